-- +goose Up
-- Signup by wallet signature (issue 3): address challenges, bootstrap tokens, dashboard
-- sessions with their sign-in history, and the deposit addresses signup shows. Bearer
-- secrets (bootstrap tokens, session cookies) are stored only as SHA-256 hashes.

-- One row per issued challenge. The nonce is public (it is inside the signed message), so it
-- is the key. `message` is the exact text the wallet signs; verification runs over these
-- bytes, never over a re-rendered template. consumed_at is set exactly once, by the
-- conditional UPDATE that verifies the signature's nonce: that is what makes it single use.
CREATE TABLE signup_challenges (
    nonce        text PRIMARY KEY CHECK (nonce ~ '^[0-9a-f]{32,128}$'),
    address      text NOT NULL,
    purpose      text NOT NULL CHECK (purpose IN ('signup', 'login', 'recovery')),
    message      text NOT NULL,
    issued_at    timestamptz NOT NULL,
    expires_at   timestamptz NOT NULL CHECK (expires_at > issued_at),
    consumed_at  timestamptz
);
CREATE INDEX signup_challenges_expires ON signup_challenges (expires_at);

-- Bootstrap tokens (abt_...): bound to the address that proved control; account_id is
-- filled when the address owns an account at verify time or when POST /v1/accounts
-- creates it.
CREATE TABLE bootstrap_tokens (
    token_hash   bytea PRIMARY KEY CHECK (length(token_hash) = 32),
    address      text NOT NULL,
    account_id   text REFERENCES accounts (id),
    issued_at    timestamptz NOT NULL,
    expires_at   timestamptz NOT NULL CHECK (expires_at > issued_at)
);
CREATE INDEX bootstrap_tokens_expires ON bootstrap_tokens (expires_at);

-- Dashboard sessions. `id` (ses_...) is a public handle for logs and audit rows; the cookie
-- value is a separate random secret of which only the hash is kept. A session is usable
-- while revoked_at is null and now() is before both idle_expires_at (slides forward with
-- use) and absolute_expires_at (fixed at sign-in).
CREATE TABLE dashboard_sessions (
    id                   text PRIMARY KEY,
    secret_hash          bytea NOT NULL UNIQUE CHECK (length(secret_hash) = 32),
    account_id           text NOT NULL REFERENCES accounts (id),
    address              text NOT NULL,
    role                 text NOT NULL CHECK (role IN ('owner', 'editor', 'viewer')),
    created_at           timestamptz NOT NULL,
    last_seen_at         timestamptz NOT NULL,
    idle_expires_at      timestamptz NOT NULL,
    absolute_expires_at  timestamptz NOT NULL,
    revoked_at           timestamptz
);
CREATE INDEX dashboard_sessions_wallet ON dashboard_sessions (account_id, address) WHERE revoked_at IS NULL;

-- Sign-ins, one per successful POST /v1/session. GET /v1/session/history reads the newest
-- ten of one wallet on one account.
CREATE TABLE session_sign_ins (
    id            bigserial PRIMARY KEY,
    account_id    text NOT NULL REFERENCES accounts (id),
    address       text NOT NULL,
    session_id    text NOT NULL REFERENCES dashboard_sessions (id),
    ip            text NOT NULL,
    signed_in_at  timestamptz NOT NULL
);
CREATE INDEX session_sign_ins_wallet ON session_sign_ins (account_id, address, signed_in_at DESC, id DESC);

-- Deposit addresses derived from the service's HD key at m/44'/195'/0'/0/<derivation_index>.
-- No private key is ever stored: the sweeper derives it from the seed it alone holds. At
-- most one current (not retired) address per account; issue 4 adds rotation by setting
-- retired_at and issuing the next index.
CREATE SEQUENCE deposit_address_index_seq AS bigint MINVALUE 0 START WITH 0;
CREATE TABLE deposit_addresses (
    address           text PRIMARY KEY,
    account_id        text NOT NULL REFERENCES accounts (id),
    derivation_index  bigint NOT NULL UNIQUE CHECK (derivation_index >= 0 AND derivation_index < 2147483648),
    issued_at         timestamptz NOT NULL,
    retired_at        timestamptz
);
CREATE UNIQUE INDEX deposit_addresses_current ON deposit_addresses (account_id) WHERE retired_at IS NULL;

-- +goose Down
DROP TABLE deposit_addresses;
DROP SEQUENCE deposit_address_index_seq;
DROP TABLE session_sign_ins;
DROP TABLE dashboard_sessions;
DROP TABLE bootstrap_tokens;
DROP TABLE signup_challenges;
