package edge

// POST /v1/estimate/transfer (key, estimates.read; rental-api-v1 TransferEstimate): the
// energy a TRC-20 transfer needs, from the node's constant-call simulation
// (infra/chainread), and what renting it costs now, from the pricer's snapshot.
// docs/market.md states the decisions: the safety margin, the fallback figures when the
// sender cannot cover the amount, the supported contracts, and the 2001 answer for a
// transfer the node says reverts.

import (
	"context"
	"errors"
	"math/big"
	"time"

	"github.com/valyala/fasthttp"

	"rental/infra/acceptance"
	"rental/infra/chainread"
	"rental/infra/tron"
	"rental/schemas/apierr"
	"rental/schemas/events"
	"rental/schemas/network"
	"rental/schemas/pricing"
)

// TransferSimulator estimates a transfer on chain; *chainread.Reader is one.
type TransferSimulator interface {
	EstimateTransfer(ctx context.Context, t chainread.Transfer, fb chainread.Fallback) (chainread.TransferEstimate, error)
}

// DefaultMarginBPS is the safety margin recommended_amount adds to energy_required:
// +10 %, rounded up to a whole unit (docs/market.md).
const DefaultMarginBPS = 1_000

// EstimateOptions are the transfer estimate's dependencies.
type EstimateOptions struct {
	Network   network.Network        // required
	Snapshots pricing.SnapshotSource // required: prices
	Chain     TransferSimulator      // required
	// USDT is the network's USDT contract: the default contract_address.
	USDT tron.Address
	// Supported are the TRC-20 contracts a transfer may be estimated for (configuration;
	// default USDT alone); any other is 2011.
	Supported []tron.Address
	Fallback  chainread.Fallback // default chainread.DefaultFallback
	MarginBPS int64              // default DefaultMarginBPS
	Now       func() time.Time
}

// TransferEstimates serves POST /v1/estimate/transfer.
type TransferEstimates struct{ o EstimateOptions }

// NewTransferEstimates checks the options.
func NewTransferEstimates(o EstimateOptions) (*TransferEstimates, error) {
	if o.Snapshots == nil || o.Chain == nil {
		return nil, errors.New("edge: estimate: Snapshots and Chain are required")
	}
	if _, err := network.Parse(string(o.Network)); err != nil {
		return nil, errors.New("edge: estimate: " + err.Error())
	}
	if len(o.Supported) == 0 && !o.USDT.IsZero() {
		o.Supported = []tron.Address{o.USDT}
	}
	if o.Fallback == (chainread.Fallback{}) {
		o.Fallback = chainread.DefaultFallback
	}
	if o.MarginBPS <= 0 {
		o.MarginBPS = DefaultMarginBPS
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &TransferEstimates{o: o}, nil
}

// Handlers implements Module.
func (m *TransferEstimates) Handlers() map[string]HandlerFunc {
	return map[string]HandlerFunc{"POST /v1/estimate/transfer": m.post}
}

type transferRequest struct {
	FromAddress     *string `json:"from_address"`
	ToAddress       *string `json:"to_address"`
	ContractAddress *string `json:"contract_address"`
	Amount          *string `json:"amount"`
	Tier            *string `json:"tier"`
}

type transferResponse struct {
	FromAddress         string       `json:"from_address"`
	ToAddress           string       `json:"to_address"`
	ContractAddress     string       `json:"contract_address"`
	RecipientHoldsToken bool         `json:"recipient_holds_token"`
	EnergyRequired      int64        `json:"energy_required"`
	RecommendedAmount   int64        `json:"recommended_amount"`
	BandwidthRequired   int64        `json:"bandwidth_required"`
	Tier                pricing.Tier `json:"tier"`
	PriceSunPerUnit     int64        `json:"price_sun_per_unit"`
	EnergyAmountSun     int64        `json:"energy_amount_sun"`
	ActivateAmountSun   int64        `json:"activate_amount_sun"`
	TotalAmountSun      int64        `json:"total_amount_sun"`
	BurnAlternativeSun  int64        `json:"burn_alternative_sun"`
	AsOf                events.Time  `json:"as_of"`
}

// maxAmountDigits: a uint256 has at most 78 decimal digits.
const maxAmountDigits = 78

func parseTokenAmount(v string) (*big.Int, error) {
	bad := Invalid("amount", "type", "amount must be a decimal string of digits (the token's smallest unit)").With("expected", "decimal_string")
	if v == "" || len(v) > maxAmountDigits {
		return nil, bad
	}
	for i := 0; i < len(v); i++ {
		if v[i] < '0' || v[i] > '9' {
			return nil, bad
		}
	}
	n, ok := new(big.Int).SetString(v, 10)
	if !ok || n.BitLen() > 256 {
		return nil, bad
	}
	return n, nil
}

func (m *TransferEstimates) post(ctx context.Context, rc *fasthttp.RequestCtx) error {
	var b transferRequest
	if err := DecodeJSON(rc, &b); err != nil {
		return err
	}
	if b.FromAddress == nil {
		return Invalid("from_address", "required", "from_address is required")
	}
	if b.ToAddress == nil {
		return Invalid("to_address", "required", "to_address is required")
	}
	from, err := chainAddress("from_address", *b.FromAddress)
	if err != nil {
		return err
	}
	to, err := chainAddress("to_address", *b.ToAddress)
	if err != nil {
		return err
	}
	contract := m.o.USDT
	if b.ContractAddress != nil {
		if contract, err = chainAddress("contract_address", *b.ContractAddress); err != nil {
			return err
		}
	}
	supported := false
	names := make([]string, 0, len(m.o.Supported))
	for _, s := range m.o.Supported {
		names = append(names, s.String())
		supported = supported || (s == contract && !contract.IsZero())
	}
	if !supported {
		return apierr.UnsupportedContract.New("contract_address is not a supported TRC-20 token").
			WithField("contract_address").With("supported", names)
	}
	var amount *big.Int
	if b.Amount != nil {
		if amount, err = parseTokenAmount(*b.Amount); err != nil {
			return err
		}
	}
	tier := pricing.Tier1h
	if b.Tier != nil {
		if tier, err = parseTier(*b.Tier); err != nil {
			return err
		}
	}

	snap, ok := m.o.Snapshots.Current()
	if !ok || snap.Network != m.o.Network {
		return apierr.ChainUnavailable.New("prices are not available yet; retry shortly").With("reason", "no_price_snapshot").WithRetryAfter(acceptance.SnapshotRetryAfter)
	}
	// The tier must be on sale before the node is asked anything.
	if _, err := snap.Price(pricing.Energy, tier, minAmount(snap, tier)); err != nil {
		return err
	}

	est, err := m.o.Chain.EstimateTransfer(ctx, chainread.Transfer{From: from, To: to, Contract: contract, Amount: amount}, m.o.Fallback)
	if err != nil {
		var re *chainread.RevertError
		if errors.As(err, &re) {
			return apierr.ValidationFailed.New("the node reports that this transfer reverts: it would fail on chain, so its energy is not estimated").
				With("constraint", "transfer_reverts").With("energy_used", re.EnergyUsed).With("node_message", re.Message)
		}
		return chainError(err)
	}

	rec := (est.EnergyRequired*(10_000+m.o.MarginBPS) + 9_999) / 10_000
	if r, ok := snap.Rules[pricing.BookKey{Resource: pricing.Energy, Tier: tier}]; ok {
		rec = min(max(rec, r.MinAmount), r.MaxAmount)
	}
	pq, err := snap.Price(pricing.Energy, tier, rec)
	if err != nil {
		return err
	}
	var activate int64
	if !est.ToActivated {
		if activate, err = snap.ActivationPriceSun(); err != nil {
			return apierr.SupplyPaused.New("to_address is not activated and activation sales are paused").WithField("to_address")
		}
	}
	return WriteJSON(rc, fasthttp.StatusOK, transferResponse{
		FromAddress: from.String(), ToAddress: to.String(), ContractAddress: contract.String(),
		RecipientHoldsToken: est.RecipientHoldsToken, EnergyRequired: est.EnergyRequired, RecommendedAmount: rec,
		BandwidthRequired: est.BandwidthRequired, Tier: tier, PriceSunPerUnit: pq.PriceSunPerUnit,
		EnergyAmountSun: pq.EnergyAmountSun, ActivateAmountSun: activate, TotalAmountSun: pq.EnergyAmountSun + activate,
		BurnAlternativeSun: est.EnergyRequired * est.EnergyFee,
		AsOf:               events.Time(m.o.Now().UTC().Truncate(time.Millisecond)),
	})
}

// minAmount is the row's minimum (1 when the row is unknown: Price then answers 2003).
func minAmount(s pricing.Snapshot, tier pricing.Tier) int64 {
	if r, ok := s.Rules[pricing.BookKey{Resource: pricing.Energy, Tier: tier}]; ok {
		return r.MinAmount
	}
	return 1
}
