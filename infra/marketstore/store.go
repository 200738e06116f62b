// Package marketstore keeps the market board's data in Postgres (migration 00016_market.sql):
// provider metadata (operator data) and the price samples behind GET /v1/market and
// GET /v1/market/history. It is the only owner of market_providers and market_samples.
package marketstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"rental/infra/outbox"
	"rental/schemas/events"
	"rental/schemas/market"
	"rental/schemas/network"
	"rental/schemas/topics"
)

// ErrNotFound is an edit of a provider that does not exist.
var ErrNotFound = errors.New("marketstore: provider not found")

// Store reads and writes one network's market data.
type Store struct {
	pool *pgxpool.Pool
	net  network.Network
}

// New returns the store of network n over pool.
func New(pool *pgxpool.Pool, n network.Network) *Store { return &Store{pool: pool, net: n} }

// ---- providers ----

func scanProvider(r pgx.Row) (market.Provider, error) {
	var p market.Provider
	var kinds []string
	var links []byte
	if err := r.Scan(&p.Slug, &p.Name, &kinds, &links, &p.Enabled); err != nil {
		return p, err
	}
	p.Kinds = make([]market.Kind, 0, len(kinds))
	for _, k := range kinds {
		p.Kinds = append(p.Kinds, market.Kind(k))
	}
	if err := json.Unmarshal(links, &p.Links); err != nil {
		return p, fmt.Errorf("marketstore: links of %s: %w", p.Slug, err)
	}
	return p, nil
}

const providerCols = `slug, name, kinds, links, enabled`

// Providers lists every provider of the network (enabled or not), by slug.
func (s *Store) Providers(ctx context.Context) ([]market.Provider, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+providerCols+` FROM market_providers WHERE network = $1 ORDER BY slug`, s.net)
	if err != nil {
		return nil, fmt.Errorf("marketstore: providers: %w", err)
	}
	defer rows.Close()
	var out []market.Provider
	for rows.Next() {
		p, err := scanProvider(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// Provider reads one provider.
func (s *Store) Provider(ctx context.Context, slug string) (market.Provider, error) {
	p, err := scanProvider(s.pool.QueryRow(ctx, `SELECT `+providerCols+` FROM market_providers WHERE network = $1 AND slug = $2`, s.net, slug))
	if errors.Is(err, pgx.ErrNoRows) {
		return p, ErrNotFound
	}
	return p, err
}

// PutProvider creates or replaces a provider's metadata; by names who did it (recorded in
// updated_by).
func (s *Store) PutProvider(ctx context.Context, p market.Provider, by string) error {
	if err := market.ValidSlug(p.Slug); err != nil {
		return err
	}
	if p.Name == "" {
		return errors.New("marketstore: a provider needs a name")
	}
	kinds := make([]string, 0, len(p.Kinds))
	for _, k := range p.Kinds {
		if _, err := market.ParseKind(string(k)); err != nil {
			return err
		}
		kinds = append(kinds, string(k))
	}
	links, err := json.Marshal(p.Links)
	if err != nil {
		return err
	}
	_, err = s.pool.Exec(ctx, `INSERT INTO market_providers (network, slug, name, kinds, links, enabled, updated_by)
		VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT (network, slug) DO UPDATE SET name = $3, kinds = $4, links = $5, enabled = $6, updated_by = $7, updated_at = now()`,
		s.net, p.Slug, p.Name, kinds, links, p.Enabled, by)
	if err != nil {
		return fmt.Errorf("marketstore: put provider %s: %w", p.Slug, err)
	}
	return nil
}

// DeleteProvider removes a provider's metadata (its samples stay until pruned).
func (s *Store) DeleteProvider(ctx context.Context, slug string) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM market_providers WHERE network = $1 AND slug = $2`, s.net, slug)
	if err != nil {
		return fmt.Errorf("marketstore: delete provider %s: %w", slug, err)
	}
	if tag.RowsAffected() == 0 {
		return ErrNotFound
	}
	return nil
}

// EnsureProvider adds a provider with default metadata (name = slug, kinds) unless it
// exists; an operator's edits are never overwritten.
func (s *Store) EnsureProvider(ctx context.Context, slug string, kinds []market.Kind) error {
	ks := make([]string, 0, len(kinds))
	for _, k := range kinds {
		ks = append(ks, string(k))
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO market_providers (network, slug, name, kinds) VALUES ($1, $2, $2, $3)
		ON CONFLICT (network, slug) DO NOTHING`, s.net, slug, ks)
	if err != nil {
		return fmt.Errorf("marketstore: ensure provider %s: %w", slug, err)
	}
	return nil
}

// ---- samples ----

func centi(p *events.Centisun) *int64 {
	if p == nil {
		return nil
	}
	v := int64(*p)
	return &v
}

func fromCenti(v *int64) *events.Centisun {
	if v == nil {
		return nil
	}
	c := events.Centisun(*v)
	return &c
}

// AddSample stores s in its sampling slot (market.Slot of its ts with every) and, in the
// same transaction, queues its record for topics.MarketSamples. stored is false when the
// slot already held a sample of that provider (another sampler replica was first): nothing
// is written then.
func (s *Store) AddSample(ctx context.Context, smp market.Sample, every time.Duration) (stored bool, err error) {
	if err := market.ValidSlug(smp.Slug); err != nil {
		return false, err
	}
	slot := market.Slot(smp.TS, every)
	ts := smp.TS.UTC().Truncate(time.Millisecond)
	rec, err := json.Marshal(events.MarketSample{
		SampleID: events.MarketSampleID(s.net, smp.Slug, slot), Network: s.net, Slug: smp.Slug, TS: events.Time(ts),
		PriceSun1h: smp.PriceSun1h, PriceSun1d: smp.PriceSun1d, AvailableEnergy: smp.AvailableEnergy, TotalEnergy: smp.TotalEnergy,
	})
	if err != nil {
		return false, err
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO market_samples
			(network, slug, slot, ts, price_centi_1h, price_centi_1d, available_energy, total_energy)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT DO NOTHING`,
			s.net, smp.Slug, slot, ts, centi(smp.PriceSun1h), centi(smp.PriceSun1d), smp.AvailableEnergy, smp.TotalEnergy)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return nil
		}
		stored = true
		return outbox.InsertRecord(ctx, tx, topics.MarketSamples, smp.Slug, rec,
			map[string]string{outbox.HeaderEventID: events.MarketSampleID(s.net, smp.Slug, slot)})
	})
	if err != nil {
		return false, fmt.Errorf("marketstore: add sample of %s: %w", smp.Slug, err)
	}
	return stored, nil
}

const sampleCols = `slug, ts, price_centi_1h, price_centi_1d, available_energy, total_energy`

func scanSample(r pgx.Row) (market.Sample, error) {
	var m market.Sample
	var p1h, p1d *int64
	if err := r.Scan(&m.Slug, &m.TS, &p1h, &p1d, &m.AvailableEnergy, &m.TotalEnergy); err != nil {
		return m, err
	}
	m.TS = m.TS.UTC()
	m.PriceSun1h, m.PriceSun1d = fromCenti(p1h), fromCenti(p1d)
	return m, nil
}

// Latest returns the newest sample of every provider that has one.
func (s *Store) Latest(ctx context.Context) (map[string]market.Sample, error) {
	rows, err := s.pool.Query(ctx, `SELECT DISTINCT ON (slug) `+sampleCols+`
		FROM market_samples WHERE network = $1 ORDER BY slug, ts DESC`, s.net)
	if err != nil {
		return nil, fmt.Errorf("marketstore: latest samples: %w", err)
	}
	defer rows.Close()
	out := map[string]market.Sample{}
	for rows.Next() {
		m, err := scanSample(rows)
		if err != nil {
			return nil, err
		}
		out[m.Slug] = m
	}
	return out, rows.Err()
}

// History returns slug's samples taken after since, oldest first (none for an unknown
// slug).
func (s *Store) History(ctx context.Context, slug string, since time.Time) ([]market.Sample, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+sampleCols+` FROM market_samples
		WHERE network = $1 AND slug = $2 AND ts > $3 ORDER BY ts`, s.net, slug, since.UTC())
	if err != nil {
		return nil, fmt.Errorf("marketstore: history of %s: %w", slug, err)
	}
	defer rows.Close()
	out := []market.Sample{}
	for rows.Next() {
		m, err := scanSample(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

// Prune deletes the samples taken before before, at most 10,000 per statement so a long
// backlog does not hold one long transaction; it returns how many went.
func (s *Store) Prune(ctx context.Context, before time.Time) (int64, error) {
	var total int64
	for {
		tag, err := s.pool.Exec(ctx, `DELETE FROM market_samples WHERE ctid IN (
			SELECT ctid FROM market_samples WHERE ts < $1 LIMIT 10000)`, before.UTC())
		if err != nil {
			return total, fmt.Errorf("marketstore: prune: %w", err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < 10000 {
			return total, nil
		}
	}
}
