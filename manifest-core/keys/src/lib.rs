//! Secrets at rest, for both services' stores (issue 40).
//!
//! A secret value is stored only as AEAD ciphertext (AES-256-GCM) under a **data key**; data
//! keys are stored in the database only **wrapped** (encrypted) by a **key-encryption key**
//! (KEK) that lives in a 0600 file outside the store. A database reader (a backup, a replica, a
//! `pg_dump`) learns which secrets exist and how long they are, never their values.
//!
//! - [`keyfile`]: the key file (one or more KEKs, the first one current), created 0600, replaced
//!   atomically, refused when others may read it.
//! - [`sealed`]: the sealed format (`version, data key id, nonce, ciphertext+tag`) and the
//!   additional data that binds a ciphertext to its row, so a value moved to another
//!   tenant's row does not open.
//! - [`keyring`]: the data keys a process holds unwrapped, what a store does at start (create
//!   the first key, or refuse a missing or wrong key file) and the steps of a rotation.
//!
//! The store owns the rows (a `data_keys` table of wrapped keys, each secret's sealed bytes);
//! this crate owns every byte of cryptography, so the two stores cannot drift apart.

pub mod keyfile;
pub mod keyring;
pub mod sealed;

pub use keyfile::{KekId, KeyFile};
pub use keyring::{Keyring, RotationLock, Startup, WrappedKey};
pub use sealed::{Context, DataKeyId};

use std::path::PathBuf;

/// What can go wrong with keys and sealed values. Every message says what to do.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// The key file could not be read or written.
    #[error("key file `{path}`: {source}")]
    Io {
        /// The key file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The store holds sealed secrets but the key file is not there.
    #[error(
        "the key file `{path}` does not exist, but the store holds secrets sealed under key-encryption key {kek}: \
         restore the key file from its backup (or pass its path with --key-file); refusing to start rather than serve without secrets"
    )]
    Missing {
        /// Where the key file was looked for.
        path: PathBuf,
        /// A KEK the store needs.
        kek: KekId,
    },
    /// The key file does not hold the KEK that wraps one of the store's data keys.
    #[error(
        "the key file `{path}` does not hold key-encryption key {kek}, which wraps the store's data key {data_key}: \
         this is another store's key file or an old copy; use the key file this store was created or last rotated with"
    )]
    WrongKey {
        /// The key file.
        path: PathBuf,
        /// The KEK the store needs.
        kek: KekId,
        /// The data key it wraps.
        data_key: DataKeyId,
    },
    /// The key file may be read by others.
    #[error("the key file `{path}` has mode {mode:04o}: others may read it; run `chmod 600 {path}`")]
    Permissions {
        /// The key file.
        path: PathBuf,
        /// Its mode bits.
        mode: u32,
    },
    /// The key file's contents are not what this crate writes.
    #[error("the key file `{path}`, line {line}: {reason}")]
    Malformed {
        /// The key file.
        path: PathBuf,
        /// The 1-based line.
        line: usize,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A wrapped data key or a sealed value did not open: its bytes were changed, or it was
    /// moved to another row.
    #[error("{what} did not open: its bytes were changed or it belongs to another row")]
    Corrupt {
        /// What did not open.
        what: &'static str,
    },
    /// A sealed value names a data key this process does not hold and the store does not have.
    #[error("a sealed value names data key {0}, which the store does not hold")]
    UnknownDataKey(DataKeyId),
    /// Another rotation of the same key file is running.
    #[error(
        "another rotation of the key file `{path}` is running (it holds `{path}.lock`): let it finish, then look at the store's keys again"
    )]
    Busy {
        /// The key file.
        path: PathBuf,
    },
    /// The key file lost a key the store needs while a rotation ran.
    #[error(
        "the key file `{path}` no longer holds key-encryption key {kek}, which the store's data keys need: \
         it was changed during the rotation; nothing was removed from it. Put back the copy that holds {kek}"
    )]
    Changed {
        /// The key file.
        path: PathBuf,
        /// The KEK it lacks.
        kek: KekId,
    },
    /// The system's random number generator failed.
    #[error("the system's random number generator failed")]
    Random,
}

/// Fills `out` from the system's random number generator.
pub(crate) fn random(out: &mut [u8]) -> Result<(), KeyError> {
    use ring::rand::SecureRandom;
    ring::rand::SystemRandom::new().fill(out).map_err(|_| KeyError::Random)
}
