package payments

import (
	"strings"
	"unicode/utf8"

	"rental/infra/tron"
)

// MemoReceiver reads a transfer's memo (raw_data.data) as the receiver of its order: a
// Base58Check address of the network, surrounding spaces allowed, nothing else. ok is
// false for anything else, and the sender receives.
func MemoReceiver(data []byte) (tron.Address, bool) {
	s := strings.TrimSpace(string(data))
	if len(s) != 34 || s[0] != 'T' {
		return tron.Address{}, false
	}
	a, err := tron.ParseAddress(s)
	if err != nil || a == zeroAddress {
		return tron.Address{}, false
	}
	return a, true
}

// zeroAddress is T9yD14Nj9j7xAB4dbGeiX9h8unkKHxuWwb (41 and twenty zero bytes): nobody holds
// its key, energy delegated to it would be lost.
var zeroAddress = tron.Address{0x41}

// MemoText is the memo as stored and shown: its text when it is valid UTF-8 of at most 200
// bytes without control characters, else nil (the bytes stay on chain).
func MemoText(data []byte) *string {
	if len(data) == 0 || len(data) > 200 || !utf8.Valid(data) {
		return nil
	}
	s := string(data)
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return nil
		}
	}
	return &s
}
