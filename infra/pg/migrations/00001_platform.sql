-- +goose Up
-- Chain follower cursor: one row per follower name. The block hash lets a restart detect a
-- fork that happened while the follower was down.
CREATE TABLE chain_cursor (
    name        text PRIMARY KEY,
    block_num   bigint NOT NULL,
    block_hash  text NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE chain_cursor;
