-- +goose NO TRANSACTION
-- +goose Up
-- Two reads run every second or so on every replica: the backlog behind backpressure and
-- GET /v1/status (count and oldest of created, paid, allocating) and the pricer's orders not
-- allocated yet (created, paid). Without an index over those statuses both scanned the whole
-- orders table: about 30 ms each at 80,000 orders, growing with every order ever taken. This
-- partial index holds only the orders not delivered yet, so both reads cost what the backlog
-- holds. Built concurrently: orders is written by every request.
CREATE INDEX CONCURRENTLY IF NOT EXISTS orders_undelivered ON orders (network, created_at)
    WHERE status IN ('created', 'paid', 'allocating');

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS orders_undelivered;
