package edge

// Batch endpoints (rental-api-v1 "Batch", "Orders, batches, keys, node proxy"; docs/batches.md):
//
//	POST /v1/batches              key (batches.write): store a batch of up to 100 receivers
//	GET  /v1/batches/{id}         key (batches.read): the batch record with its receivers
//	POST /v1/batches/{id}/cancel  key (batches.write): cancel receivers not picked up yet
//
// Creation validates every receiver the way POST /v1/orders validates one, then stores the
// batch, its receivers (pending: the processing intent) and the idempotency record in ONE
// transaction and answers 201. Nothing is charged at creation: the batch processor
// (processors/batchflow) places and charges one order per receiver afterwards.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"regexp"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/valyala/fasthttp"

	"rental/infra/acceptance"
	"rental/infra/batchstore"
	"rental/infra/idempotency"
	"rental/schemas/apierr"
	"rental/schemas/batches"
	"rental/schemas/pricing"
)

// Defaults of BatchesOptions.
const (
	// DefaultBatchMaxEnergy is the batch total-energy cap (the spec leaves it open): ten
	// orders of the default max_order_energy.
	DefaultBatchMaxEnergy = 100_000_000
	// DefaultMaxOpenBatches is how many batches of one account may be processing at once
	// before creation answers 1101.
	DefaultMaxOpenBatches = 20
)

// BatchesOptions are the batch module's dependencies and limits (infra/config Batches).
type BatchesOptions struct {
	Acceptance  *acceptance.Orders // required: the rows' rules, the own-address check, the transaction
	Pool        *pgxpool.Pool      // required: reads of batches
	Idempotency *idempotency.Store // required: client_batch_id and Idempotency-Key records
	// MaxReceivers is the account limit max_batch_receivers (at most the spec's 100).
	MaxReceivers int
	// MaxTotalEnergy is the batch total-energy cap: the sum of the energy receivers' amounts
	// (2009 above it).
	MaxTotalEnergy int64
	// MaxOpen is how many batches an account may have processing (1101 above it).
	MaxOpen int
	Logger  *slog.Logger
}

// Batches is the module serving the batch endpoints.
type Batches struct {
	o      BatchesOptions
	log    *slog.Logger
	cancel HandlerFunc // POST /v1/batches/{id}/cancel behind the Idempotency-Key handling
}

// NewBatches checks the options.
func NewBatches(o BatchesOptions) (*Batches, error) {
	if o.Acceptance == nil || o.Pool == nil || o.Idempotency == nil {
		return nil, errors.New("edge: batches: Acceptance, Pool and Idempotency are required")
	}
	if o.MaxReceivers <= 0 || o.MaxReceivers > batches.MaxReceivers {
		o.MaxReceivers = batches.MaxReceivers
	}
	if o.MaxTotalEnergy <= 0 {
		o.MaxTotalEnergy = DefaultBatchMaxEnergy
	}
	if o.MaxOpen <= 0 {
		o.MaxOpen = DefaultMaxOpenBatches
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	m := &Batches{o: o, log: o.Logger.With("module", "batches")}
	m.cancel = idempotentOn(o.Idempotency, m.cancelBatch)
	return m, nil
}

// Handlers implements Module.
func (m *Batches) Handlers() map[string]HandlerFunc {
	return map[string]HandlerFunc{
		"POST /v1/batches":             m.createBatch,
		"GET /v1/batches/{id}":         m.getBatch,
		"POST /v1/batches/{id}/cancel": m.cancel,
	}
}

// ---- POST /v1/batches: the request ----

type batchReceiverBody struct {
	Receiver *string `json:"receiver"`
	Amount   *int64  `json:"amount"`
	Activate *bool   `json:"activate"`
}

type batchBody struct {
	ClientBatchID *string              `json:"client_batch_id"`
	Resource      *string              `json:"resource"`
	Tier          *string              `json:"tier"`
	Amount        *int64               `json:"amount"`
	Activate      *bool                `json:"activate"`
	MaxPriceSun   *int64               `json:"max_price_sun"`
	Receivers     *[]batchReceiverBody `json:"receivers"`
}

// batchRequest is a syntactically valid batch with the defaults applied to each receiver.
type batchRequest struct {
	clientBatchID string
	resource      pricing.Resource
	tier          pricing.Tier
	amount        *int64
	activate      bool
	maxPriceSun   *int64
	receivers     []batchstore.NewReceiver
	overridden    []bool // receiver i gave its own amount
}

// hash fingerprints the batch for the idempotency record: the parsed request with the
// defaults applied, so formatting and explicit defaults do not make a retry different.
func (r batchRequest) hash() []byte {
	parts := [][]byte{[]byte("POST /v1/batches v1"), []byte(r.clientBatchID), []byte(r.resource), []byte(r.tier),
		[]byte(optInt(r.amount)), []byte(strconv.FormatBool(r.activate)), []byte(optInt(r.maxPriceSun))}
	for _, rc := range r.receivers {
		parts = append(parts, []byte(rc.Receiver), []byte(strconv.FormatInt(rc.Amount, 10)), []byte(strconv.FormatBool(rc.Activate)))
	}
	return idempotency.Hash(parts...)
}

func optInt(v *int64) string {
	if v == nil {
		return ""
	}
	return strconv.FormatInt(*v, 10)
}

func receiverField(i int, name string) string { return fmt.Sprintf("receivers[%d].%s", i, name) }

// parseBatchBody checks everything that needs no database, price or chain, in this order:
// body syntax and types (2000, 2001), the idempotency key (2005 when there is none),
// resource and tier, the receivers' count (2001 when none, 2009 above the account's
// max_batch_receivers), then each receiver in order: address (2007), repetition (2006),
// amount (2001), and last the batch's total energy (2009).
func (m *Batches) parseBatchBody(rc *fasthttp.RequestCtx) (batchRequest, error) {
	var b batchBody
	if err := DecodeJSON(rc, &b); err != nil {
		return batchRequest{}, err
	}
	var r batchRequest
	switch {
	case b.ClientBatchID != nil:
		if !validClientOrderID(*b.ClientBatchID) {
			return r, Invalid("client_batch_id", "format", "client_batch_id must be 1 to 128 printable ASCII characters without spaces").
				With("max_length", MaxClientOrderIDLen)
		}
		r.clientBatchID = *b.ClientBatchID
	default:
		raw := rc.Request.Header.Peek(HeaderIdempotencyKey)
		if raw == nil {
			return r, apierr.IdempotencyKeyRequired.New("a batch needs client_batch_id in the body or an Idempotency-Key header: it makes a retry of the same batch safe").
				WithField("client_batch_id")
		}
		if !idempotency.ValidKey(raw) {
			return r, Invalid(HeaderIdempotencyKey, "format", "Idempotency-Key must be 8 to 128 characters of A-Z a-z 0-9 . _ : -")
		}
		r.clientBatchID = string(raw)
	}
	if b.Resource == nil {
		return r, Invalid("resource", "required", "resource is required (energy or bandwidth)")
	}
	switch res := pricing.Resource(*b.Resource); res {
	case pricing.Energy, pricing.Bandwidth:
		r.resource = res
	default:
		return r, Invalid("resource", "enum", "a batch orders energy or bandwidth").With("allowed", []string{"energy", "bandwidth"})
	}
	if b.Tier == nil {
		return r, Invalid("tier", "required", "tier is required")
	}
	var err error
	if r.tier, err = parseTier(*b.Tier); err != nil {
		return r, err
	}
	if b.Amount != nil {
		if *b.Amount <= 0 {
			return r, Invalid("amount", "min", "amount must be a positive integer").With("min", 1)
		}
		v := *b.Amount
		r.amount = &v
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
	if b.Receivers == nil || len(*b.Receivers) == 0 {
		return r, Invalid("receivers", "required", "receivers must list at least one receiver").With("min", 1)
	}
	list := *b.Receivers
	if len(list) > m.o.MaxReceivers {
		return r, apierr.BatchTooLarge.Newf("%d receivers; a batch takes at most %d", len(list), m.o.MaxReceivers).
			WithField("receivers").With("max_receivers", m.o.MaxReceivers).With("receivers", len(list)).
			With("limit", "max_batch_receivers")
	}
	seen := make(map[string]int, len(list))
	var totalEnergy int64
	for i, rb := range list {
		if rb.Receiver == nil {
			return r, Invalid(receiverField(i, "receiver"), "required", "every receiver needs its address").With("index", i)
		}
		a, err := parseReceiver(*rb.Receiver)
		if err != nil {
			return r, apierr.InvalidAddress.Newf("receivers[%d]: %q is not a valid Base58Check TRON address", i, *rb.Receiver).
				WithField(receiverField(i, "receiver")).With("index", i)
		}
		addr := a.String()
		if first, dup := seen[addr]; dup {
			return r, apierr.DuplicateReceiver.Newf("receiver %s is listed twice (receivers[%d] and receivers[%d])", addr, first, i).
				WithField(receiverField(i, "receiver")).With("receiver", addr).With("indexes", []int{first, i})
		}
		seen[addr] = i
		nr := batchstore.NewReceiver{Receiver: addr, Activate: r.activate}
		switch {
		case rb.Amount != nil:
			if *rb.Amount <= 0 {
				return r, Invalid(receiverField(i, "amount"), "min", "amount must be a positive integer").With("min", 1).With("index", i)
			}
			nr.Amount = *rb.Amount
		case r.amount != nil:
			nr.Amount = *r.amount
		default:
			return r, Invalid(receiverField(i, "amount"), "required", "receiver has no amount and the batch no default amount").With("index", i)
		}
		if rb.Activate != nil {
			nr.Activate = *rb.Activate
		}
		if r.resource == pricing.Energy {
			// The running sum saturates just above the cap, so no sum of client amounts
			// can overflow.
			if nr.Amount > m.o.MaxTotalEnergy || totalEnergy+nr.Amount > m.o.MaxTotalEnergy {
				totalEnergy = m.o.MaxTotalEnergy + 1
			} else {
				totalEnergy += nr.Amount
			}
		}
		r.receivers = append(r.receivers, nr)
		r.overridden = append(r.overridden, rb.Amount != nil)
	}
	if totalEnergy > m.o.MaxTotalEnergy {
		var sum int64 // for details: saturates instead of overflowing
		for _, nr := range r.receivers {
			if sum > math.MaxInt64-nr.Amount {
				sum = math.MaxInt64
				break
			}
			sum += nr.Amount
		}
		return r, apierr.BatchTooLarge.Newf("the batch orders %d energy in total; a batch takes at most %d", sum, m.o.MaxTotalEnergy).
			WithField("receivers").With("max_total_energy", m.o.MaxTotalEnergy).With("total_energy", sum).
			With("limit", "max_batch_energy")
	}
	return r, nil
}

// ---- POST /v1/batches: the transaction ----

func (m *Batches) createBatch(ctx context.Context, rc *fasthttp.RequestCtx) error {
	p, err := signedAccount(rc)
	if err != nil {
		return err
	}
	req, err := m.parseBatchBody(rc)
	if err != nil {
		return err
	}
	acc := m.o.Acceptance
	if err := acc.CheckBacklog(); err != nil { // 5050 while delivery is behind; nothing stored
		return err
	}
	key := idempotency.Key{AccountID: p.AccountID, Namespace: idempotency.NamespaceBatch, Key: req.clientBatchID}
	var (
		body     []byte
		replayed bool
	)
	err = acc.InTx(ctx, func(tx pgx.Tx) error {
		c, err := m.o.Idempotency.ClaimBegunTx(ctx, tx, key, req.hash())
		if err != nil {
			return err
		}
		if c.Replay != nil {
			body, replayed = c.Replay.Body, true
			return nil
		}
		if err := m.checkRows(req); err != nil {
			return err
		}
		if err := m.checkReceiversNotOurs(ctx, tx, req); err != nil {
			return err
		}
		// Creations of one account queue here, so the open count is exact.
		if err := batchstore.LockAccount(ctx, tx, p.AccountID); err != nil {
			return err
		}
		open, err := batchstore.OpenCount(ctx, tx, p.AccountID)
		if err != nil {
			return err
		}
		if open >= m.o.MaxOpen {
			return apierr.ConcurrencyLimited.Newf("%d batches of this account are still processing; the limit is %d", open, m.o.MaxOpen).
				With("limit", m.o.MaxOpen).With("in_flight", open).With("kind", "batches").WithRetryAfter(1)
		}
		n := batchstore.NewBatch{ID: batchstore.NewID(), AccountID: p.AccountID, Network: acc.Network(),
			ClientBatchID: req.clientBatchID, Resource: string(req.resource), Tier: string(req.tier), Amount: req.amount,
			Activate: req.activate, MaxPriceSun: req.maxPriceSun, Receivers: req.receivers, CreatedAt: acc.Now()}
		if err := batchstore.Insert(ctx, tx, n); err != nil {
			return err
		}
		b, err := batchstore.Get(ctx, tx, p.AccountID, n.ID)
		if err != nil {
			return err
		}
		if body, err = json.Marshal(b.Record); err != nil {
			return err
		}
		return m.o.Idempotency.CompleteTx(ctx, tx, key, idempotency.Response{Status: fasthttp.StatusCreated, Body: body, ObjectID: n.ID})
	})
	if err != nil {
		return err
	}
	rc.Response.Header.SetContentType(contentTypeJSON)
	if replayed {
		rc.Response.Header.Set("Idempotent-Replayed", "true")
		rc.SetStatusCode(fasthttp.StatusOK)
	} else {
		rc.SetStatusCode(fasthttp.StatusCreated)
	}
	rc.SetBody(body)
	return nil
}

// checkRows applies the price table's rules to every receiver, as order acceptance does
// (acceptance.Orders.CheckRows): the row is on sale (2003 with available_tiers, 5006
// while paused) and each amount within the row's range and the account's max_order_energy
// (2008). Stock (5001), the receiver's activation (3004), the price cap (3006) and the
// balance (4001) depend on the moment of placement and become the receiver's outcome
// instead.
func (m *Batches) checkRows(req batchRequest) error {
	amounts := make([]int64, len(req.receivers))
	for i, r := range req.receivers {
		amounts[i] = r.Amount
	}
	i, e := m.o.Acceptance.CheckRows(req.resource, req.tier, amounts)
	if e == nil {
		return nil
	}
	if i >= 0 && e.Code == apierr.AmountOutOfRange {
		field := "amount"
		if req.overridden[i] {
			field = receiverField(i, "amount")
		}
		return e.WithField(field).With("index", i)
	}
	return e
}

// checkReceiversNotOurs refuses a batch naming an address of this service (3003), with the
// rule of order acceptance, in one statement for the whole list.
func (m *Batches) checkReceiversNotOurs(ctx context.Context, tx pgx.Tx, req batchRequest) error {
	addrs := make([]string, len(req.receivers))
	for i, r := range req.receivers {
		addrs[i] = r.Receiver
	}
	i, err := m.o.Acceptance.FirstOurs(ctx, tx, addrs)
	if err != nil || i < 0 {
		return err
	}
	return apierr.ReceiverIsOurs.Newf("receivers[%d] %s is an address of this service", i, addrs[i]).
		WithField(receiverField(i, "receiver")).With("index", i).With("receiver", addrs[i])
}

// ---- GET /v1/batches/{id} ----

var batchIDPattern = regexp.MustCompile(`^` + batchstore.IDPrefix + `_[0-9a-f]{24}$`)

// batchNotFound answers an unknown id and another account's batch alike, with the
// catalogue's not-found code of orders (3001): the catalogue has none for batches, and a
// batch is a group of orders.
func batchNotFound(id string) error {
	return apierr.OrderNotFound.New("no batch " + quote(id) + " on this account").WithField("id")
}

func (m *Batches) getBatch(ctx context.Context, rc *fasthttp.RequestCtx) error {
	p, err := signedAccount(rc)
	if err != nil {
		return err
	}
	id := pathValue(rc, "id")
	if !batchIDPattern.MatchString(id) {
		return batchNotFound(id)
	}
	b, err := batchstore.Get(ctx, m.o.Pool, p.AccountID, id)
	if errors.Is(err, batchstore.ErrNotFound) {
		return batchNotFound(id)
	}
	if err != nil {
		return err
	}
	return WriteJSON(rc, fasthttp.StatusOK, b.Record)
}

// ---- POST /v1/batches/{id}/cancel ----

type cancelBody struct {
	Receivers *[]string `json:"receivers"`
}

// cancelBatch cancels the receivers not picked up yet: every pending one, or exactly those
// the body lists. It answers 200 with the batch record after the cancel; the cancel that
// leaves no receiver open ends the batch (batch.completed in the same transaction).
func (m *Batches) cancelBatch(ctx context.Context, tx pgx.Tx, rc *fasthttp.RequestCtx) (TxResult, error) {
	p, err := signedAccount(rc)
	if err != nil {
		return TxResult{}, err
	}
	id := pathValue(rc, "id")
	if !batchIDPattern.MatchString(id) {
		return TxResult{}, batchNotFound(id)
	}
	var only []string
	if len(rc.Request.Body()) > 0 {
		var b cancelBody
		if err := DecodeJSON(rc, &b); err != nil {
			return TxResult{}, err
		}
		if b.Receivers != nil {
			if len(*b.Receivers) == 0 {
				return TxResult{}, Invalid("receivers", "min", "receivers, when given, lists at least one receiver; leave it out to cancel every pending one").With("min", 1)
			}
			seen := map[string]bool{}
			for i, v := range *b.Receivers {
				a, err := parseReceiver(v)
				if err != nil {
					return TxResult{}, apierr.InvalidAddress.Newf("receivers[%d]: %q is not a valid Base58Check TRON address", i, v).
						WithField(fmt.Sprintf("receivers[%d]", i)).With("index", i)
				}
				if seen[a.String()] {
					return TxResult{}, apierr.DuplicateReceiver.Newf("receiver %s is listed twice", a).
						WithField(fmt.Sprintf("receivers[%d]", i)).With("receiver", a.String())
				}
				seen[a.String()] = true
				only = append(only, a.String())
			}
		}
	}
	_, err = batchstore.Cancel(ctx, tx, p.AccountID, id, only, m.o.Acceptance.Now())
	var (
		nc *batchstore.NotCancellable
		ni *batchstore.NotInBatch
	)
	switch {
	case errors.Is(err, batchstore.ErrNotFound):
		return TxResult{}, batchNotFound(id)
	case errors.Is(err, batchstore.ErrBatchFinished):
		b, gerr := batchstore.Get(ctx, tx, p.AccountID, id)
		if gerr != nil {
			return TxResult{}, gerr
		}
		return TxResult{}, apierr.OrderInTerminalState.New("the batch has finished ("+string(b.Status)+"); nothing is left to cancel").
			With("status", string(b.Status))
	case errors.As(err, &ni):
		return TxResult{}, Invalid("receivers", "not_in_batch", "not receivers of this batch").With("receivers", ni.Receivers)
	case errors.As(err, &nc):
		if len(nc.Receivers) == 0 {
			return TxResult{}, apierr.OrderNotCancellable.New("every receiver of the batch has been picked up; nothing is left to cancel").
				With("receivers", []string{}).With("pending", 0)
		}
		return TxResult{}, apierr.OrderNotCancellable.Newf("%d of the receivers have been picked up and cannot be cancelled; nothing was cancelled", len(nc.Receivers)).
			WithField("receivers").With("receivers", nc.Receivers)
	case err != nil:
		return TxResult{}, err
	}
	b, err := batchstore.Get(ctx, tx, p.AccountID, id)
	if err != nil {
		return TxResult{}, err
	}
	return TxResult{Status: fasthttp.StatusOK, Body: b.Record, ObjectID: id}, nil
}
