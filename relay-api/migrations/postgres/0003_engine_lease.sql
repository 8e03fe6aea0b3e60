-- Version 3, PostgreSQL's alone: the engine lease of several coordinators on one database.
-- `engine` names the coordinator that runs the jobs until `expires_at` (the database's clock,
-- Unix ms); the holder renews it every second, another coordinator takes it once it runs out.
-- `public_port`: the holder's gateway, whose port every coordinator's URLs name.
-- SQLite's store is one coordinator's (its data directory is locked): no lease to hold.
CREATE TABLE relay_leases (
    name TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    expires_at BIGINT NOT NULL,
    public_port BIGINT NOT NULL
);
