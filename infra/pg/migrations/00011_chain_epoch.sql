-- +goose Up
-- The follower's rewind count. Fact ids include it after the first fork, so a block that a
-- fork orphaned and a later fork brings back (A, then B, then A again) yields facts with
-- new ids: consumers deduplicate by fact id and would otherwise skip the returning block.
ALTER TABLE chain_cursor ADD COLUMN epoch bigint NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE chain_cursor DROP COLUMN epoch;
