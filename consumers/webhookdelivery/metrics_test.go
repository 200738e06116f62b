package webhookdelivery_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"rental/infra/webhooks"
)

// gauge reads an unlabelled gauge from reg (-1 when absent).
func gauge(t testing.TB, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return -1
}

// While an endpoint is down, the queue metrics show the deliveries waiting and how long
// the oldest has been due; once it answers again they return to zero.
func TestQueueDepthAndOldestDueAge(t *testing.T) {
	e := newEnv(t)
	e.endpoint(t, webhooks.RolePrimary, "/down")
	e.rcv.Answer = func(received) int { return 503 }
	e.reg = prometheus.NewRegistry()
	e.start(t, scaled(time.Second)) // the first retry waits 1 s

	order := orderID(1)
	for seq := 1; seq <= 3; seq++ {
		e.publish(t, "order.confirmed", map[string]any{"order_id": order, "tier": "1h", "seq": seq})
	}
	waitFor(t, 20*time.Second, "three deliveries queued, the later ones due for a while", func() bool {
		return gauge(t, e.reg, "rental_webhook_queue_depth") == 3 &&
			gauge(t, e.reg, "rental_webhook_queue_oldest_due_age_seconds") >= 0.3
	})
	e.rcv.Answer = func(received) int { return 200 }
	waitFor(t, 20*time.Second, "the queue drains", func() bool {
		return gauge(t, e.reg, "rental_webhook_queue_depth") == 0 &&
			gauge(t, e.reg, "rental_webhook_queue_oldest_due_age_seconds") == 0
	})
}
