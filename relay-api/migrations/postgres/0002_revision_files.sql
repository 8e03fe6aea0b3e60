-- Version 2, SQLite's 0009: each revision's files and secrets in the store (see there).
CREATE TABLE revision_files (
    deployment_id  TEXT NOT NULL REFERENCES deployments(id),
    revision       BIGINT NOT NULL,
    path           TEXT NOT NULL,
    bytes          BYTEA NOT NULL,
    PRIMARY KEY (deployment_id, revision, path)
);

CREATE TABLE revision_secrets (
    deployment_id  TEXT NOT NULL REFERENCES deployments(id),
    revision       BIGINT NOT NULL,
    secrets        TEXT NOT NULL,
    PRIMARY KEY (deployment_id, revision)
);
