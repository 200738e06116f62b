-- +goose Up
-- custody_problem is why no signer key may use the pool now (its delegate permission is
-- missing or changed on chain, infra/custody), NULL while one may. The order processor
-- writes it when it changes; the status endpoint shows delivery degraded while any pool of
-- the network has one.
ALTER TABLE stake_pools ADD COLUMN custody_problem text;

-- +goose Down
ALTER TABLE stake_pools DROP COLUMN custody_problem;
