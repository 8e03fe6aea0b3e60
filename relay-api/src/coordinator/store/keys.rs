//! Secrets at rest (issue 40, point 1): the relay store's secret values (a revision's
//! secrets, `revision_secrets.secrets`) are stored only sealed by `svc_keys` (AES-256-GCM)
//! under a data key, bound to their row; the data keys are stored only wrapped by a
//! key-encryption key (KEK) in a 0600 key file outside the store (default
//! `DATA_DIR/secrets.key`, `--key-file`, `SVC_RELAY_KEY_FILE`). The publication store does the
//! same, in the same steps.
//!
//! - **Start** ([`start`], every command that opens the store): the stored data keys and the
//!   key file make a [`Keyring`]; a store without data keys gets its first one (and a key file
//!   if there is none); a key file that is missing, another store's, or readable by others
//!   refuses the start. Then values an older version stored in clear are sealed, in batches.
//! - **Sealing** ([`put_secrets`]) reads the current data key (the highest id) in the
//!   transaction that writes the value; **opening** ([`open_secrets`]) reads the sealed value
//!   with its data key joined, so a key this process has not seen yet (made by a rotation on
//!   another instance) unwraps.
//! - **Rotation** ([`RelayStore::rotate_keys`]): the steps of `svc_keys::keyring`, while the
//!   coordinators keep serving.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use svc_keys::sealed::{from_text, to_text};
use svc_keys::{Context, DataKeyId, KekId, KeyError, Keyring, Startup, WrappedKey};
use zeroize::Zeroizing;

use super::backend::{Backend, StoredSecret, Transaction};
use super::{RelayStore, StoreAt, StoreError, now_ms};

/// The key file's name in the coordinator's data directory, where it is by default.
pub const KEY_FILE: &str = "secrets.key";

/// Values sealed (or resealed) per transaction.
const BATCH: u32 = 100;

/// Rounds of a rotation's reseal-then-delete (a value written under an older key meanwhile,
/// by an instance that had not read the new key yet, is resealed by the next round).
const ROUNDS: usize = 5;

/// The table of the sealed values, the first part of their row context.
const SECRETS_TABLE: &str = "revision_secrets";

/// Where a relay store lives, and the key file that unwraps its data keys.
#[derive(Debug, Clone)]
pub struct OpenAt {
    /// The store: SQLite in a data directory, or a PostgreSQL database.
    pub store: StoreAt,
    /// The key file (shared by every coordinator on one database).
    pub key_file: PathBuf,
}

impl OpenAt {
    /// `store`, its secrets sealed with the keys of `key_file`.
    pub fn new(store: StoreAt, key_file: PathBuf) -> OpenAt {
        OpenAt { store, key_file }
    }

    /// The SQLite store of data directory `dir`, with its key file there.
    pub fn data_dir(dir: &Path) -> OpenAt {
        OpenAt { store: StoreAt::DataDir(dir.to_owned()), key_file: default_key_file(dir) }
    }
}

impl From<&Path> for OpenAt {
    fn from(dir: &Path) -> OpenAt {
        OpenAt::data_dir(dir)
    }
}

impl From<&PathBuf> for OpenAt {
    fn from(dir: &PathBuf) -> OpenAt {
        OpenAt::data_dir(dir)
    }
}

impl From<&OpenAt> for OpenAt {
    fn from(at: &OpenAt) -> OpenAt {
        at.clone()
    }
}

/// The key file of the coordinator whose data directory is `data_dir`, unless told another.
pub fn default_key_file(data_dir: &Path) -> PathBuf {
    data_dir.join(KEY_FILE)
}

/// The row context of a revision's secrets: its organization, deployment and revision.
fn context(org_id: &str, deployment_id: &str, revision: u32) -> Context {
    Context::new(SECRETS_TABLE, &[org_id, deployment_id, &revision.to_string()])
}

fn no_data_key() -> StoreError {
    StoreError::Backend("the store has no data key (it was opened without its start)".into())
}

/// What a store does with its keys when it opens: the [`Keyring`] (see the module's doc).
pub(super) fn start(backend: &dyn Backend, key_file: &Path) -> Result<Keyring, StoreError> {
    let stored = read(backend, |tx| tx.data_keys())?;
    let Startup { keyring, first_key, created_key_file } = Keyring::start(key_file, &stored)?;
    let keyring = match first_key {
        None => keyring,
        Some(first) => {
            if write(backend, |tx| tx.insert_data_key(&first, now_ms()))? {
                keyring
            } else {
                // Another instance on the database made the first data key a moment ago: its
                // key, not ours, unwrapped from the store (with the key file both must share).
                let stored = read(backend, |tx| tx.data_keys())?;
                Keyring::start(key_file, &stored)?.keyring
            }
        }
    };
    if created_key_file {
        tracing::info!(
            "svc relay: created the key file {} that seals the store's secrets: back it up apart from the database \
             (without it they cannot be read), and give every coordinator on the same database this file (--key-file)",
            key_file.display()
        );
    }
    let sealed = seal_in_clear(backend, &keyring)?;
    if sealed > 0 {
        tracing::info!("svc relay: sealed the secrets of {sealed} revisions an older version stored in clear");
        backend.forget_old_pages();
    }
    Ok(keyring)
}

fn read<T>(
    backend: &dyn Backend,
    op: impl FnOnce(&mut dyn Transaction) -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    let mut tx = backend.read()?;
    op(tx.as_mut())
}

fn write<T>(
    backend: &dyn Backend,
    op: impl FnOnce(&mut dyn Transaction) -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    let mut tx = backend.write()?;
    let value = op(tx.as_mut())?;
    tx.commit()?;
    Ok(value)
}

/// Seals the values stored in clear (by an older version), a batch a transaction: how many.
fn seal_in_clear(backend: &dyn Backend, keys: &Keyring) -> Result<u64, StoreError> {
    let mut sealed = 0;
    loop {
        let (found, done) = write(backend, |tx| reseal_batch(tx, keys, false))?;
        sealed += done;
        if found == 0 || done == 0 {
            return Ok(sealed);
        }
    }
}

/// One transaction's batch: the values in clear and, with `older`, those under a data key
/// older than the current one, sealed under the current one. (found, resealed).
fn reseal_batch(tx: &mut dyn Transaction, keys: &Keyring, older: bool) -> Result<(u64, u64), StoreError> {
    let current = tx.current_data_key()?.ok_or_else(no_data_key)?;
    let rows = tx.secrets_to_seal(older.then_some(current.id), BATCH)?;
    let mut done = 0;
    for row in &rows {
        let ctx = context(&row.org_id, &row.deployment_id, row.revision);
        let sealed = match &row.data_key {
            None => keys.seal(&current, &ctx, row.value.as_bytes())?,
            Some(old) => keys.reseal(&ctx, &sealed_bytes(row)?, Some(old), &current)?,
        };
        if tx.reseal_secret(row, &to_text(&sealed), current.id)? {
            done += 1;
        }
    }
    Ok((rows.len() as u64, done))
}

fn sealed_bytes(row: &StoredSecret) -> Result<Vec<u8>, StoreError> {
    from_text(&row.value).ok_or(StoreError::Keys(KeyError::Corrupt { what: "a revision's sealed secrets" }))
}

/// Seals `secrets` for revision `revision` of deployment `deployment_id` under the current
/// data key, read in `tx`, and records them there.
pub(super) fn put_secrets(
    keys: &Keyring,
    tx: &mut dyn Transaction,
    deployment_id: &str,
    revision: u32,
    secrets: &BTreeMap<String, String>,
) -> Result<(), StoreError> {
    let current = tx.current_data_key()?.ok_or_else(no_data_key)?;
    let org_id =
        tx.secrets_org(deployment_id)?.ok_or_else(|| StoreError::NotFound(format!("deployment {deployment_id}")))?;
    let json = Zeroizing::new(
        serde_json::to_vec(secrets)
            .map_err(|e| StoreError::Backend(format!("the secrets of revision {revision}: {e}").into()))?,
    );
    let sealed = keys.seal(&current, &context(&org_id, deployment_id, revision), &json)?;
    tx.insert_revision_secrets(deployment_id, revision, &to_text(&sealed), current.id)
}

/// The values of `stored`, by name: opened with the data key stored beside it (a value in
/// clear, which an older version wrote and this one seals at its next start, is read as is).
pub(crate) fn open_secrets(keys: &Keyring, stored: &StoredSecret) -> Result<BTreeMap<String, String>, StoreError> {
    let (id, revision) = (&stored.deployment_id, stored.revision);
    let json = match &stored.data_key {
        None => Zeroizing::new(stored.value.clone().into_bytes()),
        Some(key) => keys.open(&context(&stored.org_id, id, revision), &sealed_bytes(stored)?, Some(key))?,
    };
    // The parse error says where, never what: the value is a secret.
    serde_json::from_slice(&json).map_err(|e| {
        StoreError::Backend(
            format!("the stored secrets of revision {revision} of {id} are not a JSON object (line {})", e.line())
                .into(),
        )
    })
}

/// The store's data keys and what they seal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyCensus {
    /// The data keys, wrapped, by id.
    pub data_keys: Vec<WrappedKey>,
    /// How many revisions' secrets each data key seals (`None`: in clear), by id.
    pub sealed_by: Vec<(Option<DataKeyId>, u64)>,
}

/// What a rotation did (`svc relay admin keys rotate`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Rotation {
    /// The key file.
    pub key_file: PathBuf,
    /// The key file's KEKs before, the current one first.
    pub previous_keks: Vec<String>,
    /// Its KEK now (the only one, unless an older data key still needs another).
    pub kek: String,
    /// The new data key's id.
    pub data_key: DataKeyId,
    /// Older data keys wrapped again under the new KEK.
    pub rewrapped: usize,
    /// Values sealed again under the new data key.
    pub resealed: u64,
    /// Older data keys deleted (no value named them any more).
    pub deleted: u64,
    /// Data keys the store holds now.
    pub data_keys: usize,
}

impl RelayStore {
    /// A rotation, while coordinators keep serving: a new KEK in the key file, a new data
    /// key, the older ones wrapped again, every value sealed again under the new key, the
    /// older keys deleted and the key file's older KEKs forgotten (`svc_keys::keyring`).
    pub fn rotate_keys(&self) -> Result<Rotation, StoreError> {
        let keys = &self.keys;
        let _rotating = keys.lock_rotation()?;
        let previous_keks = keys.keks().iter().map(|k| k.to_string()).collect();
        // 1. The new KEK, on disk before anything is wrapped under it.
        let kek = keys.rotate_file()?;
        // 2. One transaction: the new data key, and the older ones wrapped under the new KEK.
        let (data_key, rewrapped) = self.write(|tx| -> Result<_, StoreError> {
            let stored = tx.data_keys()?;
            let next = stored
                .iter()
                .map(|k| k.id)
                .max()
                .unwrap_or(0)
                .checked_add(1)
                .ok_or_else(|| StoreError::Backend("the data keys' ids are exhausted".into()))?;
            for key in &stored {
                tx.rewrap_data_key(&keys.rewrap(key)?)?;
            }
            let new = keys.new_data_key(next)?;
            if !tx.insert_data_key(&new, now_ms())? {
                return Err(StoreError::Backend(format!("data key {next} was made meanwhile").into()));
            }
            Ok((new.id, stored.len()))
        })?;
        // 3-4. Every value sealed again under the newest key, then the keys none names
        // deleted; again if an instance wrote under an older key meanwhile.
        let (mut resealed, mut deleted) = (0, 0);
        for _ in 0..ROUNDS {
            loop {
                let (found, done) = self.write(|tx| reseal_batch(tx, keys, true))?;
                resealed += done;
                if found == 0 || done == 0 {
                    break;
                }
            }
            deleted += self.write(|tx| {
                let current = tx.current_data_key()?.ok_or_else(no_data_key)?;
                tx.delete_unused_data_keys(current.id)
            })?;
            if self.read(|tx| tx.data_keys())?.len() == 1 {
                break;
            }
        }
        // 5. The key file keeps the KEKs the data keys still need (the new one).
        let stored = self.read(|tx| tx.data_keys())?;
        let needed: BTreeSet<KekId> = stored.iter().map(|k| k.kek.clone()).collect();
        keys.forget_keks(&needed)?;
        self.backend.forget_old_pages();
        Ok(Rotation {
            key_file: self.key_file.clone(),
            previous_keks,
            kek: kek.to_string(),
            data_key,
            rewrapped,
            resealed,
            deleted,
            data_keys: stored.len(),
        })
    }

    /// The data keys, and how many revisions' secrets each seals.
    pub fn key_census(&self) -> Result<KeyCensus, StoreError> {
        self.read(|tx| Ok(KeyCensus { data_keys: tx.data_keys()?, sealed_by: tx.secrets_by_data_key()? }))
    }

    /// The keys this store seals and opens its secrets with.
    pub(crate) fn keys(&self) -> &Keyring {
        &self.keys
    }
}
