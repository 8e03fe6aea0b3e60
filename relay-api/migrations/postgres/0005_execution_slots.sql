-- Version 5, SQLite's 0011: routes of several jobs (issue 20). A revision runs one job per
-- slot, so an execution is unique by its slot, generation and attempt, not by its generation
-- and attempt alone (which refused a second slot's launch).
ALTER TABLE executions DROP CONSTRAINT executions_deployment_id_generation_attempt_key;
ALTER TABLE executions ADD CONSTRAINT executions_slot_generation_attempt_key
    UNIQUE (deployment_id, slot, generation, attempt);
