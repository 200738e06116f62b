package edgestage

import (
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"rental/edge"
	"rental/infra/config"
	"rental/infra/deposits"
	"rental/infra/stages/ledgerstage"
)

// LedgerEdge is the ledger's part of the edge.
type LedgerEdge struct {
	Accounts edge.AccountLedger // Options.Account.Ledger: balances and totals of GET /v1/account
	Balance  edge.Module        // GET /v1/balance
	Deposits edge.Module        // GET /v1/deposit-addresses
}

// ledgerEdge builds the ledger's edge modules on the edge's deposit store.
func ledgerEdge(cfg config.Config, pool *pgxpool.Pool, store *deposits.Store, log *slog.Logger, reg prometheus.Registerer) (LedgerEdge, error) {
	l, err := ledgerstage.Ledger(cfg, pool)
	if err != nil {
		return LedgerEdge{}, err
	}
	rates, err := ledgerstage.CachedUSDTRate(cfg, cfg.USDTRate.CacheTTL, reg, log) // rate_now
	if err != nil {
		return LedgerEdge{}, err
	}
	bal, err := edge.NewBalance(l)
	if err != nil {
		return LedgerEdge{}, err
	}
	dep, err := edge.NewDepositAddresses(edge.DepositAddressesOptions{
		Store: store, Rates: rates, Policy: ledgerstage.RotationPolicy(cfg), Logger: log,
	})
	if err != nil {
		return LedgerEdge{}, err
	}
	return LedgerEdge{Accounts: edge.LedgerAccounts{Ledger: l}, Balance: bal, Deposits: dep}, nil
}
