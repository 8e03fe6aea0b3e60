//! Secrets at rest (issue 40, point 1): every provisioned secret value is stored sealed
//! (AES-256-GCM) under a data key, and data keys only wrapped by a key-encryption key (KEK)
//! kept in a 0600 key file outside the store (`svc_keys` does every byte of cryptography).
//!
//! - [`start`], on every command that opens the store (`svc serve`, `svc admin ...`): reads
//!   the data keys and the key file ([`Keyring::start`]); a store without data keys gets its
//!   first one (and a key file, if there is none: say so, it must be backed up); a store with
//!   data keys and a missing or wrong key file is refused. Then any value an older version
//!   stored in clear is sealed, in batches.
//! - Each write seals its value in the transaction that reads the current data key (the
//!   highest id); a launch opens its job's values with their data key joined, so a key this
//!   process does not hold yet (another instance rotated) unwraps from the store's row.
//! - [`rotate`] (`svc admin keys rotate`), while instances keep serving: the steps of
//!   `svc_keys::keyring` (a new KEK in the key file; one transaction for a new data key and
//!   every older one re-wrapped; values resealed in batches; older data keys no value names
//!   deleted; KEKs no data key needs dropped from the key file).
//!
//! The relay's store (`relay-api`, `coordinator::keys`) does the same with the same steps.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use svc_keys::{DataKeyId, KekId, Keyring, WrappedKey};

use super::{ServiceStore, StoreError, StoredSecret};

/// The key file's name in the data directory, where it is unless `--key-file` (or
/// `SVC_KEY_FILE`) says otherwise.
pub const KEY_FILE: &str = "secrets.key";

/// Values sealed (or resealed) per transaction: each batch holds the writers' lock briefly.
const BATCH: u32 = 100;

/// How many times a rotation reseals and deletes older data keys before it says which are
/// still in use (a value written under an older key meanwhile is resealed by the next pass).
const ROTATION_PASSES: usize = 5;

/// The keys a store seals and opens its secret values with: empty until [`start`].
#[derive(Default, Clone)]
pub struct Keys(Arc<OnceLock<Arc<Keyring>>>);

impl Keys {
    /// The keyring, once started.
    pub(crate) fn get(&self) -> Option<Arc<Keyring>> {
        self.0.get().cloned()
    }

    fn started(&self) -> Result<Arc<Keyring>, StoreError> {
        self.get().ok_or_else(|| StoreError::Backend("the store's keys were not started".into()))
    }
}

impl std::fmt::Debug for Keys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never a key: whether they are started.
        f.debug_struct("Keys").field("started", &self.0.get().is_some()).finish()
    }
}

/// What [`start`] found and did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeysStarted {
    /// The key file.
    pub key_file: PathBuf,
    /// It was created now (the store had no data key and there was no file).
    pub created_key_file: bool,
    /// Values an older version had stored in clear, sealed now.
    pub sealed: u64,
}

impl KeysStarted {
    /// What the command says about it: nothing, unless a key file was made or values sealed.
    pub fn notices(&self) -> Vec<String> {
        let mut notices = Vec::new();
        if self.created_key_file {
            notices.push(format!(
                "created the key file {} (0600): the store's secrets cannot be read without it; \
                 back it up apart from the database, and give every instance on this store the same file (--key-file)",
                self.key_file.display()
            ));
        }
        if self.sealed > 0 {
            notices.push(format!(
                "sealed {} secret value{} an older version had stored in clear",
                self.sealed,
                if self.sealed == 1 { "" } else { "s" }
            ));
        }
        notices
    }
}

/// Starts `store`'s keys with the key file at `key_file`: see the module's doc. Refused
/// ([`StoreError::Keys`], which says what to do) when the store has data keys and the key
/// file is missing, is another store's, or may be read by others.
pub fn start(store: &dyn ServiceStore, key_file: &Path) -> Result<KeysStarted, StoreError> {
    let stored = store.read()?.data_keys()?;
    let mut started = Keyring::start(key_file, &stored)?;
    let created_key_file = started.created_key_file;
    if let Some(first) = started.first_key.take() {
        let mut tx = store.write()?;
        let inserted = tx.insert_data_key(&first, now_ms())?;
        let stored = if inserted { Vec::new() } else { tx.data_keys()? };
        tx.commit()?;
        if !inserted {
            // Another instance made the first data key a moment ago (under the same key
            // file, or this one is refused): start again on theirs.
            started = Keyring::start(key_file, &stored)?;
        }
    }
    let keyring = Arc::new(started.keyring);
    // Another `start` of this store (a test opening it twice) keeps the first keyring.
    let _ = store.keys().0.set(keyring);
    let sealed = seal_stale(store)?;
    if sealed > 0 {
        store.compact()?;
    }
    Ok(KeysStarted { key_file: key_file.to_owned(), created_key_file, sealed })
}

/// Seals, in batches of [`BATCH`] per transaction, every value not sealed under the current
/// data key: values in clear, and values under older data keys. How many.
fn seal_stale(store: &dyn ServiceStore) -> Result<u64, StoreError> {
    let keyring = store.keys().started()?;
    let mut count = 0;
    loop {
        let mut tx = store.write()?;
        let Some(current) = tx.current_data_key()? else { return Ok(count) };
        let batch = tx.secrets_to_seal(Some(current.id), BATCH)?;
        if batch.is_empty() {
            return Ok(count);
        }
        for old in &batch {
            let sealed = reseal(&keyring, old, &current)?;
            if tx.reseal_secret(old, &sealed, current.id)? {
                count += 1;
            }
        }
        tx.commit()?;
    }
}

/// `old`'s value sealed under `current`: opened first if sealed, taken as it is if in clear.
fn reseal(keyring: &Keyring, old: &StoredSecret, current: &WrappedKey) -> Result<Vec<u8>, StoreError> {
    let row = super::rows::secret_context(old.organization, &old.application_id, &old.secret_id);
    Ok(match &old.data_key {
        None => keyring.seal(current, &row, &old.value)?,
        Some(key) => keyring.reseal(&row, &old.value, Some(key), current)?,
    })
}

/// What [`rotate`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rotation {
    /// The key file.
    pub key_file: PathBuf,
    /// The KEK the key file held before (its current one).
    pub old_kek: KekId,
    /// The new KEK, now the key file's only one.
    pub new_kek: KekId,
    /// The new data key, which seals every value now.
    pub data_key: DataKeyId,
    /// Older data keys wrapped again under the new KEK (and then deleted once unused).
    pub rewrapped: usize,
    /// Values resealed under the new data key.
    pub resealed: u64,
    /// Older data keys deleted.
    pub deleted: u64,
}

impl Rotation {
    /// What `svc admin keys rotate` prints.
    pub fn report(&self) -> String {
        format!(
            "key-encryption key {new} replaces {old} in {file}\n\
             data key {key} seals every secret value now: {resealed} value{s} resealed, {deleted} older data key{ds} deleted\n\
             back the key file up again: the old copy opens only database backups taken before this rotation\n\
             several instances on this store: each must read this key file (--key-file); copy it to every host that has its own\n",
            new = self.new_kek,
            old = self.old_kek,
            file = self.key_file.display(),
            key = self.data_key,
            resealed = self.resealed,
            s = if self.resealed == 1 { "" } else { "s" },
            deleted = self.deleted,
            ds = if self.deleted == 1 { "" } else { "s" },
        )
    }
}

/// Rotates the keys of `store` (started by [`start`] with `key_file`) while instances keep
/// serving: the steps in the module's doc.
pub fn rotate(store: &dyn ServiceStore, key_file: &Path) -> Result<Rotation, StoreError> {
    let keyring = store.keys().started()?;
    let _rotating = keyring.lock_rotation()?;
    let old_kek = keyring.current_kek();
    // 1. A fresh KEK in the key file, before anything is wrapped under it.
    let new_kek = keyring.rotate_file()?;
    // 2. One transaction: a new data key under it, every older one wrapped again.
    let (data_key, rewrapped) = {
        let mut tx = store.write()?;
        let stored = tx.data_keys()?;
        let id = stored
            .iter()
            .map(|k| k.id)
            .max()
            .unwrap_or(0)
            .checked_add(1)
            .ok_or_else(|| StoreError::Backend("the store's data key ids are used up".into()))?;
        let fresh = keyring.new_data_key(id)?;
        for key in &stored {
            tx.rewrap_data_key(&keyring.rewrap(key)?)?;
        }
        if !tx.insert_data_key(&fresh, now_ms())? {
            return Err(StoreError::Conflict(format!("data key {id} was made meanwhile: rotate again")));
        }
        tx.commit()?;
        (id, stored.len())
    };
    // 3 and 4, until no value and no data key older than the new one is left.
    let mut resealed = 0;
    let mut deleted = 0;
    for _ in 0..ROTATION_PASSES {
        resealed += seal_stale(store)?;
        let mut tx = store.write()?;
        deleted += tx.delete_unused_data_keys(data_key)?;
        let left = tx.data_keys()?.iter().filter(|k| k.id < data_key).count();
        tx.commit()?;
        if left == 0 {
            break;
        }
    }
    // 5. The key file keeps the KEKs the store's data keys still need (after step 2, the
    // new one alone).
    let needed: BTreeSet<KekId> = store.read()?.data_keys()?.into_iter().map(|k| k.kek).collect();
    keyring.forget_keks(&needed)?;
    // The pages and log frames that held the data keys wrapped under the old KEK, and the
    // values sealed under the old data key, go too: a copy of the database taken from now
    // on opens nothing with the old key file.
    store.compact()?;
    Ok(Rotation { key_file: key_file.to_owned(), old_kek, new_kek, data_key, rewrapped, resealed, deleted })
}

/// Now, in Unix ms (a data key's `created_at`).
fn now_ms() -> i64 {
    super::rows::int(crate::service::clock::now_ms())
}
