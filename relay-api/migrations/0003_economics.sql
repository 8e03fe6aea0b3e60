-- Ingress economics: each funded period is a session bound to its quote; served periods
-- earn the carrying gateway operator a reward; projects may pin validator digests.

ALTER TABLE tokens ADD COLUMN role TEXT NOT NULL DEFAULT 'customer' CHECK (role IN ('customer', 'operator'));

-- Who operates the gateway that carries a deployment's route (rewards go there).
ALTER TABLE deployments ADD COLUMN gateway_operator TEXT NOT NULL DEFAULT 'local';

CREATE TABLE sessions (
    id                  TEXT PRIMARY KEY,
    deployment_id       TEXT NOT NULL REFERENCES deployments(id),
    quote_id            TEXT NOT NULL REFERENCES quotes(id),
    ordinal             INTEGER NOT NULL,       -- funding order within the deployment
    price_micros        INTEGER NOT NULL,
    period_ms           INTEGER NOT NULL,
    state               TEXT NOT NULL CHECK (state IN ('funded', 'active', 'settled')),
    period_index        INTEGER,                -- set when the period starts
    started_at          INTEGER,
    ends_at             INTEGER,
    unserved_ms         INTEGER,
    unserved_micros     INTEGER NOT NULL DEFAULT 0,
    refunded_micros     INTEGER NOT NULL DEFAULT 0,
    reward_micros       INTEGER NOT NULL DEFAULT 0,
    service_micros      INTEGER NOT NULL DEFAULT 0,
    settled_at          INTEGER,
    UNIQUE (deployment_id, ordinal)
);

CREATE TABLE rewards (
    session_id     TEXT PRIMARY KEY REFERENCES sessions(id),
    operator       TEXT NOT NULL,
    amount_micros  INTEGER NOT NULL CHECK (amount_micros >= 0),
    settled_at     INTEGER NOT NULL,
    claimable_at   INTEGER NOT NULL,
    claim_id       TEXT
);
CREATE INDEX rewards_by_operator ON rewards(operator, claim_id);

CREATE TABLE claims (
    id             TEXT PRIMARY KEY,
    operator       TEXT NOT NULL,
    amount_micros  INTEGER NOT NULL,
    at             INTEGER NOT NULL
);

CREATE TABLE validator_pins (
    org_id     TEXT NOT NULL REFERENCES orgs(id),
    project    TEXT NOT NULL,
    digest     TEXT NOT NULL,
    added_at   INTEGER NOT NULL,
    PRIMARY KEY (org_id, project, digest)
);

ALTER TABLE validations ADD COLUMN validator_digest TEXT NOT NULL DEFAULT '';
