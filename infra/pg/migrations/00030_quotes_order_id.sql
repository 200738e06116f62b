-- +goose Up
-- A quote prices one order (docs/pricing.md "Quotes"): order_id names the order that used
-- it, set once in that order's transaction; a second order with the quote is refused with
-- 3023 quote_used. A nullable column without a default: adding it rewrites nothing.
ALTER TABLE quotes ADD COLUMN order_id text;

-- +goose Down
ALTER TABLE quotes DROP COLUMN order_id;
