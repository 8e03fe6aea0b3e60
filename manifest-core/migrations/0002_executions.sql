-- Executions, version 2: what the scheduler records. Times are Unix milliseconds. Money
-- (quotes, charges) is decimal TEXT: the authority is up to 25 digits, beyond INTEGER.

-- The scheduler's state of each application: the version it activated and when (windows
-- and start delays count from there), when it must decide next (NULL: only on a wakeup),
-- why it is blocked, and when a `once` application settled.
ALTER TABLE applications ADD COLUMN exec_activated_version INTEGER NOT NULL DEFAULT 0;
ALTER TABLE applications ADD COLUMN exec_activated_at INTEGER NOT NULL DEFAULT 0;
ALTER TABLE applications ADD COLUMN exec_next_at INTEGER;
ALTER TABLE applications ADD COLUMN exec_blocked_code TEXT;
ALTER TABLE applications ADD COLUMN exec_blocked_message TEXT;
ALTER TABLE applications ADD COLUMN settled_at INTEGER;
-- The version that re-armed a settled `once` application (0: never re-armed): occurrences
-- of earlier versions do not count, so it runs once more.
ALTER TABLE applications ADD COLUMN rearmed_version INTEGER NOT NULL DEFAULT 0;

CREATE INDEX applications_due ON applications (exec_next_at) WHERE exec_next_at IS NOT NULL;

-- One attempt at one generation of one slot. `execution_id` is the market's idempotency
-- key; the UNIQUE constraints are what make a slot generation's attempt impossible to
-- record (and so to launch) twice.
CREATE TABLE executions (
    id INTEGER PRIMARY KEY,
    application_id INTEGER NOT NULL REFERENCES applications (id),
    execution_id TEXT NOT NULL UNIQUE,
    slot INTEGER NOT NULL CHECK (slot >= 0),
    generation INTEGER NOT NULL CHECK (generation >= 1),
    attempt INTEGER NOT NULL CHECK (attempt >= 1),
    policy_version INTEGER NOT NULL,
    state TEXT NOT NULL CHECK (state IN
        ('launching', 'running', 'ready', 'restarting', 'stopping', 'completed', 'failed', 'stopped', 'refused')),
    processor_id TEXT,
    window_start INTEGER NOT NULL,
    window_end INTEGER NOT NULL,
    restarts INTEGER NOT NULL DEFAULT 0,
    charged_micros TEXT NOT NULL,
    charged_reward_planck TEXT NOT NULL,
    charged_fee_planck TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    changed_at INTEGER NOT NULL,
    silent_since INTEGER,
    reason_code TEXT,
    reason_message TEXT,
    UNIQUE (application_id, slot, generation, attempt)
);

CREATE INDEX executions_live ON executions (state)
    WHERE state IN ('launching', 'running', 'ready', 'restarting', 'stopping');
CREATE INDEX executions_by_slot ON executions (application_id, slot, generation);

-- Every state change, for the activity of an execution and for audits.
CREATE TABLE execution_transitions (
    id INTEGER PRIMARY KEY,
    execution INTEGER NOT NULL REFERENCES executions (id),
    at INTEGER NOT NULL,
    from_state TEXT NOT NULL,
    to_state TEXT NOT NULL,
    reason_code TEXT
);

-- The spend ledger: a launch's charge, committed with the launch decision; a refused
-- launch's refund as its own entry. Never updated or deleted.
CREATE TABLE spend_ledger (
    id INTEGER PRIMARY KEY,
    application_id INTEGER NOT NULL REFERENCES applications (id),
    execution INTEGER NOT NULL REFERENCES executions (id),
    slot INTEGER NOT NULL,
    generation INTEGER NOT NULL,
    at INTEGER NOT NULL,
    micros TEXT NOT NULL,
    reward_planck TEXT NOT NULL,
    fee_planck TEXT NOT NULL,
    refund INTEGER NOT NULL CHECK (refund IN (0, 1))
);

CREATE INDEX spend_ledger_by_application ON spend_ledger (application_id, at);

CREATE TRIGGER spend_ledger_no_update BEFORE UPDATE ON spend_ledger
BEGIN
    SELECT RAISE(ABORT, 'the spend ledger is append-only');
END;

CREATE TRIGGER spend_ledger_no_delete BEFORE DELETE ON spend_ledger
BEGIN
    SELECT RAISE(ABORT, 'the spend ledger is append-only');
END;

-- A provisioned secret's value, delivered to the application's jobs (NULL: provisioned
-- before values were kept; such a secret reaches no job).
ALTER TABLE provisioned_secrets ADD COLUMN value BLOB;
