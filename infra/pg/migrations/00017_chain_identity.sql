-- +goose Up
-- The chain a cursor belongs to: the genesis block id and the network, written by the
-- follower at its first start. A node of another chain (a mainnet node under NETWORK=nile,
-- a fresh simulator under an old database) is refused instead of followed. problem is the
-- follower's standing complaint about the node (another chain, or a cursor above the
-- node's head); GET /v1/status shows payments degraded while it is set.
ALTER TABLE chain_cursor
    ADD COLUMN genesis_id text,
    ADD COLUMN network    text,
    ADD COLUMN problem    text;

-- +goose Down
ALTER TABLE chain_cursor
    DROP COLUMN problem,
    DROP COLUMN network,
    DROP COLUMN genesis_id;
