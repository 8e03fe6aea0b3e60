-- Version 2: an organization's inputs revision (SQLite's version 4 says what counts it up).
ALTER TABLE organizations ADD COLUMN inputs_rev BIGINT NOT NULL DEFAULT 0;
