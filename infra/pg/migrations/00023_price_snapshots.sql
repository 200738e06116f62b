-- +goose Up
-- The pricer's latest snapshot of each network: the events.MarketData record it also writes
-- to Redis (the same bytes), so that the snapshot outlives a Redis loss (FLUSHALL, a restart
-- without persistence, an outage). Readers (pricecache.Source) fall back to this row when
-- Redis has no fresh snapshot and hold it in memory; a snapshot past valid_until is never
-- served. One writer, infra/pricestore; several pricers keep the newest (as_of).
CREATE TABLE price_snapshots (
    network     text PRIMARY KEY CHECK (network IN ('mainnet', 'nile')),
    as_of       timestamptz NOT NULL,
    valid_until timestamptz NOT NULL CHECK (valid_until > as_of),
    record      json NOT NULL,
    written_at  timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE price_snapshots;
