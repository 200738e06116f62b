package deposits

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/btcsuite/btcd/btcutil/hdkeychain"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"rental/infra/tron"
	"rental/schemas/network"
)

// Currency is a deposit currency of the DepositAddress record.
type Currency string

const (
	TRX  Currency = "TRX"
	USDT Currency = "USDT"
)

// ParseCurrency accepts exactly the spec's enum values.
func ParseCurrency(s string) (Currency, bool) {
	switch c := Currency(s); c {
	case TRX, USDT:
		return c, true
	}
	return "", false
}

// Defaults of the DepositAddress rows.
const (
	DefaultConfirmations = 19
	DefaultSpreadBps     = 50
	DefaultMinUSDT       = "5"
	DefaultMaxUSDT       = "2000"
)

// Options configure a Store.
type Options struct {
	Deriver      *Deriver // required
	USDTContract string   // required: the TRC-20 contract accepted (network.USDTContract() or the simulator's)

	Confirmations int    // confirmations_required of both rows (default 19)
	SpreadBps     int    // spread_bps of the USDT row (default 50 = 0.5 %)
	MinUSDT       string // min of the USDT row, a decimal string (default "5")
	MaxUSDT       string // max of the USDT row, a decimal string (default "2000")

	Now func() time.Time // default time.Now

	// Network, when set, makes the store announce every newly issued address with
	// deposit_address.rotated (retired_address null on the first issue) through the outbox,
	// in the issuing transaction.
	Network network.Network
}

// Store issues and reads deposit addresses.
type Store struct {
	pool *pgxpool.Pool
	o    Options
}

var decimalRE = regexp.MustCompile(`^(0|[1-9][0-9]*)(\.[0-9]+)?$`)

// NewStore checks the options and returns a Store.
func NewStore(pool *pgxpool.Pool, o Options) (*Store, error) {
	if pool == nil || o.Deriver == nil {
		return nil, errors.New("deposits: pool and Deriver are required")
	}
	if _, err := tron.ParseAddress(o.USDTContract); err != nil {
		return nil, fmt.Errorf("deposits: USDTContract: %w", err)
	}
	if o.Confirmations <= 0 {
		o.Confirmations = DefaultConfirmations
	}
	if o.SpreadBps < 0 || o.SpreadBps >= 10_000 {
		return nil, fmt.Errorf("deposits: SpreadBps %d out of range 0..9999", o.SpreadBps)
	}
	if o.SpreadBps == 0 {
		o.SpreadBps = DefaultSpreadBps
	}
	if o.MinUSDT == "" {
		o.MinUSDT = DefaultMinUSDT
	}
	if o.MaxUSDT == "" {
		o.MaxUSDT = DefaultMaxUSDT
	}
	if !decimalRE.MatchString(o.MinUSDT) || !decimalRE.MatchString(o.MaxUSDT) {
		return nil, errors.New("deposits: MinUSDT and MaxUSDT must be decimal strings such as 5 or 2000.5")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Store{pool: pool, o: o}, nil
}

// DepositAddress is one row of the spec's DepositAddress record. The TRX and USDT rows of an
// account share Address. Fields that apply to the USDT row only are nil on the TRX row.
// The memo is always null; rate_now comes from a RateSource (rate.go), not from the store.
type DepositAddress struct {
	Currency              Currency
	Address               tron.Address
	ConfirmationsRequired int
	Contract              *string // USDT row: the TRC-20 contract accepted
	SpreadBps             *int    // USDT row
	Min, Max              *string // USDT row: decimal USDT strings
}

// Current returns the account's current deposit address, issuing it on first read.
//
// Race safety: concurrent first reads for one account serialise on a transaction-scoped
// advisory lock keyed by the account, so exactly one derivation index is taken and every
// caller sees the same address. The partial unique index deposit_addresses_current backs
// this up in the schema. The account must exist (foreign key).
func (s *Store) Current(ctx context.Context, accountID string) (tron.Address, error) {
	if a, ok, err := s.current(ctx, s.pool, accountID); err != nil || ok {
		return a, err
	}
	var addr tron.Address
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('deposit_address:' || $1, 0))`, accountID); err != nil {
			return err
		}
		a, ok, err := s.current(ctx, tx, accountID)
		if err != nil || ok {
			addr = a
			return err
		}
		a, err = s.issue(ctx, tx, accountID)
		if err != nil {
			return err
		}
		addr = a
		return s.announce(ctx, tx, accountID, a, nil, nil)
	})
	if err != nil {
		return tron.Address{}, fmt.Errorf("deposits: issue address for %s: %w", accountID, err)
	}
	return addr, nil
}

type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func (s *Store) current(ctx context.Context, q querier, accountID string) (tron.Address, bool, error) {
	var a string
	err := q.QueryRow(ctx, `SELECT address FROM deposit_addresses WHERE account_id = $1 AND retired_at IS NULL`, accountID).Scan(&a)
	if errors.Is(err, pgx.ErrNoRows) {
		return tron.Address{}, false, nil
	}
	if err != nil {
		return tron.Address{}, false, fmt.Errorf("deposits: read address: %w", err)
	}
	addr, err := tron.ParseAddress(a)
	if err != nil {
		return tron.Address{}, false, fmt.Errorf("deposits: stored address %q: %w", a, err)
	}
	return addr, true, nil
}

// Existing returns the account's DepositAddress rows without issuing an address: none
// when the account has no address yet.
func (s *Store) Existing(ctx context.Context, accountID string) ([]DepositAddress, error) {
	addr, ok, err := s.current(ctx, s.pool, accountID)
	if err != nil || !ok {
		return nil, err
	}
	return s.rows(addr, ""), nil
}

// List returns the account's DepositAddress rows, TRX first then USDT, issuing the address
// on first read. only filters to one currency; "" returns both. This is the method
// GET /v1/account (deposit_addresses of {currency, address}), GET /v1/accounts/deposit-address
// and POST /v1/accounts render from.
func (s *Store) List(ctx context.Context, accountID string, only Currency) ([]DepositAddress, error) {
	addr, err := s.Current(ctx, accountID)
	if err != nil {
		return nil, err
	}
	return s.rows(addr, only), nil
}

func (s *Store) rows(addr tron.Address, only Currency) []DepositAddress {
	contract, spread, lo, hi := s.o.USDTContract, s.o.SpreadBps, s.o.MinUSDT, s.o.MaxUSDT
	rows := []DepositAddress{
		{Currency: TRX, Address: addr, ConfirmationsRequired: s.o.Confirmations},
		{Currency: USDT, Address: addr, ConfirmationsRequired: s.o.Confirmations,
			Contract: &contract, SpreadBps: &spread, Min: &lo, Max: &hi},
	}
	if only == "" {
		return rows
	}
	out := rows[:0]
	for _, r := range rows {
		if r.Currency == only {
			out = append(out, r)
		}
	}
	return out
}

// issue takes the next derivation index for accountID inside tx (which holds the account's
// advisory lock) and stores the new current address. An index whose child key is invalid
// (probability about 2^-127) is skipped.
func (s *Store) issue(ctx context.Context, tx pgx.Tx, accountID string) (tron.Address, error) {
	for attempt := 0; attempt < 3; attempt++ {
		var idx int64
		if err := tx.QueryRow(ctx, `SELECT nextval('deposit_address_index_seq')`).Scan(&idx); err != nil {
			return tron.Address{}, err
		}
		if idx >= int64(hdkeychain.HardenedKeyStart) {
			return tron.Address{}, errors.New("deposits: derivation index space exhausted")
		}
		a, err := s.o.Deriver.Address(uint32(idx))
		if errors.Is(err, hdkeychain.ErrInvalidChild) {
			continue
		}
		if err != nil {
			return tron.Address{}, err
		}
		_, err = tx.Exec(ctx, `INSERT INTO deposit_addresses (address, account_id, derivation_index, issued_at)
			VALUES ($1, $2, $3, $4)`, a.String(), accountID, idx, s.o.Now().UTC())
		if err != nil {
			return tron.Address{}, err
		}
		return a, nil
	}
	return tron.Address{}, errors.New("deposits: no valid child key in three indexes")
}
