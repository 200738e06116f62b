package tron

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math/big"
	"strings"
)

// Reads of a Uniswap-v3-style pool (SunSwap v3 on TRON) through constant calls: the call
// data of its view functions and the decoding of their answers (constant_result words).

// Selectors of the pool's view functions and of TRC-20 decimals().
var (
	SelectorSlot0     = selector("slot0()")           // 3850c7bd
	SelectorObserve   = selector("observe(uint32[])") // 883bdbfd
	SelectorLiquidity = selector("liquidity()")       // 1a686502
	SelectorToken0    = selector("token0()")          // 0dfe1681
	SelectorToken1    = selector("token1()")          // d21220a7
	SelectorDecimals  = selector("decimals()")        // 313ce567
)

// selectorError is Error(string), the revert data of a Solidity require with a reason.
var selectorError = selector("Error(string)") // 08c379a0

// ObserveData is the call data of observe(secondsAgos): the selector, the offset of the
// array (one word), its length and one word per element.
func ObserveData(secondsAgos ...uint32) []byte {
	d := append([]byte(nil), SelectorObserve...)
	d = append(d, uintWord64(32)...)
	d = append(d, uintWord64(uint64(len(secondsAgos)))...)
	for _, s := range secondsAgos {
		d = append(d, uintWord64(uint64(s))...)
	}
	return d
}

func uintWord64(v uint64) []byte {
	w := make([]byte, 32)
	binary.BigEndian.PutUint64(w[24:], v)
	return w
}

func resultWords(resultHex string, least int) ([]byte, error) {
	b, err := hex.DecodeString(strings.TrimPrefix(resultHex, "0x"))
	if err != nil || len(b)%32 != 0 || len(b) < 32*least {
		return nil, fmt.Errorf("%w: want at least %d words", ErrABI, least)
	}
	return b, nil
}

// intWord reads a word holding a signed integer of bits bits (two's complement, sign
// extended to 256 bits as the ABI requires).
func intWord(w []byte, bits uint) (int64, error) {
	v := new(big.Int).SetBytes(w)
	if w[0]&0x80 != 0 {
		v.Sub(v, new(big.Int).Lsh(big.NewInt(1), 256))
	}
	lim := new(big.Int).Lsh(big.NewInt(1), bits-1)
	if v.Cmp(lim) >= 0 || v.Cmp(new(big.Int).Neg(lim)) < 0 {
		return 0, fmt.Errorf("%w: not an int%d word", ErrABI, bits)
	}
	return v.Int64(), nil
}

// DecodeSlot0 reads slot0()'s answer: sqrtPriceX96 (uint160) and tick (int24), the first
// two of its seven words.
func DecodeSlot0(resultHex string) (sqrtPriceX96 *big.Int, tick int, err error) {
	b, err := resultWords(resultHex, 7)
	if err != nil {
		return nil, 0, err
	}
	if !bytes.Equal(b[:12], make([]byte, 12)) {
		return nil, 0, fmt.Errorf("%w: sqrtPriceX96 is not a uint160", ErrABI)
	}
	t, err := intWord(b[32:64], 24)
	if err != nil {
		return nil, 0, err
	}
	return new(big.Int).SetBytes(b[:32]), int(t), nil
}

// DecodeObserve reads observe()'s answer (int56[] tickCumulatives, uint160[]
// secondsPerLiquidityCumulativeX128s) and returns the tick cumulatives; want is the number
// of secondsAgos asked for.
func DecodeObserve(resultHex string, want int) ([]int64, error) {
	b, err := resultWords(resultHex, 2)
	if err != nil {
		return nil, err
	}
	array := func(head int) ([][]byte, error) {
		off := new(big.Int).SetBytes(b[head : head+32])
		if !off.IsInt64() || off.Int64() > int64(len(b)) || off.Int64()%32 != 0 || off.Int64()+32 > int64(len(b)) {
			return nil, fmt.Errorf("%w: array offset out of the answer", ErrABI)
		}
		o := int(off.Int64())
		n := new(big.Int).SetBytes(b[o : o+32])
		if !n.IsInt64() || n.Int64() != int64(want) || o+32+32*want > len(b) {
			return nil, fmt.Errorf("%w: want an array of %d", ErrABI, want)
		}
		out := make([][]byte, want)
		for i := range out {
			out[i] = b[o+32+32*i : o+64+32*i]
		}
		return out, nil
	}
	ticks, err := array(0)
	if err != nil {
		return nil, err
	}
	if _, err := array(32); err != nil {
		return nil, err
	}
	out := make([]int64, want)
	for i, w := range ticks {
		if out[i], err = intWord(w, 56); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// DecodeAddressResult reads a constant_result holding one address (token0(), token1()).
func DecodeAddressResult(resultHex string) (Address, error) {
	b, err := resultWords(resultHex, 1)
	if err != nil {
		return Address{}, err
	}
	return wordAddress(b[:32])
}

// RevertReason is the reason string of revert data Error(string), or "" when the data is
// not one.
func RevertReason(resultHex string) string {
	b, err := hex.DecodeString(strings.TrimPrefix(resultHex, "0x"))
	if err != nil || len(b) < 4+64 || !bytes.Equal(b[:4], selectorError) {
		return ""
	}
	n := new(big.Int).SetBytes(b[4+32 : 4+64])
	if !n.IsInt64() || n.Int64() > int64(len(b)) || 4+64+n.Int64() > int64(len(b)) {
		return ""
	}
	return string(b[4+64 : 4+64+n.Int64()])
}

// Reverted reports whether a constant call's execution failed (REVERT, or another
// contract result than SUCCESS): java-tron answers it with result true and the message
// "REVERT opcode executed" (Wallet.callConstantContract), the revert data in
// constant_result.
func (e *TransactionExtention) Reverted() bool {
	if strings.Contains(e.Result.MessageText(), "REVERT") {
		return true
	}
	if e.Transaction != nil {
		for _, ret := range e.Transaction.Ret {
			if ret.Ret == "FAILED" || (ret.ContractRet != "" && ret.ContractRet != "SUCCESS") {
				return true
			}
		}
	}
	return false
}

// TriggerConstantContractSolid is TriggerConstantContract against the solidified state:
// /walletsolidity/triggerconstantcontract, which java-tron runs on the solidified block
// (TriggerConstantContractOnSolidityServlet through WalletOnSolidity.futureGet), that
// block's timestamp being the call's block.timestamp.
func (c *Client) TriggerConstantContractSolid(ctx context.Context, t *TriggerSmartContract) (*TransactionExtention, error) {
	const endpoint = "walletsolidity/triggerconstantcontract"
	data, err := c.postAt(ctx, "/walletsolidity/", "triggerconstantcontract", triggerRequest(t, 0))
	if err != nil {
		return nil, err
	}
	var ext TransactionExtention
	if err := decode(endpoint, data, &ext); err != nil {
		return nil, err
	}
	if !ext.Result.Result {
		return nil, &NodeError{Endpoint: endpoint, Code: ext.Result.Code, Message: ext.Result.MessageText()}
	}
	return &ext, nil
}
