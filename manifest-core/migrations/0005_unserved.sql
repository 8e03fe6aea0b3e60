-- Version 5: charges follow the paid window, not the attempt (issue 41).
--
-- A refund of time a paid window went unserved because the service stopped (its jobs died
-- with it) is a ledger entry of its own, against the charged execution, saying which stretch
-- it refunds: `unserved_from` to `unserved_to` (Unix ms; NULL on every other entry). One
-- refund per stretch: the scheduler may ask again, the index records it once.
ALTER TABLE spend_ledger ADD COLUMN unserved_from INTEGER;
ALTER TABLE spend_ledger ADD COLUMN unserved_to INTEGER;
CREATE UNIQUE INDEX spend_ledger_unserved ON spend_ledger (execution, unserved_from)
    WHERE unserved_from IS NOT NULL;

-- When the scheduler was last known alive: its executor writes the time at most every 2 s
-- in a step's transaction, and recovery dates the jobs a crash ended by it. One row.
CREATE TABLE scheduler_heartbeat (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    at INTEGER NOT NULL
);
