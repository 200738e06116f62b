package edge

// GET /v1/resources/{address} (public or key; rental-api-v1 AddressResources): the
// address's chain resources from infra/chainread (cached a few seconds, shared by the edge
// replicas through Redis) plus the calling account's own live orders on the address.

import (
	"context"
	"errors"
	"time"

	"github.com/valyala/fasthttp"

	"rental/infra/chainread"
	"rental/infra/orderstore"
	"rental/infra/tron"
	"rental/schemas/apierr"
	"rental/schemas/events"
)

// ResourceReader reads an address's resources; *chainread.Reader is one.
type ResourceReader interface {
	Resources(ctx context.Context, addr tron.Address) (chainread.Resources, error)
}

// ActiveOrdersReader lists an account's live orders on a receiver.
type ActiveOrdersReader interface {
	ActiveOnReceiver(ctx context.Context, accountID, receiver string, now time.Time) ([]orderstore.ActiveOrder, error)
}

// ResourcesOptions are the module's dependencies.
type ResourcesOptions struct {
	Chain  ResourceReader     // required
	Orders ActiveOrdersReader // required
	Now    func() time.Time
}

// Resources serves GET /v1/resources/{address}.
type Resources struct{ o ResourcesOptions }

// NewResources checks the options.
func NewResources(o ResourcesOptions) (*Resources, error) {
	if o.Chain == nil || o.Orders == nil {
		return nil, errors.New("edge: resources: Chain and Orders are required")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Resources{o: o}, nil
}

// Handlers implements Module.
func (m *Resources) Handlers() map[string]HandlerFunc {
	return map[string]HandlerFunc{"GET /v1/resources/{address}": m.get}
}

// activeOrder is one entry of our_active_orders.
type activeOrder struct {
	OrderID   string       `json:"order_id"`
	Amount    int64        `json:"amount"`
	Resource  string       `json:"resource"`
	ExpiresAt *events.Time `json:"expires_at"`
}

type resourcesResponse struct {
	chainread.Resources
	OurActiveOrders []activeOrder `json:"our_active_orders"`
}

func (m *Resources) get(ctx context.Context, rc *fasthttp.RequestCtx) error {
	raw, _ := rc.UserValue("address").(string)
	addr, err := chainAddress("address", raw)
	if err != nil {
		return err
	}
	res, err := m.o.Chain.Resources(ctx, addr)
	if err != nil {
		return chainError(err)
	}
	out := resourcesResponse{Resources: res, OurActiveOrders: []activeOrder{}}
	if p := PrincipalFrom(rc); p != nil && p.AccountID != "" {
		os, err := m.o.Orders.ActiveOnReceiver(ctx, p.AccountID, addr.String(), m.o.Now())
		if err != nil {
			return err
		}
		for _, o := range os {
			a := activeOrder{OrderID: o.ID, Amount: o.Amount, Resource: o.Resource}
			if o.ExpiresAt != nil {
				t := events.Time(*o.ExpiresAt)
				a.ExpiresAt = &t
			}
			out.OurActiveOrders = append(out.OurActiveOrders, a)
		}
	}
	return WriteJSON(rc, fasthttp.StatusOK, out)
}

// chainAddress is parseAddressField (2007 on field) returning the parsed address.
func chainAddress(field, v string) (tron.Address, error) {
	s, err := parseAddressField(field, v)
	if err != nil {
		return tron.Address{}, err
	}
	return tron.ParseAddress(s)
}

// chainError answers a failed node read: 503 5003 chain_unavailable when the node did not
// answer; anything else is an internal error.
func chainError(err error) error {
	if errors.Is(err, tron.ErrNodeUnavailable) {
		return apierr.ChainUnavailable.New("the chain node is not responding; retry shortly")
	}
	return err
}

// OrdersOnReceiver is ActiveOrdersReader over the orders table (infra/orderstore).
type OrdersOnReceiver struct {
	Q orderstore.Querier
}

// maxActiveListed bounds our_active_orders.
const maxActiveListed = 100

func (o OrdersOnReceiver) ActiveOnReceiver(ctx context.Context, accountID, receiver string, now time.Time) ([]orderstore.ActiveOrder, error) {
	return orderstore.ActiveOnReceiver(ctx, o.Q, accountID, receiver, now, maxActiveListed)
}
