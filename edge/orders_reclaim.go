package edge

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/valyala/fasthttp"

	"rental/infra/orderstore"
	"rental/schemas/apierr"
	"rental/schemas/events"
	"rental/schemas/orders"
)

// ---- POST /v1/orders/{id}/reclaim ----

// reclaimOrder asks for an early return of a live delegation from the own pools. It locks
// the order, so it serialises with the processor's own changes of it, marks the request and
// queues a reclaim intent in the same transaction; the processor undelegates and sends
// order.reclaimed. 202: the order is unchanged until the undelegation lands.
func (m *Orders) reclaimOrder(ctx context.Context, tx pgx.Tx, rc *fasthttp.RequestCtx) (TxResult, error) {
	p, err := signedAccount(rc)
	if err != nil {
		return TxResult{}, err
	}
	id := pathValue(rc, "id")
	if !orderIDPattern.MatchString(id) {
		return TxResult{}, orderNotFound(id)
	}
	row, err := orderstore.Lock(ctx, tx, id)
	if errors.Is(err, orderstore.ErrNotFound) || (err == nil && row.AccountID != p.AccountID) {
		return TxResult{}, orderNotFound(id)
	}
	if err != nil {
		return TxResult{}, err
	}
	now := m.o.Now()
	switch {
	case row.Status.Terminal():
		return TxResult{}, apierr.OrderInTerminalState.New("the order is "+string(row.Status)+"; it can no longer change").
			With("status", string(row.Status))
	case row.FilledBy != nil && *row.FilledBy != orders.FilledByPool:
		return TxResult{}, apierr.ReclaimUnavailable.New("a third-party provider filled this order; it cannot be reclaimed early").
			With("filled_by", *row.FilledBy)
	case row.Resource == orders.Activation,
		row.Status != orders.Confirmed && row.Status != orders.Active,
		row.ExpiresAt != nil && !now.Before(time.Time(*row.ExpiresAt)):
		e := apierr.NothingToReclaim.New("the order has no live delegation to return").With("status", string(row.Status))
		if row.ExpiresAt != nil {
			e.With("expires_at", events.FormatTime(time.Time(*row.ExpiresAt)))
		}
		return TxResult{}, e
	}
	row, fresh, err := orderstore.RequestReclaim(ctx, tx, id, now)
	if err != nil {
		return TxResult{}, err
	}
	if fresh {
		if err := orderstore.Enqueue(ctx, tx, id, orderstore.IntentReclaim); err != nil {
			return TxResult{}, err
		}
	}
	return TxResult{Status: fasthttp.StatusAccepted, Body: row.Record, ObjectID: id}, nil
}
