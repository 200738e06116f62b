-- +goose Up
-- Supply committed at acceptance (docs/orders.md "Supply committed at acceptance"): per
-- network, resource and source, the units orders may still be accepted against. source is
-- 'own' (the stake pools), 'market:<tier>' (the providers that did not refuse, per tier)
-- or 'deep' (the deep reserve). Acceptance takes the rows FOR UPDATE and decrements free
-- (and counts committed_total up); the pricer sets free each cycle from the chain, the
-- providers and the orders still in flight, less what was committed since it read them.
-- free never goes below 0: a group of orders that raced another for the last units fails
-- on the check and its orders are placed one by one, each against the locked rows.
CREATE TABLE supply_commitments (
    network         text NOT NULL,
    resource        text NOT NULL CHECK (resource IN ('energy', 'bandwidth')),
    source          text NOT NULL,
    free            bigint NOT NULL CONSTRAINT supply_commitments_free_check CHECK (free >= 0),
    per_order       bigint NOT NULL DEFAULT 0 CHECK (per_order >= 0),
    committed_total bigint NOT NULL DEFAULT 0,
    refreshed_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (network, resource, source)
);

-- Providers that answered "sold out": their offers are neither listed nor committable
-- until they deliver again or 30 s (the refusal cool-down) have passed since refused_at.
CREATE TABLE provider_refusals (
    network    text NOT NULL,
    provider   text NOT NULL,
    refused_at timestamptz NOT NULL,
    PRIMARY KEY (network, provider)
);

-- +goose Down
DROP TABLE provider_refusals;
DROP TABLE supply_commitments;
