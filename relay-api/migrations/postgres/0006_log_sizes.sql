-- Version 6, SQLite's 0012: what each deployment's log holds (issue 39, point 4), its lines
-- and their bytes, kept up to date as lines are appended and pruned, so the byte cap is
-- checked at every append without reading the log.
CREATE TABLE log_sizes (
    deployment_id  TEXT PRIMARY KEY REFERENCES deployments(id),
    lines          BIGINT NOT NULL,
    bytes          BIGINT NOT NULL
);
INSERT INTO log_sizes (deployment_id, lines, bytes)
    SELECT deployment_id, COUNT(*), SUM(octet_length(line)) FROM logs GROUP BY deployment_id;
