-- +goose Up
-- A deposit address that only ever received USDT has no account on chain (a TRC-20
-- transfer does not create one); the sweeper's pool creates it (kind activate, amount 1)
-- before it can delegate energy to it or send from it.
ALTER TABLE sweeps DROP CONSTRAINT sweeps_kind_check;
ALTER TABLE sweeps ADD CONSTRAINT sweeps_kind_check CHECK (kind IN ('trx', 'usdt', 'delegate', 'undelegate', 'activate'));

-- +goose Down
DELETE FROM sweeps WHERE kind = 'activate';
ALTER TABLE sweeps DROP CONSTRAINT sweeps_kind_check;
ALTER TABLE sweeps ADD CONSTRAINT sweeps_kind_check CHECK (kind IN ('trx', 'usdt', 'delegate', 'undelegate'));
