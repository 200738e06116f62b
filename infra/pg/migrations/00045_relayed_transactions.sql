-- +goose Up
-- Relayed transactions (POST /v1/transactions, docs/orders.md "Relayed transactions"): an
-- energy order that carries a customer's signed smart-contract call, broadcast by the order
-- processor once the delegation is in a block. Owned by orderstore.
--
-- orders.transaction is the customer-visible object of the order record
-- ({txid, status, block, result, energy_used, energy_fee_sun}); null for every other order.
-- Adding a nullable column without a default rewrites nothing.
ALTER TABLE orders ADD COLUMN transaction jsonb;

-- The signed transaction as the customer sent it (broadcast unchanged) and what the
-- processor needs to follow it. txid is unique across accounts: one transaction is relayed
-- once. pending is true until the processor has nothing more to do for it (the result is
-- recorded and the reclaim requested, or the order refunded).
CREATE TABLE relayed_transactions (
    order_id        text PRIMARY KEY REFERENCES orders (id),
    account_id      text NOT NULL,
    txid            text NOT NULL UNIQUE,
    owner           text NOT NULL,
    signed          jsonb NOT NULL,
    expiration      timestamptz NOT NULL,
    energy_required bigint NOT NULL,
    pending         boolean NOT NULL DEFAULT true,
    broadcast_at    timestamptz,
    created_at      timestamptz NOT NULL
);
CREATE INDEX relayed_transactions_pending ON relayed_transactions (created_at) WHERE pending;

-- +goose Down
DROP TABLE relayed_transactions;
ALTER TABLE orders DROP COLUMN transaction;
