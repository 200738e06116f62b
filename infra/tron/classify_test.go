package tron

import (
	"errors"
	"testing"
)

// Each text is what java-tron sends: {"Error"} bodies come from Util.printErrorMsg over the
// actuators' ContractValidateException messages; codes and messages from
// Wallet.broadcastTransaction.
func TestClassifyBuildAnswers(t *testing.T) {
	cve := func(msg string) error {
		return &NodeError{Endpoint: "x", Message: "class org.tron.core.exception.ContractValidateException : " + msg}
	}
	cases := []struct {
		name string
		err  error
		want Class
	}{
		// DelegateResourceActuator.validate
		{"delegate over available", cve("delegateBalance must be less than or equal to available FreezeEnergyV2 balance"), Refused},
		{"delegate under 1 TRX", cve("delegateBalance must be greater than or equal to 1 TRX"), Refused},
		{"delegate receiver missing", cve("Account[41aa] not exists"), Refused},
		{"delegate shorter lock", cve("The lock period for ENERGY this time cannot be less than the remaining time[1000ms] of the last lock period for ENERGY!"), Refused},
		{"delegate lock cap", cve("The lock period of delegate resource cannot be less than 0 and cannot exceed 864000!"), Refused},
		{"delegate to contract", cve("Do not allow delegate resources to contract addresses"), Refused},
		// UnDelegateResourceActuator.validate
		{"undelegate locked", cve("insufficient delegateFrozenBalance(Energy), request=5000000, unlock_balance=0"), Refused},
		{"undelegate missing", cve("delegated Resource does not exist"), Refused},
		// CreateAccountActuator.validate
		{"create existing", cve("Account has existed"), Refused},
		{"create no fee", cve("Validate CreateAccountActuator error, insufficient fee."), Refused},
		// Trigger: Wallet.triggerContract answers a Return with a code.
		{"trigger validate", &NodeError{Code: CodeContractValidate, Message: "Contract validate error : No contract or not a smart contract"}, Refused},
		{"address", &NodeError{Message: "class java.lang.IllegalArgumentException : Invalid owner_address"}, Refused},
		{"unreachable", &UnavailableError{Endpoint: "x", Status: 503}, Temporary},
		{"busy", &NodeError{Code: CodeServerBusy, Message: "Server busy."}, Temporary},
		{"other exception", &NodeError{Message: "class java.lang.NullPointerException : null"}, Unknown},
		{"plain error", errors.New("decode"), Unknown},
	}
	for _, c := range cases {
		if got := Classify(c.err); got != c.want {
			t.Errorf("%s: Classify = %v, want %v", c.name, got, c.want)
		}
	}
}

// Wallet.broadcastTransaction: BLOCK_UNSOLIDIFIED, NO_CONNECTION,
// NOT_ENOUGH_EFFECTIVE_CONNECTION ("Effective connection:..") and SERVER_BUSY are answered
// before pushTransaction; "P2P broadcast failed." after it.
func TestClassifyBroadcastAnswers(t *testing.T) {
	b := func(code, msg string) error {
		return &NodeError{Endpoint: "broadcasttransaction", Code: code, Message: msg}
	}
	cases := []struct {
		err  error
		want BroadcastOutcome
	}{
		{nil, BroadcastAccepted},
		{b(CodeBlockUnsolidified, "Block unsolidified."), BroadcastRetry},
		{b(CodeNoConnection, "No connection."), BroadcastRetry},
		{b(CodeNotEnoughConn, "Effective connection:0 lt minEffectiveConnection:1"), BroadcastRetry},
		{b(CodeServerBusy, "Server busy."), BroadcastRetry},
		{b(CodeNotEnoughConn, "P2P broadcast failed."), BroadcastAccepted},
		{b(CodeDupTransaction, "Transaction already exists."), BroadcastAccepted},
		{b(CodeContractValidate, "Contract validate error : delegated Resource does not exist"), BroadcastRefused},
		{b(CodeBandwidth, "Account resource insufficient error."), BroadcastRefused},
		{b(CodeSigError, "Validate signature error: x"), BroadcastRefused},
		{b(CodeTaposError, "Tapos check error."), BroadcastRefused},
		{b(CodeTransactionExpired, "Transaction expired"), BroadcastRefused},
		{b(CodeOtherError, "Error: x"), BroadcastRetry},
		{&UnavailableError{Endpoint: "x"}, BroadcastRetry},
	}
	for _, c := range cases {
		if got := ClassifyBroadcast(c.err); got != c.want {
			t.Errorf("%v: ClassifyBroadcast = %v, want %v", c.err, got, c.want)
		}
	}
	if !(&NodeError{Code: CodeBlockUnsolidified}).Temporary() {
		t.Error("BLOCK_UNSOLIDIFIED is not Temporary")
	}
}
