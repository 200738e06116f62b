-- +goose Up
-- Quotes (issue 5): a price locked for 120 seconds for one account (rental-api-v1 "Quote").
-- A quote locks the price, not stock. Rows are immutable once written; orders (issue 6)
-- read them with quotes.Store.GetValid, which refuses an expired one with 3005.
--
-- Money is integer SUN. unit_price_centisun is the volume-weighted unit price rounded half up
-- to hundredths of a SUN (the API renders it as a number with two decimals);
-- price_sun_per_unit is the unrounded price rounded up to a whole SUN (legacy clients), so
-- unit_price_centisun <= 100 x price_sun_per_unit <= unit_price_centisun + 100. fills is the
-- order-book walk as a JSON array of {price_centisun, amount, class}; empty when the whole
-- amount was priced at one uniform price.
CREATE TABLE quotes (
    id                   text PRIMARY KEY CHECK (id ~ '^q_[0-9a-f]{24}$'),
    account_id           text NOT NULL REFERENCES accounts (id),
    resource             text NOT NULL CHECK (resource IN ('energy', 'bandwidth', 'activation')),
    amount               bigint NOT NULL CHECK (amount > 0),
    -- null only for activation, to which a tier does not apply
    tier                 text CHECK (tier IN ('5m', '15m', '1h', '1d', '3d', '30d')),
    receiver             text CHECK (receiver ~ '^T[1-9A-HJ-NP-Za-km-z]{33}$'),
    price_sun_per_unit   bigint NOT NULL CHECK (price_sun_per_unit >= 0),
    unit_price_centisun  bigint NOT NULL CHECK (unit_price_centisun >= 0),
    fills                jsonb NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(fills) = 'array'),
    energy_amount_sun    bigint NOT NULL CHECK (energy_amount_sun >= 0),
    activate_amount_sun  bigint NOT NULL CHECK (activate_amount_sun >= 0),
    total_amount_sun     bigint NOT NULL,
    created_at           timestamptz NOT NULL,
    expires_at           timestamptz NOT NULL,
    CHECK ((resource = 'activation') = (tier IS NULL)),
    CHECK (total_amount_sun = energy_amount_sun + activate_amount_sun),
    -- both prices are roundings of one exact price: half up to 0.01, and up to 1
    CHECK (price_sun_per_unit * 100 BETWEEN unit_price_centisun AND unit_price_centisun + 100),
    CHECK (expires_at > created_at)
);
-- Lookups are by (id, account): the account condition is what makes another account's
-- quote invisible. Purging expired rows uses the expiry index.
CREATE INDEX quotes_account ON quotes (account_id, created_at DESC);
CREATE INDEX quotes_expires ON quotes (expires_at);

-- +goose Down
DROP TABLE quotes;
