-- Version 7, SQLite's 0013: a redeploy switches after every gateway host has the successor (issue 41).
-- The route feed's sequence: bumped whenever a gateway host's table may have changed, read in
-- the same transaction as a table, so that a host reporting the sequence it applied says
-- which changes it has; a coordinator holding feed requests looks at this one row to learn
-- of a change another coordinator made.
CREATE TABLE feed_sequence (
    id   INTEGER PRIMARY KEY CHECK (id = 1),
    seq  BIGINT NOT NULL
);
INSERT INTO feed_sequence (id, seq) VALUES (1, 0);
-- What each gateway host reported with its last feed request: the sequence of the table it
-- serves, and its routes with agents in rotation (JSON [[route, count], ...]).
CREATE TABLE gateway_acks (
    operator_id  TEXT PRIMARY KEY REFERENCES operators(id),
    applied_seq  BIGINT NOT NULL,
    agents       TEXT NOT NULL,
    reported_at  BIGINT NOT NULL   -- Unix ms
);
-- A redeploy's switch under way: its successor validated, the hosts asked to have it
-- (`began_at`), then given tables where it serves (`flipped_seq`, `flipped_at`).
CREATE TABLE route_switches (
    deployment_id  TEXT PRIMARY KEY REFERENCES deployments(id),
    revision       BIGINT NOT NULL,
    route_id       TEXT NOT NULL,
    began_at       BIGINT NOT NULL,
    flipped_seq    BIGINT,
    flipped_at     BIGINT
);
-- Gateway hosts that did not have a route within the bound: not offered for the deployment
-- (its URLs) until they report `route_id`'s agents.
CREATE TABLE lagging_hosts (
    deployment_id  TEXT NOT NULL REFERENCES deployments(id),
    operator_id    TEXT NOT NULL REFERENCES operators(id),
    route_id       TEXT NOT NULL,
    since          BIGINT NOT NULL,
    PRIMARY KEY (deployment_id, operator_id)
);
