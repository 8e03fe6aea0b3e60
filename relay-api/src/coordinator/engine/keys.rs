//! A revision's route keys: the agent API credential and the route key every job of the
//! revision holds. One pair per revision, not per launch, so that the route's replicas (its
//! jobs, one per slot) all authenticate to the gateway and prove the route with the keys the
//! store records for it: a second slot's launch must not lock the first out.
//!
//! The pair is kept in the revision's directory in the data directory (`route-keys.json`,
//! 0600, beside its app files: never in the job's own directory, which the job writes), made
//! at the revision's first launch by this coordinator and reused by every later launch and
//! restart of its slots. The store keeps only the credential's hash and the key's public half.
//! A coordinator that takes the jobs over without the file (a fresh data directory) makes a
//! new pair and records it: every job of the last leader ended with it, and each slot is
//! launched again with the new pair. A file that cannot be read for another reason than its
//! absence fails the launch (a new pair would lock the revision's running jobs out), and so
//! does a new pair while another job of the revision runs (the launcher checks).

use std::path::{Path, PathBuf};

use relay_wire::challenge::RouteKey;
use relay_wire::wire;
use serde::{Deserialize, Serialize};

use crate::coordinator::store::{RouteKeys, StoreError, random_hex};

/// In a revision's directory: its jobs' route credential and route key (JSON, 0600).
pub(crate) const ROUTE_KEYS_FILE: &str = "route-keys.json";

/// Why a revision's keys could not be had (a launch fails with it:
/// [`super::launch::StartError::Keys`]).
#[derive(Debug, thiserror::Error)]
pub(crate) enum KeysError {
    /// The job's route key could not be made.
    #[error("cannot make the job's route key: {0}")]
    RouteKey(#[source] relay_wire::challenge::RouteKeyError),
    /// The revision's route keys could not be kept in its directory.
    #[error("cannot keep the revision's route keys in {path}: {source}", path = path.display())]
    File {
        /// `route-keys.json` in the revision's directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// No randomness for the credential.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What a revision's jobs hold to serve its route.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct RevisionKeys {
    /// The credential for the coordinator's agent API, in clear.
    pub(super) credential: String,
    /// The route key (its file form).
    pub(super) route_key: RouteKey,
}

impl std::fmt::Debug for RevisionKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RevisionKeys").finish_non_exhaustive()
    }
}

impl RevisionKeys {
    /// A new random pair.
    fn generate() -> Result<RevisionKeys, KeysError> {
        Ok(RevisionKeys { credential: random_hex(32)?, route_key: RouteKey::generate().map_err(KeysError::RouteKey)? })
    }

    /// What the store records of them.
    pub(super) fn recorded(&self) -> RouteKeys {
        RouteKeys {
            credential_sha256: wire::sha256_hex(self.credential.as_bytes()),
            route_public_key: self.route_key.public_key(),
        }
    }

    /// The keys kept in revision directory `dir`, and `false`; else a new pair written there,
    /// and `true`. A file that reads but does not parse (damaged) is replaced; one that cannot
    /// be read is an error.
    pub(super) fn kept_or_new(dir: &Path) -> Result<(RevisionKeys, bool), KeysError> {
        let path = dir.join(ROUTE_KEYS_FILE);
        match std::fs::read(&path) {
            Ok(bytes) => {
                if let Ok(kept) = serde_json::from_slice(&bytes) {
                    return Ok((kept, false));
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(keys_file(&path, e)),
        }
        let keys = RevisionKeys::generate()?;
        let json = serde_json::to_vec(&keys).map_err(|e| keys_file(&path, std::io::Error::other(e)))?;
        relay_wire::files::replace_private(&path, &json).map_err(|e| keys_file(&path, e))?;
        Ok((keys, true))
    }
}

fn keys_file(path: &Path, source: std::io::Error) -> KeysError {
    KeysError::File { path: PathBuf::from(path), source }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn a_revisions_keys_are_made_once_kept_private_and_reused() {
        let dir = tempfile::tempdir().expect("a scratch directory");
        let (first, made) = RevisionKeys::kept_or_new(dir.path()).expect("made");
        assert!(made);
        let mode = std::fs::metadata(dir.path().join(ROUTE_KEYS_FILE)).expect("written").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let (again, made) = RevisionKeys::kept_or_new(dir.path()).expect("read");
        assert!(!made);
        assert_eq!(again.recorded(), first.recorded(), "every slot and restart of the revision holds the same keys");
        assert!(!format!("{first:?}").contains(&first.credential), "Debug shows no secret");
        std::fs::write(dir.path().join(ROUTE_KEYS_FILE), b"{damaged").expect("write");
        let (replaced, made) = RevisionKeys::kept_or_new(dir.path()).expect("replaced");
        assert!(made);
        assert_ne!(replaced.recorded(), first.recorded());
        // Unreadable (a directory in its place): an error, not a new pair.
        std::fs::remove_file(dir.path().join(ROUTE_KEYS_FILE)).expect("remove");
        std::fs::create_dir(dir.path().join(ROUTE_KEYS_FILE)).expect("mkdir");
        assert!(matches!(RevisionKeys::kept_or_new(dir.path()), Err(KeysError::File { .. })));
    }
}
