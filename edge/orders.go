package edge

// Order endpoints (rental-api-v1 "Orders", "Idempotency", "Errors"; docs/orders.md "API"):
//
//	POST /v1/orders               key (orders.write): price, charge and store an order
//	GET  /v1/orders               key (orders.read): the account's orders, newest first
//	GET  /v1/orders/{id}          key (orders.read)
//	POST /v1/orders/{id}/reclaim  key (orders.write): ask for an early return
//
// Creation is synchronous and happens in ONE Postgres transaction: the client_order_id
// idempotency record, the ledger hold of the total, the order row with its processing
// intent (outbox), the account's order totals, and the stored response. Either all of it
// commits or none does, so every refusal, a 503 included, stores and charges nothing, and
// a verbatim retry with the same client_order_id is always safe.

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"rental/infra/idempotency"
	"rental/infra/ledgerstore"
	"rental/infra/orderstore"
	"rental/infra/quotes"
	"rental/infra/tron"
	"rental/schemas/apierr"
	"rental/schemas/events"
	"rental/schemas/network"
	"rental/schemas/orders"
	"rental/schemas/pricing"
)

// Defaults of OrdersOptions.
const (
	DefaultMaxInFlightOrders = 100
	DefaultMaxOrderEnergy    = 10_000_000
	DefaultOrderLockWait     = 3 * time.Second
	// DefaultOrdersPageSize and MaxOrdersPageSize bound GET /v1/orders?limit=.
	DefaultOrdersPageSize = 50
	MaxOrdersPageSize     = orderstore.MaxListLimit
	// MaxClientOrderIDLen is the longest client_order_id accepted.
	MaxClientOrderIDLen = 128
)

// OrdersOptions are the order module's dependencies and limits (infra/config Orders).
type OrdersOptions struct {
	Network     network.Network     // required
	Pricing     *Pricing            // required: prices from the snapshot, receiver activation
	Ledger      *ledgerstore.Ledger // required: holds and totals; its pool runs the transactions
	Idempotency *idempotency.Store  // required: client_order_id and Idempotency-Key records
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
	// (ordergroup.go); 0 is DefaultGroupCommitters, a negative value stores every order in
	// its own transaction. GroupMax bounds a group (default DefaultGroupMax).
	GroupCommitters int
	GroupMax        int
	// Registerer receives the group commit's metrics (default: Prometheus' default).
	Registerer prometheus.Registerer
	Logger     *slog.Logger     // default: discard
	Now        func() time.Time // default: the pricing module's clock (quotes are stamped with it)
}

// Orders is the module serving the order endpoints.
type Orders struct {
	o       OrdersOptions
	log     *slog.Logger
	own     map[tron.Address]bool
	reclaim HandlerFunc     // POST /v1/orders/{id}/reclaim behind the Idempotency-Key handling
	group   *groupCommitter // nil: every creation in its own transaction
}

// NewOrders checks the options.
func NewOrders(o OrdersOptions) (*Orders, error) {
	if o.Pricing == nil || o.Ledger == nil || o.Idempotency == nil {
		return nil, errors.New("edge: orders: Pricing, Ledger and Idempotency are required")
	}
	if _, err := network.Parse(string(o.Network)); err != nil {
		return nil, errors.New("edge: orders: " + err.Error())
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
		o.Now = o.Pricing.o.Now
	}
	m := &Orders{o: o, log: o.Logger.With("module", "orders"), own: map[tron.Address]bool{}}
	for _, a := range o.OwnAddresses {
		if !a.IsZero() {
			m.own[a] = true
		}
	}
	m.reclaim = idempotentOn(o.Idempotency, m.reclaimOrder)
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

// Handlers implements Module.
func (m *Orders) Handlers() map[string]HandlerFunc {
	return map[string]HandlerFunc{
		"POST /v1/orders":              m.createOrder,
		"GET /v1/orders":               m.listOrders,
		"GET /v1/orders/{id}":          m.getOrder,
		"POST /v1/orders/{id}/reclaim": m.reclaim,
	}
}

// ---- POST /v1/orders: the request ----

// orderBody is the body of POST /v1/orders. Pointers tell absent (or null) from zero.
type orderBody struct {
	ClientOrderID *string `json:"client_order_id"`
	Resource      *string `json:"resource"`
	Amount        *int64  `json:"amount"`
	Tier          *string `json:"tier"`
	Receiver      *string `json:"receiver"`
	Activate      *bool   `json:"activate"`
	QuoteID       *string `json:"quote_id"`
	MaxPriceSun   *int64  `json:"max_price_sun"`
}

// orderRequest is a syntactically valid order. resource, amount and tier may be unset
// ("", 0, "") only with a quote, which then supplies them.
type orderRequest struct {
	clientOrderID string
	resource      pricing.Resource
	amount        int64
	tier          pricing.Tier
	receiver      tron.Address
	activate      bool
	quoteID       string
	maxPriceSun   *int64
	activation    *activationState // the receiver's state, read before the transaction (not hashed)
}

// hash fingerprints the order for the idempotency record: the parsed fields with the
// defaults applied, so key order, whitespace and an explicit default (activate false) do
// not make a retry "different", while any change of what is ordered does (3010).
func (r orderRequest) hash() []byte {
	var maxPrice string
	if r.maxPriceSun != nil {
		maxPrice = strconv.FormatInt(*r.maxPriceSun, 10)
	}
	return idempotency.Hash([]byte("POST /v1/orders v1"), []byte(r.clientOrderID), []byte(r.resource),
		[]byte(strconv.FormatInt(r.amount, 10)), []byte(r.tier), r.receiver[:], []byte(strconv.FormatBool(r.activate)),
		[]byte(r.quoteID), []byte(maxPrice))
}

// validClientOrderID: 1 to 128 printable ASCII characters without spaces. The id is an
// idempotency key and a list filter, so it must survive logs and query strings unchanged.
func validClientOrderID(s string) bool {
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

// parseOrderBody checks everything that needs no database, price or chain: a body that
// fails here fails identically on every retry, so answering before the idempotency claim
// changes nothing for a client.
func parseOrderBody(rc *fasthttp.RequestCtx) (orderRequest, error) {
	var b orderBody
	if err := DecodeJSON(rc, &b); err != nil {
		return orderRequest{}, err
	}
	var r orderRequest
	var err error
	switch {
	case b.ClientOrderID == nil:
		return r, Invalid("client_order_id", "required", "client_order_id is required: it makes a retry of the same order safe")
	case !validClientOrderID(*b.ClientOrderID):
		return r, Invalid("client_order_id", "format", "client_order_id must be 1 to 128 printable ASCII characters without spaces").
			With("max_length", MaxClientOrderIDLen)
	}
	r.clientOrderID = *b.ClientOrderID
	if b.QuoteID != nil {
		if !quotes.ValidID(*b.QuoteID) {
			return r, Invalid("quote_id", "format", "quote_id is not a quote id (q_ and 24 hex characters)")
		}
		r.quoteID = *b.QuoteID
	}
	withQuote := r.quoteID != ""
	if b.Resource != nil {
		if r.resource, err = parseResource(*b.Resource); err != nil {
			return r, err
		}
	} else if !withQuote {
		return r, Invalid("resource", "required", "resource is required (or a quote_id)")
	}
	// Activation takes neither amount nor tier (they do not apply); like the quote and
	// estimate endpoints, it ignores them rather than refuse a generic client's defaults.
	if r.resource != pricing.Activation {
		if b.Tier != nil {
			if r.tier, err = parseTier(*b.Tier); err != nil {
				return r, err
			}
		} else if !withQuote {
			return r, Invalid("tier", "required", "tier is required for energy and bandwidth")
		}
		if b.Amount != nil {
			r.amount = *b.Amount
		} else if !withQuote {
			return r, Invalid("amount", "required", "amount is required for energy and bandwidth")
		}
	}
	if b.Receiver == nil {
		return r, Invalid("receiver", "required", "receiver is required")
	}
	if r.receiver, err = parseReceiver(*b.Receiver); err != nil {
		return r, err
	}
	if b.Activate != nil {
		r.activate = *b.Activate
	}
	if b.MaxPriceSun != nil {
		if *b.MaxPriceSun < 0 {
			return r, Invalid("max_price_sun", "min", "max_price_sun must not be negative").With("min", 0)
		}
		v := *b.MaxPriceSun
		r.maxPriceSun = &v
	}
	return r, nil
}

// ---- POST /v1/orders: the transaction ----

func (m *Orders) createOrder(ctx context.Context, rc *fasthttp.RequestCtx) error {
	p, err := signedAccount(rc)
	if err != nil {
		return err
	}
	req, err := parseOrderBody(rc)
	if err != nil {
		return err
	}
	key := idempotency.Key{AccountID: p.AccountID, Namespace: idempotency.NamespaceOrder, Key: req.clientOrderID}
	// Read the receiver's activation before the transaction opens, so that no node call
	// happens while it holds the account's row and a connection; the pricing inside uses
	// this answer. (A replay pays this read too; it changes nothing.)
	var act activationState
	act.activated, act.known = m.o.Pricing.activation.Activated(ctx, req.receiver)
	req.activation = &act
	if body, ok, err := m.createInGroup(ctx, p.AccountID, req, key); err != nil || ok {
		if err != nil {
			return err
		}
		rc.Response.Header.SetContentType(contentTypeJSON)
		rc.SetStatusCode(fasthttp.StatusCreated)
		rc.SetBody(body)
		return nil
	}
	var (
		body     []byte
		replayed bool
	)
	err = m.inTx(ctx, func(tx pgx.Tx) error {
		// The claim and the receiver check travel in one round trip; the check's answer
		// counts only for a fresh claim.
		b := &pgx.Batch{}
		claim := m.o.Idempotency.QueueClaim(b, key, req.hash())
		ours := m.queueReceiverCheck(b, req.receiver)
		c, err := claim.Result(ctx, tx, tx.SendBatch(ctx, b).Close())
		if err != nil {
			return err
		}
		if c.Replay != nil {
			body, replayed = c.Replay.Body, true
			return nil
		}
		if err := ours(); err != nil {
			return err
		}
		// create bounds the waits left (the account's row, a receiver's ceiling lock) to
		// LockWait (set with the receiver check); a longer wait is answered 4004.
		_, body, err = m.create(ctx, tx, p.AccountID, req, nil, nil, &key)
		return err
	})
	if err != nil {
		return err
	}
	rc.Response.Header.SetContentType(contentTypeJSON)
	if replayed {
		// The spec: a repeat returns the original order with HTTP 200 and charges nothing.
		rc.Response.Header.Set("Idempotent-Replayed", "true")
		rc.SetStatusCode(fasthttp.StatusOK)
	} else {
		rc.SetStatusCode(fasthttp.StatusCreated)
	}
	rc.SetBody(body)
	return nil
}

// createInGroup stores the order through the group commit when it can: ok with the 201
// body when it was stored. Not ok (and no error) leaves it to the one-by-one transaction:
// an order with a quote (read and checked in the transaction), an order whose pricing refuses it (the answer depends on whether
// client_order_id replays, which only the claim knows), or one the group declined.
func (m *Orders) createInGroup(ctx context.Context, accountID string, req orderRequest, key idempotency.Key) ([]byte, bool, error) {
	if m.group == nil || req.quoteID != "" {
		return nil, false, nil
	}
	n, err := m.prepare(ctx, accountID, req, nil, nil, nil)
	if err != nil {
		return nil, false, nil
	}
	e := &groupEntry{n: n, key: key, hash: req.hash(), rcv: req.receiver}
	switch err := m.group.submit(ctx, e); {
	case err == nil:
		return e.body, true, nil
	case errors.Is(err, errDeclined):
		return nil, false, nil
	default:
		return nil, false, err
	}
}

// inTx runs fn in a transaction of the ledger's pool. Serialisation failures, deadlocks and
// lock waits beyond LockWait between concurrent creations become 4004 ledger_conflict: the
// transaction rolled back, nothing was charged, and a retry at once may pass.
func (m *Orders) inTx(ctx context.Context, fn func(pgx.Tx) error) error {
	// The BEGIN also bounds the idempotency claim's lock wait (one round trip for both).
	err := pgx.BeginTxFunc(ctx, m.o.Ledger.Pool(), pgx.TxOptions{BeginQuery: m.o.Idempotency.BeginQuery()}, fn)
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
func (m *Orders) create(ctx context.Context, tx pgx.Tx, accountID string, req orderRequest, batchID, subscriptionID *string,
	key *idempotency.Key) (orders.Record, []byte, error) {
	var q *quotes.Quote
	if req.quoteID != "" {
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
	if req.resource == pricing.Energy && m.o.ReceiverMaxEnergy > 0 {
		if err := m.checkReceiverCeiling(ctx, tx, req.receiver, req.amount); err != nil {
			return orders.Record{}, nil, err
		}
	}
	b := &pgx.Batch{}
	w, err := m.queueWrites(b, n, key)
	if err != nil {
		return orders.Record{}, nil, err
	}
	if err := w.result(ctx, tx, tx.SendBatch(ctx, b).Close()); err != nil {
		return orders.Record{}, nil, err
	}
	return w.ins.Row.Record, w.body, nil
}

// prepare prices the order and runs every check that needs neither the database nor a
// lock (activation rules, max_price_sun): what it returns is the order to store.
func (m *Orders) prepare(ctx context.Context, accountID string, req orderRequest, q *quotes.Quote, batchID, subscriptionID *string) (orderstore.NewOrder, error) {
	pr, err := m.price(ctx, req)
	if err != nil {
		return orderstore.NewOrder{}, err
	}
	activated := pr.activated != nil && *pr.activated // price is binding: never nil here
	n := orderstore.NewOrder{
		ID: orderstore.NewID(), AccountID: accountID, Network: m.o.Network, ClientOrderID: req.clientOrderID,
		Resource: orders.Resource(req.resource), Receiver: req.receiver.String(), Activate: req.activate,
		CreatedAt: m.o.Now(), BatchID: batchID, SubscriptionID: subscriptionID,
	}
	if req.quoteID != "" {
		qid := req.quoteID
		n.QuoteID = &qid
	}
	n.MaxPriceSun = req.maxPriceSun
	if req.resource == pricing.Activation {
		if activated {
			return n, Invalid("receiver", "already_activated", "the receiver is already activated; an activation order has nothing to do")
		}
		// One activation at the activation price (a quote's, when it locked one).
		n.Amount, n.ActivationAmountSun = 1, pr.activateSun
		if q != nil {
			n.ActivationAmountSun = q.ActivateAmountSun
		}
		n.UnitPriceCenti = int64(pricing.SunToCentisun(n.ActivationAmountSun))
	} else {
		if !activated && !req.activate {
			return n, apierr.ReceiverNotActivated.New("the receiver is not activated; order with activate = true (adds the activation fee) or activate it first").
				WithField("receiver").With("activate_amount_sun", pr.activateSun)
		}
		tier, secs := string(req.tier), pricing.TierSeconds(req.tier)
		n.Amount, n.Tier, n.DurationSeconds = req.amount, &tier, &secs
		n.EnergyAmountSun, n.UnitPriceCenti = pr.quote.EnergyAmountSun, int64(pr.quote.UnitPriceSun)
		n.ActivationAmountSun = pr.activateSun // 0 when the receiver is activated
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
	if total := n.Total(); req.maxPriceSun != nil && total > *req.maxPriceSun {
		return n, apierr.PriceAboveLimit.Newf("the total of %d SUN is above max_price_sun %d; nothing was charged", total, *req.maxPriceSun).
			WithField("max_price_sun").With("total_amount_sun", total).With("max_price_sun", *req.maxPriceSun)
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
		m.o.Idempotency.QueueComplete(b, *key, idempotency.Response{Status: fasthttp.StatusCreated, Body: w.body, ObjectID: n.ID})
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

// ---- orders the service places on an account's behalf ----

// Placement is an order placed without an HTTP request of its own: a batch receiver or a
// subscription refill. ClientOrderID must be unique on the account (the caller derives it
// from the batch or subscription, so a retried placement finds its first order, see
// PlaceTx); the other fields are those of POST /v1/orders without a quote.
type Placement struct {
	ClientOrderID  string
	Resource       pricing.Resource
	Amount         int64
	Tier           pricing.Tier
	Receiver       tron.Address
	Activate       bool
	MaxPriceSun    *int64
	BatchID        *string
	SubscriptionID *string
}

// ErrPlacedBefore is PlaceTx finding an order with the placement's client_order_id, batch
// and subscription already on the account: the placement happened earlier (a redelivered job), nothing new was charged.
var ErrPlacedBefore = errors.New("edge: orders: an order with this client_order_id exists")

// PlaceTx prices, charges and stores an order inside the caller's transaction, with every
// check and refusal of POST /v1/orders (the same catalogue errors: 4001 with required_sun
// and available_sun, 5001, 2003, 1101, ...). The caller's transaction must set nothing the
// creation relies on: PlaceTx bounds its own lock waits. Activation state is read from the
// node before pricing, so call it with no locks held that a slow node would stretch.
// A refusal writes nothing; the caller decides whether to roll back its own writes.
func (m *Orders) PlaceTx(ctx context.Context, tx pgx.Tx, accountID string, p Placement) (orders.Record, error) {
	if !validClientOrderID(p.ClientOrderID) {
		return orders.Record{}, errors.New("edge: orders: placement without a valid client_order_id")
	}
	var exists bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM orders WHERE account_id = $1 AND client_order_id = $2
		AND batch_id IS NOT DISTINCT FROM $3 AND subscription_id IS NOT DISTINCT FROM $4)`,
		accountID, p.ClientOrderID, p.BatchID, p.SubscriptionID).Scan(&exists); err != nil {
		return orders.Record{}, err
	}
	if exists {
		return orders.Record{}, ErrPlacedBefore
	}
	req := orderRequest{clientOrderID: p.ClientOrderID, resource: p.Resource, amount: p.Amount, tier: p.Tier,
		receiver: p.Receiver, activate: p.Activate, maxPriceSun: p.MaxPriceSun}
	var act activationState
	act.activated, act.known = m.o.Pricing.activation.Activated(ctx, req.receiver)
	req.activation = &act
	if err := m.checkReceiverNotOurs(ctx, tx, req.receiver); err != nil {
		return orders.Record{}, err
	}
	rec, _, err := m.create(ctx, tx, accountID, req, p.BatchID, p.SubscriptionID, nil)
	return rec, err
}

// checkReceiverNotOurs refuses the service's own addresses (3003): configured pools and
// treasury, stake pools known to the database, and every deposit address, retired ones
// included (a delegation to any of them would be resource the service gives itself).
//
// Its statement also sets the transaction's lock_timeout to LockWait (set_config with
// is_local, the same as SET LOCAL, in the same round trip): the account's row (ledger hold)
// and a receiver's ceiling lock come after it and are the only waits left; a wait beyond
// LockWait is answered 4004 and the client retries at once.
func (m *Orders) checkReceiverNotOurs(ctx context.Context, tx pgx.Tx, a tron.Address) error {
	b := &pgx.Batch{}
	result := m.queueReceiverCheck(b, a)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return err
	}
	return result()
}

// queueReceiverCheck is checkReceiverNotOurs queued in b; the function it returns gives
// the answer once b ran.
func (m *Orders) queueReceiverCheck(b *pgx.Batch, a tron.Address) func() error {
	ours := m.queueReceiversCheck(b, []tron.Address{a}, m.o.LockWait)
	return func() error {
		if ours(a) {
			return apierr.ReceiverIsOurs.New("the receiver is an address of this service").WithField("receiver")
		}
		return nil
	}
}

// useQuote reads the account's quote, refuses parameters contradicting it (2004, checked
// before expiry: a new quote would not fix them) and an expired one (3005), and fills the
// parameters the request left out from it.
func (m *Orders) useQuote(ctx context.Context, tx pgx.Tx, accountID string, req *orderRequest) (quotes.Quote, error) {
	q, err := quotes.GetTx(ctx, tx, accountID, req.quoteID)
	if errors.Is(err, quotes.ErrNotFound) {
		return q, Invalid("quote_id", "not_found", "no quote "+quote(req.quoteID)+" on this account")
	}
	if err != nil {
		return q, err
	}
	var mismatched []string
	if req.resource != "" && string(req.resource) != q.Resource {
		mismatched = append(mismatched, "resource")
	}
	if q.Resource != string(pricing.Activation) && req.resource != pricing.Activation {
		if req.amount != 0 && req.amount != q.Amount {
			mismatched = append(mismatched, "amount")
		}
		if req.tier != "" && string(req.tier) != q.Tier {
			mismatched = append(mismatched, "tier")
		}
	}
	if q.Receiver != "" && q.Receiver != req.receiver.String() {
		mismatched = append(mismatched, "receiver")
	}
	if len(mismatched) > 0 {
		quoted := map[string]any{"resource": q.Resource, "amount": q.Amount, "tier": nilIfEmpty(q.Tier), "receiver": nilIfEmpty(q.Receiver)}
		return q, apierr.QuoteMismatch.New("the order contradicts quote "+q.ID+" in "+strings.Join(mismatched, ", ")).
			WithField(mismatched[0]).With("quote_id", q.ID).With("mismatched", mismatched).With("quote", quoted)
	}
	if !m.o.Pricing.o.Now().Before(q.ExpiresAt) {
		return q, quotes.Expired(q)
	}
	req.resource = pricing.Resource(q.Resource)
	if req.resource != pricing.Activation {
		req.amount, req.tier = q.Amount, pricing.Tier(q.Tier)
	}
	return q, nil
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// price prices the order from the live snapshot (binding: an unknown activation state is
// 5003). With a quote the price is the quote's, but stock is still checked here: a quote
// locks the price, not the stock (5001). Supply errors are refined: 5007 when only spill
// beyond the own pools could fill and spill is forbidden, 5004 when the providers that
// should have covered the rest offer nothing at all.
func (m *Orders) price(ctx context.Context, req orderRequest) (priced, error) {
	amount := req.amount
	if req.resource == pricing.Activation {
		amount = 1
	}
	r := req.receiver
	pr, err := m.o.Pricing.price(ctx, priceRequest{resource: req.resource, tier: req.tier, amount: amount, receiver: &r, activation: req.activation}, true)
	if req.resource == pricing.Activation {
		return pr, err
	}
	e := apierr.As(err)
	switch {
	case err == nil:
	case e.Code == apierr.AmountOutOfRange:
		if mx, ok := e.Details["max_amount"].(int64); ok && req.resource == pricing.Energy && mx > m.o.MaxOrderEnergy {
			e.With("max_amount", m.o.MaxOrderEnergy)
		}
		return pr, e
	case e.Code == apierr.InsufficientSupply:
		if err := m.limitError(req); err != nil {
			return pr, err
		}
		return pr, m.supplyError(req, e)
	default:
		return pr, err
	}
	if err := m.limitError(req); err != nil {
		return pr, err
	}
	if m.o.ForbidProviderSpill {
		for _, f := range pr.quote.Walk.Fills {
			if f.Class != pricing.ClassInstant {
				return pr, m.supplyError(req, nil)
			}
		}
	}
	return pr, nil
}

// limitError is 2008 for an energy order above the account limit max_order_energy.
func (m *Orders) limitError(req orderRequest) error {
	if req.resource != pricing.Energy || req.amount <= m.o.MaxOrderEnergy {
		return nil
	}
	s, err := m.o.Pricing.snapshot()
	if err != nil {
		return err
	}
	rule := s.Rules[pricing.BookKey{Resource: req.resource, Tier: req.tier}]
	return apierr.AmountOutOfRange.Newf("amount %d is above this account's max_order_energy %d", req.amount, m.o.MaxOrderEnergy).
		WithField("amount").With("min_amount", rule.MinAmount).With("max_amount", min(rule.MaxAmount, m.o.MaxOrderEnergy)).
		With("limit", "max_order_energy")
}

// supplyError says why the book cannot fill the order. short is the snapshot's 5001 (nil
// when the book could fill it only by spilling beyond the own pools).
func (m *Orders) supplyError(req orderRequest, short *apierr.Error) error {
	s, err := m.o.Pricing.snapshot()
	if err != nil {
		return err
	}
	var own, market int64
	for _, l := range s.Books[pricing.BookKey{Resource: req.resource, Tier: req.tier}].Levels {
		switch l.Class {
		case pricing.ClassInstant:
			own += l.Amount
		case pricing.ClassMarket:
			market += l.Amount
		}
	}
	switch {
	case m.o.ForbidProviderSpill:
		return apierr.CapacityUnavailable.Newf("own capacity of %d units cannot fill %d, and this deployment does not fill orders from providers; nothing was charged", own, req.amount).
			With("available", own)
	case m.o.MarketProviders > 0 && market == 0 && own < req.amount:
		return apierr.ProviderUnavailable.New("own stock is short and no market provider is answering; nothing was charged").
			With("available", own)
	case short != nil:
		return short
	}
	return apierr.InsufficientSupply.New("not enough supply; nothing was charged")
}

// checkReceiverCeiling refuses an energy order that would take the receiver's live energy
// from this service above ReceiverMaxEnergy (5005). A transaction-scoped advisory lock on
// the receiver makes the sum exact under concurrent orders of any account; it is taken
// before the account's ledger row, always in that order, so the two cannot deadlock.
// receiverLock is the advisory lock that serialises the 5005 ceiling check of one receiver
// ($1) across creations, one by one and in groups.
const receiverLock = `hashtextextended('orders.receiver:' || $1, 0)`

func (m *Orders) checkReceiverCeiling(ctx context.Context, tx pgx.Tx, receiver tron.Address, amount int64) error {
	r := receiver.String()
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(`+receiverLock+`)`, r); err != nil {
		return err
	}
	live, err := orderstore.ReceiverLiveEnergy(ctx, tx, r, m.o.Now())
	if err != nil {
		return err
	}
	if live+amount > m.o.ReceiverMaxEnergy {
		return apierr.ReceiverCapacityExceeded.Newf("the receiver already holds %d energy from this service; at most %d more can be ordered", live, max(m.o.ReceiverMaxEnergy-live, 0)).
			WithField("receiver").With("max_additional", max(m.o.ReceiverMaxEnergy-live, 0))
	}
	return nil
}

// ---- GET /v1/orders/{id} ----

var orderIDPattern = regexp.MustCompile(`^` + orderstore.IDPrefix + `_[0-9a-f]{24}$`)

// orderNotFound answers an unknown id and another account's order alike (3001).
func orderNotFound(id string) error {
	return apierr.OrderNotFound.New("no order " + quote(id) + " on this account").WithField("id")
}

func (m *Orders) getOrder(ctx context.Context, rc *fasthttp.RequestCtx) error {
	p, err := signedAccount(rc)
	if err != nil {
		return err
	}
	id := pathValue(rc, "id")
	if !orderIDPattern.MatchString(id) {
		return orderNotFound(id)
	}
	row, err := orderstore.Get(ctx, m.o.Ledger.Pool(), p.AccountID, id)
	if errors.Is(err, orderstore.ErrNotFound) {
		return orderNotFound(id)
	}
	if err != nil {
		return err
	}
	return WriteJSON(rc, fasthttp.StatusOK, row.Record)
}

// ---- GET /v1/orders ----

// orderList is the page of GET /v1/orders.
type orderList struct {
	Data       []orders.Record `json:"data"`
	NextCursor *string         `json:"next_cursor"`
}

// orderCursor pages GET /v1/orders.
var orderCursor = listCursor{prefix: "o1:", id: orderIDPattern}

func (m *Orders) listOrders(ctx context.Context, rc *fasthttp.RequestCtx) error {
	p, err := signedAccount(rc)
	if err != nil {
		return err
	}
	q, err := readQuery(rc, "limit", "cursor", "status", "created_after", "created_before", "receiver",
		"resource", "client_order_id", "batch_id")
	if err != nil {
		return err
	}
	limit, err := pageLimit(q, DefaultOrdersPageSize, MaxOrdersPageSize)
	if err != nil {
		return err
	}
	var f orderstore.Filter
	if v, ok := q["cursor"]; ok {
		pos, err := orderCursor.decode(v)
		if err != nil {
			return err
		}
		f.After = &pos
	}
	if v, ok := q["status"]; ok {
		for _, s := range strings.Split(v, ",") {
			st, ok := orders.ParseStatus(s)
			if !ok {
				allowed := make([]string, len(orders.Statuses))
				for i, s := range orders.Statuses {
					allowed[i] = string(s)
				}
				return Invalid("status", "enum", "status must be order states, comma separated").With("allowed", allowed)
			}
			if !slices.Contains(f.Statuses, st) {
				f.Statuses = append(f.Statuses, st)
			}
		}
	}
	for _, name := range []string{"created_after", "created_before"} {
		v, ok := q[name]
		if !ok {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return Invalid(name, "format", name+" must be an RFC 3339 timestamp such as 2026-01-02T03:04:05.000Z")
		}
		if name == "created_after" {
			f.CreatedAfter = &t
		} else {
			f.CreatedBefore = &t
		}
	}
	if v, ok := q["receiver"]; ok {
		a, err := tron.ParseAddress(v)
		if err != nil || len(v) != 34 || v[0] != 'T' {
			return Invalid("receiver", "format", "receiver must be a Base58Check TRON address")
		}
		f.Receiver = a.String()
	}
	if v, ok := q["resource"]; ok {
		r, err := parseResource(v)
		if err != nil {
			return err
		}
		f.Resource = orders.Resource(r)
	}
	if v, ok := q["client_order_id"]; ok {
		if !validClientOrderID(v) {
			return Invalid("client_order_id", "format", "client_order_id must be 1 to 128 printable ASCII characters without spaces")
		}
		f.ClientOrderID = v
	}
	if v, ok := q["batch_id"]; ok {
		if v == "" || len(v) > MaxClientOrderIDLen {
			return Invalid("batch_id", "format", "batch_id must be a batch id")
		}
		f.BatchID = v
	}
	rows, next, err := orderstore.List(ctx, m.o.Ledger.Pool(), p.AccountID, f, limit)
	if err != nil {
		return err
	}
	out := orderList{Data: make([]orders.Record, len(rows))}
	for i, r := range rows {
		out.Data[i] = r.Record
	}
	if next != nil {
		c := orderCursor.encode(*next)
		out.NextCursor = &c
	}
	return WriteJSON(rc, fasthttp.StatusOK, out)
}

// ---- POST /v1/orders/{id}/reclaim ----

// reclaimOrder asks for an early return of a live delegation from the own pools. It locks
// the order, so it serialises with the processor's own changes of it, marks the request and
// queues a reclaim intent in the same transaction; the processor undelegates and sends
// order.reclaimed. 202: the order is unchanged until the undelegation lands.
func (m *Orders) reclaimOrder(ctx context.Context, tx pgx.Tx, rc *fasthttp.RequestCtx) (TxResult, error) {
	p, err := signedAccount(rc)
	if err != nil {
		return TxResult{}, err
	}
	id := pathValue(rc, "id")
	if !orderIDPattern.MatchString(id) {
		return TxResult{}, orderNotFound(id)
	}
	row, err := orderstore.Lock(ctx, tx, id)
	if errors.Is(err, orderstore.ErrNotFound) || (err == nil && row.AccountID != p.AccountID) {
		return TxResult{}, orderNotFound(id)
	}
	if err != nil {
		return TxResult{}, err
	}
	now := m.o.Now()
	switch {
	case row.Status.Terminal():
		return TxResult{}, apierr.OrderInTerminalState.New("the order is "+string(row.Status)+"; it can no longer change").
			With("status", string(row.Status))
	case row.FilledBy != nil && *row.FilledBy != orders.FilledByPool:
		return TxResult{}, apierr.ReclaimUnavailable.New("a third-party provider filled this order; it cannot be reclaimed early").
			With("filled_by", *row.FilledBy)
	case row.Resource == orders.Activation,
		row.Status != orders.Confirmed && row.Status != orders.Active,
		row.ExpiresAt != nil && !now.Before(time.Time(*row.ExpiresAt)):
		e := apierr.NothingToReclaim.New("the order has no live delegation to return").With("status", string(row.Status))
		if row.ExpiresAt != nil {
			e.With("expires_at", events.FormatTime(time.Time(*row.ExpiresAt)))
		}
		return TxResult{}, e
	}
	row, fresh, err := orderstore.RequestReclaim(ctx, tx, id, now)
	if err != nil {
		return TxResult{}, err
	}
	if fresh {
		if err := orderstore.Enqueue(ctx, tx, id, orderstore.IntentReclaim); err != nil {
			return TxResult{}, err
		}
	}
	return TxResult{Status: fasthttp.StatusAccepted, Body: row.Record, ObjectID: id}, nil
}
