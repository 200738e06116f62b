package edge

import (
	"context"

	"github.com/valyala/fasthttp"

	"rental/infra/health"
	"rental/schemas/events"
	"rental/schemas/network"
)

// StatusReporter gives the component health behind GET /v1/status. It caches and bounds
// its own work (health.Checker does: 10 s cache, one computation at a time).
type StatusReporter interface {
	Report(ctx context.Context) health.Report
}

// serviceStatus is the spec's ServiceStatus record.
type serviceStatus struct {
	Status     health.Status   `json:"status"`
	Network    network.Network `json:"network"`
	AsOf       string          `json:"as_of"`
	Components components      `json:"components"`
}

type components struct {
	API      componentStatus `json:"api"`
	Database componentStatus `json:"database"`
	Payments paymentsStatus  `json:"payments"`
	Delivery deliveryStatus  `json:"delivery"`
	Supply   supplyStatus    `json:"supply"`
}

type componentStatus struct {
	Status health.Status `json:"status"`
}

type paymentsStatus struct {
	Status             health.Status `json:"status"`
	ScannerUpdatedSAgo *int64        `json:"scanner_updated_s_ago"`
}

type deliveryStatus struct {
	Status            health.Status `json:"status"`
	Orders1h          int64         `json:"orders_1h"`
	Failed1h          int64         `json:"failed_1h"`
	MedianDeliveryS1h *int64        `json:"median_delivery_s_1h"`
}

type supplyStatus struct {
	Status          health.Status `json:"status"`
	AvailableEnergy int64         `json:"available_energy"`
}

// getStatus is GET /v1/status (public). 200 while every component is operational or
// degraded; 503 with the same body when any is down, so load balancers and uptime checks
// can act on the status code alone.
func (s *Server) getStatus(ctx context.Context, rc *fasthttp.RequestCtx) error {
	r := s.opts.Status.Report(ctx)
	body := serviceStatus{
		Status:  r.Status,
		Network: s.opts.Network,
		AsOf:    events.FormatTime(r.AsOf),
		Components: components{
			API:      componentStatus{Status: r.API},
			Database: componentStatus{Status: r.Database},
			Payments: paymentsStatus{Status: r.Payments.Status, ScannerUpdatedSAgo: r.Payments.ScannerUpdatedSecondsAgo},
			Delivery: deliveryStatus{
				Status:            r.Delivery.Status,
				Orders1h:          r.Delivery.Orders1h,
				Failed1h:          r.Delivery.Failed1h,
				MedianDeliveryS1h: r.Delivery.MedianDeliverySeconds1h,
			},
			Supply: supplyStatus{Status: r.Supply.Status, AvailableEnergy: r.Supply.AvailableEnergy},
		},
	}
	code := fasthttp.StatusOK
	if r.Status == health.Down {
		code = fasthttp.StatusServiceUnavailable
	}
	// The report is already cached for 10 s; let clients and proxies share it too.
	rc.Response.Header.Set("Cache-Control", "public, max-age=10")
	return WriteJSON(rc, code, body)
}
