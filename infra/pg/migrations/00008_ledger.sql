-- +goose Up
-- Ledger (issue 4): double-entry postings, customer balances with two-phase holds, deposits
-- credited from chain facts, deposit address rotation and sweeps. docs/ledger.md explains
-- the model; infra/ledgerstore is the only writer of these tables.

-- One row per customer account: the materialised sums of its postings and holds, plus the
-- lifetime totals of the Account record. Debits are guarded by conditional UPDATEs on this
-- row (never read then write), which also serialises concurrent debits of one account.
-- System accounts (world, revenue, adjustments...) have no row: their balances are the sums
-- of their postings, so no hot row exists for them.
CREATE TABLE ledger_accounts (
    account_id          text PRIMARY KEY REFERENCES accounts (id),
    balance_sun         bigint NOT NULL DEFAULT 0,
    reserved_sun        bigint NOT NULL DEFAULT 0 CHECK (reserved_sun >= 0),
    balance_usdt        bigint NOT NULL DEFAULT 0 CHECK (balance_usdt >= 0),
    deposited_sun       bigint NOT NULL DEFAULT 0 CHECK (deposited_sun >= 0),
    spent_sun           bigint NOT NULL DEFAULT 0 CHECK (spent_sun >= 0),
    refunded_sun        bigint NOT NULL DEFAULT 0 CHECK (refunded_sun >= 0),
    orders_created      bigint NOT NULL DEFAULT 0 CHECK (orders_created >= 0),
    energy_delegated    bigint NOT NULL DEFAULT 0 CHECK (energy_delegated >= 0),
    -- balance.low: the account's own threshold (null = the configured default) and whether
    -- the alert fired since available last stood at or above it (one event per crossing).
    low_threshold_sun   bigint CHECK (low_threshold_sun >= 0),
    low_alerted         boolean NOT NULL DEFAULT false,
    updated_at          timestamptz NOT NULL DEFAULT now()
);

-- Every movement of money: one row moves amount_sun from the `debit` ledger account to the
-- `credit` ledger account (both sides in one row, so the journal balances by construction).
-- Customer ledger accounts are named 'customer:<account id>', system ones 'world:...',
-- 'revenue:...', 'equity:...'. ref is the caller's idempotency reference: a repeat of the
-- same movement hits the unique constraint and changes nothing.
CREATE TABLE ledger_postings (
    id            bigserial PRIMARY KEY,
    ref           text NOT NULL,
    kind          text NOT NULL CHECK (kind IN ('deposit', 'deposit_reversal', 'capture', 'refund', 'adjustment', 'referral')),
    debit         text NOT NULL,
    credit        text NOT NULL CHECK (credit <> debit),
    amount_sun    bigint NOT NULL CHECK (amount_sun > 0),
    account_id    text NOT NULL REFERENCES accounts (id),
    reference_id  text,
    details       jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at    timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT ledger_postings_ref UNIQUE (ref)
);
CREATE INDEX ledger_postings_account ON ledger_postings (account_id, id);

-- Two-phase holds (pending transfers): placed at order creation, then captured (posted,
-- possibly for less; the rest is released) or released (voided). A captured hold may be
-- refunded later by a 'refund' posting. reserved_sun of an account is the sum of its placed
-- holds. expires_at is when a placed hold is no longer considered live (invariants).
CREATE TABLE ledger_holds (
    ref           text PRIMARY KEY,
    account_id    text NOT NULL REFERENCES accounts (id),
    amount_sun    bigint NOT NULL CHECK (amount_sun > 0),
    status        text NOT NULL CHECK (status IN ('placed', 'captured', 'released')),
    captured_sun  bigint CHECK (captured_sun >= 0 AND captured_sun <= amount_sun),
    placed_at     timestamptz NOT NULL DEFAULT now(),
    expires_at    timestamptz NOT NULL,
    closed_at     timestamptz
);
CREATE INDEX ledger_holds_open ON ledger_holds (account_id) WHERE status = 'placed';

-- Transfers to deposit addresses seen in chain facts, one per (tx_hash, log_index); log_index
-- is -1 for a TRX transfer. The unique key is what makes crediting exactly once: a re-read
-- fact finds its row. A fork's revert marks the row reverted (and reverses its credit), so
-- the same transfer included again on the new branch is taken up by the same row.
CREATE TABLE deposits (
    id             text PRIMARY KEY,
    tx_hash        text NOT NULL,
    log_index      integer NOT NULL,
    fact_id        text NOT NULL,
    block_num      bigint NOT NULL,
    block_id       text NOT NULL,
    block_time     timestamptz NOT NULL,
    account_id     text NOT NULL REFERENCES accounts (id),
    address        text NOT NULL,
    sender         text NOT NULL,
    asset          text NOT NULL CHECK (asset IN ('TRX', 'USDT')),
    amount         numeric(78, 0) NOT NULL CHECK (amount > 0), -- SUN for TRX, token units for USDT
    status         text NOT NULL CHECK (status IN ('pending', 'credited', 'held_below_min', 'held_for_review',
                                                   'held_no_rate', 'held_retired', 'residual', 'orphaned', 'reverted')),
    credited_sun   bigint,
    rate_sun       bigint,
    rate_source    text,
    spread_bps     integer,
    posting_ref    text,
    credited_at    timestamptz,
    credited_by    text,
    -- balance.credited went out for this transfer: a transfer credited, reverted by a fork
    -- and credited again on the new branch is announced once.
    announced      boolean NOT NULL DEFAULT false,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT deposits_tx_log UNIQUE (tx_hash, log_index)
);
CREATE INDEX deposits_account ON deposits (account_id, created_at DESC);
CREATE INDEX deposits_held ON deposits (status) WHERE status LIKE 'held_%' OR status = 'residual';

-- Rotation: a retired address keeps crediting until credited_until.
ALTER TABLE deposit_addresses ADD COLUMN credited_until timestamptz;
CREATE INDEX deposit_addresses_retired ON deposit_addresses (account_id, retired_at DESC) WHERE retired_at IS NOT NULL;

-- Sweeps: on-chain moves from deposit addresses to the treasury (kind trx, usdt) and the
-- energy the own pool lends a deposit address for its USDT transfer (delegate, undelegate).
-- The signed transaction is stored before it is broadcast, so a restart re-broadcasts the
-- same transaction (same id) instead of signing a second one; at most one open row exists
-- per address and kind.
CREATE TABLE sweeps (
    id            text PRIMARY KEY,
    address       text NOT NULL,
    kind          text NOT NULL CHECK (kind IN ('trx', 'usdt', 'delegate', 'undelegate')),
    amount        numeric(78, 0) NOT NULL CHECK (amount > 0), -- SUN, token units, or SUN delegated
    txid          text NOT NULL UNIQUE,
    signed_tx     jsonb NOT NULL,
    expires_at    timestamptz NOT NULL,
    status        text NOT NULL CHECK (status IN ('signed', 'confirmed', 'failed')),
    result        text,
    created_at    timestamptz NOT NULL DEFAULT now(),
    finished_at   timestamptz
);
CREATE UNIQUE INDEX sweeps_open ON sweeps (address, kind) WHERE status = 'signed';
CREATE INDEX sweeps_address ON sweeps (address, kind, finished_at DESC);

-- +goose Down
DROP TABLE sweeps;
DROP INDEX deposit_addresses_retired;
ALTER TABLE deposit_addresses DROP COLUMN credited_until;
DROP TABLE deposits;
DROP TABLE ledger_holds;
DROP TABLE ledger_postings;
DROP TABLE ledger_accounts;
