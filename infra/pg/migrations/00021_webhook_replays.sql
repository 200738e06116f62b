-- +goose Up
-- Dead-lettered webhook deliveries an operator queued again (admin replay-webhooks): one
-- row per event, written in the same transaction as the queue row, so every dead letter is
-- replayed at most once however often the replay runs.
CREATE TABLE webhook_replays (
    event_id    text PRIMARY KEY,
    account_id  text NOT NULL,
    actor       text NOT NULL,
    reason      text NOT NULL,
    replayed_at timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE webhook_replays;
