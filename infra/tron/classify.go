package tron

import (
	"errors"
	"strings"
)

// Class is what a caller may do after a node answer: give up on the request (Refused),
// ask again later unchanged (Temporary), or ask again a bounded number of times and then
// give up safely (Unknown). docs/chain.md lists every answer with its java-tron source.
type Class int

const (
	// Unknown is an answer the service does not recognise: retry with a bound.
	Unknown Class = iota
	// Refused is a definite no: the same request will be refused again (an actuator's
	// ContractValidateException, a bad signature, an expired transaction).
	Refused
	// Temporary is a node that could not take the request now (unreachable, busy, poorly
	// connected, behind): the same request, or the same signed bytes, may be sent again.
	Temporary
)

func (c Class) String() string {
	switch c {
	case Refused:
		return "refused"
	case Temporary:
		return "temporary"
	}
	return "unknown"
}

// Broadcast codes java-tron's Wallet.broadcastTransaction answers before the transaction
// reaches its pending pool (so the same bytes may be sent again).
const (
	CodeBlockUnsolidified = "BLOCK_UNSOLIDIFIED"
	CodeSuccess           = "SUCCESS"
)

// Exception classes java-tron's Util.printErrorMsg puts in {"Error": "class <cls> : <msg>"}.
const (
	ContractValidateException = "org.tron.core.exception.ContractValidateException"
	ContractExeException      = "org.tron.core.exception.ContractExeException"
)

// P2PBroadcastFailed is the message Wallet.broadcastTransaction sends with
// NOT_ENOUGH_EFFECTIVE_CONNECTION after pushTransaction accepted the transaction into the
// node's pending pool, when no peer took it: it may still land.
const P2PBroadcastFailed = "P2P broadcast failed."

// Classify sorts the error of a node call that builds or reads something (delegate,
// undelegate, create account, trigger, reads). Transport failures and HTTP 5xx/429 are
// Temporary; an {"Error"} body naming ContractValidateException, and a trigger's
// CONTRACT_VALIDATE_ERROR, are Refused; everything else is Unknown.
func Classify(err error) Class {
	if err == nil {
		return Unknown
	}
	if errors.Is(err, ErrNodeUnavailable) {
		return Temporary
	}
	var ne *NodeError
	if !errors.As(err, &ne) {
		return Unknown
	}
	if ne.Code != "" {
		return classifyCode(ne.Code, ne.Message)
	}
	switch {
	case strings.Contains(ne.Message, ContractValidateException):
		return Refused
	case strings.Contains(ne.Message, "java.lang.IllegalArgumentException"):
		// An address or field the node cannot parse: the same request fails again.
		return Refused
	}
	return Unknown
}

// classifyCode sorts an api.Return code (trigger and broadcast answers).
func classifyCode(code, msg string) Class {
	switch code {
	case CodeServerBusy, CodeNoConnection, CodeNotEnoughConn, CodeBlockUnsolidified:
		return Temporary
	case CodeSigError, CodeContractValidate, CodeContractExe, CodeBandwidth, CodeTaposError,
		CodeTooBigTransaction, CodeTransactionExpired:
		return Refused
	}
	return Unknown
}

// BroadcastOutcome is what a broadcast answer means for the signed transaction.
type BroadcastOutcome int

const (
	// BroadcastRetry: not taken, nothing wrong with it (the node was busy, poorly
	// connected or behind, or the answer is unknown): send the same bytes again.
	BroadcastRetry BroadcastOutcome = iota
	// BroadcastAccepted: the node took it (or the network already has it); it may land.
	BroadcastAccepted
	// BroadcastRefused: it will never land as sent (the code says why).
	BroadcastRefused
)

// ClassifyBroadcast sorts BroadcastTransaction's error. NO_CONNECTION,
// NOT_ENOUGH_EFFECTIVE_CONNECTION (before the push), BLOCK_UNSOLIDIFIED and SERVER_BUSY
// are answered before the transaction reaches the pending pool: retry. "P2P broadcast
// failed." comes with NOT_ENOUGH_EFFECTIVE_CONNECTION after the node pushed it: accepted,
// it may still land. DUP_TRANSACTION_ERROR: the node has it already. OTHER_ERROR and
// unrecognised codes are retried (the caller bounds retries by the transaction's
// expiration).
func ClassifyBroadcast(err error) BroadcastOutcome {
	if err == nil {
		return BroadcastAccepted
	}
	var ne *NodeError
	if !errors.As(err, &ne) || ne.Code == "" {
		return BroadcastRetry
	}
	switch ne.Code {
	case CodeDupTransaction:
		return BroadcastAccepted
	case CodeNotEnoughConn:
		if strings.HasPrefix(ne.Message, "P2P broadcast failed") {
			return BroadcastAccepted
		}
		return BroadcastRetry
	}
	if classifyCode(ne.Code, ne.Message) == Refused {
		return BroadcastRefused
	}
	return BroadcastRetry
}
