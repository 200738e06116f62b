package client

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"net/http"
	"net/url"
	"strconv"

	"rental/schemas/apierr"
	"rental/schemas/events"
	"rental/schemas/network"
	"rental/schemas/orders"
)

// Account is GET /v1/account.
type Account struct {
	ID               string          `json:"id"`
	Brand            string          `json:"brand"`
	Network          network.Network `json:"network"`
	Label            *string         `json:"label"`
	Status           string          `json:"status"` // unfunded, active, suspended, closed
	BalanceSun       int64           `json:"balance_sun"`
	BalanceUSDT      int64           `json:"balance_usdt"`
	ReservedSun      int64           `json:"reserved_sun"`
	DepositAddresses []struct {
		Currency string `json:"currency"`
		Address  string `json:"address"`
	} `json:"deposit_addresses"`
	Limits struct {
		MaxOrderEnergy    int64 `json:"max_order_energy"`
		MaxBatchReceivers int64 `json:"max_batch_receivers"`
		OrdersPerSecond   int64 `json:"orders_per_second"`
	} `json:"limits"`
	Totals struct {
		DepositedSun    int64 `json:"deposited_sun"`
		SpentSun        int64 `json:"spent_sun"`
		RefundedSun     int64 `json:"refunded_sun"`
		OrdersCreated   int64 `json:"orders_created"`
		EnergyDelegated int64 `json:"energy_delegated"`
	} `json:"totals"`
	CreatedAt string `json:"created_at"`
}

// Balance is GET /v1/balance, meant for polling before each order.
type Balance struct {
	BalanceSun   int64       `json:"balance_sun"`
	BalanceUSDT  int64       `json:"balance_usdt"`
	ReservedSun  int64       `json:"reserved_sun"`
	AvailableSun int64       `json:"available_sun"`
	AsOf         events.Time `json:"as_of"`
}

// DepositAddress is one row of GET /v1/deposit-addresses.
type DepositAddress struct {
	Currency              string  `json:"currency"` // TRX or USDT; both rows share the address
	Address               string  `json:"address"`
	Memo                  *string `json:"memo"`
	ConfirmationsRequired int     `json:"confirmations_required"`
	Contract              *string `json:"contract"`
	SpreadBps             *int64  `json:"spread_bps"`
	Min                   *string `json:"min"`
	Max                   *string `json:"max"`
}

// DepositAddresses is GET /v1/deposit-addresses.
type DepositAddresses struct {
	Data    []DepositAddress `json:"data"`
	Retired []struct {
		Address       string      `json:"address"`
		RetiredAt     events.Time `json:"retired_at"`
		CreditedUntil events.Time `json:"credited_until"`
	} `json:"retired"`
}

// Estimate is GET /v1/estimate (non-binding).
type Estimate struct {
	Resource          string      `json:"resource"`
	Amount            int64       `json:"amount"`
	Tier              string      `json:"tier"`
	Receiver          *string     `json:"receiver"`
	PriceSunPerUnit   json.Number `json:"price_sun_per_unit"`
	EnergyAmountSun   int64       `json:"energy_amount_sun"`
	ActivateAmountSun int64       `json:"activate_amount_sun"`
	TotalAmountSun    int64       `json:"total_amount_sun"`
	ReceiverActivated *bool       `json:"receiver_activated"`
	AsOf              events.Time `json:"as_of"`
}

// Account reads GET /v1/account.
func (c *Client) Account(ctx context.Context) (Account, error) {
	var a Account
	_, err := c.getJSON(ctx, "/v1/account", &a)
	return a, err
}

// Balance reads GET /v1/balance.
func (c *Client) Balance(ctx context.Context) (Balance, error) {
	var b Balance
	_, err := c.getJSON(ctx, "/v1/balance", &b)
	return b, err
}

// DepositAddresses reads GET /v1/deposit-addresses (the address is issued on first read).
func (c *Client) DepositAddresses(ctx context.Context) (DepositAddresses, error) {
	var d DepositAddresses
	_, err := c.getJSON(ctx, "/v1/deposit-addresses", &d)
	return d, err
}

// Estimate reads GET /v1/estimate; receiver may be "".
func (c *Client) Estimate(ctx context.Context, resource string, amount int64, tier, receiver string) (Estimate, error) {
	q := url.Values{"resource": {resource}, "amount": {strconv.FormatInt(amount, 10)}, "tier": {tier}}
	if receiver != "" {
		q.Set("receiver", receiver)
	}
	var e Estimate
	_, err := c.getJSON(ctx, "/v1/estimate?"+q.Encode(), &e)
	return e, err
}

// OrderRequest is the body of POST /v1/orders. ClientOrderID is required: it makes every
// retry of the same order safe (a repeat returns the original order, charging nothing).
type OrderRequest struct {
	ClientOrderID string `json:"client_order_id"`
	Resource      string `json:"resource,omitempty"` // energy, bandwidth, activation
	Amount        int64  `json:"amount,omitempty"`
	Tier          string `json:"tier,omitempty"` // 5m, 1h
	Receiver      string `json:"receiver"`
	Activate      *bool  `json:"activate,omitempty"`
	QuoteID       string `json:"quote_id,omitempty"`
	MaxPriceSun   *int64 `json:"max_price_sun,omitempty"`
}

// Created is the outcome of CreateOrder.
type Created struct {
	Order orders.Record
	// Replayed is true when the order existed before this call (HTTP 200: an earlier call
	// or attempt with the same client_order_id created it; nothing more was charged).
	Replayed bool
	// LookedUp is true when the outcome was learnt by GET /v1/orders?client_order_id=...
	// after the create itself gave no definite answer.
	LookedUp bool
	// Response is the create's last answer (nil when none was received).
	Response *Response
}

// ErrOutcomeUnknown: CreateOrder gave up and the look-up by client_order_id could not tell
// whether the order exists (the look-up failed too). Repeat CreateOrder with the same
// request later: it is safe.
var ErrOutcomeUnknown = errors.New("client: order outcome unknown")

// CreateOrder places an order with the retry policy: every attempt sends the same body (same
// client_order_id). When the create gives no definite answer (retries ran out, or 3015
// request_in_progress), it looks the order up by client_order_id: found, the order is
// returned with LookedUp; not found, the create's error is returned (nothing was charged);
// the look-up failing too yields ErrOutcomeUnknown joined with both errors.
func (c *Client) CreateOrder(ctx context.Context, r OrderRequest) (Created, error) {
	if r.ClientOrderID == "" {
		return Created{}, errors.New("client: CreateOrder needs a ClientOrderID")
	}
	body, err := json.Marshal(r)
	if err != nil {
		return Created{}, err
	}
	return c.create(ctx, "/v1/orders", body, r.ClientOrderID)
}

// create POSTs an order-creating body with the retry policy and, when the answer stays
// unknown, looks the order up by clientOrderID (CreateOrder, RelayTransaction).
func (c *Client) create(ctx context.Context, target string, body []byte, clientOrderID string) (Created, error) {
	resp, err := c.Do(ctx, http.MethodPost, target, body, Idempotent())
	out := Created{Response: resp}
	if err == nil {
		out.Replayed = resp.Status == http.StatusOK
		return out, decodeInto(resp, &out.Order)
	}
	var gave *GiveUpError
	if !errors.As(err, &gave) && !errors.Is(err, apierr.RequestInProgress) {
		var te *TransportError
		if !errors.As(err, &te) || ctx.Err() != nil {
			return out, err // a definite answer, or the caller's context ended
		}
	}
	o, found, lerr := c.OrderByClientID(ctx, clientOrderID)
	switch {
	case lerr != nil:
		return out, errors.Join(ErrOutcomeUnknown, err, lerr)
	case !found:
		return out, err
	}
	out.Order, out.LookedUp, out.Replayed = o, true, true
	return out, nil
}

// Order reads GET /v1/orders/{id}.
func (c *Client) Order(ctx context.Context, id string) (orders.Record, error) {
	var o orders.Record
	_, err := c.getJSON(ctx, "/v1/orders/"+url.PathEscape(id), &o)
	return o, err
}

// OrderByClientID finds the account's order with that client_order_id.
func (c *Client) OrderByClientID(ctx context.Context, clientOrderID string) (orders.Record, bool, error) {
	var p Page[orders.Record]
	_, err := c.getJSON(ctx, "/v1/orders?"+url.Values{"client_order_id": {clientOrderID}, "limit": {"1"}}.Encode(), &p)
	if err != nil || len(p.Data) == 0 {
		return orders.Record{}, false, err
	}
	return p.Data[0], true, nil
}

// Reclaim asks for the early return of an order (POST /v1/orders/{id}/reclaim, 202).
func (c *Client) Reclaim(ctx context.Context, id string) (orders.Record, error) {
	var o orders.Record
	resp, err := c.Do(ctx, http.MethodPost, "/v1/orders/"+url.PathEscape(id)+"/reclaim", nil)
	if err != nil {
		return o, err
	}
	return o, decodeInto(resp, &o)
}

// Page is one page of a cursor list: data and next_cursor (nil on the last page).
type Page[T any] struct {
	Data       []T     `json:"data"`
	NextCursor *string `json:"next_cursor"`
}

// Pages iterates over the pages of the list at path (such as "/v1/orders") with the
// filters in query; limit and cursor are managed by it (query's own limit is kept). The
// cursor is passed back unchanged. Iteration stops after the last page or at the first
// error, which is yielded with an empty page.
func Pages[T any](ctx context.Context, c *Client, path string, query url.Values) iter.Seq2[Page[T], error] {
	return func(yield func(Page[T], error) bool) {
		q := url.Values{}
		for k, v := range query {
			q[k] = append([]string(nil), v...)
		}
		q.Del("cursor")
		for {
			target := path
			if len(q) > 0 {
				target += "?" + q.Encode()
			}
			var p Page[T]
			if _, err := c.getJSON(ctx, target, &p); err != nil {
				yield(Page[T]{}, err)
				return
			}
			if !yield(p, nil) || p.NextCursor == nil || *p.NextCursor == "" {
				return
			}
			q.Set("cursor", *p.NextCursor)
		}
	}
}

// All iterates over every item of every page of Pages.
func All[T any](ctx context.Context, c *Client, path string, query url.Values) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		for p, err := range Pages[T](ctx, c, path, query) {
			if err != nil {
				var zero T
				yield(zero, err)
				return
			}
			for _, v := range p.Data {
				if !yield(v, nil) {
					return
				}
			}
		}
	}
}

// OrderPages iterates over GET /v1/orders newest first; query holds the filters (status,
// created_after, created_before, receiver, resource, client_order_id, batch_id) and limit.
func (c *Client) OrderPages(ctx context.Context, query url.Values) iter.Seq2[Page[orders.Record], error] {
	return Pages[orders.Record](ctx, c, "/v1/orders", query)
}

// Orders iterates over every order matching query, newest first, across pages.
func (c *Client) Orders(ctx context.Context, query url.Values) iter.Seq2[orders.Record, error] {
	return All[orders.Record](ctx, c, "/v1/orders", query)
}

// GetJSON GETs any target and decodes a 2xx answer into out.
func (c *Client) GetJSON(ctx context.Context, target string, out any) error {
	_, err := c.getJSON(ctx, target, out)
	return err
}

// PostJSON POSTs in (marshalled) to target and decodes a 2xx answer into out (nil: not
// decoded). Mark it Idempotent() only when it carries an idempotency key.
func (c *Client) PostJSON(ctx context.Context, target string, in, out any, opts ...CallOption) (*Response, error) {
	body, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(ctx, http.MethodPost, target, body, opts...)
	if err != nil || out == nil {
		return resp, err
	}
	return resp, decodeInto(resp, out)
}
