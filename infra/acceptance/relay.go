package acceptance

// Relayed transactions (POST /v1/transactions; docs/orders.md "Relayed transactions"): a
// customer's signed smart-contract call, checked against the chain before anything is
// charged, then accepted as an energy order for exactly the energy the call needs on the
// shortest tier on sale, stored together with the transaction. The order processor
// broadcasts the transaction once the delegation is in a block (processors/orderflow,
// relay.go).

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"rental/infra/orderstore"
	"rental/infra/sigstore"
	"rental/infra/tron"
	"rental/schemas/apierr"
	"rental/schemas/events"
	"rental/schemas/pricing"
)

// RelayNode is what relaying reads from the node; *tron.Client is one.
type RelayNode interface {
	GetAccountPermissions(ctx context.Context, addr tron.Address) (*tron.AccountPermissions, error)
	GetAccountResource(ctx context.Context, addr tron.Address) (*tron.AccountResource, error)
	GetTransactionInfoByID(ctx context.Context, txid string) (*tron.TransactionInfo, error)
	GetTransactionFromPending(ctx context.Context, txid string) (*tron.Transaction, error)
	TriggerConstantContract(ctx context.Context, t *tron.TriggerSmartContract) (*tron.TransactionExtention, error)
	GetHead(ctx context.Context) (*tron.Block, error)
}

// Relay defaults (docs/orders.md "Relayed transactions").
const (
	// BandwidthSunPerByte is what java-tron burns per byte of bandwidth an account lacks
	// (chain parameter getTransactionFee, 1,000 SUN on mainnet and nile).
	BandwidthSunPerByte = 1_000
	// DefaultRelayMarginBPS is the safety margin added to the call's estimated energy
	// (+10 %, as the transfer estimate recommends), rounded up to a whole unit.
	DefaultRelayMarginBPS = 1_000
	// DefaultRelayMinExpiry is the least time a transaction must have before its
	// expiration: the delegation's block, the transaction's own block and the processor's
	// polling between them take about three block intervals.
	DefaultRelayMinExpiry = 15 * time.Second
)

// RelaysOptions configure Relays.
type RelaysOptions struct {
	Orders    *Orders   // required: acceptance of the order
	Node      RelayNode // required
	MarginBPS int64     // default DefaultRelayMarginBPS
	MinExpiry time.Duration
	Timeout   time.Duration // bounds the node reads together (default 5 s)
}

// Relays accepts relayed transactions.
type Relays struct{ o RelaysOptions }

// NewRelays checks the options.
func NewRelays(o RelaysOptions) (*Relays, error) {
	if o.Orders == nil || o.Node == nil {
		return nil, errors.New("acceptance: relays: Orders and Node are required")
	}
	if o.MarginBPS <= 0 {
		o.MarginBPS = DefaultRelayMarginBPS
	}
	if o.MinExpiry < DefaultRelayMinExpiry {
		o.MinExpiry = DefaultRelayMinExpiry
	}
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Second
	}
	return &Relays{o: o}, nil
}

// RelayRequest is a parsed POST /v1/transactions.
type RelayRequest struct {
	Transaction json.RawMessage
	MaxPriceSun *int64
	Signature   sigstore.Sig
}

// RelayAccepted is the order relaying the transaction: Body is its record (the original
// 201 answer for a new one, the current record for a repeat).
type RelayAccepted struct {
	Body     []byte
	Replayed bool
}

// Accept checks the transaction and places its order. Every refusal stores and charges
// nothing; the same transaction posted again by the same account answers its order
// (Replayed), by another account 2065.
func (m *Relays) Accept(ctx context.Context, accountID string, req RelayRequest) (RelayAccepted, error) {
	if err := m.o.Orders.CheckBacklog(); err != nil {
		return RelayAccepted{}, err
	}
	r, err := tron.ParseRelayed(req.Transaction)
	if err != nil {
		return RelayAccepted{}, relayError(err)
	}
	if out, done, err := m.existing(ctx, accountID, r.Tx.TxID); done || err != nil {
		return out, err
	}
	ctx, cancel := context.WithTimeout(ctx, m.o.Timeout)
	defer cancel()
	head, err := m.o.Node.GetHead(ctx)
	if err != nil {
		return RelayAccepted{}, nodeUnavailable(err)
	}
	exp := time.UnixMilli(r.Raw.Expiration)
	if left := exp.Sub(time.UnixMilli(head.Timestamp())); left < m.o.MinExpiry {
		return RelayAccepted{}, apierr.TransactionExpiring.Newf("the transaction expires %s after the chain's head; the service needs at least %d s to deliver the energy and broadcast it",
			left.Round(time.Second), int64(m.o.MinExpiry/time.Second)).WithField("transaction.raw_data.expiration").
			With("expiration", events.FormatTime(exp)).With("min_seconds", int64(m.o.MinExpiry/time.Second))
	}
	if _, err := m.o.Node.GetTransactionInfoByID(ctx, r.Tx.TxID); err == nil {
		return RelayAccepted{}, apierr.TransactionAlreadyBroadcast.New("the transaction is on chain already").
			WithField("transaction.txID").With("txid", r.Tx.TxID)
	} else if !errors.Is(err, tron.ErrNotFound) {
		return RelayAccepted{}, nodeUnavailable(err)
	}
	if _, err := m.o.Node.GetTransactionFromPending(ctx, r.Tx.TxID); err == nil {
		return RelayAccepted{}, apierr.TransactionAlreadyBroadcast.New("the transaction was broadcast already: the node holds it for a coming block").
			WithField("transaction.txID").With("txid", r.Tx.TxID)
	} else if !errors.Is(err, tron.ErrNotFound) {
		return RelayAccepted{}, nodeUnavailable(err)
	}
	perms, err := m.o.Node.GetAccountPermissions(ctx, r.Owner())
	if err != nil {
		return RelayAccepted{}, nodeUnavailable(err)
	}
	if err := tron.CheckSigners(r, perms); err != nil {
		return RelayAccepted{}, relayError(err)
	}
	ext, err := m.o.Node.TriggerConstantContract(ctx, &tron.TriggerSmartContract{OwnerAddress: r.Owner(),
		ContractAddress: r.Call.ContractAddress, CallValue: r.Call.CallValue, Data: r.Call.Data})
	if err != nil {
		var ne *tron.NodeError
		if errors.As(err, &ne) && tron.Classify(err) == tron.Refused {
			return RelayAccepted{}, apierr.TransactionWouldRevert.New("the node refuses the call at the current state").
				WithField("transaction").With("node_message", ne.Message)
		}
		return RelayAccepted{}, nodeUnavailable(err)
	}
	if ext.Result.Message != "" || (ext.Transaction != nil && len(ext.Transaction.Ret) > 0 && ext.Transaction.Ret[0].ContractRet != "SUCCESS") {
		return RelayAccepted{}, apierr.TransactionWouldRevert.New("the call reverts at the current chain state; broadcast it would fail and burn its fee").
			WithField("transaction").With("node_message", ext.Result.MessageText()).With("energy_used", ext.EnergyUsed)
	}
	res, err := m.o.Node.GetAccountResource(ctx, r.Owner())
	if err != nil {
		return RelayAccepted{}, nodeUnavailable(err)
	}
	if perms.Exists() {
		// BandwidthProcessor.consume: the owner's staked bandwidth, else its free daily
		// allowance, else TRX burnt per byte; else the node refuses it (BANDWITH_ERROR).
		// A never-activated owner is activated by the order and then has the free allowance.
		size := r.Size()
		if res.NetLimit-res.NetUsed < size && res.FreeNetLimit-res.FreeNetUsed < size && perms.Balance < size*BandwidthSunPerByte {
			return RelayAccepted{}, apierr.TransactionLacksBandwidth.Newf("the transaction needs %d bytes of bandwidth; the owner has not that much staked or free and cannot burn %d SUN for it",
				size, size*BandwidthSunPerByte).WithField("transaction").With("bandwidth_required", size)
		}
	}
	available := max(res.EnergyLimit-res.EnergyUsed, 0)
	need := (ext.EnergyUsed*(10_000+m.o.MarginBPS)+9_999)/10_000 - available

	snap, err := m.o.Orders.o.Prices.Snapshot()
	if err != nil {
		return RelayAccepted{}, err
	}
	tier, rule, ok := shortestOnSale(snap)
	if !ok {
		return RelayAccepted{}, apierr.TierUnavailable.New("no energy tier is on sale; nothing was charged").With("available_tiers", []string{})
	}
	amount := max(need, rule.MinAmount)
	relay := &orderstore.NewRelay{TxID: r.Tx.TxID, Owner: r.Owner().String(), Expiration: exp, EnergyRequired: ext.EnergyUsed}
	if relay.Signed, err = json.Marshal(r.Tx); err != nil {
		return RelayAccepted{}, err
	}
	act := m.o.Orders.o.Prices.Activated(ctx, r.Owner())
	acc, err := m.o.Orders.Accept(ctx, accountID, Request{
		ClientOrderID: r.Tx.TxID, Resource: pricing.Energy, Amount: amount, Tier: tier, Receiver: r.Owner(),
		Activate: act.Known && !act.Activated, MaxPriceSun: req.MaxPriceSun, Signature: req.Signature, Relay: relay,
	})
	if orderstore.IsRelayTaken(err) {
		return RelayAccepted{}, alreadyRelayed(r.Tx.TxID)
	}
	return RelayAccepted(acc), err
}

// existing answers a transaction this service relays already: the account's own order
// (its current record), or 2065 for another account's.
func (m *Relays) existing(ctx context.Context, accountID, txid string) (RelayAccepted, bool, error) {
	pool := m.o.Orders.o.Ledger.Pool()
	owner, orderID, found, err := orderstore.RelayOf(ctx, pool, txid)
	if err != nil || !found {
		return RelayAccepted{}, false, err
	}
	if owner != accountID {
		return RelayAccepted{}, true, alreadyRelayed(txid)
	}
	row, err := orderstore.Get(ctx, pool, accountID, orderID)
	if err != nil {
		return RelayAccepted{}, true, err
	}
	body, err := json.Marshal(row.Record)
	return RelayAccepted{Body: body, Replayed: true}, true, err
}

func alreadyRelayed(txid string) error {
	return apierr.TransactionAlreadyBroadcast.New("the transaction was handed to the service already").
		WithField("transaction.txID").With("txid", txid)
}

// shortestOnSale is the shortest energy tier with a row on sale.
func shortestOnSale(s pricing.Snapshot) (pricing.Tier, events.PriceRule, bool) {
	for _, t := range pricing.Tiers {
		r, ok := s.Rules[pricing.BookKey{Resource: pricing.Energy, Tier: t}]
		if !ok {
			continue
		}
		if _, err := s.Price(pricing.Energy, t, r.MinAmount); err == nil {
			return t, r, true
		}
	}
	return "", events.PriceRule{}, false
}

// relayError maps a refusal of tron.ParseRelayed or tron.CheckSigners to its code.
func relayError(err error) error {
	var re *tron.RelayError
	if !errors.As(err, &re) {
		return err
	}
	code := apierr.TransactionUndecodable
	switch re.Reason {
	case tron.RelayMismatch:
		code = apierr.TransactionMismatch
	case tron.RelayBadSignature:
		code = apierr.TransactionSignatureInvalid
	case tron.RelayNotCall:
		code = apierr.TransactionNotContractCall
	}
	return code.New(re.Msg).WithField("transaction")
}

func nodeUnavailable(err error) error {
	return apierr.ChainUnavailable.Wrap(err, "the chain node could not be read; nothing was charged, retry shortly").WithRetryAfter(SnapshotRetryAfter)
}
