-- +goose NO TRANSACTION
-- +goose Up
-- The 5005 ceiling reads a receiver's running total (receiver_live_energy, migration 00027)
-- less its live orders already past expires_at: this index finds those by receiver and
-- expiry, where orders_receiver_live (receiver only) read every live order of the
-- receiver. Built concurrently, then the old one dropped: orders is written by every
-- request.
CREATE INDEX CONCURRENTLY IF NOT EXISTS orders_receiver_expiry ON orders (receiver, expires_at)
    WHERE status IN ('created', 'paid', 'allocating', 'delegated', 'confirmed', 'active');
DROP INDEX CONCURRENTLY IF EXISTS orders_receiver_live;

-- +goose Down
CREATE INDEX CONCURRENTLY IF NOT EXISTS orders_receiver_live ON orders (receiver)
    WHERE status IN ('created', 'paid', 'allocating', 'delegated', 'confirmed', 'active');
DROP INDEX CONCURRENTLY IF EXISTS orders_receiver_expiry;
