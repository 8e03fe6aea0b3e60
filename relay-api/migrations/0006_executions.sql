-- Ingress jobs as executions (issue 17, point 8). Each launch of a deployment revision's job
-- is one execution, recorded as svc-execution records a published application's: slot 0;
-- generation = the revision (a redeploy's successor is the next generation); attempt = the
-- launch of that revision (a restart is the next attempt). `execution_id` is the processor
-- market's order ID (`<deployment>.r<revision>.<attempt>`). Read by the deployment's
-- `svc.execution-convergence.v1`. Times are Unix milliseconds.
CREATE TABLE executions (
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
    UNIQUE (deployment_id, generation, attempt)
);

CREATE INDEX executions_by_deployment ON executions (deployment_id, id);
CREATE INDEX executions_live ON executions (state)
    WHERE state IN ('launching', 'running', 'ready', 'restarting', 'stopping');
