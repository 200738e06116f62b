package edge

// GET /v1/balance (API key, account.read): the small balance record meant for polling
// before each order, and the ledger adapter behind the money fields of GET /v1/account.

import (
	"context"
	"errors"

	"github.com/valyala/fasthttp"

	"rental/infra/ledgerstore"
	"rental/schemas/events"
)

// LedgerAccounts adapts the ledger to AccountLedger (Options.Account.Ledger).
type LedgerAccounts struct{ Ledger *ledgerstore.Ledger }

// Summary implements AccountLedger.
func (l LedgerAccounts) Summary(ctx context.Context, accountID string) (LedgerSummary, error) {
	s, err := l.Ledger.Summary(ctx, accountID)
	if err != nil {
		return LedgerSummary{}, err
	}
	return LedgerSummary{
		BalanceSun: s.BalanceSun, BalanceUSDT: s.BalanceUSDT, ReservedSun: s.ReservedSun,
		Totals: AccountTotals{DepositedSun: s.DepositedSun, SpentSun: s.SpentSun, RefundedSun: s.RefundedSun,
			OrdersCreated: s.OrdersCreated, EnergyDelegated: s.EnergyUsed},
	}, nil
}

// Balance is the module serving GET /v1/balance.
type Balance struct{ l *ledgerstore.Ledger }

// NewBalance returns the module.
func NewBalance(l *ledgerstore.Ledger) (*Balance, error) {
	if l == nil {
		return nil, errors.New("edge: balance: a ledger is required")
	}
	return &Balance{l: l}, nil
}

// Handlers implements Module.
func (m *Balance) Handlers() map[string]HandlerFunc {
	return map[string]HandlerFunc{"GET /v1/balance": m.getBalance}
}

type balanceResponse struct {
	BalanceSun   int64       `json:"balance_sun"`
	BalanceUSDT  int64       `json:"balance_usdt"`
	ReservedSun  int64       `json:"reserved_sun"`
	AvailableSun int64       `json:"available_sun"`
	AsOf         events.Time `json:"as_of"`
}

// getBalance reads the ledger row directly (no cache): a client polls it right before an
// order, so it must show a deposit or a hold the moment it is committed. as_of is the
// database's clock at the read.
func (m *Balance) getBalance(ctx context.Context, rc *fasthttp.RequestCtx) error {
	p := PrincipalFrom(rc)
	if p == nil || p.AccountID == "" {
		return errNoAccount()
	}
	s, err := m.l.Summary(ctx, p.AccountID)
	if err != nil {
		return err
	}
	return WriteJSON(rc, fasthttp.StatusOK, balanceResponse{
		BalanceSun: s.BalanceSun, BalanceUSDT: s.BalanceUSDT, ReservedSun: s.ReservedSun,
		AvailableSun: s.AvailableSun, AsOf: events.Time(s.AsOf),
	})
}
