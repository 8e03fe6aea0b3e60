-- Version 8: secrets at rest (issue 40, point 1).
--
-- A provisioned secret's value is stored sealed (AES-256-GCM, `svc_keys::sealed`) under a
-- data key, bound to its row (organization, application, secret): a value moved to another
-- row does not open. Data keys are kept here only wrapped by a key-encryption key that lives
-- in a 0600 key file outside the store (`kek_id` names it); the current data key is the one
-- with the highest id. `data_key_id` names the key a value is sealed under, so a key still in
-- use cannot be deleted; NULL with a value is a value an older version stored in clear,
-- sealed at the next start. `created_at` is Unix ms.
CREATE TABLE data_keys (
    id BIGINT PRIMARY KEY,
    kek_id TEXT NOT NULL,
    wrapped BYTEA NOT NULL,
    created_at BIGINT NOT NULL
);

ALTER TABLE provisioned_secrets ADD COLUMN data_key_id BIGINT REFERENCES data_keys (id);

CREATE INDEX provisioned_secrets_by_data_key ON provisioned_secrets (data_key_id);
