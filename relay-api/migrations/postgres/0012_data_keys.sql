-- Version 12, SQLite's 0018: secrets at rest (issue 40; see there).
CREATE TABLE data_keys (
    id          BIGINT PRIMARY KEY,
    kek_id      TEXT NOT NULL,
    wrapped     BYTEA NOT NULL,
    created_at  BIGINT NOT NULL
);
ALTER TABLE revision_secrets ADD COLUMN data_key_id BIGINT REFERENCES data_keys(id);
CREATE INDEX revision_secrets_by_data_key ON revision_secrets (data_key_id);
