-- Version 4: an organization's inputs revision, counted up by every write to what layers 3-7
-- of a publication read (grants, tier, spend authority, SSH keys, provisioned secrets,
-- accepted artifacts; curated artifacts and runtime images, global, count up every
-- organization's). A publication decided on a snapshot is written only if the revision it
-- read still holds (`Transaction::publish_decided`).
ALTER TABLE organizations ADD COLUMN inputs_rev INTEGER NOT NULL DEFAULT 0;
