-- +goose Up
-- Accounts: one per owner address per network. The owner address signed the signup
-- challenge; it owns and can recover the account. The unique constraint makes concurrent
-- signups of one address create exactly one account (accounts.CreateOrGetByOwner).
CREATE TABLE accounts (
    id             text PRIMARY KEY,
    network        text NOT NULL CHECK (network IN ('mainnet', 'nile')),
    owner_address  text NOT NULL,
    label          text,
    email          text,
    status         text NOT NULL DEFAULT 'unfunded'
                   CHECK (status IN ('unfunded', 'active', 'suspended', 'closed')),
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT accounts_owner_unique UNIQUE (network, owner_address)
);

-- API keys. The secret is stored only encrypted (AES-256-GCM under the master key from
-- configuration, the key id as associated data), never in plaintext: the edge needs the
-- secret itself to recompute HMAC signatures, so a hash would not do.
CREATE TABLE api_keys (
    id            text PRIMARY KEY,
    account_id    text NOT NULL REFERENCES accounts (id),
    secret_enc    bytea NOT NULL,
    scopes        text[] NOT NULL CHECK (cardinality(scopes) > 0),
    label         text,
    is_active     boolean NOT NULL DEFAULT true,
    ip_allowlist  text[] NOT NULL DEFAULT '{}',
    expires_at    timestamptz,
    revoked_at    timestamptz,
    last_used_at  timestamptz,
    created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX api_keys_account ON api_keys (account_id, created_at, id);

-- Audit trail of security-relevant account actions (key creation and revocation, session
-- revoke-all, label changes). Append only.
CREATE TABLE audit_log (
    id          bigserial PRIMARY KEY,
    account_id  text NOT NULL REFERENCES accounts (id),
    actor       text NOT NULL,
    action      text NOT NULL,
    details     jsonb NOT NULL DEFAULT '{}'::jsonb,
    at          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX audit_log_account ON audit_log (account_id, at DESC);

-- Idempotency records (infra/idempotency): one per (account, namespace, key). namespace
-- separates Idempotency-Key headers ("header") from body ids such as client_order_id
-- ("order"). The row is inserted in the same transaction as the work it guards, so a
-- committed row always has its response; concurrent duplicates wait on the primary key.
CREATE TABLE idempotency_keys (
    account_id       text NOT NULL,
    namespace        text NOT NULL,
    key              text NOT NULL,
    request_hash     bytea NOT NULL,
    state            text NOT NULL CHECK (state IN ('in_progress', 'done')),
    response_status  integer,
    response_body    bytea,
    object_id        text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (account_id, namespace, key)
);
CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at);

-- +goose Down
DROP TABLE idempotency_keys;
DROP TABLE audit_log;
DROP TABLE api_keys;
DROP TABLE accounts;
