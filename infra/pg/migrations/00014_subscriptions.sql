-- +goose Up
-- Subscriptions (auto-refill): the record, its history (SubscriptionEvent) and the
-- watcher's timer. docs/subscriptions.md explains the rules and the states.

-- One row per subscription, legacy or plan. Amounts are resource units; money is SUN.
-- refill_seq numbers the refills ever placed: the next refill's client_order_id is derived
-- from it, so a retried check can never place a refill twice. fee_seq numbers the daily
-- charges (hold refs subfee:<id>:<n>). next_check_at is the watcher's timer, claimed with
-- FOR UPDATE SKIP LOCKED.
CREATE TABLE subscriptions (
    id                  text PRIMARY KEY,
    account_id          text NOT NULL REFERENCES accounts (id),
    network             text NOT NULL CHECK (network IN ('mainnet', 'nile')),
    kind                text NOT NULL CHECK (kind IN ('legacy', 'plan')),
    receiver            text NOT NULL,
    resource            text NOT NULL CHECK (resource IN ('energy', 'bandwidth')),
    mode                text NOT NULL CHECK (mode IN ('refill', 'renewal')),
    tier                text NOT NULL,
    threshold_amount    bigint NOT NULL CHECK (threshold_amount >= 0),
    refill_amount       bigint NOT NULL CHECK (refill_amount > 0),
    max_price_sun       bigint CHECK (max_price_sun >= 0),
    max_refills_per_day integer CHECK (max_refills_per_day >= 1),
    daily_fee_sun       bigint NOT NULL DEFAULT 0 CHECK (daily_fee_sun >= 0),
    status              text NOT NULL CHECK (status IN ('active', 'paused', 'suspended', 'cancelled')),
    status_reason       text,
    suspended_required_sun bigint,
    label               text,
    last_refill_at      timestamptz,
    last_order_id       text,
    refills_today       integer NOT NULL DEFAULT 0,
    refills_day         date,
    refill_seq          bigint NOT NULL DEFAULT 0,
    preset              text,
    reserve             bigint,
    low                 bigint,
    high                bigint,
    fee_seq             bigint NOT NULL DEFAULT 0,
    next_billing_at     timestamptz,
    grace_until         timestamptz,
    next_check_at       timestamptz,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    cancelled_at        timestamptz,
    CHECK (kind = 'legacy' OR (resource = 'energy' AND reserve IS NOT NULL AND low IS NOT NULL AND high IS NOT NULL))
);
-- One live subscription per account, address and resource (3011); concurrent creations
-- meet on this index, so the rule holds without any lock.
CREATE UNIQUE INDEX subscriptions_live ON subscriptions (account_id, receiver, resource) WHERE status <> 'cancelled';
CREATE INDEX subscriptions_account_created ON subscriptions (account_id, created_at DESC, id DESC);
CREATE INDEX subscriptions_due ON subscriptions (next_check_at) WHERE next_check_at IS NOT NULL;
-- The refill orders of a subscription (in flight, delegated energy).
CREATE INDEX orders_subscription ON orders (subscription_id) WHERE subscription_id IS NOT NULL;

-- SubscriptionEvent: what happened to a subscription, newest read first. order_id links a
-- refill to its order, whose first delegation hash is the event's txid once delivered.
CREATE TABLE subscription_events (
    id              text PRIMARY KEY,
    subscription_id text NOT NULL REFERENCES subscriptions (id),
    kind            text NOT NULL CHECK (kind IN ('refill', 'charge', 'pause', 'resume', 'cancel', 'top_up_failed')),
    energy_delta    bigint,
    amount_sun      bigint,
    txid            text,
    order_id        text,
    ts              timestamptz NOT NULL,
    seq             bigserial
);
CREATE INDEX subscription_events_sub ON subscription_events (subscription_id, seq DESC);

-- +goose Down
DROP TABLE subscription_events;
DROP INDEX orders_subscription;
DROP TABLE subscriptions;
