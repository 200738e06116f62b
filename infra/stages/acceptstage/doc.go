// Package acceptstage wires order acceptance, which the edge (POST /v1/orders), the batch
// processor and the subscription watcher share: the pricing module that prices a request
// from the pricer's snapshot and the order module that checks, holds and records it.
package acceptstage
