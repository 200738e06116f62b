-- +goose Up
-- Webhook endpoints (docs/webhooks.md). At most two per account, one per role; the unique
-- constraint is deferrable so that a role swap (PATCH role) is two updates in one
-- transaction, checked at commit. The secret is stored only encrypted, like API key
-- secrets (AES-256-GCM under API_KEY_MASTER_KEY, the endpoint id as associated data):
-- the deliverer needs the secret itself to sign.
CREATE TABLE webhook_endpoints (
    id          text PRIMARY KEY,
    account_id  text NOT NULL REFERENCES accounts (id),
    url         text NOT NULL CHECK (length(url) <= 2048),
    events      text[],          -- NULL: every event type, including types added later
    role        text NOT NULL CHECK (role IN ('primary', 'backup')),
    is_active   boolean NOT NULL DEFAULT true,
    secret_enc  bytea NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT webhook_endpoints_role_unique UNIQUE (account_id, role) DEFERRABLE INITIALLY IMMEDIATE
);

-- Deliveries not finished yet, per account and ordering key (the order id for order
-- events, the event id otherwise). Only the head of a key (lowest seq) is ever attempted,
-- so the events of one order leave in the order they were read from Kafka, which is the
-- order they happened. role and attempt are where the delivery stands: `attempt` attempts
-- were made on the endpoint holding `role`. claim_* is a short lease taken for the
-- duration of one attempt, so duplicate wake-ups do not send the same attempt twice while
-- a crashed attempt is retried once its lease runs out.
CREATE TABLE webhook_queue (
    seq           bigserial PRIMARY KEY,
    account_id    text NOT NULL,
    okey          text NOT NULL,
    event_id      text NOT NULL UNIQUE,
    event_type    text NOT NULL,
    body          bytea NOT NULL,       -- the envelope exactly as read from Kafka
    max_attempts  int NOT NULL,         -- per endpoint: 10, or 4 for 5m-tier orders
    role          text NOT NULL CHECK (role IN ('primary', 'backup')),
    attempt       int NOT NULL DEFAULT 0,
    due_at        timestamptz NOT NULL DEFAULT now(),
    claim_attempt int NOT NULL DEFAULT 0,
    claim_until   timestamptz,
    created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhook_queue_key ON webhook_queue (account_id, okey, seq);

-- Delivery history: one row per attempt (test deliveries are not recorded). Kept with the
-- endpoint and deleted with it.
CREATE TABLE webhook_deliveries (
    id           text PRIMARY KEY,     -- X-Delivery-Id
    endpoint_id  text NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    account_id   text NOT NULL,
    event_id     text NOT NULL,
    event_type   text NOT NULL,
    role         text NOT NULL,
    attempt      int NOT NULL,
    status       text NOT NULL CHECK (status IN ('succeeded', 'failed')),
    http_status  int,
    error        text,
    latency_ms   int NOT NULL,
    next         text NOT NULL CHECK (next IN ('done', 'retry', 'failover', 'dead')),
    next_attempt_at timestamptz,
    attempted_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhook_deliveries_endpoint ON webhook_deliveries (endpoint_id, attempted_at DESC, id DESC);
CREATE INDEX webhook_deliveries_event ON webhook_deliveries (event_id);

-- +goose Down
DROP TABLE webhook_deliveries;
DROP TABLE webhook_queue;
DROP TABLE webhook_endpoints;
