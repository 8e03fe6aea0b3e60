-- Published policies (issue 17, point 8). Each revision of a deployment publishes its
-- Manifest V5 (the project's named file, or the one derived from the project) as one
-- immutable policy version: the effective V5 document (`manifest_core::PolicyV5`, canonical
-- JSON) and its digest. Its jobs run what it says (`manifest_core::plan::workload`), and the
-- deployment's `svc.execution-convergence.v1` names it as `desired`. A revision number is
-- published once: a withdrawn successor's number is never given again.
CREATE TABLE policies (
    deployment_id TEXT NOT NULL REFERENCES deployments (id),
    revision INTEGER NOT NULL CHECK (revision >= 1),
    schema_version INTEGER NOT NULL,
    authored_digest TEXT NOT NULL,
    policy_digest TEXT NOT NULL,
    policy_json TEXT NOT NULL,
    published_at INTEGER NOT NULL,
    PRIMARY KEY (deployment_id, revision)
);
