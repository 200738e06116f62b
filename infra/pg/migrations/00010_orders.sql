-- +goose Up
-- Orders (issue 6): the order record, its fills (which stake address or provider delivers
-- which part), and the signer journal. docs/orders.md explains the states and the flow.

-- One row per order. Money columns are SUN; unit_price_centi is hundredths of a SUN (the
-- API's two-decimal unit price). charged_amount_sun is what order creation held from the
-- balance (the synchronous charge); refunded_amount_sun what was given back since.
-- next_due_at is the processor's timer (confirmation deadline, expiry, retry), claimed with
-- FOR UPDATE SKIP LOCKED; null when nothing is scheduled.
CREATE TABLE orders (
    id                    text PRIMARY KEY,
    account_id            text NOT NULL REFERENCES accounts (id),
    network               text NOT NULL CHECK (network IN ('mainnet', 'nile')),
    test                  boolean NOT NULL DEFAULT false,
    client_order_id       text NOT NULL,
    batch_id              text,
    subscription_id       text,
    status                text NOT NULL CHECK (status IN ('created', 'paid', 'allocating', 'delegated', 'confirmed',
                                                          'active', 'expired', 'reclaimed', 'failed', 'refunded')),
    resource              text NOT NULL CHECK (resource IN ('energy', 'bandwidth', 'activation')),
    amount                bigint NOT NULL CHECK (amount >= 0),
    delivered_amount      bigint NOT NULL DEFAULT 0 CHECK (delivered_amount >= 0),
    partial               boolean NOT NULL DEFAULT false,
    tier                  text,
    duration_seconds      integer,
    receiver              text NOT NULL,
    activate              boolean NOT NULL DEFAULT false,
    unit_price_centi      bigint NOT NULL CHECK (unit_price_centi >= 0),
    energy_amount_sun     bigint NOT NULL CHECK (energy_amount_sun >= 0),
    activation_amount_sun bigint NOT NULL DEFAULT 0 CHECK (activation_amount_sun >= 0),
    total_amount_sun      bigint NOT NULL CHECK (total_amount_sun >= 0),
    charged_amount_sun    bigint NOT NULL CHECK (charged_amount_sun >= 0),
    refunded_amount_sun   bigint NOT NULL DEFAULT 0 CHECK (refunded_amount_sun >= 0 AND refunded_amount_sun <= charged_amount_sun),
    activation_performed  boolean NOT NULL DEFAULT false,
    activation_hash       text,
    delegate_hashes       text[] NOT NULL DEFAULT '{}',
    delegated_at          timestamptz,
    expires_at            timestamptz,
    ended_at              timestamptz,
    failure               jsonb,
    filled_by             text,
    quote_id              text,
    max_price_sun         bigint,
    reclaim_requested_at  timestamptz,
    reclaim_hash          text,
    refund_reason         text,
    next_due_at           timestamptz,
    attempts              integer NOT NULL DEFAULT 0,
    created_at            timestamptz NOT NULL DEFAULT now(),
    updated_at            timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX orders_account_created ON orders (account_id, created_at DESC, id DESC);
CREATE INDEX orders_account_client ON orders (account_id, client_order_id);
CREATE INDEX orders_due ON orders (next_due_at) WHERE next_due_at IS NOT NULL;
-- In-flight orders per account, for the concurrency limit (1101).
CREATE INDEX orders_in_flight ON orders (account_id) WHERE status IN ('created', 'paid', 'allocating', 'delegated');
-- Energy a receiver holds from live orders (the 5005 ceiling at creation).
CREATE INDEX orders_receiver_live ON orders (receiver)
    WHERE status IN ('created', 'paid', 'allocating', 'delegated', 'confirmed', 'active');
-- The last hour of orders (GET /v1/status delivery).
CREATE INDEX orders_created ON orders (created_at);
-- delivered_today of GET /v1/prices.
CREATE INDEX orders_delegated_at ON orders (delegated_at) WHERE delegated_at IS NOT NULL;

-- Fills: the parts of an order and who delivers them. source is 'pool' (own stake address
-- pool_address) or a provider slug. balance_sun is the staked TRX delegated for the part.
-- A fill counts against its pool's inventory while state is 'reserved' or 'broadcast'
-- (not yet visible on chain as a delegation): allocation subtracts those from the chain's
-- delegatable figure under the pool row's lock, so replicas never oversell a pool.
CREATE TABLE order_fills (
    order_id        text NOT NULL REFERENCES orders (id),
    seq             integer NOT NULL,
    source          text NOT NULL,
    pool_address    text,
    amount          bigint NOT NULL CHECK (amount > 0),
    balance_sun     bigint NOT NULL CHECK (balance_sun >= 0),
    state           text NOT NULL CHECK (state IN ('reserved', 'broadcast', 'landed', 'failed', 'returned')),
    delegate_txid   text,
    undelegate_txid text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (order_id, seq)
);
CREATE INDEX order_fills_in_flight ON order_fills (pool_address) WHERE state IN ('reserved', 'broadcast');

-- Own stake pools, one row per address: the row is the allocation lock.
CREATE TABLE stake_pools (
    address     text PRIMARY KEY,
    network     text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- The signer journal: every transaction is signed once, stored here, and only then
-- broadcast. After a crash the same bytes (same txid) are broadcast again, so a stage killed
-- at any point can neither delegate twice nor lose a delegation. purpose names the step;
-- (order_id, purpose, fill_seq, attempt) is unique, so a retried step finds its transaction.
-- A new attempt is signed only after the previous one is known failed or dropped (an
-- undelegation refused while the lock still runs); delegations are never re-signed.
CREATE TABLE signed_txs (
    txid        text PRIMARY KEY,
    order_id    text NOT NULL REFERENCES orders (id),
    purpose     text NOT NULL CHECK (purpose IN ('activate', 'delegate', 'undelegate')),
    fill_seq    integer NOT NULL DEFAULT -1,
    attempt     integer NOT NULL DEFAULT 0,
    signer      text NOT NULL,
    tx          jsonb NOT NULL,
    expiration  timestamptz NOT NULL,
    state       text NOT NULL CHECK (state IN ('signed', 'broadcast', 'landed', 'failed', 'dropped')),
    result      text,
    block_num   bigint,
    block_time  timestamptz,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT signed_txs_step UNIQUE (order_id, purpose, fill_seq, attempt)
);
CREATE INDEX signed_txs_order ON signed_txs (order_id);

-- +goose Down
DROP TABLE signed_txs;
DROP TABLE stake_pools;
DROP TABLE order_fills;
DROP TABLE orders;
