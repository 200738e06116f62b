-- +goose NO TRANSACTION
-- +goose Up
-- The signer journal's metrics read the unsettled entries every few seconds on every
-- order processor replica; this partial index keeps that read to the few rows in flight
-- instead of the whole journal. Built concurrently: signed_txs is written by every order.
CREATE INDEX CONCURRENTLY IF NOT EXISTS signed_txs_unsettled ON signed_txs (state, created_at)
    WHERE state IN ('signed', 'broadcast');

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS signed_txs_unsettled;
