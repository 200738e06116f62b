package edgestage

import (
	"github.com/jackc/pgx/v5/pgxpool"

	"rental/edge"
	"rental/infra/config"
	"rental/infra/paystore"
)

// paymentsModule is GET /v1/payments/{txid} (pay by transfer, docs/pricing.md).
func paymentsModule(cfg config.Config, pool *pgxpool.Pool) edge.Module {
	m, _ := edge.NewPayments(paystore.New(pool, cfg.Network)) // never fails with a store
	return m
}
