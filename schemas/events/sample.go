package events

import "maps"

// SampleData returns the sample data of an event type (nil for a type not in the
// catalogue): every data field the spec lists for the type, with placeholder values that
// pass the type's JSON Schema. The webhook test call delivers it (with test = true, which
// marks it as fake), and the OpenAPI document's webhooks show it as their example.
func SampleData(eventType string) map[string]any {
	d, ok := sampleData[eventType]
	if !ok {
		return nil
	}
	return maps.Clone(d)
}

var sampleData = func() map[string]map[string]any {
	const (
		order    = "ord_000000000000000000000000"
		receiver = "T9yD14Nj9j7xAB4dbGeiX9h8unkKHxuWwb" // the burn address: a valid address nobody holds
		at       = "2026-01-01T00:00:00.000Z"
		sub      = "sub_000000000000000000000000"
	)
	orderBase := func(extra map[string]any) map[string]any {
		m := map[string]any{"order_id": order, "client_order_id": "test", "receiver": receiver, "resource": "energy", "amount": 65000, "tier": "1h"}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	reclaimed := orderBase(map[string]any{"reclaim_hash": nil, "reclaimed_at": at, "refunded_amount_sun": 0})
	expired := orderBase(map[string]any{"reclaim_hash": nil, "expired_at": at, "refunded_amount_sun": 0})
	return map[string]map[string]any{
		EventOrderConfirmed: orderBase(map[string]any{
			"batch_id": nil, "subscription_id": nil, "delivered_amount": 65000, "partial": false, "tier": "1h",
			"duration_seconds": 3600, "delegate_hash": nil, "delegate_hashes": []string{}, "delegated_at": nil,
			"expires_at": nil, "total_amount_sun": 0, "refunded_amount_sun": 0,
			"activation": map[string]any{"performed": false, "hash": nil, "amount_sun": 0},
		}),
		EventOrderFailed: orderBase(map[string]any{"tier": "1h",
			"failure":            map[string]any{"code": 5002, "slug": "delegation_failed", "message": "test event"},
			"charged_amount_sun": 0, "refunded_amount_sun": 0, "refund_complete": true}),
		EventOrderExpired:   expired,
		EventOrderReclaimed: reclaimed,
		EventOrderRefunded: orderBase(map[string]any{"delivered_amount": 65000, "partial": false, "reason": "support_adjustment",
			"charged_amount_sun": 0, "refunded_amount_sun": 0, "refund_complete": true, "refunded_at": at}),
		EventBatchCompleted: {"batch_id": "bat_000000000000000000000000", "client_batch_id": "test", "status": "completed",
			"summary":            map[string]any{"total": 1, "completed": 1, "partial": 0, "failed": 0, "insufficient_funds": 0, "cancelled": 0},
			"charged_amount_sun": 0, "finished_at": at},
		EventSubscriptionRefilled: {"subscription_id": sub, "order_id": order, "receiver": receiver, "resource": "energy",
			"amount": 65000, "tier": "1h", "trigger_available": 0, "threshold_amount": 0, "total_amount_sun": 0, "refills_today": 1},
		EventSubscriptionSuspended: {"subscription_id": sub, "receiver": receiver, "reason": "insufficient_funds",
			"required_sun": 0, "available_sun": 0},
		EventSubscriptionPaused:  {"subscription_id": sub, "receiver": receiver, "reason": "user"},
		EventSubscriptionCharged: {"subscription_id": sub, "receiver": receiver, "plan": "basic", "amount_sun": 1, "next_billing_at": at},
		EventBalanceCredited: {"reason": "adjustment", "currency": "TRX", "amount_sun": 1, "tx_hash": nil, "confirmations": nil,
			"balance_sun": nil, "reference_id": nil, "asset": "TRX", "usdt_amount": nil, "rate": nil, "rate_source": nil,
			"spread_bps": nil, "txid": nil, "sender": nil, "block_number": nil},
		EventBalanceLow:            {"balance_sun": 0, "threshold_sun": 0, "estimated_orders_remaining": 0},
		EventDepositAddressRotated: {"address": receiver, "retired_address": nil, "retired_credit_until": nil, "rotated_at": at},
	}
}()
