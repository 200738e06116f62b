package orderstore

import (
	"context"
	"fmt"
	"time"
)

// ActiveOrder is one of an account's live orders on a receiver (GET /v1/resources
// our_active_orders).
type ActiveOrder struct {
	ID        string
	Amount    int64
	Resource  string
	ExpiresAt *time.Time // nil until the delegation landed
}

// ActiveOnReceiver lists accountID's orders on receiver that are live at now: not ended
// and not past expires_at, newest first, at most limit.
func ActiveOnReceiver(ctx context.Context, q Querier, accountID, receiver string, now time.Time, limit int) ([]ActiveOrder, error) {
	rows, err := q.Query(ctx, `SELECT id, amount, resource, expires_at FROM orders
		WHERE receiver = $2 AND account_id = $1
		  AND status IN ('created', 'paid', 'allocating', 'delegated', 'confirmed', 'active')
		  AND (expires_at IS NULL OR expires_at > $3)
		ORDER BY created_at DESC, id DESC LIMIT $4`, accountID, receiver, now.UTC(), limit)
	if err != nil {
		return nil, fmt.Errorf("orderstore: active orders on %s: %w", receiver, err)
	}
	defer rows.Close()
	out := []ActiveOrder{}
	for rows.Next() {
		var o ActiveOrder
		if err := rows.Scan(&o.ID, &o.Amount, &o.Resource, &o.ExpiresAt); err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, rows.Err()
}
