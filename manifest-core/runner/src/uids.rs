//! Job uids, each given to one job at a time on the whole host. A runner takes the lowest
//! uid it does not use; when jobs get uids of their own (the service runs as root), the uid
//! is also reserved host-wide by `flock` on a file named after it in [`HOST_RESERVATIONS`],
//! so two services on one host (two relay coordinators, two `svc serve` instances) never run
//! two tenants' jobs as one uid. A lock dies with its process, `kill -9` included, so a
//! crashed service leaves nothing to clear.

use std::collections::BTreeSet;
use std::fs::File;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::{JobUid, LaunchError};

/// Where job uids are reserved host-wide (by a service running as root).
pub const HOST_RESERVATIONS: &str = "/run/svc-job-uids";

/// How many uids a runner hands out, from its base.
pub(crate) const UID_COUNT: u32 = 65_536;

/// The uids a runner hands out: `base` and up.
#[derive(Debug, Clone)]
pub(crate) struct Uids {
    base: u32,
    taken: Arc<Mutex<BTreeSet<u32>>>,
    /// Where each uid is reserved host-wide, if jobs get uids of their own.
    host: Option<PathBuf>,
}

impl Uids {
    /// Uids from `base`, reserved host-wide in `host` (made, 0700, if missing).
    pub(crate) fn new(base: u32, host: Option<&Path>) -> std::io::Result<Uids> {
        if let Some(dir) = host {
            std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
        }
        Ok(Uids { base, taken: Arc::default(), host: host.map(Path::to_owned) })
    }

    /// Takes the lowest uid neither this runner nor another process on the host uses.
    pub(crate) fn lease(&self, job: &str) -> Result<UidLease, LaunchError> {
        let mut taken = self.taken.lock().map_err(|_| LaunchError::NoUid { job: job.to_owned(), running: 0 })?;
        for slot in (0..UID_COUNT).filter(|n| !taken.contains(n)) {
            let id = self.base.saturating_add(slot);
            let reservation = match &self.host {
                None => None,
                Some(dir) => match reserve(dir, id) {
                    Ok(Some(file)) => Some(file),
                    // Another service's job has it.
                    Ok(None) => continue,
                    Err(source) => {
                        return Err(LaunchError::Prepare {
                            job: job.to_owned(),
                            path: dir.join(id.to_string()),
                            source,
                        });
                    }
                },
            };
            taken.insert(slot);
            return Ok(UidLease {
                uid: JobUid { uid: id, gid: id },
                slot,
                taken: self.taken.clone(),
                _reservation: reservation,
            });
        }
        Err(LaunchError::NoUid { job: job.to_owned(), running: taken.len() })
    }
}

/// Locks `dir/<uid>`: the open file holds the reservation, `None` if another process does.
fn reserve(dir: &Path, uid: u32) -> std::io::Result<Option<File>> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(dir.join(uid.to_string()))?;
    match rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(Some(file)),
        Err(e) if e == rustix::io::Errno::WOULDBLOCK => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// A job uid in use; given back when dropped (after the job's processes are gone), here and
/// on the host.
#[derive(Debug)]
pub(crate) struct UidLease {
    pub(crate) uid: JobUid,
    slot: u32,
    taken: Arc<Mutex<BTreeSet<u32>>>,
    /// The host-wide reservation, released as the file closes.
    _reservation: Option<File>,
}

impl Drop for UidLease {
    fn drop(&mut self) {
        if let Ok(mut taken) = self.taken.lock() {
            taken.remove(&self.slot);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by hand (issue 19, two coordinators on one host): each runner handed out uids
    /// from its own base alone, so two services on a host ran two tenants' jobs as uid
    /// 2000000000 at once.
    #[test]
    fn two_runners_on_one_host_never_give_one_uid_to_two_jobs() {
        let dir = tempfile::tempdir().expect("a scratch directory");
        let host = dir.path().join("uids");
        let (a, b) = (Uids::new(1_000, Some(&host)).expect("a"), Uids::new(1_000, Some(&host)).expect("b"));
        let first = a.lease("a1").expect("a uid");
        let second = b.lease("b1").expect("a uid");
        let third = a.lease("a2").expect("a uid");
        assert_eq!((first.uid.uid, second.uid.uid, third.uid.uid), (1_000, 1_001, 1_002));
        drop(second);
        assert_eq!(a.lease("a3").expect("a uid").uid.uid, 1_001, "given back on the host once its job ended");
        let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&host).expect("made").permissions());
        assert_eq!(mode & 0o777, 0o700);
    }

    #[test]
    fn without_host_reservations_a_runner_counts_its_own_uids_only() {
        let (a, b) = (Uids::new(7, None).expect("a"), Uids::new(7, None).expect("b"));
        let (x, y) = (a.lease("a").expect("a uid"), b.lease("b").expect("a uid"));
        assert_eq!((x.uid.uid, y.uid.uid), (7, 7));
        assert_eq!(a.lease("a2").expect("a uid").uid.uid, 8);
    }
}
