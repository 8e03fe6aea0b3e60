//! The data keys a process holds unwrapped, and what a store does with them.
//!
//! The store keeps a table of [`WrappedKey`]s (id, the KEK's id, the wrapped bytes); the
//! **current** data key is the one with the highest id, so every instance on one database
//! seals under the same key once it reads the table. Each sealed row also names its data key
//! in a column with a foreign key, so a data key still in use is never deleted.
//!
//! At start ([`Keyring::start`]): a store without data keys gets its first one (and a key
//! file, if there is none); a store with data keys needs the key file that wraps them, or the
//! process refuses to start. A rotation ([`Keyring::rotate_file`], then the store's steps):
//!
//! 1. a fresh KEK becomes the key file's current one, the old kept after it;
//! 2. one transaction: a new data key (id = highest + 1) under the new KEK, every older data
//!    key re-wrapped under it ([`Keyring::rewrap`]);
//! 3. batches of rows sealed under older keys re-sealed under the new one ([`Keyring::reseal`]),
//!    until none is left;
//! 4. older data keys no row names are deleted;
//! 5. KEKs no data key needs leave the key file ([`Keyring::forget_keks`]).
//!
//! Instances running meanwhile keep serving: a value under a data key they do not hold is
//! unwrapped from the store's row, and a KEK they do not hold is looked for again in the key
//! file (re-read once per miss), which the rotation wrote before using the new KEK.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use ring::aead::{LessSafeKey, NONCE_LEN, Nonce};
use zeroize::Zeroizing;

use crate::KeyError;
use crate::keyfile::{KekId, KeyFile};
use crate::sealed::{self, Context, DataKeyId};

/// A data key as the store keeps it: encrypted under a KEK.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WrappedKey {
    /// Its id.
    pub id: DataKeyId,
    /// The KEK that wraps it.
    pub kek: KekId,
    /// The nonce, then the key encrypted, then the tag.
    pub wrapped: Vec<u8>,
}

/// What [`Keyring::start`] found.
#[derive(Debug)]
pub struct Startup {
    /// The keys, ready to seal and open.
    pub keyring: Keyring,
    /// A store without data keys: its first one, for the store to insert (if another
    /// instance inserted one first, insert nothing and [`Keyring::admit`] the stored one).
    pub first_key: Option<WrappedKey>,
    /// The key file was created now (say so: it must be backed up).
    pub created_key_file: bool,
}

/// A rotation's hold on its key file ([`Keyring::lock_rotation`]); released when dropped
/// (or when the process ends, however it ends).
#[derive(Debug)]
pub struct RotationLock {
    _file: std::fs::File,
}

/// The data keys a process holds, and the key file that unwraps more.
#[derive(Debug)]
pub struct Keyring {
    file: Mutex<KeyFile>,
    keys: RwLock<HashMap<DataKeyId, Arc<LessSafeKey>>>,
}

impl Keyring {
    /// What a store does at start, given the data keys it holds (`stored`, any order).
    ///
    /// No data keys: reads the key file at `path`, creating it if missing, and makes the
    /// first data key. Data keys: the key file must exist and hold the KEK of each, and each
    /// must unwrap; otherwise an error that says which key is needed and what to do.
    pub fn start(path: &Path, stored: &[WrappedKey]) -> Result<Startup, KeyError> {
        let mut created_key_file = false;
        let file = match KeyFile::read(path)? {
            Some(file) => file,
            None => match stored.first() {
                Some(key) => return Err(KeyError::Missing { path: path.to_owned(), kek: key.kek.clone() }),
                None => match KeyFile::create(path) {
                    Ok(file) => {
                        created_key_file = true;
                        file
                    }
                    // Another instance created it a moment ago: use theirs.
                    Err(KeyError::Io { source, .. }) if source.kind() == std::io::ErrorKind::AlreadyExists => {
                        KeyFile::read(path)?.ok_or_else(|| KeyError::Io { path: path.to_owned(), source })?
                    }
                    Err(e) => return Err(e),
                },
            },
        };
        let keyring = Self { file: Mutex::new(file), keys: RwLock::new(HashMap::new()) };
        for key in stored {
            keyring.admit(key)?;
        }
        let first_key = if stored.is_empty() { Some(keyring.new_data_key(1)?) } else { None };
        Ok(Startup { keyring, first_key, created_key_file })
    }

    /// Unwraps `key` (read from the store) and holds it. Re-reads the key file once when it
    /// does not hold the KEK (another instance rotated).
    pub fn admit(&self, key: &WrappedKey) -> Result<(), KeyError> {
        if self.keys.read().unwrap_or_else(PoisonError::into_inner).contains_key(&key.id) {
            return Ok(());
        }
        let mut file = self.file.lock().unwrap_or_else(PoisonError::into_inner);
        if file.get(&key.kek).is_none()
            && let Some(reread) = KeyFile::read(file.path())?
        {
            *file = reread;
        }
        let Some(kek) = file.get(&key.kek) else {
            return Err(KeyError::WrongKey { path: file.path().to_owned(), kek: key.kek.clone(), data_key: key.id });
        };
        let data_key = unwrap_with(&kek.key, key)?;
        self.keys.write().unwrap_or_else(PoisonError::into_inner).insert(key.id, Arc::new(data_key));
        Ok(())
    }

    /// Whether this process holds data key `id` unwrapped.
    pub fn holds(&self, id: DataKeyId) -> bool {
        self.keys.read().unwrap_or_else(PoisonError::into_inner).contains_key(&id)
    }

    /// `plaintext` sealed for the row `context` under the current data key `current` (the
    /// store's highest, read in the same transaction as the write).
    pub fn seal(&self, current: &WrappedKey, context: &Context, plaintext: &[u8]) -> Result<Vec<u8>, KeyError> {
        self.admit(current)?;
        sealed::seal(&*self.key(current.id)?, current.id, context, plaintext)
    }

    /// The plaintext of `sealed`, of the row `context`. `wrapped` is the data key it names
    /// as the store has it: needed only when this process does not hold that key yet.
    pub fn open(
        &self,
        context: &Context,
        sealed: &[u8],
        wrapped: Option<&WrappedKey>,
    ) -> Result<Zeroizing<Vec<u8>>, KeyError> {
        let id = sealed::data_key_id(sealed)?;
        if !self.holds(id) {
            match wrapped {
                Some(key) if key.id == id => self.admit(key)?,
                _ => return Err(KeyError::UnknownDataKey(id)),
            }
        }
        sealed::open(&*self.key(id)?, id, context, sealed)
    }

    /// `sealed` (under an older data key) sealed again under `current`.
    pub fn reseal(
        &self,
        context: &Context,
        sealed: &[u8],
        old: Option<&WrappedKey>,
        current: &WrappedKey,
    ) -> Result<Vec<u8>, KeyError> {
        let plaintext = self.open(context, sealed, old)?;
        self.seal(current, context, &plaintext)
    }

    /// A fresh data key with id `id`, wrapped under the current KEK, and held.
    pub fn new_data_key(&self, id: DataKeyId) -> Result<WrappedKey, KeyError> {
        let mut bytes = Zeroizing::new([0u8; 32]);
        crate::random(bytes.as_mut_slice())?;
        let file = self.file.lock().unwrap_or_else(PoisonError::into_inner);
        let wrapped = wrap_with(file.current(), id, &bytes)?;
        self.keys.write().unwrap_or_else(PoisonError::into_inner).insert(id, Arc::new(sealed::aead_key(&bytes)));
        Ok(wrapped)
    }

    /// `key` wrapped again under the current KEK (a rotation's step 2).
    pub fn rewrap(&self, key: &WrappedKey) -> Result<WrappedKey, KeyError> {
        let file = self.file.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(kek) = file.get(&key.kek) else {
            return Err(KeyError::WrongKey { path: file.path().to_owned(), kek: key.kek.clone(), data_key: key.id });
        };
        let bytes = unwrap_bytes(&kek.key, key)?;
        wrap_with(file.current(), key.id, &bytes)
    }

    /// A rotation's step 1: a fresh KEK becomes the key file's current one (the old ones kept
    /// after it), written to disk before anything is wrapped under it. Its id.
    pub fn rotate_file(&self) -> Result<KekId, KeyError> {
        let mut file = self.file.lock().unwrap_or_else(PoisonError::into_inner);
        let current = KeyFile::read(file.path())?
            .ok_or_else(|| KeyError::Missing { path: file.path().to_owned(), kek: file.current_id().clone() })?;
        let rotated = current.with_new_current()?;
        rotated.save()?;
        let id = rotated.current_id().clone();
        *file = rotated;
        Ok(id)
    }

    /// Holds the key file's rotation lock (`FILE.lock`, an exclusive `flock`) until the guard
    /// is dropped: two rotations at once would each save the key file without the other's new
    /// KEK. Refused at once, not waited for, when another process holds it.
    pub fn lock_rotation(&self) -> Result<RotationLock, KeyError> {
        let path = self.file.lock().unwrap_or_else(PoisonError::into_inner).path().to_owned();
        let mut name = path.file_name().map(std::ffi::OsStr::to_os_string).unwrap_or_default();
        name.push(".lock");
        let lock_path = path.with_file_name(name);
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(false);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let file = options.open(&lock_path).map_err(|source| KeyError::Io { path: lock_path.clone(), source })?;
        match rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => Ok(RotationLock { _file: file }),
            Err(rustix::io::Errno::WOULDBLOCK) => Err(KeyError::Busy { path }),
            Err(e) => Err(KeyError::Io { path: lock_path, source: e.into() }),
        }
    }

    /// A rotation's last step: the key file keeps only the KEKs in `needed` (the ones the
    /// store's data keys name) and the current one. Refused, removing nothing, when the file
    /// on disk lacks one of `needed` (it was changed meanwhile).
    pub fn forget_keks(&self, needed: &BTreeSet<KekId>) -> Result<(), KeyError> {
        let mut file = self.file.lock().unwrap_or_else(PoisonError::into_inner);
        let current = KeyFile::read(file.path())?
            .ok_or_else(|| KeyError::Missing { path: file.path().to_owned(), kek: file.current_id().clone() })?;
        if let Some(lost) = needed.iter().find(|id| current.get(id).is_none()) {
            return Err(KeyError::Changed { path: file.path().to_owned(), kek: lost.clone() });
        }
        let kept = current.retain(|id| needed.contains(id));
        kept.save()?;
        *file = kept;
        Ok(())
    }

    /// The key file's current KEK's id.
    pub fn current_kek(&self) -> KekId {
        self.file.lock().unwrap_or_else(PoisonError::into_inner).current_id().clone()
    }

    /// Every KEK the key file holds, the current one first.
    pub fn keks(&self) -> Vec<KekId> {
        self.file.lock().unwrap_or_else(PoisonError::into_inner).ids().cloned().collect()
    }

    fn key(&self, id: DataKeyId) -> Result<Arc<LessSafeKey>, KeyError> {
        self.keys.read().unwrap_or_else(PoisonError::into_inner).get(&id).cloned().ok_or(KeyError::UnknownDataKey(id))
    }
}

/// The additional data of a wrapped key: its id, so a wrapped key moved to another id does
/// not unwrap.
fn wrap_aad(id: DataKeyId) -> Vec<u8> {
    let mut aad = b"svc-data-key-v1\0".to_vec();
    aad.extend_from_slice(&id.to_be_bytes());
    aad
}

fn wrap_with(kek: &crate::keyfile::Kek, id: DataKeyId, bytes: &[u8; 32]) -> Result<WrappedKey, KeyError> {
    let mut nonce = [0u8; NONCE_LEN];
    crate::random(&mut nonce)?;
    let mut body = Zeroizing::new(bytes.to_vec());
    sealed::aead_key(&kek.key)
        .seal_in_place_append_tag(Nonce::assume_unique_for_key(nonce), ring::aead::Aad::from(wrap_aad(id)), &mut *body)
        .map_err(|_| KeyError::Corrupt { what: "a data key to wrap" })?;
    let mut wrapped = nonce.to_vec();
    wrapped.extend_from_slice(&body);
    Ok(WrappedKey { id, kek: kek.id.clone(), wrapped })
}

fn unwrap_bytes(kek: &[u8; 32], key: &WrappedKey) -> Result<Zeroizing<[u8; 32]>, KeyError> {
    let corrupt = || KeyError::Corrupt { what: "a wrapped data key" };
    if key.wrapped.len() != NONCE_LEN + 32 + 16 {
        return Err(corrupt());
    }
    let mut nonce = [0u8; NONCE_LEN];
    nonce.copy_from_slice(&key.wrapped[..NONCE_LEN]);
    let mut body = Zeroizing::new(key.wrapped[NONCE_LEN..].to_vec());
    let plain = sealed::aead_key(kek)
        .open_in_place(Nonce::assume_unique_for_key(nonce), ring::aead::Aad::from(wrap_aad(key.id)), &mut body)
        .map_err(|_| corrupt())?;
    let mut bytes = Zeroizing::new([0u8; 32]);
    bytes.copy_from_slice(plain);
    Ok(bytes)
}

fn unwrap_with(kek: &[u8; 32], key: &WrappedKey) -> Result<LessSafeKey, KeyError> {
    Ok(sealed::aead_key(&*unwrap_bytes(kek, key)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row() -> Context {
        Context::new("provisioned_secrets", &["1", "web", "API_KEY"])
    }

    #[test]
    fn a_fresh_store_gets_a_key_file_and_a_first_key_and_a_restart_opens_what_it_sealed() {
        let dir = tempfile::tempdir().expect("scratch");
        let path = dir.path().join("secrets.key");
        let started = Keyring::start(&path, &[]).expect("started");
        assert!(started.created_key_file);
        let first = started.first_key.expect("a first key");
        let sealed = started.keyring.seal(&first, &row(), b"hunter2").expect("sealed");

        let restarted = Keyring::start(&path, std::slice::from_ref(&first)).expect("restarted");
        assert!(restarted.first_key.is_none() && !restarted.created_key_file);
        assert_eq!(restarted.keyring.open(&row(), &sealed, None).expect("opens").as_slice(), b"hunter2");
    }

    #[test]
    fn a_store_with_keys_refuses_a_missing_or_another_stores_key_file() {
        let dir = tempfile::tempdir().expect("scratch");
        let path = dir.path().join("secrets.key");
        let first = Keyring::start(&path, &[]).expect("started").first_key.expect("key");
        std::fs::rename(&path, dir.path().join("moved.key")).expect("move");
        let missing = Keyring::start(&path, std::slice::from_ref(&first)).expect_err("refused").to_string();
        assert!(missing.contains("does not exist") && missing.contains("refusing to start"), "{missing}");
        assert!(!path.exists(), "no new key file made for a store that has keys");

        let other = dir.path().join("other.key");
        KeyFile::create(&other).expect("another store's file");
        let wrong = Keyring::start(&other, std::slice::from_ref(&first)).expect_err("refused").to_string();
        assert!(wrong.contains(&format!("does not hold key-encryption key {}", first.kek)), "{wrong}");
    }

    #[test]
    fn a_rotation_reseals_under_a_new_key_and_another_instance_follows_it() {
        let dir = tempfile::tempdir().expect("scratch");
        let path = dir.path().join("secrets.key");
        let started = Keyring::start(&path, &[]).expect("started");
        let first = started.first_key.expect("key");
        let admin = started.keyring;
        let sealed = admin.seal(&first, &row(), b"hunter2").expect("sealed");
        // Another instance, started before the rotation.
        let running = Keyring::start(&path, std::slice::from_ref(&first)).expect("running").keyring;

        let old_kek = first.kek.clone();
        let new_kek = admin.rotate_file().expect("rotated file");
        assert_eq!(admin.keks(), vec![new_kek.clone(), old_kek.clone()]);
        let second = admin.new_data_key(2).expect("new data key");
        let first_rewrapped = admin.rewrap(&first).expect("rewrapped");
        assert_eq!(second.kek, new_kek);
        assert_eq!(first_rewrapped.kek, new_kek);
        let resealed = admin.reseal(&row(), &sealed, None, &second).expect("resealed");
        assert_eq!(sealed::data_key_id(&resealed).expect("id"), 2);
        admin.forget_keks(&BTreeSet::from([new_kek.clone()])).expect("forgot");
        assert_eq!(
            KeyFile::read(&path).expect("read").expect("there").ids().cloned().collect::<Vec<_>>(),
            vec![new_kek]
        );

        // The running instance meets key 2, wrapped under a KEK it has not read yet.
        assert!(matches!(running.open(&row(), &resealed, None), Err(KeyError::UnknownDataKey(2))));
        assert_eq!(running.open(&row(), &resealed, Some(&second)).expect("opens").as_slice(), b"hunter2");
        // A new instance needs only the new key file.
        let fresh = Keyring::start(&path, &[first_rewrapped, second]).expect("starts after rotation").keyring;
        assert_eq!(fresh.open(&row(), &resealed, None).expect("opens").as_slice(), b"hunter2");
    }

    #[test]
    fn a_second_rotation_at_once_is_refused_and_a_changed_file_keeps_its_keys() {
        let dir = tempfile::tempdir().expect("scratch");
        let path = dir.path().join("secrets.key");
        let started = Keyring::start(&path, &[]).expect("started");
        let first = started.first_key.expect("key");
        let one = started.keyring;
        let other = Keyring::start(&path, std::slice::from_ref(&first)).expect("another process").keyring;
        let held = one.lock_rotation().expect("the first rotation's lock");
        let busy = other.lock_rotation().expect_err("refused").to_string();
        assert!(busy.contains("another rotation") && busy.contains("secrets.key.lock"), "{busy}");
        drop(held);
        other.lock_rotation().expect("free again");

        // A rotation whose file lost the KEK the store needs removes nothing.
        let new_kek = one.rotate_file().expect("rotated");
        KeyFile::create(&dir.path().join("elsewhere.key")).expect("made");
        std::fs::rename(dir.path().join("elsewhere.key"), &path).expect("replaced behind its back");
        let changed = one.forget_keks(&BTreeSet::from([new_kek.clone()])).expect_err("refused").to_string();
        assert!(changed.contains(&format!("no longer holds key-encryption key {new_kek}")), "{changed}");
    }

    #[test]
    fn a_wrapped_key_moved_to_another_id_does_not_unwrap() {
        let dir = tempfile::tempdir().expect("scratch");
        let path = dir.path().join("secrets.key");
        let started = Keyring::start(&path, &[]).expect("started");
        let mut moved = started.first_key.expect("key");
        moved.id = 9;
        let error = Keyring::start(&path, &[moved]).expect_err("refused").to_string();
        assert!(error.contains("did not open"), "{error}");
    }
}
