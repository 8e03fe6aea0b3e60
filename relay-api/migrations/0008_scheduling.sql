-- Ingress jobs decided by the scheduler (issue 17, point 8): each deployment is an
-- application of svc-execution's scheduler, its executions recorded as the scheduler records
-- a published application's. An execution gains what the scheduler reads (its slot, the
-- policy version it runs, its paid window, its same-job restarts, since when its processor
-- has been silent); a deployment gains the scheduler's state (the version it activated and
-- when, when to decide next, why it is blocked). Times are Unix milliseconds.
ALTER TABLE executions ADD COLUMN slot INTEGER NOT NULL DEFAULT 0 CHECK (slot >= 0);
ALTER TABLE executions ADD COLUMN policy_version INTEGER NOT NULL DEFAULT 0;
ALTER TABLE executions ADD COLUMN window_start INTEGER NOT NULL DEFAULT 0;
ALTER TABLE executions ADD COLUMN window_end INTEGER NOT NULL DEFAULT 0;
ALTER TABLE executions ADD COLUMN restarts INTEGER NOT NULL DEFAULT 0;
ALTER TABLE executions ADD COLUMN silent_since INTEGER;
-- Executions recorded before: each ran its revision (the generation), in a window from its
-- launch that its funding bounds (`scheduling::INGRESS_WINDOW_MS`, a century).
UPDATE executions SET policy_version = generation, window_start = created_at,
    window_end = created_at + 3153600000000;

ALTER TABLE deployments ADD COLUMN exec_activated_version INTEGER NOT NULL DEFAULT 0;
ALTER TABLE deployments ADD COLUMN exec_activated_at INTEGER NOT NULL DEFAULT 0;
ALTER TABLE deployments ADD COLUMN exec_next_at INTEGER;
ALTER TABLE deployments ADD COLUMN exec_blocked_code TEXT;
ALTER TABLE deployments ADD COLUMN exec_blocked_message TEXT;
CREATE INDEX deployments_due ON deployments (exec_next_at) WHERE exec_next_at IS NOT NULL;
CREATE INDEX executions_by_generation ON executions (deployment_id, slot, generation);
