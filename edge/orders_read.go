package edge

import (
	"context"
	"errors"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"rental/infra/orderstore"
	"rental/infra/tron"
	"rental/schemas/apierr"
	"rental/schemas/orders"
)

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
	row, err := orderstore.Get(ctx, m.o.Pool, p.AccountID, id)
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
	q, err := queryParams(rc, "limit", "cursor", "status", "created_after", "created_before", "receiver",
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
	rows, next, err := orderstore.List(ctx, m.o.Pool, p.AccountID, f, limit)
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
