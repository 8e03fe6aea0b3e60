-- Version 3: an application's activity by index. The API's activity and the console's
-- overview read one application's entries, newest first; without it they scanned every
-- application's activity. (PostgreSQL's schema has it from its first migration.)
CREATE INDEX activity_by_application ON activity (application_id, id);
