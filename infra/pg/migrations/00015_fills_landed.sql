-- +goose Up
-- Allocation sums, under the stake pools' locks, the fills that landed after the chain's
-- figure was read (they are not in that figure yet). Without this index the sum reads every
-- fill of the pool ever made, and the lock is held for as long.
CREATE INDEX order_fills_landed ON order_fills (pool_address, updated_at) WHERE state = 'landed';

-- +goose Down
DROP INDEX order_fills_landed;
