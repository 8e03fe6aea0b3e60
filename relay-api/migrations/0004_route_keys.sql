-- Route credentials and route secrets are no longer kept in clear. A launch makes a fresh
-- tunnel credential and a fresh Ed25519 route key for the job; the store keeps only the
-- credential's SHA-256 (what the gateway checks) and the key's public half (what the
-- challenge proof verifies with). Running deployments get new ones at their next launch
-- (a coordinator restart relaunches every job).

ALTER TABLE deployments ADD COLUMN credential_sha256 TEXT NOT NULL DEFAULT '';
ALTER TABLE deployments ADD COLUMN route_public_key TEXT NOT NULL DEFAULT '';
ALTER TABLE deployments DROP COLUMN credential;
ALTER TABLE deployments DROP COLUMN route_secret;

-- Why a deployment failed, as a stable code for its hint (`job_exited`, `job_failed`).
ALTER TABLE deployments ADD COLUMN failure_code TEXT;
