-- +goose Up
-- The market board (GET /v1/market, docs/market.md), owned by infra/marketstore.
--
-- market_providers is operator data: who each provider on the board is (name, kinds, links).
-- Operators edit it with `admin market-provider`; the sampler adds a row with defaults
-- (name = slug) the first time it samples a configured feed, so a new feed shows at once.
CREATE TABLE market_providers (
    network    text NOT NULL CHECK (network IN ('mainnet', 'nile')),
    slug       text NOT NULL CHECK (slug ~ '^[a-z0-9][a-z0-9_-]{0,39}$'),
    name       text NOT NULL CHECK (name <> ''),
    kinds      text[] NOT NULL DEFAULT '{}' CHECK (kinds <@ ARRAY['api', 'bot', 'pool', 'market', 'web']),
    links      jsonb NOT NULL DEFAULT '{}'::jsonb CHECK (jsonb_typeof(links) = 'object'),
    enabled    boolean NOT NULL DEFAULT true,
    updated_by text NOT NULL DEFAULT 'sampler',
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (network, slug)
);

-- One row per provider and sampling slot (ts truncated to the 5-minute period, as a
-- number): a second sampler replica's sample of the same slot is dropped, not doubled.
-- Prices are per energy unit for the whole rental in centisun (hundredths of a SUN); NULL is
-- "not offered". Pruned after the retention (30 days) by the sampler.
CREATE TABLE market_samples (
    network          text NOT NULL CHECK (network IN ('mainnet', 'nile')),
    slug             text NOT NULL,
    slot             bigint NOT NULL,
    ts               timestamptz NOT NULL,
    price_centi_1h   bigint CHECK (price_centi_1h >= 0),
    price_centi_1d   bigint CHECK (price_centi_1d >= 0),
    available_energy bigint CHECK (available_energy >= 0),
    total_energy     bigint CHECK (total_energy >= 0),
    PRIMARY KEY (network, slug, slot)
);
-- History reads and "latest per provider" walk (network, slug, ts DESC); pruning uses ts.
CREATE INDEX market_samples_slug_ts ON market_samples (network, slug, ts DESC);
CREATE INDEX market_samples_ts ON market_samples (ts);

-- +goose Down
DROP TABLE market_samples;
DROP TABLE market_providers;
