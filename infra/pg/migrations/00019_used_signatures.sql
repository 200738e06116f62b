-- +goose Up
-- Signatures of signed writes already used (1009), kept in Postgres so that losing Redis
-- (FLUSHALL, a restart without persistence) does not reopen the replay window. A row lives
-- as long as its signature's timestamp could pass the skew check; expired rows are swept.
CREATE TABLE used_signatures (
    key_id     text        NOT NULL,
    sig        bytea       NOT NULL,
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (key_id, sig)
);
CREATE INDEX used_signatures_expiry ON used_signatures (expires_at);

-- +goose Down
DROP TABLE used_signatures;
