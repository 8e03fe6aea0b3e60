-- A lagging gateway host rejoins only with a table where the route it waits for serves, and a
-- host's report is that of its newest signed feed request (issue 41).
-- The least feed sequence of the table a lagging host must have applied to rejoin: moved on
-- when the switch that left it out (or any later one) ends (0: any).
ALTER TABLE lagging_hosts ADD COLUMN min_seq INTEGER NOT NULL DEFAULT 0;
-- The signed time (the feed signature's `at`, Unix ms) of the request whose report is
-- recorded: an older request's report, arriving late or replayed, does not replace it.
ALTER TABLE gateway_acks ADD COLUMN signed_at INTEGER NOT NULL DEFAULT 0;
