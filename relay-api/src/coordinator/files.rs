//! The coordinator's files besides its store. In the data directory (0700),
//! `deployments/<id>/r<N>/` holds revision N of each deployment: its app files (`app/`; a
//! revision deployed before the store kept secrets also has `secrets.json`, 0600); in the job
//! directory (0700, outside the data directory), `<id>/r<N>/agent/` is that revision's job's
//! own writable state. A redeploy's revision sits beside the serving one until it takes
//! over; the engine removes a revision's files when its job has stopped for good.
//!
//! A deploy records its files and secrets in the store, with the revision, in one
//! transaction, and writes the files into the receiving coordinator's data directory first
//! ([`stage`]: a staging directory per revision, moved into place, removed again if the store
//! refuses). So a refused or failed deploy leaves nothing. Any other coordinator on the store
//! writes a revision's files from the store when it launches it ([`materialize`]), checking
//! each path again. [`sweep`] removes what no deployment needs: the stored copies and files of
//! revisions no longer in use and, at startup, what a crash left (staging directories, files
//! of deployments the store does not know, revisions neither serving nor next).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use relay_wire::files::{create_private_dir, write_private};

use super::state::DeploymentState;
use super::store::{RelayStore, RevisionBundle};

/// In a deployment's directory: the app's files.
pub(super) const APP_DIR: &str = "app";

/// In a deployment's directory: the app's secret values (JSON, 0600).
pub(super) const SECRETS_FILE: &str = "secrets.json";

/// Staging directories start with this (never a deployment ID).
const STAGING: &str = ".staging-";

/// A file-system failure; the error names its path (`fs-err`, and `relay-wire`'s private-file
/// helpers word theirs the same way).
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub(crate) struct FilesError(#[from] std::io::Error);

/// Creates the data and job directories (0700) and returns their absolute paths, so jobs and
/// their sandboxes never depend on the working directory. They must be apart: neither may be
/// the other or inside it.
pub(super) fn prepare_dirs(data_dir: &Path, jobs_dir: &Path) -> Result<(PathBuf, PathBuf), FilesError> {
    let apart = |data: &Path, jobs: &Path| {
        if jobs.starts_with(data) || data.starts_with(jobs) {
            return Err(FilesError(std::io::Error::other(format!(
                "{}: the job directory and the data directory {} must be apart (neither inside the other): \
                 choose another --jobs-dir",
                jobs_dir.display(),
                data.display()
            ))));
        }
        Ok(())
    };
    create_private_dir(data_dir)?;
    let data = fs_err::canonicalize(data_dir)?;
    // Checked before the job directory is made (nothing is created inside the data
    // directory), and again once links are resolved.
    let absolute = std::path::absolute(jobs_dir)
        .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", jobs_dir.display())))?;
    apart(&data, &absolute)?;
    create_private_dir(jobs_dir)?;
    let jobs = fs_err::canonicalize(jobs_dir)?;
    apart(&data, &jobs)?;
    create_private_dir(&data.join("deployments"))?;
    Ok((data, jobs))
}

/// The data directory's lock file.
const LOCK_FILE: &str = "coordinator.lock";

/// The data directory's lock, held while a coordinator runs on it: a second coordinator on
/// the same directory would launch every job again and sweep the first one's sandboxes as
/// orphans. Released when dropped, or by the kernel when the process dies (`kill -9`
/// included), so a stale file never blocks.
#[derive(Debug)]
pub(super) struct DataDirLock {
    _file: std::fs::File,
}

/// Takes the data directory's lock, or says who holds it.
pub(super) fn lock_data_dir(data_dir: &Path) -> Result<DataDirLock, FilesError> {
    use fs_err::os::unix::fs::OpenOptionsExt;
    use std::io::{Seek, Write};
    let path = data_dir.join(LOCK_FILE);
    let mut file =
        fs_err::OpenOptions::new().read(true).write(true).create(true).truncate(false).mode(0o600).open(&path)?;
    match rustix::fs::flock(file.file(), rustix::fs::FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => {}
        Err(rustix::io::Errno::WOULDBLOCK) => {
            let holder = fs_err::read_to_string(&path).unwrap_or_default();
            let holder = holder.trim();
            let who = if holder.is_empty() { String::new() } else { format!(" (pid {holder})") };
            return Err(FilesError(std::io::Error::other(format!(
                "{}: another coordinator{who} runs on this data directory (`svc relay serve` or `svc ingress \
                 demo`): stop it first, or choose another --data-dir",
                data_dir.display()
            ))));
        }
        Err(e) => return Err(FilesError(std::io::Error::other(format!("{}: cannot lock it: {e}", path.display())))),
    }
    // Who holds it, for the next one's message.
    file.set_len(0)?;
    file.rewind().map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
    write!(file, "{}", std::process::id())?;
    Ok(DataDirLock { _file: file.into_parts().0 })
}

/// The directory of revision `revision` of deployment `id` under `base` (the data
/// directory's `deployments/`, or the job directory).
pub(crate) fn revision_dir(base: &Path, id: &str, revision: u32) -> PathBuf {
    base.join(id).join(format!("r{revision}"))
}

// An app file's path check and bounds: the ones every bundle has (the publication service's
// artifact uploads too), from the executions' crate.
pub(crate) use svc_execution::bundle::{BundlePathProblem, check_bundle_path};

/// Why a revision's files could not be written from the store.
#[derive(Debug, thiserror::Error)]
pub(crate) enum MaterializeError {
    /// The store keeps no files for the revision (it neither serves nor comes next).
    #[error("the store keeps no files for revision {revision} of deployment {id}")]
    NotStored {
        /// The deployment.
        id: String,
        /// The revision.
        revision: u32,
    },
    /// The store could not be read.
    #[error("reading the files of revision {revision} of deployment {id}: {source}")]
    Store {
        /// The deployment.
        id: String,
        /// The revision.
        revision: u32,
        /// Why.
        #[source]
        source: super::StoreError,
    },
    /// They could not be written.
    #[error(transparent)]
    Files(#[from] FilesError),
}

/// A bundle that cannot be written where it belongs: a deployment ID or a file path a deploy
/// would have refused (the store's copy was damaged, or edited at a SQL prompt).
fn refuse_outside(id: &str, bundle: &RevisionBundle) -> Result<(), FilesError> {
    if !is_deployment_id(id) {
        return Err(FilesError(std::io::Error::other(format!("{id:?} is not a deployment ID; nothing was written"))));
    }
    for (path, _) in &bundle.files {
        if let Err(why) = check_bundle_path(path) {
            return Err(FilesError(std::io::Error::other(format!(
                "deployment {id}: the stored file {path:?} {why}; nothing was written"
            ))));
        }
    }
    Ok(())
}

/// Writes revision `revision` of deployment `id` from the store into `deployments`, unless
/// its files are there already: the deploy recorded them in the store, and whichever
/// coordinator launches the revision (one on a fresh data directory, or not the one that
/// received the deploy) writes them first. Staged and moved into place, so a crash leaves
/// nothing half written.
pub(crate) fn materialize(
    store: &RelayStore,
    deployments: &Path,
    id: &str,
    revision: u32,
) -> Result<(), MaterializeError> {
    if revision_dir(deployments, id, revision).join(APP_DIR).is_dir() {
        return Ok(());
    }
    let stored = store.revision_bundle(id, revision).map_err(|source| MaterializeError::Store {
        id: id.to_owned(),
        revision,
        source,
    })?;
    let bundle = stored.ok_or_else(|| MaterializeError::NotStored { id: id.to_owned(), revision })?;
    stage(deployments, id, revision, &bundle)?.keep();
    Ok(())
}

/// Writes revision `revision` of deployment `id` under `deployments` and moves it into
/// place; removed again unless [`StagedBundle::keep`] is called.
pub(super) fn stage(
    deployments: &Path,
    id: &str,
    revision: u32,
    bundle: &RevisionBundle,
) -> Result<StagedBundle, FilesError> {
    refuse_outside(id, bundle)?;
    let mut staged = StagedBundle::write(deployments, id, revision, &bundle.files)?;
    staged.place()?;
    Ok(staged)
}

/// Records in the store the files of the revisions this data directory holds and the store
/// does not: a data directory written before the store kept them (each deployment's serving
/// and next revision, unless it is stopped). A revision that cannot be read is logged and
/// left as it was (its job still runs from its files). Returns how many revisions were
/// recorded.
pub(super) fn import(store: &RelayStore, deployments: &Path) -> usize {
    let mut imported = 0;
    let Ok(entries) = std::fs::read_dir(deployments) else { return 0 };
    for entry in entries.flatten() {
        let id = entry.file_name().to_string_lossy().into_owned();
        if !is_deployment_id(&id) {
            continue;
        }
        let Ok(d) = store.deployment(&id) else { continue };
        if d.state == DeploymentState::Stopped {
            continue;
        }
        let next = store.successor(&id).ok().flatten().map(|s| s.revision);
        for revision in std::iter::once(d.revision).chain(next) {
            match import_revision(store, deployments, &id, revision) {
                Ok(true) => imported += 1,
                Ok(false) => {}
                Err(e) => tracing::warn!(error = %e, "could not record revision {revision} of {id} in the store"),
            }
        }
    }
    imported
}

/// [`import`] for one revision: whether it was recorded (not if the store had it, or the
/// data directory has no files for it).
fn import_revision(store: &RelayStore, deployments: &Path, id: &str, revision: u32) -> Result<bool, MaterializeError> {
    let failed = |source| MaterializeError::Store { id: id.to_owned(), revision, source };
    let dir = revision_dir(deployments, id, revision);
    let app = dir.join(APP_DIR);
    if !app.is_dir() {
        return Ok(false);
    }
    if store.revision_secrets(id, revision).map_err(failed)?.is_some() {
        forget_clear_secrets(&dir)?;
        return Ok(false);
    }
    let mut files = Vec::new();
    read_tree(&app, "", &mut files)?;
    let secrets = read_secrets(&dir).map_err(|e| FilesError(std::io::Error::other(e.to_string())))?;
    let imported = store.import_revision_bundle(id, revision, &RevisionBundle { files, secrets }).map_err(failed)?;
    forget_clear_secrets(&dir)?;
    Ok(imported)
}

/// Removes a revision's `secrets.json` (written in clear by a version before the store kept
/// secrets) once the store holds them, sealed (issue 40): no clear copy stays on disk.
fn forget_clear_secrets(revision_dir: &Path) -> Result<(), FilesError> {
    match std::fs::remove_file(revision_dir.join(SECRETS_FILE)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(FilesError(std::io::Error::new(
            e.kind(),
            format!("{}: {e}", revision_dir.join(SECRETS_FILE).display()),
        ))),
        _ => Ok(()),
    }
}

/// Every regular file under `dir`, as `/`-separated paths under `prefix` and their bytes.
fn read_tree(dir: &Path, prefix: &str, out: &mut Vec<(String, Vec<u8>)>) -> Result<(), FilesError> {
    for entry in fs_err::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = if prefix.is_empty() { name } else { format!("{prefix}/{name}") };
        let kind = entry.file_type()?;
        if kind.is_dir() {
            read_tree(&entry.path(), &path, out)?;
        } else if kind.is_file() {
            out.push((path, fs_err::read(entry.path())?));
        }
    }
    Ok(())
}

/// A deploy's files, written into a staging directory, moved into place by
/// [`StagedBundle::place`] and kept by [`StagedBundle::keep`]; removed (wherever they are) if
/// dropped before.
#[derive(Debug)]
pub(super) struct StagedBundle {
    path: PathBuf,
    target: PathBuf,
    /// The deployment's directory, if it was made for these files.
    made_dir: Option<PathBuf>,
    kept: bool,
}

impl StagedBundle {
    /// Writes the app's files and the secrets of revision `revision` of deployment `id`
    /// under `deployments`: staged beside the deployment's other revisions when it has some,
    /// else as the whole deployment directory (a new deployment).
    fn write(
        deployments: &Path,
        id: &str,
        revision: u32,
        files: &[(String, Vec<u8>)],
    ) -> Result<StagedBundle, FilesError> {
        let deployment = deployments.join(id);
        // Each revision stages apart (a deploy and a launch may write two revisions at once);
        // a deployment directory made for it goes again with it unless kept.
        let made_dir = if deployment.is_dir() {
            None
        } else {
            create_private_dir(&deployment)?;
            Some(deployment.clone())
        };
        let staged = StagedBundle {
            path: deployment.join(format!("{STAGING}r{revision}")),
            target: revision_dir(deployments, id, revision),
            made_dir,
            kept: false,
        };
        // A staging directory a crash left is replaced.
        let _ = std::fs::remove_dir_all(&staged.path);
        let app = staged.path.join(APP_DIR);
        create_private_dir(&app)?;
        for (path, bytes) in files {
            let target = app.join(path);
            if let Some(parent) = target.parent() {
                create_private_dir(parent)?;
            }
            write_private(&target, bytes)?;
        }
        Ok(staged)
    }

    /// Moves the files into place (an atomic rename).
    fn place(&mut self) -> Result<(), FilesError> {
        fs_err::rename(&self.path, &self.target)?;
        self.path = self.target.clone();
        Ok(())
    }

    /// Keeps the files where they are: the deployment is recorded.
    pub(super) fn keep(mut self) {
        self.kept = true;
    }
}

impl Drop for StagedBundle {
    fn drop(&mut self) {
        if !self.kept {
            let _ = std::fs::remove_dir_all(&self.path);
            if let Some(dir) = &self.made_dir {
                // Only if nothing else is in it now (another revision written meanwhile).
                let _ = std::fs::remove_dir(dir);
            }
        }
    }
}

/// Moves the files of data directories written before the job directory existed
/// (`jobs/<id>/{app,secrets.json,logs}` in the data directory) to `deployments/<id>/`, and
/// removes the rest (the old agent state: a job relaunches with new keys anyway).
pub(super) fn migrate_old_layout(data_dir: &Path) -> Result<(), FilesError> {
    let old = data_dir.join("jobs");
    let Ok(entries) = std::fs::read_dir(&old) else { return Ok(()) };
    for entry in entries {
        let entry = entry?;
        let from = entry.path();
        let to = data_dir.join("deployments").join(entry.file_name());
        if to.exists() || !from.join(APP_DIR).is_dir() {
            continue;
        }
        create_private_dir(&to)?;
        for name in [APP_DIR, SECRETS_FILE] {
            if from.join(name).exists() {
                fs_err::rename(from.join(name), to.join(name))?;
            }
        }
    }
    fs_err::remove_dir_all(&old).map_err(FilesError::from)
}

/// Moves the files of deployments written before revisions (`deployments/<id>/app` and
/// `secrets.json`) to their first revision (`deployments/<id>/r1/`).
pub(super) fn migrate_to_revisions(deployments: &Path) -> Result<(), FilesError> {
    let Ok(entries) = std::fs::read_dir(deployments) else { return Ok(()) };
    for entry in entries.flatten() {
        let dir = entry.path();
        if !is_deployment_id(&entry.file_name().to_string_lossy()) || !dir.join(APP_DIR).is_dir() {
            continue;
        }
        let first = dir.join("r1");
        create_private_dir(&first)?;
        for name in [APP_DIR, SECRETS_FILE] {
            if dir.join(name).exists() {
                fs_err::rename(dir.join(name), first.join(name))?;
            }
        }
    }
    Ok(())
}

/// Removes revision `revision` of deployment `id`: its files and its job's state.
pub(super) fn remove_revision(deployments: &Path, jobs: &Path, id: &str, revision: u32) {
    for base in [deployments, jobs] {
        let _ = std::fs::remove_dir_all(revision_dir(base, id, revision));
    }
}

/// Whether `name` is a revision directory other than those in `keep` (`r` and a number).
fn is_other_revision(name: &str, keep: &[u32]) -> bool {
    name.strip_prefix('r').and_then(|n| n.parse::<u32>().ok()).is_some_and(|n| !keep.contains(&n))
}

/// Whether `name` is a deployment ID (`dep_` and 16 lowercase hex digits): the only names
/// [`sweep`] ever removes (with their staging form), whatever else a directory holds.
fn is_deployment_id(name: &str) -> bool {
    name.strip_prefix("dep_")
        .is_some_and(|hex| hex.len() == 16 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
}

/// Removes the files of stopped deployments, in `deployments` and in `jobs`; at `startup`
/// also staging directories and the files of deployments the store does not know (a crash
/// between placing a deploy's files and recording it). Entries not named like a deployment
/// are never touched. Returns how many directories went.
pub(super) fn sweep(store: &RelayStore, deployments: &Path, jobs: &Path, startup: bool) -> usize {
    // The store's copies first: what no revision in use needs (the secrets with them).
    if let Err(e) = store.sweep_revision_bundles() {
        tracing::warn!(error = %e, "could not remove the stored files of revisions no longer in use");
    }
    let mut removed = 0;
    for dir in [deployments, jobs] {
        let Ok(entries) = std::fs::read_dir(dir) else { continue };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let remove = if let Some(id) = name.strip_prefix(STAGING) {
                startup && is_deployment_id(id)
            } else if !is_deployment_id(&name) {
                false
            } else {
                match store.deployment(&name) {
                    Ok(d) => d.state == DeploymentState::Stopped,
                    Err(super::StoreError::NotFound(_)) => startup,
                    Err(_) => false,
                }
            };
            if remove && std::fs::remove_dir_all(entry.path()).is_ok() {
                removed += 1;
            } else if startup && !remove && is_deployment_id(&name) {
                removed += sweep_revisions(store, &name, &entry.path());
            }
        }
    }
    removed
}

/// At startup: removes the revisions of a deployment that neither serve nor come next
/// (a predecessor whose job a crash cut short, a replaced successor), and staging left.
fn sweep_revisions(store: &RelayStore, id: &str, dir: &Path) -> usize {
    let Ok(d) = store.deployment(id) else { return 0 };
    let mut keep = vec![d.revision];
    match store.successor(id) {
        Ok(Some(s)) => keep.push(s.revision),
        Ok(None) => {}
        Err(_) => return 0,
    }
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let stale =
            name.strip_prefix(STAGING).is_some_and(|r| is_other_revision(r, &[])) || is_other_revision(&name, &keep);
        if stale && std::fs::remove_dir_all(entry.path()).is_ok() {
            removed += 1;
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn scratch(name: &str) -> tempfile::TempDir {
        tempfile::Builder::new().prefix(&format!("svc-relay-files-{name}-")).tempdir().expect("a scratch directory")
    }

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).expect("exists").permissions().mode() & 0o777
    }

    #[test]
    fn a_staged_bundle_is_private_and_stays_only_when_kept() {
        let scratch = scratch("stage");
        let dir = scratch.path();
        std::fs::create_dir_all(dir).expect("mkdir");
        let files = vec![("server.js".to_owned(), b"x".to_vec()), ("lib/a.js".to_owned(), b"y".to_vec())];
        drop(StagedBundle::write(dir, "dep_1", 1, &files).expect("staged"));
        assert_eq!(std::fs::read_dir(dir).expect("read").count(), 0, "a dropped bundle leaves nothing");
        let mut placed = StagedBundle::write(dir, "dep_1", 1, &files).expect("staged");
        placed.place().expect("placed");
        assert!(dir.join("dep_1/r1/app/server.js").is_file());
        drop(placed);
        assert_eq!(std::fs::read_dir(dir).expect("read").count(), 0, "an unkept bundle leaves nothing");

        let mut kept = StagedBundle::write(dir, "dep_2", 1, &files).expect("staged");
        kept.place().expect("placed");
        kept.keep();
        let landed = dir.join("dep_2/r1");
        assert_eq!(std::fs::read(landed.join("app/lib/a.js")).expect("read"), b"y");
        assert_eq!(mode(&landed.join("app/lib")), 0o700);
        assert_eq!(mode(&landed.join("app/server.js")), 0o600);
        assert!(!landed.join(SECRETS_FILE).exists(), "secrets stay in the store");
        assert_eq!(std::fs::read_dir(dir).expect("read").count(), 1, "no staging left");
        // The next revision lands beside the first, which stays.
        let mut next = StagedBundle::write(dir, "dep_2", 2, &files).expect("staged");
        next.place().expect("placed");
        next.keep();
        assert!(dir.join("dep_2/r2/app/server.js").is_file() && dir.join("dep_2/r1/app/server.js").is_file());
        let entries: Vec<String> = std::fs::read_dir(dir.join("dep_2"))
            .expect("read")
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(entries.len(), 2, "no staging left beside the revisions: {entries:?}");
    }

    /// Review finding: the store's copy of a revision (edited at a SQL prompt, or a database
    /// others can write) was written under the data directory as it came.
    #[test]
    fn stored_paths_that_would_leave_the_app_directory_are_refused_when_written() {
        let scratch = scratch("escape");
        let deployments = scratch.path().join("relay").join("deployments");
        std::fs::create_dir_all(&deployments).expect("mkdir");
        let outside = scratch.path().join("outside");
        let bundle =
            |path: &str| RevisionBundle { files: vec![(path.to_owned(), b"x".to_vec())], ..Default::default() };
        for path in ["../../../outside", &outside.display().to_string(), "a//b", "./x", ""] {
            let refused = stage(&deployments, "dep_0123456789abcdef", 1, &bundle(path)).expect_err(path);
            assert!(refused.to_string().contains("nothing was written"), "{refused}");
        }
        let refused = stage(&deployments, "../outside", 1, &bundle("server.js")).expect_err("not an ID");
        assert!(refused.to_string().contains("not a deployment ID"), "{refused}");
        assert!(!outside.exists(), "nothing outside");
        assert_eq!(std::fs::read_dir(&deployments).expect("read").count(), 0, "nothing inside either");
        stage(&deployments, "dep_0123456789abcdef", 1, &bundle("lib/ok.js")).expect("a plain path").keep();
        assert!(deployments.join("dep_0123456789abcdef/r1/app/lib/ok.js").is_file());
    }

    #[test]
    fn a_job_directory_overlapping_the_data_directory_is_refused() {
        let scratch = scratch("overlap");
        let dir = scratch.path();
        let data = dir.join("relay");
        for jobs in [data.clone(), data.join("jobs"), dir.to_path_buf()] {
            let refused = prepare_dirs(&data, &jobs).expect_err("overlapping");
            assert!(refused.to_string().contains("must be apart"), "{refused}");
        }
        assert!(data.is_dir(), "the data directory stays");
    }

    #[test]
    fn a_sweep_removes_unknown_deployments_and_nothing_else() {
        let scratch = scratch("sweep");
        let dir = scratch.path();
        let (data, jobs) = prepare_dirs(&dir.join("relay"), &dir.join("elsewhere")).expect("prepared");
        let store = RelayStore::open(&data).expect("store");
        for name in ["photos", ".config", "dep_0123456789abcdef", ".staging-dep_0123456789abcdef"] {
            std::fs::create_dir_all(jobs.join(name)).expect("mkdir");
        }
        assert_eq!(sweep(&store, &data.join("deployments"), &jobs, false), 0, "nothing stopped, nothing gone");
        assert_eq!(sweep(&store, &data.join("deployments"), &jobs, true), 2, "the unknown deployment and its staging");
        let mut left: Vec<String> = std::fs::read_dir(&jobs)
            .expect("read")
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, [".config", "photos"]);
    }

    #[test]
    fn files_from_before_revisions_become_the_first_revision() {
        let scratch = scratch("revisions");
        let dir = scratch.path();
        let deployments = dir.join("deployments");
        let old = deployments.join("dep_0123456789abcdef");
        std::fs::create_dir_all(old.join("app/lib")).expect("mkdir");
        std::fs::write(old.join("app/lib/a.js"), b"a").expect("write");
        std::fs::write(old.join(SECRETS_FILE), b"{}").expect("write");
        std::fs::create_dir_all(deployments.join("photos/app")).expect("not a deployment");
        migrate_to_revisions(&deployments).expect("migrated");
        assert_eq!(std::fs::read(old.join("r1/app/lib/a.js")).expect("moved"), b"a");
        assert!(old.join("r1").join(SECRETS_FILE).is_file() && !old.join("app").exists());
        assert!(deployments.join("photos/app").is_dir(), "only deployments are touched");
        migrate_to_revisions(&deployments).expect("a second run changes nothing");
        assert!(old.join("r1/app/lib/a.js").is_file());
    }

    /// Issue 40: a revision deployed before the store kept secrets has them in clear in its
    /// `secrets.json`; recorded in the store at start, sealed, the file goes.
    #[test]
    fn a_revisions_clear_secrets_file_is_recorded_sealed_and_removed() {
        use super::super::store::{NewDeployment, PublishedPolicy};
        let scratch = scratch("import");
        let (data, _) = prepare_dirs(&scratch.path().join("relay"), &scratch.path().join("jobs")).expect("prepared");
        let store = RelayStore::open(&data).expect("store");
        let id = "dep_0123456789abcdef";
        let org_id = store.invite("acme").expect("org");
        let policy = PublishedPolicy {
            revision: 1,
            schema_version: 5,
            authored_digest: "sha256:m".into(),
            policy_digest: "sha256:p".into(),
            policy_json: "{}".into(),
            published_at: 0,
        };
        store
            .create_deployment(&NewDeployment {
                id: id.into(),
                org_id,
                project: "p".into(),
                project_json: "{}".into(),
                project_digest: "sha256:p".into(),
                manifest_digest: "sha256:m".into(),
                policy,
                canonical_hostname: "p-acme.localhost".into(),
                route_id: "rt_1".into(),
                ceiling_micros: 1_000_000,
                gateway_operator: "local".into(),
                hostnames: Vec::new(),
                quote: None,
                bundle: RevisionBundle::default(),
            })
            .expect("created");
        // As the version before the store kept a revision's files and secrets left it.
        let conn = rusqlite::Connection::open(data.join(super::super::store::DATABASE_FILE)).expect("the store");
        conn.execute_batch("DELETE FROM revision_files; DELETE FROM revision_secrets;").expect("rows gone");
        let revision = data.join("deployments").join(id).join("r1");
        std::fs::create_dir_all(revision.join(APP_DIR)).expect("mkdir");
        std::fs::write(revision.join(APP_DIR).join("server.js"), b"x").expect("write");
        std::fs::write(revision.join(SECRETS_FILE), br#"{"API_KEY":"clear-value-4d1c"}"#).expect("write");

        assert_eq!(import(&store, &data.join("deployments")), 1, "recorded");
        assert!(!revision.join(SECRETS_FILE).exists(), "no clear copy left");
        let secrets = store.revision_secrets(id, 1).expect("opens").expect("recorded");
        assert_eq!(secrets.get("API_KEY").map(String::as_str), Some("clear-value-4d1c"));
        let stored: String = conn.query_row("SELECT secrets FROM revision_secrets", [], |r| r.get(0)).expect("the row");
        assert!(stored.starts_with("sealed-v1.") && !stored.contains("clear-value"), "{stored}");
    }

    #[test]
    fn only_deployment_names_are_ever_swept() {
        assert!(is_deployment_id("dep_0123456789abcdef"));
        for other in ["photos", ".config", "dep_0123", "dep_0123456789ABCDEF", "dep_0123456789abcdefa", "catalog"] {
            assert!(!is_deployment_id(other), "{other}");
        }
    }

    #[test]
    fn the_job_directory_is_beside_the_data_directory() {
        assert_eq!(super::super::jobs_dir_beside(Path::new("relay")), Path::new("relay-jobs"));
        assert_eq!(
            super::super::jobs_dir_beside(Path::new("/var/lib/svc/relay")),
            Path::new("/var/lib/svc/relay-jobs")
        );
        let scratch = scratch("prepare");
        let dir = scratch.path();
        let (data, jobs) = prepare_dirs(&dir.join("relay"), &dir.join("relay-jobs")).expect("prepared");
        assert!(data.is_absolute() && jobs.is_absolute());
        assert_eq!((mode(&data), mode(&jobs), mode(&data.join("deployments"))), (0o700, 0o700, 0o700));
    }
}

/// Why a revision's secrets could not be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SecretsError {
    /// The file is unreadable.
    #[error("cannot read {path}: {source}", path = path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file is not what the coordinator wrote.
    #[error("{path} is not readable: {source}", path = path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
}

/// The values of a revision's secrets, by name (the secret's ID in its manifest), from its
/// `secrets.json` (none: no file).
pub(crate) fn secret_values(revision_dir: &Path) -> Result<BTreeMap<String, Vec<u8>>, SecretsError> {
    Ok(read_secrets(revision_dir)?.into_iter().map(|(name, value)| (name, value.into_bytes())).collect())
}

/// A revision's `secrets.json` as written (none: no file). Revisions deployed since the store
/// keeps secrets have none; older ones are read from it.
fn read_secrets(revision_dir: &Path) -> Result<BTreeMap<String, String>, SecretsError> {
    let path = revision_dir.join(SECRETS_FILE);
    match std::fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|source| SecretsError::Invalid { path, source }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(BTreeMap::new()),
        Err(source) => Err(SecretsError::Read { path, source }),
    }
}
