// Package pricestore keeps the price model (schemas/pricing.Model) in Postgres, one per
// network, in the tables of migration 00006_pricing.sql, and the pricer's latest snapshot
// (price_snapshots, 00023; snapshot.go). The pricer loads the model every cycle, so
// an operator's change is in force from the next snapshot on, without a deploy. Operators
// change it with the pricer binary's admin commands (processors/cmd/pricer: show, set-price,
// pause, ...) which call the methods below, or with plain SQL (docs/pricing.md); every change
// bumps price_model.revision.
//
// Every mutation runs in one transaction that reloads the whole model and validates it before
// committing, so an edit that would leave an invalid model (a gap in the schedule, a volume
// step raising the price) is refused and nothing changes.
package pricestore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"rental/schemas/network"
	"rental/schemas/pricing"
)

// ErrNotFound is returned when the network has no model, or an edit names a row or day part
// that does not exist.
var ErrNotFound = errors.New("pricestore: not found")

// Store reads and edits price models.
type Store struct {
	pool *pgxpool.Pool
}

// New returns a store over pool.
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Load reads the model of net in one repeatable-read snapshot, so the rows read belong to a
// single revision. The model is returned as stored; callers validate it (pricing.Build does).
func (s *Store) Load(ctx context.Context, net network.Network) (pricing.Model, error) {
	var m pricing.Model
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var err error
		m, err = load(ctx, tx, net)
		return err
	})
	return m, err
}

func load(ctx context.Context, q querier, net network.Network) (pricing.Model, error) {
	m := pricing.Model{Network: net}
	var validMS int64
	var pay []byte
	err := q.QueryRow(ctx, `SELECT revision, activation_price_sun, activation_paused, market_markup_bps,
	        deep_markup_bps, valid_for_ms, payment_addresses FROM price_model WHERE network = $1`, string(net)).
		Scan(&m.Revision, &m.ActivationPriceSun, &m.ActivationPaused, &m.MarketMarkupBPS, &m.DeepMarkupBPS, &validMS, &pay)
	if errors.Is(err, pgx.ErrNoRows) {
		return m, fmt.Errorf("%w: no price model for network %s", ErrNotFound, net)
	}
	if err != nil {
		return m, fmt.Errorf("pricestore: load model: %w", err)
	}
	m.ValidFor = time.Duration(validMS) * time.Millisecond
	if err := json.Unmarshal(pay, &m.PaymentAddresses); err != nil {
		return m, fmt.Errorf("pricestore: payment_addresses: %w", err)
	}

	rows, err := q.Query(ctx, `SELECT id, label, start_minute, end_minute, factor_bps FROM price_day_parts
	        WHERE network = $1 ORDER BY start_minute`, string(net))
	if err != nil {
		return m, fmt.Errorf("pricestore: load day parts: %w", err)
	}
	m.DayParts, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (pricing.DayPart, error) {
		var p pricing.DayPart
		err := r.Scan(&p.ID, &p.Label, &p.StartMinute, &p.EndMinute, &p.FactorBPS)
		return p, err
	})
	if err != nil {
		return m, fmt.Errorf("pricestore: load day parts: %w", err)
	}

	rows, err = q.Query(ctx, `SELECT resource, tier, base_price_centisun, min_amount, max_amount, enabled, paused,
	        follows_schedule FROM price_rows WHERE network = $1 ORDER BY resource, tier`, string(net))
	if err != nil {
		return m, fmt.Errorf("pricestore: load rows: %w", err)
	}
	m.Rows, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (pricing.Row, error) {
		var row pricing.Row
		var res, tier string
		var base int64
		err := r.Scan(&res, &tier, &base, &row.MinAmount, &row.MaxAmount, &row.Enabled, &row.Paused, &row.FollowsSchedule)
		row.Resource, row.Tier, row.BasePrice = pricing.Resource(res), pricing.Tier(tier), pricing.Centisun(base)
		return row, err
	})
	if err != nil {
		return m, fmt.Errorf("pricestore: load rows: %w", err)
	}

	rows, err = q.Query(ctx, `SELECT resource, tier, min_amount, price_centisun FROM price_volume_steps
	        WHERE network = $1 ORDER BY resource, tier, min_amount`, string(net))
	if err != nil {
		return m, fmt.Errorf("pricestore: load volume steps: %w", err)
	}
	type step struct {
		key pricing.BookKey
		pricing.VolumeStep
	}
	steps, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (step, error) {
		var s step
		var res, tier string
		var price int64
		err := r.Scan(&res, &tier, &s.MinAmount, &price)
		s.key, s.Price = pricing.BookKey{Resource: pricing.Resource(res), Tier: pricing.Tier(tier)}, pricing.Centisun(price)
		return s, err
	})
	if err != nil {
		return m, fmt.Errorf("pricestore: load volume steps: %w", err)
	}
	for _, s := range steps {
		for i := range m.Rows {
			if m.Rows[i].Key() == s.key {
				m.Rows[i].VolumeSteps = append(m.Rows[i].VolumeSteps, s.VolumeStep)
			}
		}
	}
	return m, nil
}

// edit runs fn in a transaction, then reloads and validates the model before committing.
// It returns the model as committed.
func (s *Store) edit(ctx context.Context, net network.Network, fn func(tx pgx.Tx) (int64, error)) (pricing.Model, error) {
	var m pricing.Model
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		// Serialize operator edits of one network so that two edits never validate against
		// each other's half-applied state.
		if _, err := tx.Exec(ctx, `SELECT 1 FROM price_model WHERE network = $1 FOR UPDATE`, string(net)); err != nil {
			return err
		}
		n, err := fn(tx)
		if err != nil {
			return err
		}
		if n == 0 {
			return ErrNotFound
		}
		if m, err = load(ctx, tx, net); err != nil {
			return err
		}
		if err := m.Validate(); err != nil {
			return fmt.Errorf("pricestore: edit refused: %w", err)
		}
		return nil
	})
	return m, err
}

func exec(ctx context.Context, tx pgx.Tx, sql string, args ...any) (int64, error) {
	tag, err := tx.Exec(ctx, sql, args...)
	if err != nil {
		return 0, fmt.Errorf("pricestore: %w", err)
	}
	return tag.RowsAffected(), nil
}

// SetBasePrice sets a row's price at factor 1.00.
func (s *Store) SetBasePrice(ctx context.Context, net network.Network, key pricing.BookKey, price pricing.Centisun) (pricing.Model, error) {
	return s.edit(ctx, net, func(tx pgx.Tx) (int64, error) {
		return exec(ctx, tx, `UPDATE price_rows SET base_price_centisun = $4 WHERE network = $1 AND resource = $2 AND tier = $3`,
			string(net), string(key.Resource), string(key.Tier), int64(price))
	})
}

// SetLimits sets a row's min_amount and max_amount.
func (s *Store) SetLimits(ctx context.Context, net network.Network, key pricing.BookKey, minAmount, maxAmount int64) (pricing.Model, error) {
	return s.edit(ctx, net, func(tx pgx.Tx) (int64, error) {
		return exec(ctx, tx, `UPDATE price_rows SET min_amount = $4, max_amount = $5 WHERE network = $1 AND resource = $2 AND tier = $3`,
			string(net), string(key.Resource), string(key.Tier), minAmount, maxAmount)
	})
}

// SetPaused pauses (5006, row omitted from the table) or resumes a row.
func (s *Store) SetPaused(ctx context.Context, net network.Network, key pricing.BookKey, paused bool) (pricing.Model, error) {
	return s.edit(ctx, net, func(tx pgx.Tx) (int64, error) {
		return exec(ctx, tx, `UPDATE price_rows SET paused = $4 WHERE network = $1 AND resource = $2 AND tier = $3`,
			string(net), string(key.Resource), string(key.Tier), paused)
	})
}

// SetEnabled switches a row on or off (off: listed unavailable, 2003).
func (s *Store) SetEnabled(ctx context.Context, net network.Network, key pricing.BookKey, enabled bool) (pricing.Model, error) {
	return s.edit(ctx, net, func(tx pgx.Tx) (int64, error) {
		return exec(ctx, tx, `UPDATE price_rows SET enabled = $4 WHERE network = $1 AND resource = $2 AND tier = $3`,
			string(net), string(key.Resource), string(key.Tier), enabled)
	})
}

// SetVolumeSteps replaces a row's volume steps.
func (s *Store) SetVolumeSteps(ctx context.Context, net network.Network, key pricing.BookKey, steps []pricing.VolumeStep) (pricing.Model, error) {
	return s.edit(ctx, net, func(tx pgx.Tx) (int64, error) {
		n, err := exec(ctx, tx, `SELECT 1 FROM price_rows WHERE network = $1 AND resource = $2 AND tier = $3`,
			string(net), string(key.Resource), string(key.Tier))
		if err != nil || n == 0 {
			return n, err
		}
		if _, err := exec(ctx, tx, `DELETE FROM price_volume_steps WHERE network = $1 AND resource = $2 AND tier = $3`,
			string(net), string(key.Resource), string(key.Tier)); err != nil {
			return 0, err
		}
		for _, v := range steps {
			if _, err := exec(ctx, tx, `INSERT INTO price_volume_steps (network, resource, tier, min_amount, price_centisun)
			        VALUES ($1, $2, $3, $4, $5)`, string(net), string(key.Resource), string(key.Tier), v.MinAmount, int64(v.Price)); err != nil {
				return 0, err
			}
		}
		return 1, nil
	})
}

// SetFactor sets a day part's factor in basis points.
func (s *Store) SetFactor(ctx context.Context, net network.Network, dayPart string, factorBPS int64) (pricing.Model, error) {
	return s.edit(ctx, net, func(tx pgx.Tx) (int64, error) {
		return exec(ctx, tx, `UPDATE price_day_parts SET factor_bps = $3 WHERE network = $1 AND id = $2`, string(net), dayPart, factorBPS)
	})
}

// SetSchedule replaces the whole day-part schedule (it must cover the day).
func (s *Store) SetSchedule(ctx context.Context, net network.Network, parts []pricing.DayPart) (pricing.Model, error) {
	return s.edit(ctx, net, func(tx pgx.Tx) (int64, error) {
		if _, err := exec(ctx, tx, `DELETE FROM price_day_parts WHERE network = $1`, string(net)); err != nil {
			return 0, err
		}
		for _, p := range parts {
			if _, err := exec(ctx, tx, `INSERT INTO price_day_parts (network, id, label, start_minute, end_minute, factor_bps)
			        VALUES ($1, $2, $3, $4, $5, $6)`, string(net), p.ID, p.Label, p.StartMinute, p.EndMinute, p.FactorBPS); err != nil {
				return 0, err
			}
		}
		return 1, nil
	})
}

// SetActivation sets the activation price and whether activation sales are paused.
func (s *Store) SetActivation(ctx context.Context, net network.Network, priceSun int64, paused bool) (pricing.Model, error) {
	return s.edit(ctx, net, func(tx pgx.Tx) (int64, error) {
		return exec(ctx, tx, `UPDATE price_model SET activation_price_sun = $2, activation_paused = $3 WHERE network = $1`,
			string(net), priceSun, paused)
	})
}

// SetMarkups sets the margins on market and deep supply, in basis points.
func (s *Store) SetMarkups(ctx context.Context, net network.Network, marketBPS, deepBPS int64) (pricing.Model, error) {
	return s.edit(ctx, net, func(tx pgx.Tx) (int64, error) {
		return exec(ctx, tx, `UPDATE price_model SET market_markup_bps = $2, deep_markup_bps = $3 WHERE network = $1`,
			string(net), marketBPS, deepBPS)
	})
}

// SetPaymentAddresses replaces the table's payment_addresses object.
func (s *Store) SetPaymentAddresses(ctx context.Context, net network.Network, addrs map[string]string) (pricing.Model, error) {
	if addrs == nil {
		addrs = map[string]string{}
	}
	b, err := json.Marshal(addrs)
	if err != nil {
		return pricing.Model{}, err
	}
	return s.edit(ctx, net, func(tx pgx.Tx) (int64, error) {
		return exec(ctx, tx, `UPDATE price_model SET payment_addresses = $2 WHERE network = $1`, string(net), b)
	})
}
