-- The ingress console's sessions (issue 40, point 3).
-- Signing in exchanges the token for a random session id; the browser's cookie holds the id,
-- this table only its SHA-256 (`id_hash`), so a reader of the database cannot sign in with
-- what it reads. A session is its token's: read through the token's row on every request and
-- deleted with it. It ends when unused for the idle bound (`last_seen_at`), or the absolute
-- one after `created_at` (Unix ms; the bounds are svc-web's), or when its member signs out
-- (the row deleted). Expired rows are collected a bounded number at each sign-in. `csrf` is
-- the session's CSRF token (random).
CREATE TABLE console_sessions (
    id_hash       TEXT PRIMARY KEY,
    token_hash    TEXT NOT NULL REFERENCES tokens(hash) ON DELETE CASCADE,
    csrf          TEXT NOT NULL,
    created_at    INTEGER NOT NULL,
    last_seen_at  INTEGER NOT NULL
);
CREATE INDEX console_sessions_by_token ON console_sessions (token_hash);
CREATE INDEX console_sessions_by_created ON console_sessions (created_at);
CREATE INDEX console_sessions_by_last_seen ON console_sessions (last_seen_at);
