-- +goose Up
-- Transactional outbox: a state change and the event announcing it commit in the same
-- transaction; the relay (infra/outbox) publishes rows to Kafka afterwards.
--
-- shard spreads keys over 16 lanes (infra/outbox.Shards). All rows of one key share a shard,
-- and a shard is published by one relay at a time in id order, which keeps per-key order
-- with several relay replicas. Changing the shard count requires a drained outbox.
CREATE TABLE outbox (
    id           bigserial PRIMARY KEY,
    topic        text NOT NULL,
    key          text NOT NULL CHECK (key <> ''),
    value        bytea NOT NULL,
    headers      jsonb NOT NULL DEFAULT '{}'::jsonb,
    shard        smallint NOT NULL GENERATED ALWAYS AS ((hashtext(key) & 15)::smallint) STORED,
    created_at   timestamptz NOT NULL DEFAULT now(),
    published_at timestamptz
);

-- The relay's query: unpublished rows of one shard in id order.
CREATE INDEX outbox_pending ON outbox (shard, id) WHERE published_at IS NULL;
-- The pruner's query: published rows older than the retention.
CREATE INDEX outbox_published ON outbox (published_at) WHERE published_at IS NOT NULL;

-- +goose Down
DROP TABLE outbox;
