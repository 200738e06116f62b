package pricestore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"rental/schemas/network"
)

// SaveSnapshot stores record (the pricer's events.MarketData bytes) as net's latest snapshot
// (table price_snapshots, migration 00023) unless a newer one (as_of) is stored already:
// several pricers may write, and readers get the newest. One statement, one round trip per
// pricer cycle.
func (s *Store) SaveSnapshot(ctx context.Context, net network.Network, asOf, validUntil time.Time, record []byte) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO price_snapshots (network, as_of, valid_until, record)
	        VALUES ($1, $2, $3, $4)
	        ON CONFLICT (network) DO UPDATE SET as_of = EXCLUDED.as_of, valid_until = EXCLUDED.valid_until,
	            record = EXCLUDED.record, written_at = now()
	        WHERE price_snapshots.as_of < EXCLUDED.as_of`, string(net), asOf, validUntil, record)
	if err != nil {
		return fmt.Errorf("pricestore: save snapshot: %w", err)
	}
	return nil
}

// LatestSnapshot returns the record of net's latest stored snapshot, nil when there is none.
// It may be past its valid_until: the reader decides (pricing.Snapshot.ValidUntil).
func (s *Store) LatestSnapshot(ctx context.Context, net network.Network) ([]byte, error) {
	var b []byte
	err := s.pool.QueryRow(ctx, `SELECT record FROM price_snapshots WHERE network = $1`, string(net)).Scan(&b)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("pricestore: read snapshot: %w", err)
	}
	return b, nil
}
