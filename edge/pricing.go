package edge

// Pricing endpoints (rental-api-v1 "Pricing and chain"; docs/pricing.md):
//
//	GET  /v1/prices             public or key: the PriceTable of the latest snapshot
//	GET  /v1/orderbook          public: one book, with the walk of ?amount=
//	GET  /v1/estimate           public or key: a non-binding price, + activation fee
//	POST /v1/quotes             key (quotes.write): a price locked for 120 s (quotes.go)
//	GET  /v1/quotes/{quoteId}   key (quotes.read) (quotes.go)
//
// Prices come from the live pricer shared with order acceptance (acceptance.Prices: the
// in-memory snapshot the pricer publishes): no request of the first three endpoints
// touches a database, and GET /v1/prices answers bytes rendered once per snapshot. The
// only I/O is the receiver's activation check, a node read cached for a few seconds
// (acceptance.ActivationCache).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"rental/infra/acceptance"
	"rental/infra/idempotency"
	"rental/infra/quotes"
	"rental/infra/tron"
	"rental/schemas/apierr"
	"rental/schemas/events"
	"rental/schemas/pricing"
)

// Defaults of the GET /v1/orderbook query.
const (
	DefaultBookResource = pricing.Energy
	DefaultBookTier     = pricing.Tier1h
)

// PricingOptions are the pricing module's dependencies.
type PricingOptions struct {
	Prices *acceptance.Prices // required: the live snapshot and receiver activation, shared with order acceptance
	// Quotes and Idempotency serve POST and GET /v1/quotes; both nil leaves those two
	// endpoints answering 9002. Idempotency is required with Quotes (Idempotency-Key).
	Quotes      *quotes.Store
	Idempotency *idempotency.Store
	Logger      *slog.Logger // default: discard
}

// Pricing is the module serving the pricing endpoints and quotes.
type Pricing struct {
	o        PricingOptions
	log      *slog.Logger
	rendered atomic.Pointer[renderedPrices]
	createQ  HandlerFunc // POST /v1/quotes behind the Idempotency-Key handling
}

// NewPricing checks the options.
func NewPricing(o PricingOptions) (*Pricing, error) {
	if o.Prices == nil {
		return nil, errors.New("edge: pricing: Prices is required")
	}
	if (o.Quotes == nil) != (o.Idempotency == nil) {
		return nil, errors.New("edge: pricing: Quotes and Idempotency go together")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	m := &Pricing{o: o, log: o.Logger.With("module", "pricing")}
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
		q, err := queryParams(rc, "resource")
		if err != nil {
			return err
		}
		if v, ok := q["resource"]; ok {
			if res, err = parseResource(v); err != nil {
				return err
			}
		}
	}
	s, err := m.o.Prices.Snapshot()
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
	q, err := queryParams(rc, "resource", "tier", "amount")
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
	s, err := m.o.Prices.Snapshot()
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

func (m *Pricing) getEstimate(ctx context.Context, rc *fasthttp.RequestCtx) error {
	q, err := queryParams(rc, "resource", "amount", "tier", "receiver")
	if err != nil {
		return err
	}
	req := acceptance.PriceRequest{}
	v, ok := q["resource"]
	if !ok {
		return Invalid("resource", "required", "resource is required")
	}
	if req.Resource, err = parseResource(v); err != nil {
		return err
	}
	if req.Resource == pricing.Activation {
		req.Amount = 1 // amount and tier do not apply to activation
	} else {
		v, ok := q["amount"]
		if !ok {
			return Invalid("amount", "required", "amount is required")
		}
		if req.Amount, err = parseAmount(v); err != nil {
			return err
		}
		if v, ok = q["tier"]; !ok {
			return Invalid("tier", "required", "tier is required")
		}
		if req.Tier, err = parseTier(v); err != nil {
			return err
		}
	}
	if v, ok := q["receiver"]; ok {
		a, err := parseReceiver(v)
		if err != nil {
			return err
		}
		req.Receiver = &a
	}
	p, err := m.o.Prices.Price(ctx, req, false)
	if err != nil {
		return err
	}
	_, legacy := p.UnitPrice()
	out := estimateResponse{
		Resource: req.Resource, Amount: req.Amount, PriceSunPerUnit: legacy,
		EnergyAmountSun: p.Quote.EnergyAmountSun, ActivateAmountSun: p.ActivateSun, TotalAmountSun: p.Total(),
		ReceiverActivated: p.Activated, AsOf: events.Time(p.AsOf),
	}
	if req.Tier != "" {
		t := req.Tier
		out.Tier = &t
	}
	if req.Receiver != nil {
		r := req.Receiver.String()
		out.Receiver = &r
	}
	return WriteJSON(rc, fasthttp.StatusOK, out)
}

// ---- query parameters ----

// queryParams returns the query parameters named in allowed. A parameter given twice is
// 2001 (constraint "repeated"): which one would count is not obvious. Other parameters are
// ignored, as everywhere on this edge's GET endpoints.
func queryParams(rc *fasthttp.RequestCtx, allowed ...string) (map[string]string, error) {
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
