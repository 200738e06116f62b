package acceptance

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"rental/infra/orderstore"
	"rental/infra/tron"
	"rental/schemas/orders"
	"rental/schemas/pricing"
)

// Placement is an order placed without an HTTP request of its own: a batch receiver or a
// subscription refill. ClientOrderID must be unique on the account (the caller derives it
// from the batch or subscription, so a retried placement finds its first order, see
// PlaceTx); the other fields are those of POST /v1/orders without a quote.
type Placement struct {
	ClientOrderID  string
	Resource       pricing.Resource
	Amount         int64
	Tier           pricing.Tier
	Receiver       tron.Address
	Activate       bool
	MaxPriceSun    *int64
	BatchID        *string
	SubscriptionID *string
}

// ErrPlacedBefore is PlaceTx finding an order with the placement's client_order_id, batch
// and subscription already on the account: the placement happened earlier (a redelivered
// job), nothing new was charged.
var ErrPlacedBefore = errors.New("acceptance: an order with this client_order_id exists")

// PlaceTx prices, charges and stores an order inside the caller's transaction, with every
// check and refusal of POST /v1/orders (the same catalogue errors: 4001 with required_sun
// and available_sun, 5001, 2003, 1101, ...). The caller's transaction must set nothing the
// creation relies on: PlaceTx bounds its own lock waits. Activation state is read from the
// node before pricing, so call it with no locks held that a slow node would stretch.
// A refusal writes nothing; the caller decides whether to roll back its own writes.
func (m *Orders) PlaceTx(ctx context.Context, tx pgx.Tx, accountID string, p Placement) (orders.Record, error) {
	if !ValidClientOrderID(p.ClientOrderID) {
		return orders.Record{}, errors.New("acceptance: placement without a valid client_order_id")
	}
	exists, err := orderstore.PlacedBefore(ctx, tx, accountID, p.ClientOrderID, p.BatchID, p.SubscriptionID)
	if err != nil {
		return orders.Record{}, err
	}
	if exists {
		return orders.Record{}, ErrPlacedBefore
	}
	req := Request{ClientOrderID: p.ClientOrderID, Resource: p.Resource, Amount: p.Amount, Tier: p.Tier,
		Receiver: p.Receiver, Activate: p.Activate, MaxPriceSun: p.MaxPriceSun}
	act := m.o.Prices.Activated(ctx, req.Receiver)
	req.activation = &act
	if err := m.checkReceiverNotOurs(ctx, tx, req.Receiver); err != nil {
		return orders.Record{}, err
	}
	rec, _, err := m.create(ctx, tx, accountID, req, p.BatchID, p.SubscriptionID, nil)
	return rec, err
}
