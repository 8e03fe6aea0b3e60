-- Version 6: jobs' output (issue 42, point 2).
--
-- Each line a job printed, with the execution that printed it, the part (its program or its
-- sidecar), when the service took it (Unix ms) and its place in the store's order (`seq`,
-- never reused: paging and following read after a `seq`). Bounded per execution: the newest
-- lines within the service's bounds are kept (`OUTPUT_LINES_KEPT`, `OUTPUT_BYTES_KEPT`), and
-- only the newest executions of a slot keep theirs; `execution_output_sizes` counts what an
-- execution holds and the lines it lost (printed but not kept).
CREATE TABLE execution_output (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    execution INTEGER NOT NULL REFERENCES executions (id),
    application_id INTEGER NOT NULL REFERENCES applications (id),
    part TEXT NOT NULL CHECK (part IN ('program', 'sidecar')),
    at INTEGER NOT NULL,
    line TEXT NOT NULL
);

CREATE INDEX execution_output_by_application ON execution_output (application_id, seq);
CREATE INDEX execution_output_by_execution ON execution_output (execution, seq);

CREATE TABLE execution_output_sizes (
    execution INTEGER PRIMARY KEY REFERENCES executions (id),
    lines INTEGER NOT NULL,
    bytes INTEGER NOT NULL,
    dropped INTEGER NOT NULL DEFAULT 0
);
