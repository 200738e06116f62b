-- +goose Up
-- chainwatch state next to chain_cursor (00001). All of it is written in the same transaction
-- as the outbox rows of the facts it announces, so the cursor, the window and Kafka agree.

-- The recent-block window: the ids of the last N blocks read, so a fork can be traced back
-- to the common ancestor by comparing the node's blocks with what was read before. Pruned
-- to the configured window size on every advance.
CREATE TABLE chain_blocks (
    block_num   bigint PRIMARY KEY,
    block_id    text NOT NULL,
    parent_id   text NOT NULL,
    block_time  timestamptz NOT NULL
);

-- Facts emitted per block of the window. When a block is orphaned its facts are read from
-- here, a revert fact is emitted for each, and the rows are deleted in the same transaction:
-- a fact is reverted at most once. Pruned together with chain_blocks.
CREATE TABLE chain_block_facts (
    block_num   bigint NOT NULL REFERENCES chain_blocks (block_num) ON DELETE CASCADE,
    seq         int NOT NULL,       -- emission order inside the block; reverts go backwards
    fact_id     text NOT NULL UNIQUE,
    fact        jsonb NOT NULL,     -- the emitted events.ChainFact
    PRIMARY KEY (block_num, seq)
);

-- Transaction ids whose result chainwatch reports as tx_result facts. Processors register
-- an id in the same transaction that records their intent to broadcast it, before the
-- broadcast, so a landing transaction is never missed.
CREATE TABLE chain_tracked_tx (
    tx_id       text PRIMARY KEY CHECK (tx_id ~ '^[0-9a-f]{64}$'),
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE chain_tracked_tx;
DROP TABLE chain_block_facts;
DROP TABLE chain_blocks;
