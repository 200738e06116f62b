package edge

import (
	"context"
	"errors"
	"regexp"
	"slices"
	"strings"

	"github.com/valyala/fasthttp"

	"rental/infra/substore"
	"rental/schemas/apierr"
	"rental/schemas/autorefill"
)

// ---- GET /v1/subscriptions/{id} ----

var subscriptionIDPattern = regexp.MustCompile(`^` + substore.IDPrefix + `_[0-9a-f]{24}$`)

// subscriptionNotFound answers an unknown id and another account's subscription alike:
// 404 3022 object_not_found on the path parameter (docs/errors.md).
func subscriptionNotFound(id string) error {
	return apierr.ObjectNotFound.New("no subscription " + quote(id) + " on this account").WithField("subscriptionId")
}

func (m *Subscriptions) getSubscription(ctx context.Context, rc *fasthttp.RequestCtx) error {
	p, err := accountOf(rc)
	if err != nil {
		return err
	}
	id := pathValue(rc, "subscriptionId")
	if !subscriptionIDPattern.MatchString(id) {
		return subscriptionNotFound(id)
	}
	pool := m.o.Ledger.Pool()
	row, err := substore.Get(ctx, pool, p.AccountID, id)
	if errors.Is(err, substore.ErrNotFound) {
		return subscriptionNotFound(id)
	}
	if err != nil {
		return err
	}
	rec, err := m.render(ctx, pool, row, true)
	if err != nil {
		return err
	}
	return WriteJSON(rc, fasthttp.StatusOK, rec)
}

// render is the record with a plan's delegated energy and, withHistory, its events[].
func (m *Subscriptions) render(ctx context.Context, q substore.Querier, row substore.Row, withHistory bool) (autorefill.Record, error) {
	if row.Kind != autorefill.Plan {
		return row.Record(0, nil), nil
	}
	delegated, err := substore.DelegatedEnergy(ctx, q, row.ID, m.o.Now())
	if err != nil {
		return autorefill.Record{}, err
	}
	var hist []autorefill.HistoryEvent
	if withHistory {
		if hist, err = substore.RecentHistory(ctx, q, row.ID, autorefill.MaxHistory); err != nil {
			return autorefill.Record{}, err
		}
	}
	return row.Record(delegated, hist), nil
}

// ---- GET /v1/subscriptions ----

type subscriptionList struct {
	Data       []autorefill.Record `json:"data"`
	NextCursor *string             `json:"next_cursor"`
}

// subscriptionCursor pages GET /v1/subscriptions.
var subscriptionCursor = listCursor{prefix: "s1:", id: subscriptionIDPattern}

func (m *Subscriptions) listSubscriptions(ctx context.Context, rc *fasthttp.RequestCtx) error {
	p, err := accountOf(rc)
	if err != nil {
		return err
	}
	q, err := queryParams(rc, "limit", "cursor", "status", "receiver")
	if err != nil {
		return err
	}
	limit, err := pageLimit(q, DefaultSubscriptionsPageSize, MaxSubscriptionsPageSize)
	if err != nil {
		return err
	}
	var f substore.Filter
	if v, ok := q["cursor"]; ok {
		pos, err := subscriptionCursor.decode(v)
		if err != nil {
			return err
		}
		f.After = &pos
	}
	if v, ok := q["status"]; ok {
		for _, s := range strings.Split(v, ",") {
			st, ok := autorefill.ParseStatus(s)
			if !ok {
				return Invalid("status", "enum", "status must be active, paused, suspended or cancelled (comma separated for several)").
					With("allowed", autorefill.Statuses)
			}
			if !slices.Contains(f.Statuses, st) {
				f.Statuses = append(f.Statuses, st)
			}
		}
	}
	if v, ok := q["receiver"]; ok {
		a, err := parseReceiver(v)
		if err != nil {
			return Invalid("receiver", "format", "receiver must be a Base58Check TRON address")
		}
		f.Receiver = a.String()
	}
	pool := m.o.Ledger.Pool()
	rows, next, err := substore.List(ctx, pool, p.AccountID, f, limit)
	if err != nil {
		return err
	}
	var planIDs []string
	for _, r := range rows {
		if r.Kind == autorefill.Plan {
			planIDs = append(planIDs, r.ID)
		}
	}
	delegated, err := substore.DelegatedEnergyOf(ctx, pool, planIDs, m.o.Now())
	if err != nil {
		return err
	}
	out := subscriptionList{Data: make([]autorefill.Record, len(rows))}
	for i, r := range rows {
		out.Data[i] = r.Record(delegated[r.ID], nil)
	}
	if next != nil {
		c := subscriptionCursor.encode(*next)
		out.NextCursor = &c
	}
	return WriteJSON(rc, fasthttp.StatusOK, out)
}
