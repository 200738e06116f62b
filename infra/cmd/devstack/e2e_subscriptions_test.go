package main_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"rental/schemas/events"
	"rental/schemas/topics"
)

// TestE2ESubscriptionRefill runs a legacy auto-refill through the whole dev stack, public
// interfaces only: a customer subscribes an address that has no energy; the watcher sees it
// on the node and places a refill, the order processor delegates it (the order carries the
// subscription's id), subscription.refilled arrives on Kafka; when the address has spent
// the energy again, max_refills_per_day 1 suspends the subscription (subscription.suspended,
// daily_limit_reached) instead of ordering. The balance is exact to the SUN.
func TestE2ESubscriptionRefill(t *testing.T) {
	e := e2eStack(t, "SUBSCRIPTION_CHECK_INTERVAL=200ms")
	c := e.c
	e.scopes = []string{"subscriptions.read", "subscriptions.write"}
	e.signup()
	const deposit = 100_000_000
	e.deposit(deposit)
	recv := e.newReceiver()
	eventually(t, 15*time.Second, "GET /v1/prices answers 200", func() bool { return c.api("GET", "/v1/prices", nil).status == 200 })

	var plans struct {
		Available bool `json:"available"`
		PerUse    struct {
			PriceSun *int64 `json:"price_sun"`
		} `json:"per_use"`
		Data []struct{ Slug string } `json:"data"`
	}
	c.want(c.api("GET", "/v1/subscriptions/plans", nil), 200, "GET /v1/subscriptions/plans").decode(t, &plans)
	if !plans.Available || plans.PerUse.PriceSun == nil || len(plans.Data) != 4 {
		t.Fatalf("plans %+v", plans)
	}

	type subscription struct {
		ID           string  `json:"id"`
		Status       string  `json:"status"`
		StatusReason *string `json:"status_reason"`
		LastOrderID  *string `json:"last_order_id"`
		RefillsToday int     `json:"refills_today"`
	}
	var sub subscription
	c.want(c.signed("POST", "/v1/subscriptions", map[string]any{"receiver": recv, "resource": "energy", "mode": "refill", "tier": "5m",
		"threshold_amount": 30_000, "refill_amount": 65_000, "max_refills_per_day": 1}), 201, "POST /v1/subscriptions").decode(t, &sub)
	get := func() subscription {
		var s subscription
		c.want(c.signed("GET", "/v1/subscriptions/"+sub.ID, nil), 200, "GET /v1/subscriptions/{id}").decode(t, &s)
		return s
	}
	took := eventually(t, 20*time.Second, "refill placed", func() bool { sub = get(); return sub.LastOrderID != nil })
	t.Logf("refill placed %s after the subscription", took.Round(time.Millisecond))
	e.order.ID = *sub.LastOrderID
	e.receiver = recv
	e.waitActive()
	var o struct {
		SubscriptionID *string `json:"subscription_id"`
		Amount         int64   `json:"amount"`
		Tier           *string `json:"tier"`
	}
	c.want(c.signed("GET", "/v1/orders/"+e.order.ID, nil), 200, "GET the refill order").decode(t, &o)
	if o.SubscriptionID == nil || *o.SubscriptionID != sub.ID || o.Amount != 65_000 || *o.Tier != "5m" {
		t.Fatalf("refill order %+v", o)
	}
	c.wantBalance("after the refill's delivery", deposit-e.order.TotalAmountSun, 0)

	var refilled events.SubscriptionRefilled
	consume(t, e.s.kafk, topics.SubscriptionEvents.Name, 10*time.Second, func(r *kgo.Record) bool {
		var env events.Envelope
		if json.Unmarshal(r.Value, &env) != nil || env.Event != events.EventSubscriptionRefilled {
			return false
		}
		if string(r.Key) != sub.ID || env.AccountID != e.acc || json.Unmarshal(env.Data, &refilled) != nil {
			t.Fatalf("subscription.refilled keyed %s: %s", r.Key, r.Value)
		}
		return true
	})
	if refilled.OrderID != e.order.ID || refilled.TriggerAvailable != 0 || refilled.RefillsToday != 1 || refilled.TotalAmountSun != e.order.TotalAmountSun {
		t.Fatalf("subscription.refilled %+v", refilled)
	}

	// The address spends the energy: a second refill is due, but one a day is the limit.
	var acc simAccount
	acc = c.simAccount(recv)
	c.want(c.sim("POST", "/sim/energy/use", map[string]any{"address": recv, "energy": acc.EnergyLimit}), 200, "use energy")
	eventually(t, 10*time.Second, "subscription suspended", func() bool { sub = get(); return sub.Status == "suspended" })
	if sub.StatusReason == nil || *sub.StatusReason != "daily_limit_reached" || sub.RefillsToday != 1 || *sub.LastOrderID != e.order.ID {
		t.Fatalf("suspended subscription %+v", sub)
	}
	var suspended events.SubscriptionSuspended
	consume(t, e.s.kafk, topics.SubscriptionEvents.Name, 10*time.Second, func(r *kgo.Record) bool {
		var env events.Envelope
		if json.Unmarshal(r.Value, &env) != nil || env.Event != events.EventSubscriptionSuspended {
			return false
		}
		return json.Unmarshal(env.Data, &suspended) == nil
	})
	if suspended.SubscriptionID != sub.ID || suspended.Reason != "daily_limit_reached" || suspended.RequiredSun != nil {
		t.Fatalf("subscription.suspended %+v", suspended)
	}
	c.wantBalance("after the suspension", deposit-e.order.TotalAmountSun, 0)
	e.s.stop()
}
