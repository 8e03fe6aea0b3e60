-- Secrets at rest (issue 40): the data keys that seal secret values (AES-256-GCM, svc-keys),
-- each stored only wrapped by a key-encryption key that lives in a 0600 key file outside the
-- store (`kek_id` names it; the key itself is never here). The current data key is the one
-- with the highest id: every coordinator on the database seals under it once it reads it.
CREATE TABLE data_keys (
    id          INTEGER PRIMARY KEY,
    kek_id      TEXT NOT NULL,
    wrapped     BLOB NOT NULL,
    created_at  INTEGER NOT NULL
);
-- A revision's secrets are sealed (`sealed-v1.` and base64url, bound to the row) under the
-- data key named here, which cannot be deleted while a row names it. NULL: written in clear
-- by an older version, and sealed at the next start.
ALTER TABLE revision_secrets ADD COLUMN data_key_id INTEGER REFERENCES data_keys(id);
CREATE INDEX revision_secrets_by_data_key ON revision_secrets (data_key_id);
