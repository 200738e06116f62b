// Package scopes is the complete API key scope vocabulary of rental-api-v1, a contract: a
// scope is never renamed or given a new meaning, new scopes are only added. Names follow the
// spec's area.action form. `read` covers GET calls of the area, `write` every call that
// changes state in it. A key carries exactly the scopes chosen at its creation: there is no
// default, no preset and no wildcard, and `write` does not imply `read`.
//
// The edge's endpoint table names the one scope each key-authenticated endpoint requires
// (edge.Endpoints, enforced by a test: every such endpoint names a scope of this list, and
// every scope of this list is required by at least one endpoint).
package scopes

import "slices"

// The vocabulary. Keep All in step (a test checks it).
const (
	AccountRead  = "account.read"  // GET /v1/account, GET /v1/balance
	AccountWrite = "account.write" // PATCH /v1/account (dashboard sessions only in v1)

	APIKeysRead  = "api_keys.read"  // GET /v1/api-keys
	APIKeysWrite = "api_keys.write" // POST, PATCH, DELETE /v1/api-keys

	DepositsRead = "deposits.read" // GET /v1/deposit-addresses

	OrdersRead  = "orders.read"  // GET /v1/orders, GET /v1/orders/{id}
	OrdersWrite = "orders.write" // POST /v1/orders, POST /v1/orders/{id}/reclaim

	BatchesRead  = "batches.read"  // GET /v1/batches/{id}
	BatchesWrite = "batches.write" // POST /v1/batches, POST /v1/batches/{id}/cancel

	QuotesRead  = "quotes.read"  // GET /v1/quotes/{quoteId}
	QuotesWrite = "quotes.write" // POST /v1/quotes

	EstimatesRead = "estimates.read" // POST /v1/estimate/transfer (computes, changes nothing)

	SubscriptionsRead  = "subscriptions.read"  // GET /v1/subscriptions, GET /v1/subscriptions/{id}
	SubscriptionsWrite = "subscriptions.write" // POST, PATCH, DELETE /v1/subscriptions

	WebhooksRead  = "webhooks.read"  // GET /v1/webhooks
	WebhooksWrite = "webhooks.write" // POST, PATCH, DELETE /v1/webhooks, rotate-secret, test
)

var all = []string{
	AccountRead, AccountWrite,
	APIKeysRead, APIKeysWrite,
	DepositsRead,
	OrdersRead, OrdersWrite,
	BatchesRead, BatchesWrite,
	QuotesRead, QuotesWrite,
	EstimatesRead,
	SubscriptionsRead, SubscriptionsWrite,
	WebhooksRead, WebhooksWrite,
}

// All returns the vocabulary in documentation order.
func All() []string { return slices.Clone(all) }

// Valid reports whether s is a scope of the vocabulary (exact, case-sensitive).
func Valid(s string) bool { return slices.Contains(all, s) }
