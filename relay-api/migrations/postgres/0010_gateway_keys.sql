-- Version 10, SQLite's 0016: gateways verify, never sign (issue 40).
-- The public halves of the coordinators' probe keys (Ed25519, 64 hex digits): the route feed
-- gives them to every gateway host, which lets a probe token signed by one of them through a
-- route's guards. Each coordinator records its own when it starts.
CREATE TABLE probe_keys (
    public_key TEXT PRIMARY KEY,
    added_at BIGINT NOT NULL
);
-- The latest signed time (the feed signature's `at`, Unix ms) of a feed request accepted from
-- each operator: a request signed no later is refused as a replay, whichever coordinator of
-- the database it reaches.
CREATE TABLE feed_counters (
    operator_id TEXT PRIMARY KEY,
    last_signed_at BIGINT NOT NULL
);
