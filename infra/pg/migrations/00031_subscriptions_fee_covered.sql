-- +goose Up
-- The plan fee level paid for the current billing day (docs/subscriptions.md "Changing
-- the reserve mid-day"): set to daily_fee_sun by each daily charge and by an upgrade's
-- charge, left alone by a downgrade, so raising the reserve again within the day costs
-- only what was not paid yet. NULL (rows billed before this column) reads as
-- daily_fee_sun. Nullable without a default: adding it rewrites nothing.
ALTER TABLE subscriptions ADD COLUMN fee_covered_sun bigint CHECK (fee_covered_sun >= 0);

-- +goose Down
ALTER TABLE subscriptions DROP COLUMN fee_covered_sun;
