package chainread

import (
	"context"
	"fmt"
	"math/big"

	"rental/infra/tron"
)

// Fallback are the energy figures of a TRC-20 transfer used when the sender's token
// balance cannot cover the amount, so the node cannot simulate the transfer (it would
// revert for lack of funds, not tell the energy). docs/market.md gives the defaults.
type Fallback struct {
	ToHolder int64 // recipient already holds the token
	ToNew    int64 // first-time recipient (a new storage slot: about twice the energy)
}

// DefaultFallback rounds up the energy of a USDT transfer on mainnet (64,285 to a holder,
// 130,285 to a first-time holder) so a fallback estimate does not fall short.
var DefaultFallback = Fallback{ToHolder: 65_000, ToNew: 131_000}

// Transfer is a TRC-20 transfer to estimate.
type Transfer struct {
	From, To, Contract tron.Address
	// Amount in the token's smallest unit; nil when the caller gave none (any amount the
	// sender holds costs the same: the simulation then moves one unit).
	Amount *big.Int
}

// TransferEstimate is the node's answer about a transfer.
type TransferEstimate struct {
	RecipientHoldsToken bool
	EnergyRequired      int64
	// Simulated is false when EnergyRequired is a Fallback figure.
	Simulated         bool
	BandwidthRequired int64
	ToActivated       bool
	EnergyFee         int64 // getEnergyFee: SUN burnt per energy unit
}

// RevertError is a simulated transfer the node reports as reverted: the transfer would
// fail on chain, so its energy_used is no estimate.
type RevertError struct {
	EnergyUsed int64
	Message    string
}

func (e *RevertError) Error() string {
	return fmt.Sprintf("chainread: the simulated transfer reverts (%s)", e.Message)
}

// Bandwidth of a TRC-20 transfer: java-tron charges the size of the signed transaction
// (raw_data, one 65-byte signature, their protobuf framing) plus 64 bytes for the result.
const (
	txFramingBytes  = 3 + 67 + 64 // raw_data tag and length, signature field, result reserve
	feeLimitBytes   = 6           // the fee_limit field the constant call leaves out
	defaultTransfer = 345         // a typical USDT transfer, when the node shows no transaction
)

// EstimateTransfer reads whether To holds the token, simulates transfer(To, Amount) from
// From with a constant call when From's balance covers the amount (else the Fallback
// figure), and reads To's activation and the energy price. A revert of a transfer the
// sender could pay is a *RevertError. Node failures wrap tron.ErrNodeUnavailable.
func (r *Reader) EstimateTransfer(ctx context.Context, t Transfer, fb Fallback) (TransferEstimate, error) {
	cctx, cancel := r.call(ctx)
	defer cancel()
	var out TransferEstimate
	toBal, err := r.balanceOf(cctx, t.Contract, t.To)
	if err != nil {
		return out, err
	}
	out.RecipientHoldsToken = toBal.Sign() > 0
	fromBal, err := r.balanceOf(cctx, t.Contract, t.From)
	if err != nil {
		return out, err
	}
	amount := t.Amount
	if amount == nil {
		amount = big.NewInt(1)
	}
	out.BandwidthRequired = defaultTransfer
	if fromBal.Cmp(amount) >= 0 {
		data, err := tron.TRC20TransferData(t.To, amount)
		if err != nil {
			return out, err
		}
		ext, err := r.o.Node.TriggerConstantContract(cctx, &tron.TriggerSmartContract{
			OwnerAddress: t.From, ContractAddress: t.Contract, Data: data})
		if err != nil {
			return out, err
		}
		if reverted(ext) {
			return out, &RevertError{EnergyUsed: ext.EnergyUsed, Message: ext.Result.MessageText()}
		}
		out.EnergyRequired, out.Simulated = ext.EnergyUsed, true
		if ext.Transaction != nil && ext.Transaction.RawDataHex != "" {
			out.BandwidthRequired = int64(len(ext.Transaction.RawDataHex)/2) + feeLimitBytes + txFramingBytes
		}
	} else if out.RecipientHoldsToken {
		out.EnergyRequired = fb.ToHolder
	} else {
		out.EnergyRequired = fb.ToNew
	}
	acc, err := r.o.Node.GetAccount(cctx, t.To)
	if err != nil {
		return out, err
	}
	out.ToActivated = acc.Exists()
	if out.EnergyFee, err = r.EnergyFee(ctx); err != nil {
		return out, err
	}
	return out, nil
}
