-- The relay coordinator's store. Times are Unix milliseconds; money is integer
-- service-credit micros (1 credit = 1,000,000 micros), never floating point.

CREATE TABLE orgs (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL UNIQUE,
    invited_at  INTEGER,               -- NULL: no invitation to the ingress add-on
    created_at  INTEGER NOT NULL
);

CREATE TABLE tokens (
    hash        TEXT PRIMARY KEY,      -- SHA-256 of the plaintext; the plaintext is never stored
    id          TEXT NOT NULL UNIQUE,
    org_id      TEXT NOT NULL REFERENCES orgs(id),
    created_at  INTEGER NOT NULL
);

CREATE TABLE deployments (
    id                  TEXT PRIMARY KEY,
    org_id              TEXT NOT NULL REFERENCES orgs(id),
    project             TEXT NOT NULL,
    project_json        TEXT NOT NULL,
    project_digest      TEXT NOT NULL,
    manifest_digest     TEXT NOT NULL,
    canonical_hostname  TEXT NOT NULL,
    route_id            TEXT NOT NULL UNIQUE,
    credential          TEXT NOT NULL,  -- handed to the job's agent; the gateway keeps only its hash
    route_secret        TEXT NOT NULL,  -- keys the challenge proof
    ceiling_micros      INTEGER NOT NULL,
    state               TEXT NOT NULL,
    state_reason        TEXT NOT NULL,
    periods_spent       INTEGER NOT NULL DEFAULT 0,
    next_period_at      INTEGER,        -- when the next period is charged (while live or degraded)
    created_at          INTEGER NOT NULL,
    updated_at          INTEGER NOT NULL
);
CREATE INDEX deployments_by_project ON deployments(org_id, project, created_at);
-- One running deployment per canonical hostname.
CREATE UNIQUE INDEX deployments_active_hostname ON deployments(canonical_hostname) WHERE state <> 'stopped';

CREATE TABLE transitions (
    seq            INTEGER PRIMARY KEY,
    deployment_id  TEXT NOT NULL REFERENCES deployments(id),
    from_state     TEXT,
    to_state       TEXT NOT NULL,
    reason         TEXT NOT NULL,
    at             INTEGER NOT NULL
);

CREATE TABLE quotes (
    id                 TEXT PRIMARY KEY,
    deployment_id      TEXT NOT NULL REFERENCES deployments(id),
    project_digest     TEXT NOT NULL,
    hostnames_json     TEXT NOT NULL,
    price_micros       INTEGER NOT NULL,   -- per period
    period_secs        INTEGER NOT NULL,
    periods            INTEGER NOT NULL,
    total_micros       INTEGER NOT NULL,
    created_at         INTEGER NOT NULL,
    expires_at         INTEGER NOT NULL,
    funded_at          INTEGER
);

CREATE TABLE ledger (
    seq            INTEGER PRIMARY KEY,
    deployment_id  TEXT NOT NULL REFERENCES deployments(id),
    kind           TEXT NOT NULL CHECK (kind IN ('fund', 'spend', 'unserved', 'stop', 'refund')),
    amount_micros  INTEGER NOT NULL CHECK (amount_micros >= 0),
    quote_id       TEXT REFERENCES quotes(id),
    period_index   INTEGER,
    note           TEXT NOT NULL,
    at             INTEGER NOT NULL
);
CREATE UNIQUE INDEX ledger_one_spend_per_period ON ledger(deployment_id, period_index) WHERE kind = 'spend';

CREATE TABLE hostnames (
    hostname       TEXT NOT NULL,
    deployment_id  TEXT NOT NULL REFERENCES deployments(id),
    token          TEXT NOT NULL,
    state          TEXT NOT NULL,      -- pending_dns, verified, live, removed
    hints_json     TEXT NOT NULL DEFAULT '[]',
    checked_at     INTEGER,
    created_at     INTEGER NOT NULL,
    PRIMARY KEY (deployment_id, hostname)
);
CREATE UNIQUE INDEX hostnames_one_owner ON hostnames(hostname) WHERE state <> 'removed';

CREATE TABLE validations (
    seq                INTEGER PRIMARY KEY,
    deployment_id      TEXT NOT NULL REFERENCES deployments(id),
    hostname           TEXT NOT NULL,
    passed             INTEGER NOT NULL,
    validator_version  TEXT NOT NULL,
    detail_json        TEXT NOT NULL,
    at                 INTEGER NOT NULL
);

CREATE TABLE logs (
    seq            INTEGER PRIMARY KEY,
    deployment_id  TEXT NOT NULL REFERENCES deployments(id),
    source         TEXT NOT NULL,      -- route, app, agent
    line           TEXT NOT NULL,
    at             INTEGER NOT NULL
);
CREATE INDEX logs_by_deployment ON logs(deployment_id, seq);
