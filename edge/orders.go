package edge

// Order endpoints (rental-api-v1 "Orders", "Idempotency", "Errors"; docs/orders.md "API"):
//
//	POST /v1/orders               key (orders.write): price, charge and store an order
//	GET  /v1/orders               key (orders.read): the account's orders, newest first (orders_read.go)
//	GET  /v1/orders/{id}          key (orders.read) (orders_read.go)
//	POST /v1/orders/{id}/reclaim  key (orders.write): ask for an early return (orders_reclaim.go)
//
// Creation is order acceptance (infra/acceptance, Orders.Accept): ONE Postgres transaction
// holds the client_order_id idempotency record, the ledger hold of the total, the order
// row with its processing intent (outbox), the account's order totals, and the stored
// response. This module parses the request, authenticates it, calls Accept and renders
// its answer.

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/valyala/fasthttp"

	"rental/infra/acceptance"
	"rental/infra/idempotency"
	"rental/infra/orderstore"
	"rental/infra/quotes"
	"rental/schemas/pricing"
)

// Bounds of GET /v1/orders?limit= and of client_order_id.
const (
	DefaultOrdersPageSize = 50
	MaxOrdersPageSize     = orderstore.MaxListLimit
	// MaxClientOrderIDLen is the longest client_order_id accepted.
	MaxClientOrderIDLen = acceptance.MaxClientOrderIDLen
)

// OrdersOptions are the order module's dependencies.
type OrdersOptions struct {
	Acceptance  *acceptance.Orders // required: creation (POST /v1/orders)
	Pool        *pgxpool.Pool      // required: reads of orders and the reclaim's transaction
	Idempotency *idempotency.Store // required: the reclaim's Idempotency-Key
	Now         func() time.Time   // default: acceptance's clock
}

// Orders is the module serving the order endpoints.
type Orders struct {
	o       OrdersOptions
	reclaim HandlerFunc // POST /v1/orders/{id}/reclaim behind the Idempotency-Key handling
}

// NewOrders checks the options.
func NewOrders(o OrdersOptions) (*Orders, error) {
	if o.Acceptance == nil || o.Pool == nil || o.Idempotency == nil {
		return nil, errors.New("edge: orders: Acceptance, Pool and Idempotency are required")
	}
	if o.Now == nil {
		o.Now = o.Acceptance.Now
	}
	m := &Orders{o: o}
	m.reclaim = idempotentOn(o.Idempotency, m.reclaimOrder)
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

// validClientOrderID is acceptance's rule for client_order_id (and client_batch_id).
func validClientOrderID(s string) bool { return acceptance.ValidClientOrderID(s) }

// parseOrderBody checks everything that needs no database, price or chain: a body that
// fails here fails identically on every retry, so answering before the idempotency claim
// changes nothing for a client.
func parseOrderBody(rc *fasthttp.RequestCtx) (acceptance.Request, error) {
	var b orderBody
	if err := DecodeJSON(rc, &b); err != nil {
		return acceptance.Request{}, err
	}
	var r acceptance.Request
	var err error
	switch {
	case b.ClientOrderID == nil:
		return r, Invalid("client_order_id", "required", "client_order_id is required: it makes a retry of the same order safe")
	case !validClientOrderID(*b.ClientOrderID):
		return r, Invalid("client_order_id", "format", "client_order_id must be 1 to 128 printable ASCII characters without spaces").
			With("max_length", MaxClientOrderIDLen)
	}
	r.ClientOrderID = *b.ClientOrderID
	if b.QuoteID != nil {
		if !quotes.ValidID(*b.QuoteID) {
			return r, Invalid("quote_id", "format", "quote_id is not a quote id (q_ and 24 hex characters)")
		}
		r.QuoteID = *b.QuoteID
	}
	withQuote := r.QuoteID != ""
	if b.Resource != nil {
		if r.Resource, err = parseResource(*b.Resource); err != nil {
			return r, err
		}
	} else if !withQuote {
		return r, Invalid("resource", "required", "resource is required (or a quote_id)")
	}
	// Activation takes neither amount nor tier (they do not apply); like the quote and
	// estimate endpoints, it ignores them rather than refuse a generic client's defaults.
	if r.Resource != pricing.Activation {
		if b.Tier != nil {
			if r.Tier, err = parseTier(*b.Tier); err != nil {
				return r, err
			}
		} else if !withQuote {
			return r, Invalid("tier", "required", "tier is required for energy and bandwidth")
		}
		if b.Amount != nil {
			r.Amount = *b.Amount
		} else if !withQuote {
			return r, Invalid("amount", "required", "amount is required for energy and bandwidth")
		}
	}
	if b.Receiver == nil {
		return r, Invalid("receiver", "required", "receiver is required")
	}
	if r.Receiver, err = parseReceiver(*b.Receiver); err != nil {
		return r, err
	}
	if b.Activate != nil {
		r.Activate = *b.Activate
	}
	if b.MaxPriceSun != nil {
		if *b.MaxPriceSun < 0 {
			return r, Invalid("max_price_sun", "min", "max_price_sun must not be negative").With("min", 0)
		}
		v := *b.MaxPriceSun
		r.MaxPriceSun = &v
	}
	return r, nil
}

// ---- POST /v1/orders: the call ----

func (m *Orders) createOrder(ctx context.Context, rc *fasthttp.RequestCtx) error {
	p, err := signedAccount(rc)
	if err != nil {
		return err
	}
	req, err := parseOrderBody(rc)
	if err != nil {
		return err
	}
	req.Signature = p.Signature() // recorded in the creation's transaction
	res, err := m.o.Acceptance.Accept(ctx, p.AccountID, req)
	if err != nil {
		return err
	}
	writeCreated(rc, res.Body, res.Replayed)
	return nil
}

// writeCreated answers an order creation: 201 with the record, or for a repeat 200 with
// Idempotent-Replayed (the spec: a repeat returns the order and charges nothing).
func writeCreated(rc *fasthttp.RequestCtx, body []byte, replayed bool) {
	rc.Response.Header.SetContentType(contentTypeJSON)
	if replayed {
		rc.Response.Header.Set("Idempotent-Replayed", "true")
		rc.SetStatusCode(fasthttp.StatusOK)
	} else {
		rc.SetStatusCode(fasthttp.StatusCreated)
	}
	rc.SetBody(body)
}
