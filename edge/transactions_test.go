package edge

// POST /v1/transactions is this service's (docs/orders.md "Relayed transactions"); its
// behaviour end to end is tested in processors/orderflow (TestRelayedTransferLandsOnDeliveredEnergyAndIsReclaimed).
func init() { ourAdditions = append(ourAdditions, "POST /v1/transactions") }
