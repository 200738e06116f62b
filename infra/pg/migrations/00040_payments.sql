-- +goose Up
-- Pay by transfer (docs/pricing.md "Pay by transfer"): every TRX transfer to a payment
-- address of the price table, one row per transaction, written by infra/paystore only.
-- status: seen (in a block, not decided yet), delivering (an order of the transfer account
-- is placed), delivered (its delegation is broadcast), refunding (a refund is signed and
-- stored, broadcast until it lands), refunded (the refund landed), kept (nothing to give
-- back: dust, or a token that is no order, see held), held (a token transfer recorded for
-- support), reverted (a fork removed the transfer before it was acted on).
CREATE TABLE payments (
    txid            text PRIMARY KEY,
    network         text NOT NULL CHECK (network IN ('mainnet', 'nile')),
    address         text NOT NULL,            -- the payment address
    row_key         text NOT NULL,            -- <resource>_<tier>
    sender          text NOT NULL,
    receiver        text NOT NULL,            -- the memo's address, else the sender
    memo            text,                     -- raw_data.data as text, when printable
    asset           text NOT NULL DEFAULT 'TRX' CHECK (asset IN ('TRX', 'USDT')),
    amount_sun      bigint NOT NULL CHECK (amount_sun >= 0),
    block_num       bigint NOT NULL,
    block_id        text NOT NULL,
    block_time      timestamptz NOT NULL,
    status          text NOT NULL DEFAULT 'seen'
                    CHECK (status IN ('seen', 'delivering', 'delivered', 'refunding', 'refunded', 'kept', 'held', 'reverted')),
    order_id        text,
    order_amount    bigint,
    price_sun       bigint,                   -- the order's total (activation included)
    kept_sun        bigint NOT NULL DEFAULT 0,
    refund_sun      bigint NOT NULL DEFAULT 0,
    reason          text,                     -- why refunded or kept
    refund_txid     text,
    refund_tx       jsonb,                    -- the signed refund, re-broadcast until it lands
    refund_expires  timestamptz,
    settled         boolean NOT NULL DEFAULT false, -- the order reached a state that needs nothing more
    tx_expires      timestamptz NOT NULL,     -- the transfer's raw_data.expiration: it cannot land after it
    orphaned_at     timestamptz,              -- a fork removed its block; cleared when it is included again
    seen_at         timestamptz NOT NULL DEFAULT now(),
    delivering_at   timestamptz,
    delivered_at    timestamptz,
    updated_at      timestamptz NOT NULL DEFAULT now()
);
-- The work queues: undecided payments, payments whose order is still in flight, refunds
-- still to land.
CREATE INDEX payments_seen ON payments (seen_at) WHERE status = 'seen';
CREATE INDEX payments_open ON payments (updated_at) WHERE status IN ('delivering', 'delivered') AND NOT settled;
CREATE INDEX payments_refunding ON payments (updated_at) WHERE status = 'refunding';
CREATE INDEX payments_block ON payments (block_num);
CREATE INDEX payments_orphaned ON payments (orphaned_at) WHERE orphaned_at IS NOT NULL;

-- The payment follower's cursor and its window of recent block ids (fork detection); one
-- cursor per network.
CREATE TABLE payment_cursor (
    network     text PRIMARY KEY CHECK (network IN ('mainnet', 'nile')),
    block_num   bigint NOT NULL,
    block_id    text NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE payment_blocks (
    network     text NOT NULL,
    block_num   bigint NOT NULL,
    block_id    text NOT NULL,
    PRIMARY KEY (network, block_num)
);

-- Two ledger kinds of the transfer account: what is kept (surplus below one unit, dust)
-- and what goes back to a sender.
ALTER TABLE ledger_postings DROP CONSTRAINT ledger_postings_kind_check;
ALTER TABLE ledger_postings ADD CONSTRAINT ledger_postings_kind_check
    CHECK (kind IN ('deposit', 'deposit_reversal', 'capture', 'refund', 'adjustment', 'referral', 'payment_kept', 'payment_refund')) NOT VALID;
ALTER TABLE ledger_postings VALIDATE CONSTRAINT ledger_postings_kind_check;

-- Payment addresses derive at m/44'/195'/0'/0/<2147418112 + k> (infra/paystore): deposit
-- indexes stay below them.
ALTER SEQUENCE deposit_address_index_seq MAXVALUE 2147418111;

-- +goose Down
ALTER SEQUENCE deposit_address_index_seq NO MAXVALUE;
ALTER TABLE ledger_postings DROP CONSTRAINT ledger_postings_kind_check;
ALTER TABLE ledger_postings ADD CONSTRAINT ledger_postings_kind_check
    CHECK (kind IN ('deposit', 'deposit_reversal', 'capture', 'refund', 'adjustment', 'referral'));
DROP TABLE payment_blocks;
DROP TABLE payment_cursor;
DROP TABLE payments;
