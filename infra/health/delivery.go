package health

import (
	"context"
	"time"
)

// DeliveryWindow is how orders fared in the last hour.
type DeliveryWindow struct {
	Orders int64 // orders created in the hour
	Failed int64 // of those, ended failed
	// MedianDeliverySeconds is the median time from creation to confirmation of the
	// delivered ones; nil when none was delivered.
	MedianDeliverySeconds *int64
}

// DeliveryStats reads the last hour of orders. The orders table arrives with issue 6, which
// supplies the real implementation; until then NoDeliveryStats reports an empty hour.
type DeliveryStats interface {
	DeliveryLastHour(ctx context.Context) (DeliveryWindow, error)
}

// NoDeliveryStats reports zero orders: correct while the deployment cannot take orders.
type NoDeliveryStats struct{}

func (NoDeliveryStats) DeliveryLastHour(context.Context) (DeliveryWindow, error) {
	return DeliveryWindow{}, nil
}

// Delivery thresholds. The spec judges delivery only for an hour with at least
// MinOrdersJudged orders, so a quiet hour with one unlucky order does not flag the service.
const (
	MinOrdersJudged = 3
	// Failed share (per mille) from which delivery is degraded, and down.
	FailedDegradedPermille = 100 // 10 %
	FailedDownPermille     = 500 // 50 %
	// Median delivery time above which delivery is degraded.
	SlowDeliverySeconds = 60
)

func judgeDelivery(w DeliveryWindow) Status {
	if w.Orders < MinOrdersJudged {
		return Operational
	}
	share := w.Failed * 1000 / w.Orders
	switch {
	case share >= FailedDownPermille:
		return Down
	case share >= FailedDegradedPermille:
		return Degraded
	case w.MedianDeliverySeconds != nil && *w.MedianDeliverySeconds > SlowDeliverySeconds:
		return Degraded
	}
	return Operational
}

// PoolCustody lists the own pools no signer may use now, with why (orderstore).
type PoolCustody interface {
	PoolCustodyProblems(ctx context.Context) (map[string]string, error)
}

// DeliveryBacklog is how far delivery is behind acceptance (orderstore.Backlog): the age of
// the oldest accepted order whose delegation was not sent yet, and whether it is beyond the
// bound at which creation refuses new work (5050). It answers from a cached reading.
type DeliveryBacklog interface {
	Behind() (age time.Duration, behind bool)
}
