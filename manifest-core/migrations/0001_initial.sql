-- Publication service store, version 1. Applied once, in order, by `service::store::sqlite`;
-- `PRAGMA user_version` records the last applied migration. Never edit a released migration:
-- add the next file instead.

-- An organization owns applications and tokens. `entitlement` is its tier (basic, developer,
-- business, enterprise), separate from member roles. `spend_authority_micros` is the
-- service-credit authority per job (NULL: none).
CREATE TABLE organizations (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    entitlement TEXT NOT NULL DEFAULT 'basic'
        CHECK (entitlement IN ('basic', 'developer', 'business', 'enterprise')),
    spend_authority_micros INTEGER CHECK (spend_authority_micros >= 0)
);

-- Bearer tokens, stored as the SHA-256 of the token: the plaintext is printed once and never kept.
CREATE TABLE tokens (
    id TEXT PRIMARY KEY,
    organization_id INTEGER NOT NULL REFERENCES organizations (id),
    role TEXT NOT NULL CHECK (role IN ('viewer', 'developer', 'admin', 'owner')),
    name TEXT NOT NULL,
    token_hash TEXT NOT NULL UNIQUE
);

CREATE TABLE capability_grants (
    organization_id INTEGER NOT NULL REFERENCES organizations (id),
    capability TEXT NOT NULL,
    PRIMARY KEY (organization_id, capability)
) WITHOUT ROWID;

-- The active pointer always names the latest committed version (0: none yet).
CREATE TABLE applications (
    id INTEGER PRIMARY KEY,
    organization_id INTEGER NOT NULL REFERENCES organizations (id),
    application_id TEXT NOT NULL,
    application_uid TEXT NOT NULL UNIQUE,
    status TEXT NOT NULL DEFAULT 'disabled' CHECK (status IN ('disabled', 'active', 'paused')),
    pause_reason TEXT,
    active_pointer_version INTEGER NOT NULL DEFAULT 0,
    settled INTEGER NOT NULL DEFAULT 0 CHECK (settled IN (0, 1)),
    UNIQUE (organization_id, application_id)
);

-- Immutable once written: the triggers below refuse updates and deletes.
CREATE TABLE policy_versions (
    application_id INTEGER NOT NULL REFERENCES applications (id),
    version INTEGER NOT NULL CHECK (version >= 1),
    schema_version INTEGER NOT NULL CHECK (schema_version IN (4, 5)),
    authored_digest TEXT NOT NULL,
    policy_digest TEXT NOT NULL,
    -- RFC 8785 canonical JSON of the effective policy (V4) or effective document (V5).
    policy TEXT NOT NULL,
    -- RFC 8785 canonical JSON of the manifest as authored (defaults left out).
    authored TEXT NOT NULL,
    -- Job slots the version needs, and its execution mode (`once`, `continuous`, `interval`;
    -- `scheduled` for V4).
    jobs INTEGER NOT NULL,
    execution TEXT NOT NULL,
    published_by TEXT NOT NULL,
    -- A rowid table: rows of several KiB do not belong in a WITHOUT ROWID b-tree.
    UNIQUE (application_id, version)
);

CREATE TRIGGER policy_versions_no_update BEFORE UPDATE ON policy_versions
BEGIN
    SELECT RAISE(ABORT, 'policy versions are immutable');
END;

CREATE TRIGGER policy_versions_no_delete BEFORE DELETE ON policy_versions
BEGIN
    SELECT RAISE(ABORT, 'policy versions are immutable');
END;

-- Plain INTEGER PRIMARY KEY (no AUTOINCREMENT): rows are never deleted, so ids only grow,
-- without AUTOINCREMENT's extra write per insert.
CREATE TABLE activity (
    id INTEGER PRIMARY KEY,
    application_id INTEGER NOT NULL REFERENCES applications (id),
    at TEXT NOT NULL,
    actor TEXT NOT NULL,
    action TEXT NOT NULL,
    policy_version INTEGER,
    status TEXT,
    reason TEXT
);

-- A committed publication asks the scheduler to reconcile the application: one row each.
CREATE TABLE wakeups (
    id INTEGER PRIMARY KEY,
    application_id INTEGER NOT NULL REFERENCES applications (id),
    policy_version INTEGER NOT NULL
);

-- Curated first-party artifacts, global. For a runtime image, `cid` and `digest` are the
-- bootstrap's and `image_digest` is the image's.
CREATE TABLE curated_artifacts (
    cid TEXT NOT NULL,
    digest TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('ipfs_bundle', 'runtime_image')),
    encryption TEXT NOT NULL CHECK (encryption IN ('none', 'aes256_gcm')),
    image_digest TEXT,
    PRIMARY KEY (cid, digest)
) WITHOUT ROWID;

-- Artifact versions accepted from a build of an application's repository.
CREATE TABLE accepted_artifacts (
    id INTEGER PRIMARY KEY,
    organization_id INTEGER NOT NULL REFERENCES organizations (id),
    application_id TEXT NOT NULL,
    repository TEXT NOT NULL,
    ref TEXT NOT NULL,
    workflow_ref TEXT NOT NULL,
    manifest_path TEXT NOT NULL,
    cid TEXT NOT NULL,
    digest TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('ipfs_bundle', 'runtime_image')),
    encryption TEXT NOT NULL CHECK (encryption IN ('none', 'aes256_gcm')),
    image_digest TEXT
);

CREATE INDEX accepted_artifacts_by_application ON accepted_artifacts (organization_id, application_id);

-- The native runtime image catalog: exact versions and their digests.
CREATE TABLE runtime_images (
    catalog TEXT NOT NULL,
    name TEXT NOT NULL,
    version TEXT NOT NULL,
    digest TEXT NOT NULL,
    PRIMARY KEY (catalog, name, version)
) WITHOUT ROWID;

-- Which secrets have a provisioned value (never the value itself).
CREATE TABLE provisioned_secrets (
    organization_id INTEGER NOT NULL REFERENCES organizations (id),
    application_id TEXT NOT NULL,
    secret_id TEXT NOT NULL,
    PRIMARY KEY (organization_id, application_id, secret_id)
) WITHOUT ROWID;

-- Organization operator SSH public keys, snapshotted into V5 policies that ask for access.
CREATE TABLE ssh_keys (
    organization_id INTEGER NOT NULL REFERENCES organizations (id),
    public_key TEXT NOT NULL,
    PRIMARY KEY (organization_id, public_key)
) WITHOUT ROWID;
