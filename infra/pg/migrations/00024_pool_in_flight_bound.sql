-- +goose Up
-- in_flight_bound_sun is never less than the staked balance of the pool's fills reserved
-- or broadcast (the first part of what allocation counts in flight): every statement that
-- adds such a fill, or puts a fill into that set, raises it in the same transaction (the
-- triggers below, so that no code path can forget), and only fills leaving the set, which
-- do not touch it, make the sum smaller. Allocation reads it with the pool's lock instead of
-- summing the fills, which under load are tens of thousands of rows (a delegation stays
-- broadcast until its block is deep enough); when the bound is too tight for an order it
-- sums them and sets the bound to the exact figure (orderstore.ExactInFlight).
ALTER TABLE stake_pools ADD COLUMN in_flight_bound_sun bigint NOT NULL DEFAULT 0;
UPDATE stake_pools p SET in_flight_bound_sun = coalesce((SELECT sum(balance_sun) FROM order_fills f
    WHERE f.pool_address = p.address AND f.source = 'pool' AND f.state IN ('reserved', 'broadcast')), 0);

-- +goose StatementBegin
CREATE FUNCTION order_fills_raise_pool_bound() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE stake_pools p SET in_flight_bound_sun = p.in_flight_bound_sun + n.total
    FROM (SELECT pool_address, sum(balance_sun) AS total FROM new_fills
          WHERE source = 'pool' AND state IN ('reserved', 'broadcast') GROUP BY pool_address) n
    WHERE p.address = n.pool_address;
    RETURN NULL;
END $$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE FUNCTION order_fill_raise_pool_bound() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE stake_pools SET in_flight_bound_sun = in_flight_bound_sun + NEW.balance_sun WHERE address = NEW.pool_address;
    RETURN NULL;
END $$;
-- +goose StatementEnd
-- Inserts: once a statement (allocation inserts a group's fills in one).
CREATE TRIGGER order_fills_raise_pool_bound AFTER INSERT ON order_fills
    REFERENCING NEW TABLE AS new_fills FOR EACH STATEMENT EXECUTE FUNCTION order_fills_raise_pool_bound();
-- Updates: only a row that is in flight now and was not (or was with another pool or a
-- smaller balance) runs the function, by its whole balance (a bound may be loose); the
-- condition is checked without it, so the updates of every mark and confirmation stay as
-- cheap as they were.
CREATE TRIGGER order_fill_raise_pool_bound AFTER UPDATE ON order_fills FOR EACH ROW
    WHEN (NEW.source = 'pool' AND NEW.state IN ('reserved', 'broadcast')
          AND NOT (OLD.source = 'pool' AND OLD.state IN ('reserved', 'broadcast')
                   AND OLD.pool_address IS NOT DISTINCT FROM NEW.pool_address AND OLD.balance_sun >= NEW.balance_sun))
    EXECUTE FUNCTION order_fill_raise_pool_bound();

-- +goose Down
DROP TRIGGER order_fill_raise_pool_bound ON order_fills;
DROP TRIGGER order_fills_raise_pool_bound ON order_fills;
DROP FUNCTION order_fill_raise_pool_bound();
DROP FUNCTION order_fills_raise_pool_bound();
ALTER TABLE stake_pools DROP COLUMN in_flight_bound_sun;
