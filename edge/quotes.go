package edge

// POST /v1/quotes and GET /v1/quotes/{quoteId} (API key; scopes quotes.write and
// quotes.read). A quote is priced exactly like GET /v1/estimate, stored, and valid for 120
// seconds; it locks the price, not stock. Another account's quote and an unknown id are
// answered alike (404). Expiry is enforced where a quote is used, by order creation
// (quotes.Store.GetValid, 3005). docs/pricing.md has the rules.

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/valyala/fasthttp"

	"rental/infra/acceptance"
	"rental/infra/quotes"
	"rental/schemas/apierr"
	"rental/schemas/events"
	"rental/schemas/pricing"
)

// quoteRequest is the body of POST /v1/quotes.
type quoteRequest struct {
	Resource *string `json:"resource"`
	Tier     *string `json:"tier"`
	Amount   *int64  `json:"amount"`
	Receiver *string `json:"receiver"`
}

// quoteResponse is the spec's Quote.
type quoteResponse struct {
	ID                string          `json:"id"`
	Resource          string          `json:"resource"`
	Amount            int64           `json:"amount"`
	Tier              *string         `json:"tier"`
	Receiver          *string         `json:"receiver"`
	PriceSunPerUnit   int64           `json:"price_sun_per_unit"`
	UnitPriceSun      events.Centisun `json:"unit_price_sun"`
	Fills             []pricing.Fill  `json:"fills"`
	EnergyAmountSun   int64           `json:"energy_amount_sun"`
	ActivateAmountSun int64           `json:"activate_amount_sun"`
	TotalAmountSun    int64           `json:"total_amount_sun"`
	CreatedAt         events.Time     `json:"created_at"`
	ExpiresAt         events.Time     `json:"expires_at"`
}

// parseQuoteRequest validates the body. Activation ignores amount and tier (they do not
// apply to it); their JSON types are still checked by DecodeJSON.
func parseQuoteRequest(rc *fasthttp.RequestCtx) (acceptance.PriceRequest, error) {
	var body quoteRequest
	if err := DecodeJSON(rc, &body); err != nil {
		return acceptance.PriceRequest{}, err
	}
	var req acceptance.PriceRequest
	var err error
	if body.Resource == nil {
		return req, Invalid("resource", "required", "resource is required")
	}
	if req.Resource, err = parseResource(*body.Resource); err != nil {
		return req, err
	}
	if req.Resource == pricing.Activation {
		req.Amount = 1
	} else {
		if body.Tier == nil {
			return req, Invalid("tier", "required", "tier is required")
		}
		if req.Tier, err = parseTier(*body.Tier); err != nil {
			return req, err
		}
		if body.Amount == nil {
			return req, Invalid("amount", "required", "amount is required for energy and bandwidth")
		}
		req.Amount = *body.Amount
	}
	if body.Receiver != nil {
		a, err := parseReceiver(*body.Receiver)
		if err != nil {
			return req, err
		}
		req.Receiver = &a
	}
	return req, nil
}

// createQuote runs inside the transaction that also holds the Idempotency-Key record, so a
// repeat returns the stored quote and a failure stores nothing.
func (m *Pricing) createQuote(ctx context.Context, tx pgx.Tx, rc *fasthttp.RequestCtx) (TxResult, error) {
	p, err := signedAccount(rc)
	if err != nil {
		return TxResult{}, err
	}
	req, err := parseQuoteRequest(rc)
	if err != nil {
		return TxResult{}, err
	}
	pr, err := m.o.Prices.Price(ctx, req, true)
	if err != nil {
		return TxResult{}, err
	}
	exact, legacy := pr.UnitPrice()
	q := quotes.Quote{
		AccountID: p.AccountID, Resource: string(req.Resource), Amount: req.Amount, Tier: string(req.Tier),
		PriceSunPerUnit: legacy, UnitPriceCenti: int64(exact), Fills: []quotes.Fill{},
		EnergyAmountSun: pr.Quote.EnergyAmountSun, ActivateAmountSun: pr.ActivateSun, TotalAmountSun: pr.Total(),
	}
	if req.Receiver != nil {
		q.Receiver = req.Receiver.String()
	}
	for _, f := range pr.Quote.Fills {
		q.Fills = append(q.Fills, quotes.Fill{PriceCenti: int64(f.PriceSun), Amount: f.Amount, Class: string(f.Class)})
	}
	quotes.Stamp(&q, m.o.Prices.Now())
	if err := quotes.CreateTx(ctx, tx, q); err != nil {
		return TxResult{}, err
	}
	return TxResult{Status: fasthttp.StatusCreated, Body: renderQuote(q), ObjectID: q.ID}, nil
}

func (m *Pricing) getQuote(ctx context.Context, rc *fasthttp.RequestCtx) error {
	p, err := signedAccount(rc)
	if err != nil {
		return err
	}
	id := pathValue(rc, "quoteId")
	q, err := m.o.Quotes.Get(ctx, p.AccountID, id)
	if errors.Is(err, quotes.ErrNotFound) {
		return quoteNotFound(id)
	}
	if err != nil {
		return err
	}
	return WriteJSON(rc, fasthttp.StatusOK, renderQuote(q))
}

// quoteNotFound answers an unknown quote id and another account's quote alike (no
// existence oracle). The catalogue has no quote_not_found (3001 is for orders), so it is
// the edge's convention for an unknown id in a path: 404 3022 object_not_found on the path
// parameter (docs/errors.md).
func quoteNotFound(id string) error {
	return apierr.ObjectNotFound.New("no quote " + quote(id) + " on this account").WithField("quoteId")
}

func renderQuote(q quotes.Quote) quoteResponse {
	out := quoteResponse{
		ID: q.ID, Resource: q.Resource, Amount: q.Amount,
		PriceSunPerUnit: q.PriceSunPerUnit, UnitPriceSun: events.Centisun(q.UnitPriceCenti),
		Fills:           make([]pricing.Fill, 0, len(q.Fills)),
		EnergyAmountSun: q.EnergyAmountSun, ActivateAmountSun: q.ActivateAmountSun, TotalAmountSun: q.TotalAmountSun,
		CreatedAt: events.Time(q.CreatedAt), ExpiresAt: events.Time(q.ExpiresAt),
	}
	if q.Tier != "" {
		t := q.Tier
		out.Tier = &t
	}
	if q.Receiver != "" {
		r := q.Receiver
		out.Receiver = &r
	}
	for _, f := range q.Fills {
		out.Fills = append(out.Fills, pricing.Fill{PriceSun: pricing.Centisun(f.PriceCenti), Amount: f.Amount, Class: pricing.LevelClass(f.Class)})
	}
	return out
}
