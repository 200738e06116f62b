-- +goose Up
-- Support adjustments above the approval threshold wait here for a second operator
-- (docs/operations.md "Adjustments and two-person approval"): requested_by asked,
-- approved_by (another identity) approved, and the credit is posted in the approving
-- transaction with ref as its idempotency reference. Written by infra/ledgerstore only.
CREATE TABLE pending_adjustments (
    ref           text PRIMARY KEY,
    account_id    text NOT NULL REFERENCES accounts (id),
    amount_sun    bigint NOT NULL CHECK (amount_sun > 0),
    reason        text NOT NULL,
    requested_by  text NOT NULL,
    requested_at  timestamptz NOT NULL DEFAULT now(),
    approved_by   text CHECK (approved_by <> requested_by),
    approved_at   timestamptz,
    CHECK ((approved_by IS NULL) = (approved_at IS NULL))
);

-- +goose Down
DROP TABLE pending_adjustments;
