-- +goose Up
-- The price model, one per network, which operators change without a deploy: the pricer
-- stage reloads it every cycle (a few seconds). Prices are per unit for the whole rental in
-- centisun (hundredths of a SUN, fixed point) at day-part factor 1.00; see docs/pricing.md for
-- the rounding rules and for the operator commands (`pricer show`, `pricer set-price`, ...).
-- Plain SQL edits work too: every change bumps price_model.revision through the triggers
-- below, and an edit that breaks an invariant the SQL cannot express (a schedule with a gap)
-- is refused by the pricer, which keeps serving the last good model and logs the error.

CREATE TABLE price_model (
    network              text PRIMARY KEY CHECK (network IN ('mainnet', 'nile')),
    revision             bigint NOT NULL DEFAULT 1,
    activation_price_sun bigint NOT NULL CHECK (activation_price_sun >= 0),
    activation_paused    boolean NOT NULL DEFAULT false,
    -- Margins on resold supply: market providers and the deep reserve (10000 = +100 %).
    market_markup_bps    bigint NOT NULL DEFAULT 1500 CHECK (market_markup_bps >= 0),
    deep_markup_bps      bigint NOT NULL DEFAULT 1000 CHECK (deep_markup_bps >= 0),
    -- How long a snapshot may be served (valid_until = as_of + valid_for_ms).
    valid_for_ms         integer NOT NULL DEFAULT 10000 CHECK (valid_for_ms > 0),
    payment_addresses    jsonb NOT NULL DEFAULT '{}'::jsonb CHECK (jsonb_typeof(payment_addresses) = 'object'),
    updated_at           timestamptz NOT NULL DEFAULT now()
);

-- Day parts cover [0, 1440) minutes UTC without gap or overlap (checked by the pricer).
CREATE TABLE price_day_parts (
    network      text NOT NULL REFERENCES price_model (network) ON DELETE CASCADE,
    id           text NOT NULL CHECK (id <> ''),
    label        text NOT NULL,
    start_minute integer NOT NULL CHECK (start_minute >= 0 AND start_minute < 1440),
    end_minute   integer NOT NULL CHECK (end_minute > start_minute AND end_minute <= 1440),
    factor_bps   bigint NOT NULL CHECK (factor_bps > 0 AND factor_bps <= 100000),
    PRIMARY KEY (network, id),
    UNIQUE (network, start_minute)
);

-- One row per (resource, tier). Retired tiers (15m, 3d, 30d) can never have a row.
-- enabled = false: listed with available = false, orders refused with 2003.
-- paused = true: omitted from GET /v1/prices, orders refused with 5006.
CREATE TABLE price_rows (
    network             text NOT NULL REFERENCES price_model (network) ON DELETE CASCADE,
    resource            text NOT NULL CHECK (resource IN ('energy', 'bandwidth')),
    tier                text NOT NULL CHECK (tier IN ('5m', '1h', '1d')),
    base_price_centisun bigint NOT NULL CHECK (base_price_centisun > 0),
    min_amount          bigint NOT NULL CHECK (min_amount > 0),
    max_amount          bigint NOT NULL,
    enabled             boolean NOT NULL DEFAULT true,
    paused              boolean NOT NULL DEFAULT false,
    follows_schedule    boolean NOT NULL DEFAULT true,
    PRIMARY KEY (network, resource, tier),
    CHECK (max_amount >= min_amount)
);

-- Volume steps: the price at factor 1.00 for orders of at least min_amount (above the row's
-- min_amount, never raising the price; checked by the pricer).
CREATE TABLE price_volume_steps (
    network        text NOT NULL,
    resource       text NOT NULL,
    tier           text NOT NULL,
    min_amount     bigint NOT NULL CHECK (min_amount > 0),
    price_centisun bigint NOT NULL CHECK (price_centisun > 0),
    PRIMARY KEY (network, resource, tier, min_amount),
    FOREIGN KEY (network, resource, tier) REFERENCES price_rows (network, resource, tier) ON DELETE CASCADE
);

-- Every change bumps the model revision so that a snapshot names the model it came from.
-- +goose StatementBegin
CREATE FUNCTION price_model_bump() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_TABLE_NAME = 'price_model' THEN
        IF NEW.revision = OLD.revision THEN
            NEW.revision := OLD.revision + 1;
        END IF;
        NEW.updated_at := now();
        RETURN NEW;
    END IF;
    UPDATE price_model SET revision = revision + 1, updated_at = now()
     WHERE network = COALESCE(NEW.network, OLD.network);
    RETURN NULL;
END $$;
-- +goose StatementEnd

CREATE TRIGGER price_model_bump BEFORE UPDATE ON price_model
    FOR EACH ROW EXECUTE FUNCTION price_model_bump();
CREATE TRIGGER price_day_parts_bump AFTER INSERT OR UPDATE OR DELETE ON price_day_parts
    FOR EACH ROW EXECUTE FUNCTION price_model_bump();
CREATE TRIGGER price_rows_bump AFTER INSERT OR UPDATE OR DELETE ON price_rows
    FOR EACH ROW EXECUTE FUNCTION price_model_bump();
CREATE TRIGGER price_volume_steps_bump AFTER INSERT OR UPDATE OR DELETE ON price_volume_steps
    FOR EACH ROW EXECUTE FUNCTION price_model_bump();

-- Defaults (docs/pricing.md explains them). Activation 1.5 TRX: the chain charges 1 TRX for
-- creating an account plus the bandwidth of the transfer.
INSERT INTO price_model (network, activation_price_sun) VALUES ('mainnet', 1500000), ('nile', 1500000);

-- Day parts (UTC): night is cheapest, the Asian and European business day dearest.
INSERT INTO price_day_parts (network, id, label, start_minute, end_minute, factor_bps)
SELECT n, p.id, p.label, p.s, p.e, p.f
  FROM (VALUES ('mainnet'), ('nile')) AS nets (n),
       (VALUES ('night',   'Night',   0,    360,  8500),
               ('day',     'Day',     360,  720,  10000),
               ('peak',    'Peak',    720,  1080, 11000),
               ('evening', 'Evening', 1080, 1440, 9500)) AS p (id, label, s, e, f);

-- Rows: energy 1 h at 75 SUN per unit at factor 1.00, 5 m cheaper per unit (60 SUN), 1 d
-- present but switched off; bandwidth flat (no day-part factor). Nile has smaller maxima
-- (the testnet's one provider has a small fixed inventory).
INSERT INTO price_rows (network, resource, tier, base_price_centisun, min_amount, max_amount, enabled, follows_schedule)
SELECT n, r.res, r.tier, r.price, r.mn, CASE WHEN n = 'nile' THEN LEAST(r.mx, r.nile_mx) ELSE r.mx END, r.enabled, r.sched
  FROM (VALUES ('mainnet'), ('nile')) AS nets (n),
       (VALUES ('energy',    '5m', 6000::bigint,  32000::bigint, 5000000::bigint,  1000000::bigint, true,  true),
               ('energy',    '1h', 7500,          32000,         10000000,         1000000,         true,  true),
               ('energy',    '1d', 9000,          32000,         10000000,         1000000,         false, true),
               ('bandwidth', '5m', 30000,         1000,          1000000,          100000,          true,  false),
               ('bandwidth', '1h', 40000,         1000,          1000000,          100000,          true,  false),
               ('bandwidth', '1d', 60000,         1000,          1000000,          100000,          false, false))
       AS r (res, tier, price, mn, mx, nile_mx, enabled, sched);

-- Volume discounts on energy: 1 h 72 SUN from 500,000 and 69 SUN from 2,000,000 units;
-- 5 m 57 SUN from 1,000,000 units (only where the row's maximum allows the step).
INSERT INTO price_volume_steps (network, resource, tier, min_amount, price_centisun)
SELECT r.network, r.resource, r.tier, v.mn, v.price
  FROM price_rows r
  JOIN (VALUES ('energy', '1h', 500000::bigint, 7200::bigint),
               ('energy', '1h', 2000000,        6900),
               ('energy', '5m', 1000000,        5700)) AS v (res, tier, mn, price)
    ON r.resource = v.res AND r.tier = v.tier AND v.mn <= r.max_amount;

-- The seed is revision 1.
UPDATE price_model SET revision = 1 WHERE revision <> 1;

-- +goose Down
DROP TABLE price_volume_steps;
DROP TABLE price_rows;
DROP TABLE price_day_parts;
DROP TABLE price_model;
DROP FUNCTION price_model_bump();
