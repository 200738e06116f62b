-- +goose Up
-- The deliverer's sweep looks for queue heads past their due time every second on every
-- replica; without this index it reads the whole queue.
CREATE INDEX webhook_queue_due ON webhook_queue (due_at);

-- +goose Down
DROP INDEX webhook_queue_due;
