package orderstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"rental/infra/pg"
	"rental/schemas/orders"
)

// MaxListLimit is the largest page List returns.
const MaxListLimit = 200

// Position is a place in an account's order list, newest first: the list continues with
// the orders strictly older than (CreatedAt, ID). The edge turns it into an opaque cursor.
type Position struct {
	CreatedAt time.Time
	ID        string
}

// Filter narrows List; zero fields do not filter.
type Filter struct {
	Statuses      []orders.Status // any of them
	CreatedAfter  *time.Time      // created_at > CreatedAfter
	CreatedBefore *time.Time      // created_at < CreatedBefore
	Receiver      string
	Resource      orders.Resource
	ClientOrderID string
	BatchID       string
	After         *Position // continue after this position
}

// List returns up to limit orders of accountID matching f, newest first (created_at, then
// id, both descending, so the order is total and a cursor never skips or repeats a row),
// and the position to continue from when more rows match (nil on the last page).
// The keyset condition uses the index orders_account_created.
func List(ctx context.Context, q Querier, accountID string, f Filter, limit int) ([]Row, *Position, error) {
	if limit <= 0 || limit > MaxListLimit {
		return nil, nil, fmt.Errorf("orderstore: list limit %d outside 1..%d", limit, MaxListLimit)
	}
	k := pg.NewNewestFirst(accountID)
	if len(f.Statuses) > 0 {
		ss := make([]string, len(f.Statuses))
		for i, s := range f.Statuses {
			ss[i] = string(s)
		}
		k.Where("status = ANY(" + k.Arg(ss) + ")")
	}
	if f.CreatedAfter != nil {
		k.Where("created_at > " + k.Arg(*f.CreatedAfter))
	}
	if f.CreatedBefore != nil {
		k.Where("created_at < " + k.Arg(*f.CreatedBefore))
	}
	if f.Receiver != "" {
		k.Where("receiver = " + k.Arg(f.Receiver))
	}
	if f.Resource != "" {
		k.Where("resource = " + k.Arg(string(f.Resource)))
	}
	if f.ClientOrderID != "" {
		k.Where("client_order_id = " + k.Arg(f.ClientOrderID))
	}
	if f.BatchID != "" {
		k.Where("batch_id = " + k.Arg(f.BatchID))
	}
	if f.After != nil {
		k.After(f.After.CreatedAt, f.After.ID)
	}
	sql, args := k.Page(columns, "orders", limit)
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, nil, fmt.Errorf("orderstore: list: %w", err)
	}
	defer rows.Close()
	out := make([]Row, 0, min(limit, 64))
	var next *Position
	for rows.Next() {
		if len(out) == limit {
			last := out[len(out)-1]
			next = &Position{CreatedAt: time.Time(last.CreatedAt), ID: last.ID}
			break
		}
		r, err := scan(rows)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("orderstore: list: %w", err)
	}
	return out, next, nil
}

// RequestReclaim marks the order as asked to be returned early (reclaim_requested_at = at)
// unless it already was, inside tx after Lock. fresh is true when this call set it: only
// then does the caller queue IntentReclaim, so a client repeating the request does not
// flood the processor with intents. The record (status, updated_at) does not change: the
// processor changes it when the undelegation lands.
func RequestReclaim(ctx context.Context, tx pgx.Tx, id string, at time.Time) (row Row, fresh bool, err error) {
	row, err = scan(tx.QueryRow(ctx, `UPDATE orders SET reclaim_requested_at = $2
		WHERE id = $1 AND reclaim_requested_at IS NULL RETURNING `+columns, id, at.UTC()))
	if err == nil {
		return row, true, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return Row{}, false, fmt.Errorf("orderstore: reclaim %s: %w", id, err)
	}
	row, err = Lock(ctx, tx, id)
	return row, false, err
}

// ReceiverLiveEnergy is the energy of this service's orders on receiver that are live:
// not ended (terminal) and not past expires_at. It reads across accounts, because the
// ceiling it serves (5005) is about what one address takes from the service.
func ReceiverLiveEnergy(ctx context.Context, q Querier, receiver string, now time.Time) (int64, error) {
	var n int64
	err := q.QueryRow(ctx, `SELECT n FROM (`+receiversLiveEnergySQL+`) AS l(r, n)`, []string{receiver}, now.UTC()).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("orderstore: receiver energy: %w", err)
	}
	return n, nil
}
