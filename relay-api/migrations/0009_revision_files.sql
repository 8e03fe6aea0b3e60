-- Each revision's files and secrets in the store (issue 19, point 3): a deploy records them in
-- the transaction that records the revision, and a coordinator launches a revision from
-- them (written into its data directory first), so any coordinator on the database can run
-- any deployment, and a coordinator moved to a fresh data directory finds its deployments.
-- Rows of revisions that neither serve nor come next are removed by the engine's sweep.
CREATE TABLE revision_files (
    deployment_id  TEXT NOT NULL REFERENCES deployments(id),
    revision       INTEGER NOT NULL,
    path           TEXT NOT NULL,
    bytes          BLOB NOT NULL,
    PRIMARY KEY (deployment_id, revision, path)
);

-- A revision's secrets, as the JSON object the deploy sent (names to values).
CREATE TABLE revision_secrets (
    deployment_id  TEXT NOT NULL REFERENCES deployments(id),
    revision       INTEGER NOT NULL,
    secrets        TEXT NOT NULL,
    PRIMARY KEY (deployment_id, revision)
);
