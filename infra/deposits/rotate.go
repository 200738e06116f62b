package deposits

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"rental/infra/accounts"
	"rental/infra/outbox"
	"rental/infra/tron"
	"rental/schemas/apierr"
	"rental/schemas/events"
)

// RotationPolicy limits how often support may rotate an account's deposit address; the
// values are published in GET /v1/deposit-addresses as `rotation`.
type RotationPolicy struct {
	MinIntervalDays   int `json:"min_interval_days"`   // at least this long between two rotations
	MaxPerWindow      int `json:"max_per_window"`      // at most this many rotations ...
	WindowDays        int `json:"window_days"`         // ... in any window of this many days
	RetiredCreditDays int `json:"retired_credit_days"` // a retired address credits this long
}

// DefaultRotationPolicy: one rotation a week, three a quarter, retired addresses credit for
// 30 days.
func DefaultRotationPolicy() RotationPolicy {
	return RotationPolicy{MinIntervalDays: 7, MaxPerWindow: 3, WindowDays: 90, RetiredCreditDays: 30}
}

func (p RotationPolicy) withDefaults() RotationPolicy {
	d := DefaultRotationPolicy()
	if p.MinIntervalDays <= 0 {
		p.MinIntervalDays = d.MinIntervalDays
	}
	if p.MaxPerWindow <= 0 {
		p.MaxPerWindow = d.MaxPerWindow
	}
	if p.WindowDays <= 0 {
		p.WindowDays = d.WindowDays
	}
	if p.RetiredCreditDays <= 0 {
		p.RetiredCreditDays = d.RetiredCreditDays
	}
	return p
}

const day = 24 * time.Hour

// Retired is a retired deposit address of an account.
type Retired struct {
	Address       tron.Address
	RetiredAt     time.Time
	CreditedUntil time.Time
}

// Retired lists the account's retired addresses, newest first.
func (s *Store) Retired(ctx context.Context, accountID string) ([]Retired, error) {
	rows, err := s.pool.Query(ctx, `SELECT address, retired_at, coalesce(credited_until, retired_at) FROM deposit_addresses
		WHERE account_id = $1 AND retired_at IS NOT NULL ORDER BY retired_at DESC, derivation_index DESC`, accountID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Retired, error) {
		var x Retired
		var a string
		if err := r.Scan(&a, &x.RetiredAt, &x.CreditedUntil); err != nil {
			return x, err
		}
		addr, err := tron.ParseAddress(a)
		x.Address = addr
		return x, err
	})
}

// Rotation is the outcome of Rotate.
type Rotation struct {
	Address       tron.Address
	Retired       tron.Address
	CreditedUntil time.Time
	RotatedAt     time.Time
}

// Rotate retires the account's current address (it keeps crediting for
// RetiredCreditDays) and issues the next one, emitting deposit_address.rotated and writing an
// audit row (actor, action deposit_address.rotate) in one transaction. The policy refuses
// rotations that come too soon or too often with 3018 deposit_rotation_limited, whose
// Retry-After and details.retry_after say when one is allowed again. An account without an
// address simply gets its first one.
func (s *Store) Rotate(ctx context.Context, accountID, actor, reason string, p RotationPolicy) (Rotation, error) {
	p = p.withDefaults()
	var out Rotation
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('deposit_address:' || $1, 0))`, accountID); err != nil {
			return err
		}
		now := s.o.Now().UTC()
		cur, ok, err := s.current(ctx, tx, accountID)
		if err != nil {
			return err
		}
		if !ok {
			a, err := s.issue(ctx, tx, accountID)
			if err != nil {
				return err
			}
			out = Rotation{Address: a, RotatedAt: now}
			return s.announce(ctx, tx, accountID, a, nil, nil)
		}
		var last *time.Time
		var inWindow int
		var oldest *time.Time
		err = tx.QueryRow(ctx, `SELECT max(retired_at), count(*) FILTER (WHERE retired_at > $2),
				min(retired_at) FILTER (WHERE retired_at > $2)
			FROM deposit_addresses WHERE account_id = $1 AND retired_at IS NOT NULL`,
			accountID, now.Add(-time.Duration(p.WindowDays)*day)).Scan(&last, &inWindow, &oldest)
		if err != nil {
			return err
		}
		if last != nil {
			if next := last.Add(time.Duration(p.MinIntervalDays) * day); now.Before(next) {
				return rotationLimited(next.Sub(now), fmt.Sprintf("the address was rotated at %s; the minimum interval is %d days",
					events.FormatTime(*last), p.MinIntervalDays))
			}
		}
		if inWindow >= p.MaxPerWindow && oldest != nil {
			next := oldest.Add(time.Duration(p.WindowDays) * day)
			return rotationLimited(next.Sub(now), fmt.Sprintf("%d rotations in the last %d days; at most %d are allowed",
				inWindow, p.WindowDays, p.MaxPerWindow))
		}
		until := now.Add(time.Duration(p.RetiredCreditDays) * day)
		if _, err := tx.Exec(ctx, `UPDATE deposit_addresses SET retired_at = $2, credited_until = $3
			WHERE account_id = $1 AND retired_at IS NULL`, accountID, now, until); err != nil {
			return err
		}
		a, err := s.issue(ctx, tx, accountID)
		if err != nil {
			return err
		}
		out = Rotation{Address: a, Retired: cur, CreditedUntil: until, RotatedAt: now}
		if err := s.announce(ctx, tx, accountID, a, &cur, &until); err != nil {
			return err
		}
		return accounts.WriteAudit(ctx, tx, accountID, actor, "deposit_address.rotate", map[string]any{
			"address": a.String(), "retired_address": cur.String(), "credited_until": events.FormatTime(until), "reason": reason,
		})
	})
	return out, err
}

func rotationLimited(wait time.Duration, msg string) error {
	secs := int((wait + time.Second - 1) / time.Second)
	return apierr.DepositRotationLimited.New(msg).With("retry_after", secs).WithRetryAfter(secs)
}

// announce writes deposit_address.rotated for a newly issued address when the store has a
// Network (see Options.Network).
func (s *Store) announce(ctx context.Context, tx pgx.Tx, accountID string, addr tron.Address, retired *tron.Address, until *time.Time) error {
	if s.o.Network == "" {
		return nil
	}
	d := events.DepositAddressRotated{Address: addr.String(), RotatedAt: events.Time(s.o.Now())}
	if retired != nil {
		r := retired.String()
		d.RetiredAddress = &r
	}
	if until != nil {
		u := events.Time(*until)
		d.RetiredCreditUntil = &u
	}
	env, err := events.New(events.EventDepositAddressRotated, accountID, s.o.Network, d)
	if err != nil {
		return err
	}
	return outbox.Insert(ctx, tx, env)
}

// AddressInfo is what crediting needs to know about a deposit address.
type AddressInfo struct {
	AccountID     string
	Index         uint32
	RetiredAt     *time.Time
	CreditedUntil *time.Time
}

// Querier reads rows: a pool or a transaction.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Lookup finds a deposit address (current or retired); ok is false when it is not one.
func Lookup(ctx context.Context, q Querier, address string) (AddressInfo, bool, error) {
	var x AddressInfo
	var idx int64
	err := q.QueryRow(ctx, `SELECT account_id, derivation_index, retired_at, credited_until FROM deposit_addresses WHERE address = $1`, address).
		Scan(&x.AccountID, &idx, &x.RetiredAt, &x.CreditedUntil)
	if errors.Is(err, pgx.ErrNoRows) {
		return AddressInfo{}, false, nil
	}
	x.Index = uint32(idx)
	return x, err == nil, err
}

// Credits reports whether a transfer at t to this address is credited automatically: always
// for the current address, until credited_until for a retired one.
func (x AddressInfo) Credits(t time.Time) bool {
	if x.RetiredAt == nil {
		return true
	}
	return x.CreditedUntil != nil && !t.After(*x.CreditedUntil)
}
