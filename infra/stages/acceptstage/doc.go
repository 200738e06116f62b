// Package acceptstage wires order acceptance (infra/acceptance), which the edge
// (POST /v1/orders), the batch processor and the subscription watcher share: the live prices
// read from the pricer's snapshot and the orders that check, hold and record a request. It
// links no edge code, so the processors' binaries do not either.
package acceptstage
