package substore

import (
	"context"
	"fmt"
	"time"

	"rental/infra/orderstore"
	"rental/infra/pg"
	"rental/schemas/autorefill"
)

// MaxListLimit is the largest page List returns.
const MaxListLimit = 200

// Position is a place in an account's subscription list, newest first (as orderstore's).
type Position = orderstore.Position

// Filter narrows List; zero fields do not filter.
type Filter struct {
	Statuses []autorefill.Status
	Receiver string
	After    *Position
}

// List returns up to limit subscriptions of accountID matching f, newest first (created_at,
// then id, both descending: a total order, so a cursor never skips or repeats a row), and
// the position to continue from when more rows match (nil on the last page).
func List(ctx context.Context, q Querier, accountID string, f Filter, limit int) ([]Row, *Position, error) {
	if limit <= 0 || limit > MaxListLimit {
		return nil, nil, fmt.Errorf("substore: list limit %d outside 1..%d", limit, MaxListLimit)
	}
	k := pg.NewNewestFirst(accountID)
	if len(f.Statuses) > 0 {
		ss := make([]string, len(f.Statuses))
		for i, s := range f.Statuses {
			ss[i] = string(s)
		}
		k.Where("status = ANY(" + k.Arg(ss) + ")")
	}
	if f.Receiver != "" {
		k.Where("receiver = " + k.Arg(f.Receiver))
	}
	if f.After != nil {
		k.After(f.After.CreatedAt, f.After.ID)
	}
	sql, args := k.Page(columns, "subscriptions", limit)
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	var out []Row
	for rows.Next() {
		r, err := scan(rows)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	if len(out) <= limit {
		return out, nil, nil
	}
	out = out[:limit]
	last := out[limit-1]
	return out, &Position{CreatedAt: last.CreatedAt, ID: last.ID}, nil
}

// DelegatedEnergyOf is DelegatedEnergy for several subscriptions at once (a list page).
func DelegatedEnergyOf(ctx context.Context, q Querier, ids []string, now time.Time) (map[string]int64, error) {
	out := map[string]int64{}
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := q.Query(ctx, `SELECT subscription_id,
			coalesce(sum(CASE WHEN status IN ('confirmed', 'active') THEN delivered_amount ELSE amount END), 0)::bigint
		FROM orders WHERE subscription_id = ANY($1) AND resource = 'energy'
		  AND status IN ('created', 'paid', 'allocating', 'delegated', 'confirmed', 'active')
		  AND (expires_at IS NULL OR expires_at > $2)
		GROUP BY subscription_id`, ids, now)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var n int64
		if err := rows.Scan(&id, &n); err != nil {
			return nil, err
		}
		out[id] = n
	}
	return out, rows.Err()
}
