package tron

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"strings"
)

// TRC-20 call data and event decoding: the two calls the service makes (transfer and
// balanceOf) and the one event it reads (Transfer). ABI words are 32 bytes; an address
// word holds the 20-byte account without the 0x41 prefix.

// Selectors: the first 4 bytes of keccak256 of the signature.
var (
	SelectorTransfer  = selector("transfer(address,uint256)") // a9059cbb
	SelectorBalanceOf = selector("balanceOf(address)")        // 70a08231
	TopicTransfer     = Keccak256([]byte("Transfer(address,address,uint256)"))
)

// TopicTransferHex is TopicTransfer as java-tron prints log topics (hex, no 0x).
var TopicTransferHex = hex.EncodeToString(TopicTransfer)

// ErrABI is wrapped by every decoding failure of call data, results and logs.
var ErrABI = errors.New("abi")

func selector(sig string) []byte { return Keccak256([]byte(sig))[:4] }

var maxUint256 = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 256), big.NewInt(1))

func addressWord(a Address) []byte {
	w := make([]byte, 32)
	copy(w[12:], a[1:])
	return w
}

func uintWord(v *big.Int) ([]byte, error) {
	if v == nil || v.Sign() < 0 || v.Cmp(maxUint256) > 0 {
		return nil, fmt.Errorf("%w: amount out of uint256 range", ErrABI)
	}
	return v.FillBytes(make([]byte, 32)), nil
}

func wordAddress(w []byte) (Address, error) {
	if len(w) != 32 || !bytes.Equal(w[:12], make([]byte, 12)) {
		return Address{}, fmt.Errorf("%w: not an address word", ErrABI)
	}
	return AddressFromBytes(w[12:])
}

// TRC20TransferParameter is the ABI encoding of (to, amount) without the selector: the
// "parameter" of triggersmartcontract with function_selector "transfer(address,uint256)".
func TRC20TransferParameter(to Address, amount *big.Int) (string, error) {
	amt, err := uintWord(amount)
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(append(addressWord(to), amt...)), nil
}

// TRC20TransferData is the whole call data of transfer(to, amount), as it appears in a
// TriggerSmartContract's data.
func TRC20TransferData(to Address, amount *big.Int) ([]byte, error) {
	amt, err := uintWord(amount)
	if err != nil {
		return nil, err
	}
	d := append(append([]byte(nil), SelectorTransfer...), addressWord(to)...)
	return append(d, amt...), nil
}

// ParseTRC20TransferData reads call data of transfer(address,uint256).
func ParseTRC20TransferData(data []byte) (Address, *big.Int, error) {
	if len(data) != 4+64 || !bytes.Equal(data[:4], SelectorTransfer) {
		return Address{}, nil, fmt.Errorf("%w: not transfer(address,uint256) call data", ErrABI)
	}
	to, err := wordAddress(data[4:36])
	if err != nil {
		return Address{}, nil, err
	}
	return to, new(big.Int).SetBytes(data[36:68]), nil
}

// TRC20BalanceOfParameter is the "parameter" of balanceOf(owner).
func TRC20BalanceOfParameter(owner Address) string { return hex.EncodeToString(addressWord(owner)) }

// TRC20BalanceOfData is the whole call data of balanceOf(owner).
func TRC20BalanceOfData(owner Address) []byte {
	return append(append([]byte(nil), SelectorBalanceOf...), addressWord(owner)...)
}

// DecodeUint256 reads a constant_result entry (hex) holding one uint256, such as the
// answer of balanceOf.
func DecodeUint256(resultHex string) (*big.Int, error) {
	b, err := hex.DecodeString(strings.TrimPrefix(resultHex, "0x"))
	if err != nil || len(b) != 32 {
		return nil, fmt.Errorf("%w: want one 32-byte word", ErrABI)
	}
	return new(big.Int).SetBytes(b), nil
}

// TRC20Transfer is a decoded Transfer(address indexed from, address indexed to,
// uint256 value) event.
type TRC20Transfer struct {
	Token  Address // the emitting contract
	From   Address
	To     Address
	Amount *big.Int
}

// DecodeTransferLog decodes a Transfer log as java-tron prints it (topics and data in
// hex, address in either form). ok is false, with no error, when the log is some other
// event; a log that claims to be a Transfer but is malformed is an error.
func DecodeTransferLog(l Log) (ev TRC20Transfer, ok bool, err error) {
	if len(l.Topics) == 0 || !strings.EqualFold(strings.TrimPrefix(l.Topics[0], "0x"), TopicTransferHex) {
		return TRC20Transfer{}, false, nil
	}
	// Indexed from and to are topics 1 and 2; an ERC-721-style Transfer has a third
	// indexed argument and no data, so it is not a TRC-20 transfer.
	if len(l.Topics) != 3 {
		return TRC20Transfer{}, false, nil
	}
	var words [3][]byte
	for i, s := range []string{l.Topics[1], l.Topics[2], l.Data} {
		if words[i], err = hex.DecodeString(strings.TrimPrefix(s, "0x")); err != nil || len(words[i]) != 32 {
			return TRC20Transfer{}, false, fmt.Errorf("%w: Transfer log word %d is not 32 bytes of hex", ErrABI, i)
		}
	}
	if ev.Token, err = ParseAnyAddress(l.Address); err != nil {
		return TRC20Transfer{}, false, fmt.Errorf("%w: Transfer log address: %w", ErrABI, err)
	}
	if ev.From, err = wordAddress(words[0]); err != nil {
		return TRC20Transfer{}, false, err
	}
	if ev.To, err = wordAddress(words[1]); err != nil {
		return TRC20Transfer{}, false, err
	}
	ev.Amount = new(big.Int).SetBytes(words[2])
	return ev, true, nil
}

// TransferLog builds the Log java-tron prints for a Transfer event (visible=false form:
// 20-byte hex address). The simulator emits it; tests use it.
func TransferLog(token, from, to Address, amount *big.Int) (Log, error) {
	amt, err := uintWord(amount)
	if err != nil {
		return Log{}, err
	}
	return Log{
		Address: hex.EncodeToString(token[1:]),
		Topics:  []string{TopicTransferHex, hex.EncodeToString(addressWord(from)), hex.EncodeToString(addressWord(to))},
		Data:    hex.EncodeToString(amt),
	}, nil
}
