package signup

import (
	"strings"
	"time"

	"rental/infra/tron"
	"rental/schemas/events"
	"rental/schemas/network"
)

// Purpose is what a signed challenge may be used for. It is part of the signed text, so a
// signature made for one purpose is never accepted for another.
type Purpose string

const (
	PurposeSignup   Purpose = "signup"   // POST /v1/accounts/challenge/verify and the one-shot POST /v1/accounts
	PurposeLogin    Purpose = "login"    // POST /v1/session
	PurposeRecovery Purpose = "recovery" // POST /v1/accounts/challenge/verify for an existing account
)

// ParsePurpose accepts exactly the spec's enum values.
func ParsePurpose(s string) (Purpose, bool) {
	switch p := Purpose(s); p {
	case PurposeSignup, PurposeLogin, PurposeRecovery:
		return p, true
	}
	return "", false
}

// action is the human sentence of a purpose in the first line of the message.
func (p Purpose) action() string {
	switch p {
	case PurposeLogin:
		return "sign in to the dashboard"
	case PurposeRecovery:
		return "recover your account"
	}
	return "create an account"
}

// MessageParams is everything the challenge message binds.
type MessageParams struct {
	Brand     string
	Host      string
	Network   network.Network
	Address   tron.Address
	Purpose   Purpose
	Nonce     string
	IssuedAt  time.Time
	ExpiresAt time.Time
}

// Message renders the exact text a wallet signs (TronWeb signMessageV2, TIP-191 personal-sign
// style: the wallet hashes "\x19TRON Signed Message:\n" + byte length + these bytes). The
// template is a contract documented in docs/signup.md; changing one byte invalidates every
// outstanding challenge and the committed TronWeb vectors, so change it only deliberately.
//
// It is plain ASCII (brand and host are configuration), lines end in "\n", no trailing
// newline, and it binds the brand, the host (so a phishing site cannot replay a signature
// it collected for its own domain), the network, the address, the purpose, the nonce, and
// the issue and expiry times in the spec's timestamp form:
//
//	{brand} ({host}) asks you to sign this message to {action} with your TRON address:
//	{address}
//
//	Purpose: {purpose}
//	Network: {network}
//	Host: {host}
//	Nonce: {nonce}
//	Issued At: {issued_at}
//	Expiration Time: {expires_at}
//
//	Signing proves that you control this address. It is not a transaction: it moves no funds and costs no fee.
func Message(p MessageParams) string {
	var b strings.Builder
	b.WriteString(p.Brand + " (" + p.Host + ") asks you to sign this message to " + p.Purpose.action() + " with your TRON address:\n")
	b.WriteString(p.Address.String() + "\n")
	b.WriteString("\n")
	b.WriteString("Purpose: " + string(p.Purpose) + "\n")
	b.WriteString("Network: " + string(p.Network) + "\n")
	b.WriteString("Host: " + p.Host + "\n")
	b.WriteString("Nonce: " + p.Nonce + "\n")
	b.WriteString("Issued At: " + events.FormatTime(p.IssuedAt) + "\n")
	b.WriteString("Expiration Time: " + events.FormatTime(p.ExpiresAt) + "\n")
	b.WriteString("\n")
	b.WriteString("Signing proves that you control this address. It is not a transaction: it moves no funds and costs no fee.")
	return b.String()
}
