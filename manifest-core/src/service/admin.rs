//! Offline administration on a data directory (`svc admin ...`). Each command is one write
//! transaction on the same store the server uses; the server reads everything per request, so
//! a running server sees the change at once.

use std::path::{Path, PathBuf};

pub use svc_sql::StoreAt;

use crate::formats::{IPFS_CID, SHA256_DIGEST};
use crate::service::auth::{Role, issue_token};
use crate::service::capability::{Capability, Tier};
use crate::service::store::{
    AcceptedArtifact, ArtifactEvidence, NewToken, Organization, RuntimeImage, StoreError, Transaction,
};
use crate::shape::Pattern;

/// Why an administration command failed.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// An argument is not valid; the message says which and why.
    #[error("{0}")]
    Invalid(String),
}

/// An artifact as given on the command line.
#[derive(Debug, Clone)]
pub struct ArtifactArgs {
    /// `ipfs://...` (a runtime image's bootstrap).
    pub cid: String,
    /// `sha256:...` (a runtime image's bootstrap).
    pub digest: String,
    /// `ipfs_bundle` or `runtime_image`.
    pub kind: String,
    /// `none` or `aes256_gcm`.
    pub encryption: String,
    /// For a runtime image: the image's digest.
    pub image_digest: Option<String>,
}

/// Where an accepted artifact version was built.
#[derive(Debug, Clone)]
pub struct BuildArgs {
    /// `owner/repository`.
    pub repository: String,
    /// The ref built.
    pub git_ref: String,
    /// The workflow reference.
    pub workflow_ref: String,
    /// The manifest's path.
    pub manifest_path: String,
}

/// The store an admin command works on, and the key file that unwraps its secrets.
#[derive(Debug, Clone)]
pub struct Target {
    /// Where the store lives.
    pub at: StoreAt,
    /// The key file (`--key-file`; by default `secrets.key` in the data directory).
    pub key_file: PathBuf,
}

impl Target {
    /// The store at `at`, its key file `key_file`, or by default the one in `data_dir`.
    pub fn new(at: StoreAt, key_file: Option<PathBuf>, data_dir: &Path) -> Target {
        Target { at, key_file: key_file.unwrap_or_else(|| data_dir.join(crate::service::store::KEY_FILE)) }
    }
}

impl From<&Target> for Target {
    fn from(target: &Target) -> Target {
        target.clone()
    }
}

/// SQLite in the data directory, with the key file in it.
impl From<&Path> for Target {
    fn from(dir: &Path) -> Target {
        Target::new(StoreAt::DataDir(dir.to_owned()), None, dir)
    }
}

impl From<&PathBuf> for Target {
    fn from(dir: &PathBuf) -> Target {
        Target::from(dir.as_path())
    }
}

/// Opens the store and starts its keys; what the start did (a key file made, values sealed)
/// is said on standard error.
fn open(target: impl Into<Target>) -> Result<std::sync::Arc<dyn crate::service::store::ServiceStore>, AdminError> {
    let target = target.into();
    let opened = crate::service::store::open(&target.at, &target.key_file)?;
    for notice in opened.keys.notices() {
        eprintln!("svc admin: {notice}");
    }
    Ok(opened.store)
}

fn with_store<T>(
    target: impl Into<Target>,
    f: impl FnOnce(&mut dyn Transaction) -> Result<T, AdminError>,
) -> Result<T, AdminError> {
    let store = open(target)?;
    let mut tx = store.write()?;
    let value = f(tx.as_mut())?;
    tx.commit()?;
    Ok(value)
}

fn existing(tx: &mut dyn Transaction, org: &str) -> Result<Organization, AdminError> {
    tx.organization(org)?.ok_or_else(|| {
        AdminError::Invalid(format!(
            "no organization \"{org}\"; `svc admin token create --org {org} --role owner` creates it"
        ))
    })
}

fn check(value: &str, what: &str, p: &Pattern) -> Result<(), AdminError> {
    if (p.check)(value) {
        Ok(())
    } else {
        Err(AdminError::Invalid(format!("{what} \"{value}\" is not {}", p.describe)))
    }
}

fn evidence(a: &ArtifactArgs) -> Result<ArtifactEvidence, AdminError> {
    check(&a.cid, "--cid", &IPFS_CID)?;
    check(&a.digest, "--digest", &SHA256_DIGEST)?;
    if !["ipfs_bundle", "runtime_image"].contains(&a.kind.as_str()) {
        return Err(AdminError::Invalid(format!("--kind \"{}\" is not ipfs_bundle or runtime_image", a.kind)));
    }
    if !["none", "aes256_gcm"].contains(&a.encryption.as_str()) {
        return Err(AdminError::Invalid(format!("--encryption \"{}\" is not none or aes256_gcm", a.encryption)));
    }
    match (&a.image_digest, a.kind.as_str()) {
        (Some(d), "runtime_image") => check(d, "--image-digest", &SHA256_DIGEST)?,
        (None, "runtime_image") => {
            return Err(AdminError::Invalid(
                "a runtime image needs --image-digest (and its bootstrap as --cid/--digest)".into(),
            ));
        }
        (Some(_), _) => return Err(AdminError::Invalid("--image-digest is only for --kind runtime_image".into())),
        (None, _) => {}
    }
    Ok(ArtifactEvidence {
        cid: a.cid.clone(),
        digest: a.digest.clone(),
        kind: a.kind.clone(),
        encryption: a.encryption.clone(),
        image_digest: a.image_digest.clone(),
    })
}

/// A token just created: the plaintext (shown only once), its public ID and its name.
#[derive(Debug, Clone)]
pub struct CreatedToken {
    /// `svc_` and 64 hex digits; never stored.
    pub plaintext: String,
    /// `tok_` and 16 hex digits.
    pub id: String,
    /// What activity and the console show (`--name`, else the role and the ID's first digits).
    pub name: String,
}

/// Creates a token (and the organization if new).
pub fn token_create(
    at: impl Into<Target>,
    org: &str,
    role: Role,
    name: Option<&str>,
) -> Result<CreatedToken, AdminError> {
    crate::names::organization(org).map_err(|e| AdminError::Invalid(e.to_string()))?;
    if let Some(n) = name {
        crate::names::token_name(n).map_err(|e| AdminError::Invalid(e.to_string()))?;
    }
    let token = issue_token().map_err(|e| AdminError::Invalid(e.to_string()))?;
    let name = name.map_or_else(|| crate::names::default_token_name(role.as_str(), &token.id), str::to_owned);
    with_store(at, |tx| {
        let organization = tx.ensure_organization(org)?;
        let new = NewToken { id: token.id.clone(), role, name: name.clone(), hash: token.hash.clone() };
        tx.insert_token(organization.id, &new)?;
        Ok(CreatedToken { plaintext: token.plaintext.clone(), id: token.id.clone(), name: name.clone() })
    })
}

/// Curates an artifact (global).
pub fn artifact_curate(at: impl Into<Target>, artifact: &ArtifactArgs) -> Result<(), AdminError> {
    let e = evidence(artifact)?;
    with_store(at, |tx| Ok(tx.curate(&e)?))
}

/// Accepts an artifact version built for an application.
pub fn artifact_accept(
    at: impl Into<Target>,
    org: &str,
    application_id: &str,
    build: &BuildArgs,
    artifact: &ArtifactArgs,
) -> Result<(), AdminError> {
    let e = evidence(artifact)?;
    check(&build.repository, "--repository", &crate::formats::REPOSITORY)?;
    check(&build.git_ref, "--ref", &crate::formats::GIT_REF)?;
    check(&build.workflow_ref, "--workflow-ref", &crate::formats::WORKFLOW_REF)?;
    check(&build.manifest_path, "--manifest-path", &crate::formats::SAFE_RELATIVE_PATH)?;
    with_store(at, |tx| {
        let organization = existing(tx, org)?;
        let accepted = AcceptedArtifact {
            repository: build.repository.clone(),
            git_ref: build.git_ref.clone(),
            workflow_ref: build.workflow_ref.clone(),
            manifest_path: build.manifest_path.clone(),
            evidence: e,
        };
        Ok(tx.accept(organization.id, application_id, &accepted)?)
    })
}

/// Grants or revokes a capability.
pub fn capability_set(at: impl Into<Target>, org: &str, name: &str, granted: bool) -> Result<(), AdminError> {
    let Some(capability) = Capability::parse(name) else {
        let names: Vec<_> = Capability::ALL.iter().map(|c| c.name()).collect();
        return Err(AdminError::Invalid(format!(
            "no capability \"{name}\"; the capabilities are {}",
            names.join(", ")
        )));
    };
    with_store(at, |tx| {
        let organization = existing(tx, org)?;
        Ok(tx.set_grant(organization.id, capability.name(), granted)?)
    })
}

/// Sets the organization's entitlement tier.
pub fn entitlement_set(at: impl Into<Target>, org: &str, tier: Tier) -> Result<(), AdminError> {
    with_store(at, |tx| {
        let organization = existing(tx, org)?;
        Ok(tx.set_tier(organization.id, tier)?)
    })
}

/// Sets (or, with `None`, clears) the organization's spend authority per job: at most
/// 2^63 - 1 micros, the store's range (a larger value is refused, never saturated).
pub fn spend_authority_set(at: impl Into<Target>, org: &str, micros: Option<u64>) -> Result<(), AdminError> {
    if let Some(m) = micros.filter(|&m| i64::try_from(m).is_err()) {
        return Err(AdminError::Invalid(format!("--micros {m} is out of range: at most {} micros", i64::MAX)));
    }
    with_store(at, |tx| {
        let organization = existing(tx, org)?;
        Ok(tx.set_spend_authority(organization.id, micros)?)
    })
}

/// Adds an operator SSH public key to the organization.
pub fn ssh_key_add(at: impl Into<Target>, org: &str, public_key: &str) -> Result<(), AdminError> {
    let key = public_key.trim();
    let valid = key.split_whitespace().count() >= 2
        && ["ssh-ed25519 ", "ssh-rsa ", "ecdsa-sha2-"].iter().any(|p| key.starts_with(p));
    if !valid {
        return Err(AdminError::Invalid(
            "the key is not an OpenSSH public key line (`ssh-ed25519 AAAA... comment`)".into(),
        ));
    }
    with_store(at, |tx| {
        let organization = existing(tx, org)?;
        Ok(tx.add_ssh_key(organization.id, key)?)
    })
}

/// Marks a secret as provisioned for an application, with its value for the application's
/// jobs when given (at most 64 KiB).
pub fn secret_provision(
    at: impl Into<Target>,
    org: &str,
    application_id: &str,
    secret_id: &str,
    value: Option<&[u8]>,
) -> Result<(), AdminError> {
    check(secret_id, "--secret-id", &crate::formats::SECRET_ID)?;
    if let Some(v) = value.filter(|v| v.len() > MAX_SECRET_BYTES) {
        return Err(AdminError::Invalid(format!(
            "the secret's value has {} bytes; the most is {MAX_SECRET_BYTES}",
            v.len()
        )));
    }
    with_store(at, |tx| {
        let organization = existing(tx, org)?;
        match value {
            Some(v) => Ok(tx.set_secret_value(organization.id, application_id, secret_id, v)?),
            None => Ok(tx.provision_secret(organization.id, application_id, secret_id)?),
        }
    })
}

/// Rotates the store's keys (`svc admin keys rotate`) while the service keeps running: a
/// new key-encryption key in the key file, a new data key, every value resealed; see
/// [`crate::service::store::keys::rotate`].
pub fn keys_rotate(target: impl Into<Target>) -> Result<crate::service::store::Rotation, AdminError> {
    let target = target.into();
    let store = open(&target)?;
    Ok(crate::service::store::keys::rotate(store.as_ref(), &target.key_file)?)
}

/// The largest secret value kept.
pub const MAX_SECRET_BYTES: usize = 64 * 1024;

/// Stores a bundle directory in the data directory's artifact store (`artifacts/`), the one
/// the local pool launches from; its digest. With `expected`, another digest is refused.
pub fn artifact_store(dir: &Path, bundle: &Path, expected: Option<&str>) -> Result<String, AdminError> {
    if let Some(d) = expected {
        check(d, "--digest", &SHA256_DIGEST)?;
    }
    let store = svc_execution::artifacts::ArtifactStore::open(dir.join("artifacts"))
        .map_err(|e| AdminError::Invalid(format!("the artifact store: {e}")))?;
    store.store(bundle, expected).map_err(|e| AdminError::Invalid(e.to_string()))
}

/// Stores a bundle read into memory (each relative path with its bytes; `executable` names
/// the files kept executable) in the data directory's artifact store, as [`artifact_store`]
/// stores a directory: the same files have the same digest. With `expected`, another digest
/// is refused.
pub fn artifact_store_files(
    dir: &Path,
    files: &std::collections::BTreeMap<String, Vec<u8>>,
    executable: &std::collections::BTreeSet<String>,
    expected: Option<&str>,
) -> Result<String, AdminError> {
    if let Some(d) = expected {
        check(d, "--digest", &SHA256_DIGEST)?;
    }
    let store = svc_execution::artifacts::ArtifactStore::open(dir.join("artifacts"))
        .map_err(|e| AdminError::Invalid(format!("the artifact store: {e}")))?;
    store.store_files(files, executable, expected).map_err(|e| AdminError::Invalid(e.to_string()))
}

/// Adds an exact image version to a runtime catalog.
pub fn image_add(at: impl Into<Target>, image: &RuntimeImage) -> Result<(), AdminError> {
    let exact = image.version.split('.').count() == 3 && (crate::formats::IMAGE_VERSION.check)(&image.version);
    if !exact {
        return Err(AdminError::Invalid(format!("--version \"{}\" is not an exact MAJOR.MINOR.PATCH", image.version)));
    }
    check(&image.digest, "--digest", &SHA256_DIGEST)?;
    with_store(at, |tx| Ok(tx.add_runtime_image(image)?))
}
