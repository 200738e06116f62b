package edge

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/valyala/fasthttp"

	"rental/infra/accounts"
	"rental/schemas/apierr"
	"rental/schemas/events"
	"rental/schemas/network"
)

// AccountStore is what the account and API key endpoints need from infra/accounts
// (*accounts.Store implements it).
type AccountStore interface {
	GetAccount(ctx context.Context, id string) (accounts.Account, error)
	CreateKeyTx(ctx context.Context, tx pgx.Tx, accountID string, nk accounts.NewKey, actor string) (accounts.CreatedKey, error)
	ListKeys(ctx context.Context, accountID string) ([]accounts.Key, error)
	UpdateKey(ctx context.Context, accountID, keyID string, u accounts.KeyUpdate, actor string) (accounts.Key, error)
	RevokeKey(ctx context.Context, accountID, keyID, actor string) error
}

// LedgerSummary is the money part of the Account record.
type LedgerSummary struct {
	BalanceSun  int64
	BalanceUSDT int64
	ReservedSun int64
	Totals      AccountTotals
}

// AccountTotals are the lifetime counters of the Account record.
type AccountTotals struct {
	DepositedSun    int64 `json:"deposited_sun"`
	SpentSun        int64 `json:"spent_sun"`
	RefundedSun     int64 `json:"refunded_sun"`
	OrdersCreated   int64 `json:"orders_created"`
	EnergyDelegated int64 `json:"energy_delegated"`
}

// AccountLedger gives an account's balances and totals; the ledger (issue 4) implements
// it. Without one, every amount is zero, which is the truth before any deposit exists.
type AccountLedger interface {
	Summary(ctx context.Context, accountID string) (LedgerSummary, error)
}

// DepositAddressRef is one row of the Account record's deposit_addresses.
type DepositAddressRef struct {
	Currency string `json:"currency"` // TRX or USDT
	Address  string `json:"address"`
}

// DepositAddressLister lists an account's current deposit addresses (the signup deposit
// store implements it). It must not issue addresses: GET /v1/account is a read.
type DepositAddressLister interface {
	DepositAddresses(ctx context.Context, accountID string) ([]DepositAddressRef, error)
}

// AccountLimits are the limits in force for accounts (the Account record's `limits`).
type AccountLimits struct {
	MaxOrderEnergy    int64 `json:"max_order_energy"`    // default 10,000,000
	MaxBatchReceivers int   `json:"max_batch_receivers"` // the spec's 100
	OrdersPerSecond   int   `json:"orders_per_second"`   // the order-class rate, 30
}

// AccountSources render the Account record. Build one value in main and give the same to
// every endpoint that answers with an Account (GET and PATCH /v1/account).
type AccountSources struct {
	Brand    string
	Network  network.Network
	Ledger   AccountLedger        // nil: zeros until the ledger exists
	Deposits DepositAddressLister // nil: no addresses listed
	Limits   AccountLimits
}

func (src *AccountSources) defaults(o Options) {
	if src.Brand == "" {
		src.Brand = o.Brand
	}
	if src.Network == "" {
		src.Network = o.Network
	}
	if src.Limits.MaxOrderEnergy <= 0 {
		src.Limits.MaxOrderEnergy = 10_000_000
	}
	if src.Limits.MaxBatchReceivers <= 0 {
		src.Limits.MaxBatchReceivers = 100
	}
	if src.Limits.OrdersPerSecond <= 0 {
		src.Limits.OrdersPerSecond = o.RateLimits.Order
	}
}

// Account is the spec's Account record (GET /v1/account).
type Account struct {
	ID               string              `json:"id"`
	Brand            string              `json:"brand"`
	Network          network.Network     `json:"network"`
	Label            *string             `json:"label"`
	Status           string              `json:"status"`
	BalanceSun       int64               `json:"balance_sun"`
	BalanceUSDT      int64               `json:"balance_usdt"`
	ReservedSun      int64               `json:"reserved_sun"`
	DepositAddresses []DepositAddressRef `json:"deposit_addresses"`
	Limits           AccountLimits       `json:"limits"`
	Totals           AccountTotals       `json:"totals"`
	CreatedAt        string              `json:"created_at"`
}

// Render builds the Account record of a.
func (src AccountSources) Render(ctx context.Context, a accounts.Account) (Account, error) {
	out := Account{
		ID:               a.ID,
		Brand:            src.Brand,
		Network:          a.Network,
		Label:            a.Label,
		Status:           a.Status,
		DepositAddresses: []DepositAddressRef{},
		Limits:           src.Limits,
		CreatedAt:        events.FormatTime(a.CreatedAt),
	}
	if src.Ledger != nil {
		sum, err := src.Ledger.Summary(ctx, a.ID)
		if err != nil {
			return Account{}, err
		}
		out.BalanceSun, out.BalanceUSDT, out.ReservedSun, out.Totals = sum.BalanceSun, sum.BalanceUSDT, sum.ReservedSun, sum.Totals
	}
	if src.Deposits != nil {
		ds, err := src.Deposits.DepositAddresses(ctx, a.ID)
		if err != nil {
			return Account{}, err
		}
		if ds != nil {
			out.DepositAddresses = ds
		}
	}
	return out, nil
}

// getAccount serves GET /v1/account for a key (account.read) or a bootstrap token.
func (s *Server) getAccount(ctx context.Context, rc *fasthttp.RequestCtx) error {
	p := PrincipalFrom(rc)
	if p == nil || p.AccountID == "" {
		return errNoAccount()
	}
	a, err := s.opts.Accounts.GetAccount(ctx, p.AccountID)
	if errors.Is(err, accounts.ErrNotFound) {
		// The credential named an account that is gone: an internal inconsistency.
		return apierr.InternalError.Wrap(err, "account of a valid credential not found")
	}
	if err != nil {
		return err
	}
	out, err := s.opts.Account.Render(ctx, a)
	if err != nil {
		return err
	}
	return WriteJSON(rc, fasthttp.StatusOK, out)
}

// timeOrNil renders an optional timestamp.
func timeOrNil(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := events.FormatTime(*t)
	return &s
}
