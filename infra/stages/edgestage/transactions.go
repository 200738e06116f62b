package edgestage

import (
	"time"

	"rental/edge"
	"rental/infra/acceptance"
	"rental/infra/config"
	"rental/infra/tron"
)

// transactionsModule is POST /v1/transactions over order acceptance and the node.
func transactionsModule(cfg config.Config, acc *acceptance.Orders) (*edge.Transactions, error) {
	relays, err := acceptance.NewRelays(acceptance.RelaysOptions{Orders: acc,
		Node: tron.NewClient(cfg.TronNodeURL, tron.WithTimeout(3*time.Second))})
	if err != nil {
		return nil, err
	}
	return edge.NewTransactions(relays)
}
