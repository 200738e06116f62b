-- +goose Up
-- Batches (docs/batches.md): one order per receiver, placed asynchronously by the batch
-- processor (processors/batchflow), and one batch.completed once every receiver has a final
-- outcome.

-- One row per batch. open_receivers counts receivers without a final outcome; the
-- transaction that brings it to 0 (under this row's lock) gives the batch its final status
-- and writes batch.completed, guarded by status = 'processing', so the event is written once.
CREATE TABLE batches (
    id                 text PRIMARY KEY,
    account_id         text NOT NULL REFERENCES accounts (id),
    network            text NOT NULL CHECK (network IN ('mainnet', 'nile')),
    client_batch_id    text NOT NULL,
    status             text NOT NULL CHECK (status IN ('processing', 'completed', 'partial', 'failed', 'cancelled')),
    resource           text NOT NULL CHECK (resource IN ('energy', 'bandwidth')),
    tier               text NOT NULL,
    amount             bigint CHECK (amount > 0),
    activate           boolean NOT NULL DEFAULT false,
    max_price_sun      bigint CHECK (max_price_sun >= 0),
    total              integer NOT NULL CHECK (total BETWEEN 1 AND 100),
    open_receivers     integer NOT NULL CHECK (open_receivers >= 0 AND open_receivers <= total),
    charged_amount_sun bigint NOT NULL DEFAULT 0 CHECK (charged_amount_sun >= 0),
    created_at         timestamptz NOT NULL,
    updated_at         timestamptz NOT NULL,
    finished_at        timestamptz,
    CHECK ((status = 'processing') = (finished_at IS NULL))
);
CREATE INDEX batches_account_created ON batches (account_id, created_at DESC);
-- Open batches of an account (the 1101 limit at creation).
CREATE INDEX batches_open ON batches (account_id) WHERE status = 'processing';

-- One row per receiver, in the order of the request (idx from 0). state:
--   pending            waiting for the processor (due_at: when it may be picked up)
--   placed             its order (order_id) was placed and charged; waiting for the outcome
--   completed, partial its order was confirmed (partial: with the order's partial flag)
--   failed             refused at placement (error) or its order failed
--   insufficient_funds refused at placement with 4001 / 4002 (error keeps required/available)
--   cancelled          cancelled before pick-up
-- The pending rows are the batch's processing intent: they commit with the batch, and the
-- processor claims them with FOR UPDATE SKIP LOCKED.
CREATE TABLE batch_receivers (
    batch_id           text NOT NULL REFERENCES batches (id),
    idx                integer NOT NULL CHECK (idx >= 0),
    receiver           text NOT NULL,
    amount             bigint NOT NULL CHECK (amount > 0),
    activate           boolean NOT NULL,
    state              text NOT NULL CHECK (state IN ('pending', 'placed', 'completed', 'partial', 'failed',
                                                      'insufficient_funds', 'cancelled')),
    order_id           text UNIQUE REFERENCES orders (id),
    error              jsonb,
    due_at             timestamptz,
    attempts           integer NOT NULL DEFAULT 0,
    finished_at        timestamptz,
    updated_at         timestamptz NOT NULL,
    PRIMARY KEY (batch_id, idx),
    UNIQUE (batch_id, receiver),
    CHECK ((state = 'pending') = (due_at IS NOT NULL)),
    CHECK (state IN ('pending', 'placed') OR finished_at IS NOT NULL)
);
-- The processor's claim: pending receivers whose time has come.
CREATE INDEX batch_receivers_due ON batch_receivers (due_at) WHERE state = 'pending';
-- The outcome sweep: receivers whose order is still out.
CREATE INDEX batch_receivers_placed ON batch_receivers (batch_id) WHERE state = 'placed';

-- +goose Down
DROP TABLE batch_receivers;
DROP TABLE batches;
