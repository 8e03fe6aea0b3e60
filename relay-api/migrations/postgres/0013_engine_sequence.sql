-- Version 13, SQLite's 0019: issue 44, point 5. The engine steps a settled live deployment
-- only at its due times or on an event. An operation that changes what the engine must do (a
-- deploy, a fund, a stop, a hostname, a gateway host's report) moves this sequence on, so
-- that the lease holder's engine, which looks at this one row at each tick, learns of an
-- operation another coordinator on the database answered, and steps every deployment again.
CREATE TABLE engine_sequence (
    id   INTEGER PRIMARY KEY CHECK (id = 1),
    seq  BIGINT NOT NULL
);
INSERT INTO engine_sequence (id, seq) VALUES (1, 0);
