// Package substage wires the subscription watcher (processors/subscriptions) from
// configuration: refills are placed through order acceptance (acceptstage) and plan fees
// charged through the ledger (ledgerstage). The edge's subscription endpoints are wired in
// edgestage.
package substage
