-- Routes of several jobs (issue 20): a revision runs one job per slot, so an execution is
-- unique by its slot, generation and attempt, not by its generation and attempt alone (which
-- refused a second slot's launch). SQLite cannot change a table's constraint in place: the
-- table is rebuilt with the same columns, rows and indexes.
CREATE TABLE executions_new (
    id INTEGER PRIMARY KEY,
    deployment_id TEXT NOT NULL REFERENCES deployments (id),
    execution_id TEXT NOT NULL UNIQUE,
    generation INTEGER NOT NULL CHECK (generation >= 1),
    attempt INTEGER NOT NULL CHECK (attempt >= 1),
    state TEXT NOT NULL CHECK (state IN
        ('launching', 'running', 'ready', 'restarting', 'stopping', 'completed', 'failed', 'stopped', 'refused')),
    processor_id TEXT,
    created_at INTEGER NOT NULL,
    changed_at INTEGER NOT NULL,
    reason_code TEXT,
    reason_message TEXT,
    slot INTEGER NOT NULL DEFAULT 0 CHECK (slot >= 0),
    policy_version INTEGER NOT NULL DEFAULT 0,
    window_start INTEGER NOT NULL DEFAULT 0,
    window_end INTEGER NOT NULL DEFAULT 0,
    restarts INTEGER NOT NULL DEFAULT 0,
    silent_since INTEGER,
    UNIQUE (deployment_id, slot, generation, attempt)
);
INSERT INTO executions_new (id, deployment_id, execution_id, generation, attempt, state, processor_id, created_at,
        changed_at, reason_code, reason_message, slot, policy_version, window_start, window_end, restarts,
        silent_since)
    SELECT id, deployment_id, execution_id, generation, attempt, state, processor_id, created_at, changed_at,
        reason_code, reason_message, slot, policy_version, window_start, window_end, restarts, silent_since
    FROM executions;
DROP TABLE executions;
ALTER TABLE executions_new RENAME TO executions;
CREATE INDEX executions_by_deployment ON executions (deployment_id, id);
CREATE INDEX executions_live ON executions (state)
    WHERE state IN ('launching', 'running', 'ready', 'restarting', 'stopping');
CREATE INDEX executions_by_generation ON executions (deployment_id, slot, generation);
