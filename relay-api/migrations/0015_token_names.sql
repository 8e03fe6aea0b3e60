-- A token carries a name people read (`svc relay admin token --name`): timelines say who
-- stopped a deployment by it, the console says who is signed in (issue 42). Tokens issued
-- before it are named by their role and the first four hex digits of their ID.
ALTER TABLE tokens ADD COLUMN name TEXT NOT NULL DEFAULT '';
UPDATE tokens SET name = role || '-' || substr(id, 5, 4) WHERE name = '';
