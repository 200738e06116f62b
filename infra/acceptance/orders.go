// Package acceptance is order acceptance, the synchronous debit: it prices an order from
// the live snapshot, checks it (receiver, limits, funds, stock), places the ledger hold and
// stores the order row with its processing intent (outbox), all in one Postgres
// transaction (docs/orders.md "API", "Group commit"). POST /v1/orders calls Accept; the
// batch processor and the subscription watcher place their orders with PlaceTx inside
// their own transactions, so every order, wherever it comes from, passes the same checks.
// It has no HTTP in it: refusals are catalogue errors (schemas/apierr) the caller renders.
package acceptance

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/prometheus/client_golang/prometheus"

	"rental/infra/idempotency"
	"rental/infra/ledgerstore"
	"rental/infra/orderstore"
	"rental/infra/pg"
	"rental/infra/quotes"
	"rental/infra/sigstore"
	"rental/infra/supplystore"
	"rental/infra/tron"
	"rental/schemas/apierr"
	"rental/schemas/network"
	"rental/schemas/orders"
	"rental/schemas/pricing"
)

// Defaults of Options.
const (
	DefaultMaxInFlightOrders = 100
	DefaultMaxOrderEnergy    = 10_000_000
	DefaultOrderLockWait     = 3 * time.Second
	// MaxClientOrderIDLen is the longest client_order_id accepted.
	MaxClientOrderIDLen = 128
)

// Options are order acceptance's dependencies and limits (infra/config Orders).
type Options struct {
	Network     network.Network     // required
	Prices      *Prices             // required: prices from the snapshot, receiver activation
	Ledger      *ledgerstore.Ledger // required: holds and totals; its pool runs the transactions
	Idempotency *idempotency.Store  // required: client_order_id records
	// OwnAddresses are refused as receivers with 3003 besides every deposit address and
	// stake pool in the database: POOL_ADDRESSES and TREASURY_ADDRESS.
	OwnAddresses []tron.Address
	// MaxInFlight is the 1101 limit: orders of one account still waiting for delivery.
	MaxInFlight int
	// MaxOrderEnergy is the account limit max_order_energy (2008 above it).
	MaxOrderEnergy int64
	// ReceiverMaxEnergy is the 5005 ceiling: energy one receiver may hold from this
	// service's live orders, every account together. 0 means no ceiling.
	ReceiverMaxEnergy int64
	// ShortRental, when positive, is the rental period of the 5m tier (a test deployment's
	// DEV_SHORT_RENTAL); zero is the tier's own.
	ShortRental time.Duration
	// ForbidProviderSpill restricts orders to the own pools: an order they cannot fill is
	// 5007 instead of being filled from market providers or the deep reserve.
	ForbidProviderSpill bool
	// MarketProviders is how many market providers the pricer is configured with: when
	// there are some but the book holds no market level, they all failed (the pricer drops
	// a source after SUPPLY_MAX_STALE), and an order own stock cannot fill is 5004.
	MarketProviders int
	// LockWait bounds how long a creation waits for a concurrent creation of the same
	// account (or receiver) before answering 4004 ledger_conflict (default 3 s).
	LockWait time.Duration
	// GroupCommitters is how many transactions may store creations in groups at once
	// (group.go); 0 is DefaultGroupCommitters, a negative value stores every order in
	// its own transaction. GroupMax bounds a group (default DefaultGroupMax).
	GroupCommitters int
	GroupMax        int
	// Backlog is delivery's backlog (orderstore.Backlog): while it is behind, Accept and
	// batch creation refuse with 5050 (CheckBacklog). Nil: never refused for it.
	Backlog Backlog
	// Signatures records the signature of each signed creation (Request.Signature) in the
	// creation's transaction, so a replay is refused (1009) even after the Redis replay
	// cache lost its keys. nil records nothing.
	Signatures *sigstore.Store
	// CommitSupply accepts an order only against supply committed to it (infra/supplystore,
	// docs/orders.md "Supply committed at acceptance"): the rows the pricer refreshes are
	// locked in the order's transaction, after every other lock, and an order they cannot
	// hold is refused with 5001 (5007, 5004) with nothing stored. Without a row (before the
	// pricer's first refresh) every order is refused. False: stock is checked against the
	// snapshot only.
	CommitSupply bool
	// Registerer receives the group commit's metrics (default: Prometheus' default).
	Registerer prometheus.Registerer
	Logger     *slog.Logger     // default: discard
	Now        func() time.Time // default: the prices' clock (quotes are stamped with it)
}

// Orders accepts orders: Accept for POST /v1/orders, PlaceTx for the orders the service
// places on an account's behalf.
type Orders struct {
	o     Options
	log   *slog.Logger
	own   map[string]bool // OwnAddresses, in their Base58 form
	group *groupCommitter // nil: every creation in its own transaction
}

// NewOrders checks the options.
func NewOrders(o Options) (*Orders, error) {
	if o.Prices == nil || o.Ledger == nil || o.Idempotency == nil {
		return nil, errors.New("acceptance: orders: Prices, Ledger and Idempotency are required")
	}
	if _, err := network.Parse(string(o.Network)); err != nil {
		return nil, errors.New("acceptance: orders: " + err.Error())
	}
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = DefaultMaxInFlightOrders
	}
	if o.MaxOrderEnergy <= 0 {
		o.MaxOrderEnergy = DefaultMaxOrderEnergy
	}
	if o.ReceiverMaxEnergy < 0 {
		o.ReceiverMaxEnergy = 0
	}
	if o.LockWait <= 0 {
		o.LockWait = DefaultOrderLockWait
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = o.Prices.o.Now
	}
	m := &Orders{o: o, log: o.Logger.With("module", "orders"), own: map[string]bool{}}
	for _, a := range o.OwnAddresses {
		if !a.IsZero() {
			m.own[a.String()] = true
		}
	}
	if o.GroupCommitters == 0 {
		m.o.GroupCommitters = DefaultGroupCommitters
	}
	if o.GroupMax <= 0 {
		m.o.GroupMax = DefaultGroupMax
	}
	if m.o.GroupCommitters > 0 {
		m.group = newGroupCommitter(m, o.Registerer)
	}
	return m, nil
}

// Now is acceptance's clock: orders are stamped with it.
func (m *Orders) Now() time.Time { return m.o.Now() }

// Backlog is the backlog acceptance refuses on (nil: none); GET /v1/status reads the same.
func (m *Orders) Backlog() Backlog { return m.o.Backlog }

// Network is the network orders are accepted for.
func (m *Orders) Network() network.Network { return m.o.Network }

// ValidClientOrderID: 1 to 128 printable ASCII characters without spaces. The id is an
// idempotency key and a list filter, so it must survive logs and query strings unchanged.
func ValidClientOrderID(s string) bool {
	if len(s) == 0 || len(s) > MaxClientOrderIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// Request is a syntactically valid order of POST /v1/orders. Resource, Amount and Tier
// may be unset ("", 0, "") only with a quote, which then supplies them.
type Request struct {
	ClientOrderID string
	Resource      pricing.Resource
	Amount        int64
	Tier          pricing.Tier
	Receiver      tron.Address
	Activate      bool
	QuoteID       string
	MaxPriceSun   *int64
	// Signature is the request signature that authorised the creation (not hashed: a
	// verbatim retry is signed afresh). With Options.Signatures it is recorded in the
	// creation's transaction; a signature recorded before is 1009.
	Signature sigstore.Sig
	// Relay is the customer's transaction the order relays (POST /v1/transactions, relay.go);
	// such an order is stored one by one, never in a group.
	Relay      *orderstore.NewRelay
	activation *Activation // the receiver's state, read before the transaction (not hashed)
}

// Hash fingerprints the order for the idempotency record: the parsed fields with the
// defaults applied, so key order, whitespace and an explicit default (activate false) do
// not make a retry "different", while any change of what is ordered does (3010).
func (r Request) Hash() []byte {
	if r.Relay != nil {
		// The transaction is the request: a repeat is the same order whatever the
		// estimate says by then.
		return idempotency.Hash([]byte("POST /v1/transactions v1"), []byte(r.Relay.TxID))
	}
	var maxPrice string
	if r.MaxPriceSun != nil {
		maxPrice = strconv.FormatInt(*r.MaxPriceSun, 10)
	}
	return idempotency.Hash([]byte("POST /v1/orders v1"), []byte(r.ClientOrderID), []byte(r.Resource),
		[]byte(strconv.FormatInt(r.Amount, 10)), []byte(r.Tier), r.Receiver[:], []byte(strconv.FormatBool(r.Activate)),
		[]byte(r.QuoteID), []byte(maxPrice))
}

// Accepted is Accept's outcome: the order's 201 body, or with Replayed the body stored for
// the client_order_id before (the spec: HTTP 200, nothing charged).
type Accepted struct {
	Body     []byte
	Replayed bool
}

// Backlog is how far delivery is behind acceptance; *orderstore.Backlog is one. Behind
// answers from a cached reading and never waits for the database.
type Backlog interface {
	Behind() (age time.Duration, behind bool)
}

// CheckBacklog refuses new work with 5050 delivery_backlogged (Retry-After) while the oldest
// accepted, undelivered order is older than the backlog's bound: an order accepted now could
// not be delivered before its rental matters. Nothing is stored or charged. Accept calls it
// first; batch creation calls it before its transaction.
func (m *Orders) CheckBacklog() error {
	if m.o.Backlog == nil {
		return nil
	}
	age, behind := m.o.Backlog.Behind()
	if !behind {
		return nil
	}
	return apierr.DeliveryBacklogged.Newf("delivery is behind: the oldest accepted order has waited %d s for its delegation; nothing was stored or charged, retry later",
		int64(age/time.Second)).With("backlog_age_seconds", int64(age/time.Second)).WithRetryAfter(backlogRetryAfter)
}

// backlogRetryAfter is the Retry-After of 5050, in seconds: the backlog is read about once a
// second and drains at delivery's pace, so a few seconds is the earliest a retry can pass.
const backlogRetryAfter = 5

// Accept creates the order of POST /v1/orders in ONE Postgres transaction: the
// client_order_id idempotency record, the ledger hold of the total, the order row with its
// processing intent (outbox), the account's order totals, and the stored response. Either
// all of it commits or none does, so every refusal, a 503 included, stores and charges
// nothing, and a verbatim retry with the same client_order_id is always safe. Plain
// creations go through the group commit (group.go) when it runs.
func (m *Orders) Accept(ctx context.Context, accountID string, req Request) (Accepted, error) {
	if err := m.CheckBacklog(); err != nil {
		return Accepted{}, err
	}
	key := idempotency.Key{AccountID: accountID, Namespace: idempotency.NamespaceOrder, Key: req.ClientOrderID}
	// Read the receiver's activation before the transaction opens, so that no node call
	// happens while it holds the account's row and a connection; the pricing inside uses
	// this answer. (A replay pays this read too; it changes nothing.)
	act := m.o.Prices.Activated(ctx, req.Receiver)
	req.activation = &act
	if body, ok, err := m.acceptInGroup(ctx, accountID, req, key); err != nil || ok {
		return Accepted{Body: body}, err
	}
	var out Accepted
	err := m.InTx(ctx, func(tx pgx.Tx) error {
		// The claim and the receiver check travel in one round trip; the check's answer
		// counts only for a fresh claim.
		b := &pgx.Batch{}
		claim := m.o.Idempotency.QueueClaim(b, key, req.Hash())
		ours := m.queueReceiverCheck(b, req.Receiver)
		var sig *sigstore.Queued
		if m.o.Signatures != nil && !req.Signature.IsZero() {
			sig = m.o.Signatures.QueueRecord(b, req.Signature)
		}
		c, err := claim.Result(ctx, tx, tx.SendBatch(ctx, b).Close())
		if err != nil {
			return err
		}
		if sig != nil && sig.Err() != nil {
			return replayed()
		}
		if c.Replay != nil {
			out = Accepted{Body: c.Replay.Body, Replayed: true}
			return nil
		}
		if err := ours(); err != nil {
			return err
		}
		// create bounds the waits left (the account's row, a receiver's ceiling lock) to
		// LockWait (set with the receiver check); a longer wait is answered 4004.
		_, out.Body, err = m.create(ctx, tx, accountID, req, nil, nil, &key)
		return err
	})
	return out, err
}

// replayed is the answer to a signature recorded before (1009).
func replayed() error {
	return apierr.ReplayedSignature.New("this signature was already used; sign each attempt with a fresh timestamp")
}

// acceptInGroup stores the order through the group commit when it can: ok with the 201
// body when it was stored. Not ok (and no error) leaves it to the one-by-one transaction:
// an order with a quote (read and checked in the transaction), an order whose pricing
// refuses it (the answer depends on whether client_order_id replays, which only the claim
// knows), or one the group declined.
func (m *Orders) acceptInGroup(ctx context.Context, accountID string, req Request, key idempotency.Key) ([]byte, bool, error) {
	if m.group == nil || req.QuoteID != "" || req.Relay != nil {
		return nil, false, nil
	}
	n, err := m.prepare(ctx, accountID, req, nil, nil, nil)
	if err != nil {
		return nil, false, nil
	}
	e := &groupEntry{n: n, key: key, hash: req.Hash(), sig: req.Signature}
	switch err := m.group.submit(ctx, e); {
	case err == nil:
		return e.body, true, nil
	case errors.Is(err, errDeclined):
		return nil, false, nil
	default:
		return nil, false, err
	}
}

// InTx runs fn in a transaction of the ledger's pool, begun with the idempotency store's
// lock wait. Serialisation failures, deadlocks and lock waits beyond the bound between
// concurrent creations become 4004 ledger_conflict: the transaction rolled back, nothing
// was charged, and a retry at once may pass. A session lost before COMMIT (a Postgres
// shutdown ending it) is answered 9003 by the edge, not 9000 (pg.BeginTxFunc). Batch
// creation uses it too.
func (m *Orders) InTx(ctx context.Context, fn func(pgx.Tx) error) error {
	// The BEGIN also bounds the idempotency claim's lock wait (one round trip for both).
	err := pg.BeginTxFunc(ctx, m.o.Ledger.Pool(), pgx.TxOptions{BeginQuery: m.o.Idempotency.BeginQuery()}, fn)
	var pe *pgconn.PgError
	if err != nil && errors.As(err, &pe) && !isCatalogue(err) {
		switch pe.Code {
		case "40001", "40P01", "55P03":
			return apierr.LedgerConflict.Wrap(err, "a concurrent order of this account collided with this one; nothing was charged, retry at once")
		}
	}
	return err
}

func isCatalogue(err error) bool {
	var e *apierr.Error
	return errors.As(err, &e)
}

// create runs the checks that need the database, the price or the chain, in the order
// docs/orders.md lists, then charges and stores the order. Every refusal returns before
// anything is written, and the caller's rollback undoes the rest.
//
// The receiver must have passed the own-address check (queueReceiverCheck) in tx, which
// also set the transaction's lock wait. With key, the idempotency record is completed with
// the 201 response, whose body create returns; the last writes (hold, order row and intent,
// stored response) travel in one round trip.
func (m *Orders) create(ctx context.Context, tx pgx.Tx, accountID string, req Request, batchID, subscriptionID *string,
	key *idempotency.Key) (orders.Record, []byte, error) {
	var q *quotes.Quote
	if req.QuoteID != "" {
		qq, err := m.useQuote(ctx, tx, accountID, &req)
		if err != nil {
			return orders.Record{}, nil, err
		}
		q = &qq
	}
	n, err := m.prepare(ctx, accountID, req, q, batchID, subscriptionID)
	if err != nil {
		return orders.Record{}, nil, err
	}
	if req.Resource == pricing.Energy && m.o.ReceiverMaxEnergy > 0 {
		if err := m.checkReceiverCeiling(ctx, tx, req.Receiver, req.Amount); err != nil {
			return orders.Record{}, nil, err
		}
	}
	b := &pgx.Batch{}
	w, err := m.queueWrites(b, n, key)
	if err != nil {
		return orders.Record{}, nil, err
	}
	if q != nil {
		quotes.QueueUse(b, *q, n.ID)
	}
	// The supply rows are locked last, after the account's row (the hold); the group
	// writes them last too.
	var sup *supplystore.Locked
	if m.commits(n.Resource) {
		sup = supplystore.QueueLock(b, m.o.Network, []string{string(n.Resource)})
	}
	if err := w.result(ctx, tx, tx.SendBatch(ctx, b).Close()); err != nil {
		return orders.Record{}, nil, err
	}
	if sup != nil {
		if !sup.Take(string(n.Resource), *n.Tier, n.Amount, !m.o.ForbidProviderSpill) {
			return orders.Record{}, nil, m.uncommitted(req, sup.Available(string(n.Resource), *n.Tier, !m.o.ForbidProviderSpill))
		}
		b := &pgx.Batch{}
		sup.QueueTaken(b)
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return orders.Record{}, nil, err
		}
	}
	return w.ins.Row.Record, w.body, nil
}

// commits reports whether an order of resource is accepted only against committed supply.
func (m *Orders) commits(r orders.Resource) bool {
	return m.o.CommitSupply && (r == orders.Energy || r == orders.Bandwidth)
}

// uncommitted is the refusal of an order the committed supply cannot hold: 5001 with
// details.available (what could still be committed to one order), refined like the
// snapshot's (5007 without spill, 5004 when no provider answers).
func (m *Orders) uncommitted(req Request, available int64) error {
	return m.supplyError(req, apierr.InsufficientSupply.Newf("only %d units can still be committed to an order; nothing was charged", available).
		With("available", available))
}

// prepare prices the order and runs every check that needs neither the database nor a
// lock (activation rules, max_price_sun): what it returns is the order to store.
func (m *Orders) prepare(ctx context.Context, accountID string, req Request, q *quotes.Quote, batchID, subscriptionID *string) (orderstore.NewOrder, error) {
	pr, err := m.price(ctx, req)
	if err != nil {
		return orderstore.NewOrder{}, err
	}
	activated := pr.Activated != nil && *pr.Activated // price is binding: never nil here
	n := orderstore.NewOrder{
		ID: orderstore.NewID(), AccountID: accountID, Network: m.o.Network, ClientOrderID: req.ClientOrderID,
		Resource: orders.Resource(req.Resource), Receiver: req.Receiver.String(), Activate: req.Activate,
		CreatedAt: m.o.Now(), BatchID: batchID, SubscriptionID: subscriptionID,
	}
	if req.QuoteID != "" {
		qid := req.QuoteID
		n.QuoteID = &qid
	}
	n.MaxPriceSun = req.MaxPriceSun
	n.Relay = req.Relay
	if req.Resource == pricing.Activation {
		if activated {
			return n, invalid("receiver", "already_activated", "the receiver is already activated; an activation order has nothing to do")
		}
		// One activation at the activation price (a quote's, when it locked one).
		n.Amount, n.ActivationAmountSun = 1, pr.ActivateSun
		if q != nil {
			n.ActivationAmountSun = q.ActivateAmountSun
		}
		n.UnitPriceCenti = int64(pricing.SunToCentisun(n.ActivationAmountSun))
	} else {
		if !activated && !req.Activate {
			return n, apierr.ReceiverNotActivated.New("the receiver is not activated; order with activate = true (adds the activation fee) or activate it first").
				WithField("receiver").With("activate_amount_sun", pr.ActivateSun)
		}
		tier, secs := string(req.Tier), pricing.TierSeconds(req.Tier)
		if req.Tier == pricing.Tier5m && m.o.ShortRental > 0 {
			secs = int64(m.o.ShortRental / time.Second)
		}
		n.Amount, n.Tier, n.DurationSeconds = req.Amount, &tier, &secs
		n.EnergyAmountSun, n.UnitPriceCenti = pr.Quote.EnergyAmountSun, int64(pr.Quote.UnitPriceSun)
		n.ActivationAmountSun = pr.ActivateSun // 0 when the receiver is activated
		if q != nil {
			// The quote locks the price of the resource and, when it priced an activation
			// for this receiver, of the activation too. Whether a fee is due follows the
			// receiver's state now: an already activated receiver pays none.
			n.EnergyAmountSun, n.UnitPriceCenti = q.EnergyAmountSun, q.UnitPriceCenti
			if n.ActivationAmountSun > 0 && q.ActivateAmountSun > 0 {
				n.ActivationAmountSun = q.ActivateAmountSun
			}
		}
	}
	if total := n.Total(); req.MaxPriceSun != nil && total > *req.MaxPriceSun {
		return n, apierr.PriceAboveLimit.Newf("the total of %d SUN is above max_price_sun %d; nothing was charged", total, *req.MaxPriceSun).
			WithField("max_price_sun").With("total_amount_sun", total).With("max_price_sun", *req.MaxPriceSun)
	}
	return n, nil
}

// writes are an order's writes queued in a batch: the hold, the order row with its intent,
// and (with an idempotency key) the stored 201.
type writes struct {
	accountID string
	hold      *ledgerstore.QueuedHold
	ins       *orderstore.QueuedInsert
	body      []byte
	max       int
}

// queueWrites queues n's writes in b. The hold's UPDATE of the account's ledger row
// serialises concurrent creations of the account from there to commit, so the in-flight
// count of the insert after it is exact. The hold also counts the order in orders_created
// (energy_delegated is counted by the processor when the delegation is confirmed, with the
// amount actually delivered). A refusal of any of them is answered after the batch ran,
// and the caller's rollback undoes the others.
func (m *Orders) queueWrites(b *pgx.Batch, n orderstore.NewOrder, key *idempotency.Key) (*writes, error) {
	w := &writes{accountID: n.AccountID, max: m.o.MaxInFlight}
	var err error
	if w.hold, err = m.o.Ledger.QueueOrderHold(b, n.AccountID, n.ID, n.Total()); err != nil {
		return nil, err
	}
	if w.ins, err = orderstore.QueueInsertLimited(b, n, m.o.MaxInFlight); err != nil {
		return nil, err
	}
	if key != nil {
		if w.body, err = json.Marshal(w.ins.Row.Record); err != nil {
			return nil, err
		}
		m.o.Idempotency.QueueComplete(b, *key, idempotency.Response{Status: http.StatusCreated, Body: w.body, ObjectID: n.ID})
	}
	return w, nil
}

// result answers the queued writes once their batch ran: the hold's refusal (4001, 4002,
// 4004), else 1101 when the account had too many orders in flight, else nil.
func (w *writes) result(ctx context.Context, tx pgx.Tx, batchErr error) error {
	if err := w.hold.Result(ctx, tx, batchErr); err != nil {
		return err
	}
	if !w.ins.Admitted {
		inFlight, err := orderstore.InFlight(ctx, tx, w.accountID)
		if err != nil {
			return err
		}
		return apierr.ConcurrencyLimited.Newf("%d orders of this account are still being delivered; the limit is %d", inFlight, w.max).
			With("limit", w.max).With("in_flight", inFlight).WithRetryAfter(1)
	}
	return nil
}

// invalid is the catalogue's 2001 validation_failed on field with details.constraint.
func invalid(field, constraint, message string) *apierr.Error {
	return apierr.ValidationFailed.New(message).WithField(field).With("constraint", constraint)
}

// quoted is s as a JSON string for a message, cut at 64 bytes.
func quoted(s string) string {
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	b, _ := json.Marshal(s)
	return string(b)
}
