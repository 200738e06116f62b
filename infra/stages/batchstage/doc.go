// Package batchstage wires the batch processor (processors/batchflow) from configuration:
// it places orders through order acceptance (acceptstage), priced from the pricer's
// snapshot. The edge's batch endpoints are wired in edgestage.
package batchstage
