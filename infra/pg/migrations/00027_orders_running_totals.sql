-- +goose Up
-- Two sums that used to read every order they cover, kept as running totals instead (both
-- owned by orderstore):
--
-- receiver_live_energy: the energy of a receiver's energy orders in a live status
-- (created, paid, allocating, delegated, confirmed, active), whatever their expiry. The 5005
-- ceiling at acceptance reads it and subtracts the orders past expires_at that are still in
-- a live status (the few between expiry and the processor ending them, found through
-- orders_receiver_expiry, migration 00028). Summing the live orders instead cost a read
-- per live order of the receiver on every acceptance: hundreds a receiver under 1 h
-- rentals, thousands for a receiver rented to all day. The triggers keep it for every
-- writer of orders, so that no code path (nor an older binary during a rollout) can forget
-- it; only a change of liveness runs one, so the updates of marks and confirmations stay as
-- cheap as they were.
CREATE TABLE receiver_live_energy (
    receiver text PRIMARY KEY,
    energy   bigint NOT NULL
);

-- +goose StatementBegin
CREATE FUNCTION orders_add_receiver_energy() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- In receiver order, as acceptance takes the receivers' locks: two statements adding to
    -- the same receivers queue instead of deadlocking.
    INSERT INTO receiver_live_energy AS t (receiver, energy)
    SELECT receiver, sum(amount) FROM added_orders
    WHERE resource = 'energy' AND status IN ('created', 'paid', 'allocating', 'delegated', 'confirmed', 'active')
    GROUP BY receiver ORDER BY receiver
    ON CONFLICT (receiver) DO UPDATE SET energy = t.energy + excluded.energy;
    RETURN NULL;
END $$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE FUNCTION order_moves_receiver_energy() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND NEW.status IN ('created', 'paid', 'allocating', 'delegated', 'confirmed', 'active') THEN
        INSERT INTO receiver_live_energy AS t (receiver, energy) VALUES (NEW.receiver, NEW.amount)
        ON CONFLICT (receiver) DO UPDATE SET energy = t.energy + excluded.energy;
    ELSE
        UPDATE receiver_live_energy SET energy = energy - OLD.amount WHERE receiver = OLD.receiver;
    END IF;
    RETURN NULL;
END $$;
-- +goose StatementEnd
-- Inserts: once a statement (acceptance inserts a group's orders in one).
CREATE TRIGGER orders_add_receiver_energy AFTER INSERT ON orders
    REFERENCING NEW TABLE AS added_orders FOR EACH STATEMENT EXECUTE FUNCTION orders_add_receiver_energy();
-- Updates and deletes: only an energy order entering or leaving the live statuses runs the
-- function (an order's receiver, resource and amount never change).
CREATE TRIGGER order_moves_receiver_energy AFTER UPDATE OF status ON orders FOR EACH ROW
    WHEN (NEW.resource = 'energy'
          AND (OLD.status IN ('created', 'paid', 'allocating', 'delegated', 'confirmed', 'active'))
              <> (NEW.status IN ('created', 'paid', 'allocating', 'delegated', 'confirmed', 'active')))
    EXECUTE FUNCTION order_moves_receiver_energy();
CREATE TRIGGER order_removes_receiver_energy AFTER DELETE ON orders FOR EACH ROW
    WHEN (OLD.resource = 'energy' AND OLD.status IN ('created', 'paid', 'allocating', 'delegated', 'confirmed', 'active'))
    EXECUTE FUNCTION order_moves_receiver_energy();
-- Both tables are filled after the triggers exist, in the same transaction: CREATE TRIGGER
-- holds off every write to orders until the commit, so no order is counted twice or missed.
INSERT INTO receiver_live_energy (receiver, energy)
SELECT receiver, sum(amount) FROM orders
WHERE resource = 'energy' AND status IN ('created', 'paid', 'allocating', 'delegated', 'confirmed', 'active')
GROUP BY receiver;

-- energy_delivered_days: delivered_today of GET /v1/prices, the energy delivered per UTC day
-- of delegation (orders.delegated_at), kept by the confirmation's statement
-- (orderstore.ConfirmMany, the only writer of delegated_at and delivered_amount). Summing
-- the orders delegated since midnight cost a read per order of the day, every second, on
-- every pricer. A day has one row per shard, the shard picked by the writing connection,
-- so that concurrent confirmations do not queue on one row.
CREATE TABLE energy_delivered_days (
    network text NOT NULL,
    day     date NOT NULL,
    shard   int NOT NULL,
    energy  bigint NOT NULL,
    PRIMARY KEY (network, day, shard)
);
INSERT INTO energy_delivered_days (network, day, shard, energy)
SELECT network, (delegated_at AT TIME ZONE 'UTC')::date, 0, sum(coalesce(delivered_amount, 0)) FROM orders
WHERE resource = 'energy' AND delegated_at IS NOT NULL
GROUP BY 1, 2;

-- +goose Down
DROP TABLE energy_delivered_days;
DROP TRIGGER order_removes_receiver_energy ON orders;
DROP TRIGGER order_moves_receiver_energy ON orders;
DROP TRIGGER orders_add_receiver_energy ON orders;
DROP FUNCTION order_moves_receiver_energy();
DROP FUNCTION orders_add_receiver_energy();
DROP TABLE receiver_live_energy;
