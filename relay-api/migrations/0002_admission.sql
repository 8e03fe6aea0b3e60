-- Gateway operators and their admission. An operator is admitted by a single-use admission
-- token the service issues (`svc relay admin admission-token`); the gateway host registers
-- its Ed25519 public key with it (`gateway-prep init`).

CREATE TABLE admission_tokens (
    hash        TEXT PRIMARY KEY,      -- SHA-256 of the plaintext; the plaintext is never stored
    id          TEXT NOT NULL UNIQUE,
    operator    TEXT NOT NULL,         -- the operator name the token admits
    created_at  INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL,
    used_at     INTEGER,               -- NULL until a registration used it (single use)
    used_by     TEXT                   -- the operator record it admitted
);

CREATE TABLE operators (
    id                  TEXT PRIMARY KEY,
    name                TEXT NOT NULL,
    public_key          TEXT NOT NULL UNIQUE,   -- base64 of the raw 32-byte Ed25519 key
    hostname            TEXT NOT NULL UNIQUE,   -- the gateway's public hostname
    admitted_at         INTEGER NOT NULL,
    admission_token_id  TEXT NOT NULL
);
