package edge

// Pricing endpoints (rental-api-v1 "Pricing and chain"; docs/pricing.md):
//
//	GET  /v1/prices             public or key: the PriceTable of the latest snapshot
//	GET  /v1/orderbook          public: one book, with the walk of ?amount=
//	GET  /v1/estimate           public or key: a non-binding price, + activation fee
//	POST /v1/quotes             key (quotes.write): a price locked for 120 s (quotes.go)
//	GET  /v1/quotes/{quoteId}   key (quotes.read) (quotes.go)
//
// Prices come from the in-memory snapshot the pricer publishes (pricing.SnapshotSource):
// no request of the first three endpoints touches a database, and GET /v1/prices answers
// bytes rendered once per snapshot. The only I/O is the receiver's activation check, a
// node read cached for a few seconds (ActivationCache).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
	"golang.org/x/sync/singleflight"

	"rental/infra/idempotency"
	"rental/infra/quotes"
	"rental/infra/tron"
	"rental/schemas/apierr"
	"rental/schemas/events"
	"rental/schemas/network"
	"rental/schemas/pricing"
)

// Defaults of the GET /v1/orderbook query.
const (
	DefaultBookResource = pricing.Energy
	DefaultBookTier     = pricing.Tier1h
)

// AccountReader reads an account from the chain; *tron.Client is one. A never-activated
// address is an Account whose Exists is false, not an error.
type AccountReader interface {
	GetAccount(ctx context.Context, addr tron.Address) (*tron.Account, error)
}

// PricingOptions are the pricing module's dependencies.
type PricingOptions struct {
	Network   network.Network        // required; a snapshot of another network is not served
	Snapshots pricing.SnapshotSource // required: the pricer's latest snapshot, in memory
	Chain     AccountReader          // required: the node the receiver activation is read from
	// Quotes and Idempotency serve POST and GET /v1/quotes; both nil leaves those two
	// endpoints answering 9002. Idempotency is required with Quotes (Idempotency-Key).
	Quotes      *quotes.Store
	Idempotency *idempotency.Store
	// ActivationTTL is how long a receiver's activation state is cached (default 5 s).
	ActivationTTL time.Duration
	// ChainTimeout bounds one node read (default 2 s).
	ChainTimeout time.Duration
	Logger       *slog.Logger     // default: discard
	Now          func() time.Time // default time.Now; tests move it
}

// Pricing is the module serving the pricing endpoints and quotes.
type Pricing struct {
	o          PricingOptions
	log        *slog.Logger
	activation *ActivationCache
	rendered   atomic.Pointer[renderedPrices]
	createQ    HandlerFunc // POST /v1/quotes behind the Idempotency-Key handling
}

// NewPricing checks the options.
func NewPricing(o PricingOptions) (*Pricing, error) {
	if o.Snapshots == nil || o.Chain == nil {
		return nil, errors.New("edge: pricing: Snapshots and Chain are required")
	}
	if _, err := network.Parse(string(o.Network)); err != nil {
		return nil, errors.New("edge: pricing: " + err.Error())
	}
	if (o.Quotes == nil) != (o.Idempotency == nil) {
		return nil, errors.New("edge: pricing: Quotes and Idempotency go together")
	}
	if o.ActivationTTL <= 0 {
		o.ActivationTTL = 5 * time.Second
	}
	if o.ChainTimeout <= 0 {
		o.ChainTimeout = 2 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	m := &Pricing{o: o, log: o.Logger.With("module", "pricing")}
	m.activation = NewActivationCache(o.Chain, o.ActivationTTL, o.ChainTimeout, o.Now)
	if o.Quotes != nil {
		m.createQ = idempotentOn(o.Idempotency, m.createQuote)
	}
	return m, nil
}

// Handlers implements Module.
func (m *Pricing) Handlers() map[string]HandlerFunc {
	hs := map[string]HandlerFunc{
		"GET /v1/prices":    m.getPrices,
		"GET /v1/orderbook": m.getOrderBook,
		"GET /v1/estimate":  m.getEstimate,
	}
	if m.o.Quotes != nil {
		hs["POST /v1/quotes"] = m.createQ
		hs["GET /v1/quotes/{quoteId}"] = m.getQuote
	}
	return hs
}

// idempotentOn is Server.Idempotent for a module, which has no Server: the method reads
// only Options.Idempotency. (Asked of the edge's owner: a package-level form of it.)
func idempotentOn(store *idempotency.Store, h TxHandler) HandlerFunc {
	return (&Server{opts: Options{Idempotency: store}}).Idempotent(h)
}

// ---- the snapshot ----

// snapshot returns the snapshot to price from: 503 5003 chain_unavailable while there is
// none, when it is past its valid_until (the pricer stopped publishing; prices past
// their validity are not served, least of all locked into quotes) or of another network.
func (m *Pricing) snapshot() (pricing.Snapshot, error) {
	s, ok := m.o.Snapshots.Current()
	switch {
	case !ok:
		return s, apierr.ChainUnavailable.New("prices are not available yet; retry shortly").With("reason", "no_price_snapshot")
	case s.Network != m.o.Network:
		m.log.Error("pricing snapshot of another network ignored", "snapshot", s.Network, "edge", m.o.Network)
		return s, apierr.ChainUnavailable.New("prices are not available; retry shortly").With("reason", "no_price_snapshot")
	case m.o.Now().After(s.ValidUntil):
		return s, apierr.ChainUnavailable.New("prices are being refreshed; retry shortly").
			With("reason", "price_snapshot_stale").With("valid_until", events.FormatTime(s.ValidUntil))
	}
	return s, nil
}

// ---- GET /v1/prices ----

// renderedPrices are the GET /v1/prices bodies of one snapshot, rendered once: the whole
// table and the table filtered by each resource.
type renderedPrices struct {
	asOf, validUntil time.Time
	revision         int64
	all              []byte
	by               map[pricing.Resource][]byte
}

func (r *renderedPrices) of(s pricing.Snapshot) bool {
	return r != nil && r.asOf.Equal(s.AsOf) && r.validUntil.Equal(s.ValidUntil) && r.revision == s.ModelRevision
}

func (m *Pricing) pricesBodies(s pricing.Snapshot) (*renderedPrices, error) {
	if r := m.rendered.Load(); r.of(s) {
		return r, nil
	}
	r := &renderedPrices{asOf: s.AsOf, validUntil: s.ValidUntil, revision: s.ModelRevision,
		by: map[pricing.Resource][]byte{}}
	var err error
	if r.all, err = json.Marshal(s.Table); err != nil {
		return nil, err
	}
	for _, res := range []pricing.Resource{pricing.Energy, pricing.Bandwidth, pricing.Activation} {
		if r.by[res], err = json.Marshal(pricing.FilterTable(s.Table, res)); err != nil {
			return nil, err
		}
	}
	// Concurrent renders of the same snapshot store equal bytes; the last one wins.
	m.rendered.Store(r)
	return r, nil
}

func (m *Pricing) getPrices(_ context.Context, rc *fasthttp.RequestCtx) error {
	var res pricing.Resource
	if rc.QueryArgs().Len() > 0 {
		q, err := readQuery(rc, "resource")
		if err != nil {
			return err
		}
		if v, ok := q["resource"]; ok {
			if res, err = parseResource(v); err != nil {
				return err
			}
		}
	}
	s, err := m.snapshot()
	if err != nil {
		return err
	}
	r, err := m.pricesBodies(s)
	if err != nil {
		return err
	}
	body := r.all
	if res != "" {
		body = r.by[res]
	}
	rc.Response.Header.SetContentType(contentTypeJSON)
	rc.SetStatusCode(fasthttp.StatusOK)
	rc.Response.SetBodyRaw(body) // shared, never modified: no copy per request
	return nil
}

// ---- GET /v1/orderbook ----

func (m *Pricing) getOrderBook(_ context.Context, rc *fasthttp.RequestCtx) error {
	q, err := readQuery(rc, "resource", "tier", "amount")
	if err != nil {
		return err
	}
	res, tier := DefaultBookResource, DefaultBookTier
	if v, ok := q["resource"]; ok {
		if res, err = parseResource(v); err != nil {
			return err
		}
		if res == pricing.Activation {
			return Invalid("resource", "enum", "activation has no order book").
				With("allowed", []string{"energy", "bandwidth"})
		}
	}
	if v, ok := q["tier"]; ok {
		if tier, err = parseTier(v); err != nil {
			return err
		}
	}
	var amount int64
	v, hasAmount := q["amount"]
	if hasAmount {
		if amount, err = parseAmount(v); err != nil {
			return err
		}
	}
	s, err := m.snapshot()
	if err != nil {
		return err
	}
	b, err := s.OrderBook(res, tier, amount)
	if err != nil {
		return err
	}
	if hasAmount && amount == 0 {
		// The domain reads 0 as "no walk"; an explicit amount=0 is below every minimum.
		r := s.Rules[pricing.BookKey{Resource: res, Tier: tier}]
		return apierr.AmountOutOfRange.Newf("amount 0 outside [%d, %d]", r.MinAmount, r.MaxAmount).
			WithField("amount").With("min_amount", r.MinAmount).With("max_amount", r.MaxAmount)
	}
	return WriteJSON(rc, fasthttp.StatusOK, b)
}

// ---- GET /v1/estimate ----

// estimateResponse is the spec's Estimate.
type estimateResponse struct {
	Resource          pricing.Resource `json:"resource"`
	Amount            int64            `json:"amount"`
	Tier              *pricing.Tier    `json:"tier"`
	Receiver          *string          `json:"receiver"`
	PriceSunPerUnit   int64            `json:"price_sun_per_unit"`
	EnergyAmountSun   int64            `json:"energy_amount_sun"`
	ActivateAmountSun int64            `json:"activate_amount_sun"`
	TotalAmountSun    int64            `json:"total_amount_sun"`
	ReceiverActivated *bool            `json:"receiver_activated"`
	AsOf              events.Time      `json:"as_of"`
}

// priceRequest is a validated estimate or quote request.
type priceRequest struct {
	resource pricing.Resource
	tier     pricing.Tier // "" for activation
	amount   int64        // 1 for activation
	receiver *tron.Address
	// activation, when set, is the receiver's state read just before (order creation
	// reads it before its transaction opens); price then asks the node nothing.
	activation *activationState
}

// activationState is one answer of ActivationCache.Activated.
type activationState struct{ activated, known bool }

// priced is a request priced from a snapshot, activation fee included.
type priced struct {
	req       priceRequest
	quote     pricing.Quote
	activated *bool // the receiver's state; nil without receiver or when the node failed
	// activateSun is the activation part: the activation price for resource activation,
	// or the fee when the receiver is known not to be activated.
	activateSun int64
	asOf        time.Time
}

func (p priced) total() int64 { return p.quote.EnergyAmountSun + p.activateSun }

// unitPrice is the exact unit price (hundredths of a SUN) and its legacy whole-SUN form.
// Activation is one unit at the activation price.
func (p priced) unitPrice() (pricing.Centisun, int64) {
	if p.req.resource == pricing.Activation {
		return pricing.SunToCentisun(p.activateSun), p.activateSun
	}
	return p.quote.UnitPriceSun, p.quote.PriceSunPerUnit
}

func (m *Pricing) getEstimate(ctx context.Context, rc *fasthttp.RequestCtx) error {
	q, err := readQuery(rc, "resource", "amount", "tier", "receiver")
	if err != nil {
		return err
	}
	req := priceRequest{}
	v, ok := q["resource"]
	if !ok {
		return Invalid("resource", "required", "resource is required")
	}
	if req.resource, err = parseResource(v); err != nil {
		return err
	}
	if req.resource == pricing.Activation {
		req.amount = 1 // amount and tier do not apply to activation
	} else {
		v, ok := q["amount"]
		if !ok {
			return Invalid("amount", "required", "amount is required")
		}
		if req.amount, err = parseAmount(v); err != nil {
			return err
		}
		if v, ok = q["tier"]; !ok {
			return Invalid("tier", "required", "tier is required")
		}
		if req.tier, err = parseTier(v); err != nil {
			return err
		}
	}
	if v, ok := q["receiver"]; ok {
		a, err := parseReceiver(v)
		if err != nil {
			return err
		}
		req.receiver = &a
	}
	p, err := m.price(ctx, req, false)
	if err != nil {
		return err
	}
	_, legacy := p.unitPrice()
	out := estimateResponse{
		Resource: req.resource, Amount: req.amount, PriceSunPerUnit: legacy,
		EnergyAmountSun: p.quote.EnergyAmountSun, ActivateAmountSun: p.activateSun, TotalAmountSun: p.total(),
		ReceiverActivated: p.activated, AsOf: events.Time(p.asOf),
	}
	if req.tier != "" {
		t := req.tier
		out.Tier = &t
	}
	if req.receiver != nil {
		r := req.receiver.String()
		out.Receiver = &r
	}
	return WriteJSON(rc, fasthttp.StatusOK, out)
}

// price prices req from the current snapshot and adds the activation fee when the receiver
// is not activated. binding (quotes) makes an unknown activation state an error (5003):
// a quote must not lock a total that may lack the fee. An estimate reports it as
// receiver_activated null and adds no fee.
func (m *Pricing) price(ctx context.Context, req priceRequest, binding bool) (priced, error) {
	s, err := m.snapshot()
	if err != nil {
		return priced{}, err
	}
	pq, err := s.Price(req.resource, req.tier, req.amount)
	if err != nil {
		return priced{}, err
	}
	p := priced{req: req, quote: pq, asOf: s.AsOf}
	if req.resource == pricing.Activation {
		p.activateSun = pq.ActivateAmountSun
	}
	if req.receiver != nil {
		var activated, known bool
		if req.activation != nil {
			activated, known = req.activation.activated, req.activation.known
		} else {
			activated, known = m.activation.Activated(ctx, *req.receiver)
		}
		switch {
		case known:
			p.activated = &activated
		case binding:
			return priced{}, apierr.ChainUnavailable.New("the receiver's activation could not be read from the chain; retry shortly").
				WithField("receiver")
		}
		if known && !activated && req.resource != pricing.Activation {
			fee, err := s.ActivationPriceSun()
			if err != nil {
				return priced{}, apierr.SupplyPaused.New("the receiver is not activated and activation sales are paused").
					WithField("receiver")
			}
			p.activateSun = fee
		}
	}
	return p, nil
}

// ---- query parameters ----

// readQuery returns the query parameters named in allowed. A parameter given twice is
// 2001 (constraint "repeated"): which one would count is not obvious. Other parameters are
// ignored, as everywhere on this edge's GET endpoints.
func readQuery(rc *fasthttp.RequestCtx, allowed ...string) (map[string]string, error) {
	out := make(map[string]string, len(allowed))
	var err error
	rc.QueryArgs().VisitAll(func(k, v []byte) {
		if err != nil {
			return
		}
		for _, name := range allowed {
			if string(k) != name {
				continue
			}
			if _, dup := out[name]; dup {
				err = Invalid(name, "repeated", name+" is given more than once")
				return
			}
			out[name] = string(v)
		}
	})
	return out, err
}

// pageLimit reads the list endpoints' limit from q: def when absent, else an integer from
// 1 to max (2001 "range" with details.min and details.max otherwise).
func pageLimit(q map[string]string, def, max int) (int, error) {
	v, ok := q["limit"]
	if !ok {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > max {
		return 0, Invalid("limit", "range", fmt.Sprintf("limit must be an integer from 1 to %d", max)).
			With("min", 1).With("max", max)
	}
	return n, nil
}

func parseResource(v string) (pricing.Resource, error) {
	switch r := pricing.Resource(v); r {
	case pricing.Energy, pricing.Bandwidth, pricing.Activation:
		return r, nil
	}
	return "", Invalid("resource", "enum", "resource must be energy, bandwidth or activation").
		With("allowed", []string{"energy", "bandwidth", "activation"})
}

// parseTier accepts the whole tier enum, retired tiers included; whether a tier is sold is
// the snapshot's answer (2003 with details.available_tiers).
func parseTier(v string) (pricing.Tier, error) {
	if pricing.TierSeconds(pricing.Tier(v)) > 0 {
		return pricing.Tier(v), nil
	}
	return "", Invalid("tier", "enum", "tier must be one of 5m, 15m, 1h, 1d, 3d, 30d").
		With("allowed", []string{"5m", "15m", "1h", "1d", "3d", "30d"})
}

// parseAmount reads a decimal int64: optional minus sign and digits only. Anything else
// (empty, 1.5, 1e6, +5, spaces, beyond int64) is 2001 constraint "type". A well-formed
// integer outside the row's range is the snapshot's 2008.
func parseAmount(v string) (int64, error) {
	digits := v
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	ok := len(digits) > 0
	for i := 0; i < len(digits) && ok; i++ {
		ok = digits[i] >= '0' && digits[i] <= '9'
	}
	var n int64
	var err error
	if ok {
		n, err = strconv.ParseInt(v, 10, 64)
	}
	if !ok || err != nil {
		return 0, Invalid("amount", "type", "amount must be an integer (int64)").With("expected", "integer")
	}
	return n, nil
}

// parseReceiver accepts the spec's chain address form only: Base58Check, T..., 34
// characters. The hex form and anything failing the checksum is 2007 invalid_address.
func parseReceiver(v string) (tron.Address, error) {
	bad := func(why string) (tron.Address, error) {
		return tron.Address{}, apierr.InvalidAddress.New("receiver is not a valid Base58Check TRON address: " + why).WithField("receiver")
	}
	if len(v) != 34 || v[0] != 'T' {
		return bad("want 34 characters starting with T")
	}
	a, err := tron.ParseAddress(v)
	if err != nil {
		return bad(err.Error())
	}
	return a, nil
}

// ---- receiver activation ----

// ActivationCache answers whether an address is activated on chain, reading the node at
// most once per address per TTL (concurrent misses share one read). A failed read is not
// cached: the next request tries again.
type ActivationCache struct {
	node    AccountReader
	ttl     time.Duration
	timeout time.Duration
	now     func() time.Time
	group   singleflight.Group

	mu      sync.Mutex
	entries map[tron.Address]activationEntry
}

type activationEntry struct {
	activated bool
	at        time.Time
}

// maxActivationEntries bounds the cache; above it expired entries are swept, and if none
// had expired the cache is cleared (a flood of distinct addresses must not grow memory).
const maxActivationEntries = 100_000

// NewActivationCache returns a cache over node.
func NewActivationCache(node AccountReader, ttl, timeout time.Duration, now func() time.Time) *ActivationCache {
	return &ActivationCache{node: node, ttl: ttl, timeout: timeout, now: now, entries: map[tron.Address]activationEntry{}}
}

// Activated reports whether addr is activated; known is false when the node could not be
// read.
func (c *ActivationCache) Activated(ctx context.Context, addr tron.Address) (activated, known bool) {
	now := c.now()
	c.mu.Lock()
	e, ok := c.entries[addr]
	c.mu.Unlock()
	if ok && now.Sub(e.at) < c.ttl {
		return e.activated, true
	}
	v, err, _ := c.group.Do(string(addr[:]), func() (any, error) {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.timeout)
		defer cancel()
		a, err := c.node.GetAccount(rctx, addr)
		if err != nil {
			return false, err
		}
		act := a.Exists()
		c.mu.Lock()
		if len(c.entries) >= maxActivationEntries {
			for k, e := range c.entries {
				if now.Sub(e.at) >= c.ttl {
					delete(c.entries, k)
				}
			}
			if len(c.entries) >= maxActivationEntries {
				clear(c.entries)
			}
		}
		c.entries[addr] = activationEntry{activated: act, at: now}
		c.mu.Unlock()
		return act, nil
	})
	if err != nil {
		return false, false
	}
	return v.(bool), true
}
