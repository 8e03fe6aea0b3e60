-- Redeploys. A deployment serves one revision of its project at a time (`revision`, from 1).
-- A deploy of a changed project records its successor here: its own job and route are
-- started and validated beside the serving one, and only then does it replace the
-- deployment's project, route and keys (and this row goes). At most one per deployment: a
-- newer deploy replaces a successor not yet serving.

ALTER TABLE deployments ADD COLUMN revision INTEGER NOT NULL DEFAULT 1;

CREATE TABLE successors (
    deployment_id      TEXT PRIMARY KEY REFERENCES deployments(id),
    revision           INTEGER NOT NULL,
    project_json       TEXT NOT NULL,
    project_digest     TEXT NOT NULL,
    manifest_digest    TEXT NOT NULL,
    ceiling_micros     INTEGER NOT NULL,
    route_id           TEXT NOT NULL UNIQUE,
    credential_sha256  TEXT NOT NULL DEFAULT '',
    route_public_key   TEXT NOT NULL DEFAULT '',
    state              TEXT NOT NULL,   -- starting | validating | failed
    reason             TEXT NOT NULL,
    created_at         INTEGER NOT NULL,
    updated_at         INTEGER NOT NULL
);
