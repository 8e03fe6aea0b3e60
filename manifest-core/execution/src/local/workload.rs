//! A job order's workload as the one confined process that runs it: the artifact read-only at
//! `/app`, a native image read-only at `/image`, the secret files at their own paths, and
//! exactly the workload's environment.
//!
//! A refusal is the tenant's to read (issue 39, point 6): it names the artifact's digest and
//! paths inside the job, never the host's; what only the host knows (its store's and scratch
//! directories, its programs, the OS error) goes to the service's log ([`Refusal::on_host`]).

use std::ffi::{OsStr, OsString};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use fs_err::os::unix::fs::OpenOptionsExt;
use svc_runner::{Confined, Mount};

use crate::artifacts::{ArtifactError, ArtifactStore};
use crate::market::{Refusal, Sidecar, Workload, WorkloadRuntime};

/// Where the artifact appears inside the job (its working directory).
pub const APP_INSIDE: &str = "/app";

/// Where a native image appears inside the job.
pub const IMAGE_INSIDE: &str = "/image";

/// Where a secret file may not go: the job's other mounts and the system's own.
const RESERVED: [&str; 11] =
    [APP_INSIDE, IMAGE_INSIDE, "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/dev"];

/// The process that runs `workload`; its secret files are written under `scratch` (the
/// job's own directory, 0700).
pub(super) fn confine(
    workload: &Workload,
    store: &ArtifactStore,
    node: &OsStr,
    scratch: &Path,
) -> Result<Confined, Refusal> {
    let mut mounts = Vec::new();
    let (argv, cwd) = match &workload.runtime {
        WorkloadRuntime::Javascript { engine, entry_file, args } => {
            let (program, leading): (&OsStr, &[&str]) = match engine.as_str() {
                "nodejs" => (node, &[]),
                "deno" => (OsStr::new("deno"), &["run", "--allow-all"]),
                "bun" => (OsStr::new("bun"), &["run"]),
                other => {
                    return Err(Refusal::Start(format!(
                        "the javascript engine {other:?} is unknown: the local pool runs nodejs, deno and bun"
                    )));
                }
            };
            // The program may be a path of the host (`SVC_NODE`): the log has it, the tenant
            // the engine.
            let program = svc_runner::which(program).map_err(|e| {
                Refusal::Start(format!("the javascript engine {engine} is not installed on the job's processor"))
                    .on_host(format_args!("`{}`: {e}", program.to_string_lossy()))
            })?;
            let entry = relative(entry_file).ok_or_else(|| {
                Refusal::Start(format!(
                    "the entry file {entry_file:?} must be a path inside the artifact (relative, no `..`)"
                ))
            })?;
            mounts.push(artifact(store, &workload.artifact_digest, APP_INSIDE)?);
            let mut argv = vec![program.into_os_string()];
            argv.extend(leading.iter().map(OsString::from));
            argv.push(Path::new(APP_INSIDE).join(entry).into_os_string());
            argv.extend(args.iter().map(OsString::from));
            (argv, APP_INSIDE)
        }
        WorkloadRuntime::NativeImage { image_digest, executable, args } => {
            let executable = relative(executable).ok_or_else(|| {
                Refusal::Start(format!(
                    "the executable {executable:?} must be a path inside the image (relative, no `..`)"
                ))
            })?;
            let image = artifact(store, image_digest, IMAGE_INSIDE)?;
            let runnable = fs_err::symlink_metadata(image.host.join(&executable))
                .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0);
            if !runnable {
                return Err(Refusal::Start(format!(
                    "the image {image_digest} has no executable file {}",
                    executable.display()
                )));
            }
            mounts.push(image);
            // An image may run alone, or beside the application's own artifact.
            let cwd = if workload.artifact_digest.is_empty() {
                IMAGE_INSIDE
            } else {
                mounts.push(artifact(store, &workload.artifact_digest, APP_INSIDE)?);
                APP_INSIDE
            };
            let mut argv = vec![Path::new(IMAGE_INSIDE).join(executable).into_os_string()];
            argv.extend(args.iter().map(OsString::from));
            (argv, cwd)
        }
    };
    mounts.extend(secret_files(&workload.files, scratch)?);
    Ok(Confined { argv, env: workload.env.clone(), mounts, cwd: cwd.into() })
}

/// The stored artifact `digest`, checked again, shown read-only at `inside`.
fn artifact(store: &ArtifactStore, digest: &str, inside: &str) -> Result<Mount, Refusal> {
    let host = store.path(digest).map_err(|e| artifact_refusal(store, digest, inside, &e))?;
    // Shared by every job of the artifact: it keeps its owner (0644 files, 0755 directories).
    Ok(Mount { host, inside: inside.into(), writable: false, job_owned: false })
}

/// Why the stored artifact `digest` (to be shown at `inside`) cannot be used, as the tenant
/// reads it: its digest, and a file by its path inside the job; the store's directory and the
/// OS error go to the log.
fn artifact_refusal(store: &ArtifactStore, digest: &str, inside: &str, e: &ArtifactError) -> Refusal {
    // `<store>/sha256-<hex>/<path in the artifact>` is `<inside>/<path in the artifact>`.
    let in_job = |path: &Path| {
        let within = path.strip_prefix(store.dir()).ok().map(|p| p.components().skip(1).collect::<PathBuf>());
        within.map_or_else(|| "a file of the artifact".to_owned(), |p| Path::new(inside).join(p).display().to_string())
    };
    let told = match e {
        ArtifactError::BadDigest { .. } | ArtifactError::Mismatch { .. } => return Refusal::Artifact(e.to_string()),
        ArtifactError::Missing { .. } => format!(
            "the artifact {digest} is not in the service's artifact store; upload the application's files with `svc app deploy DIR` (or, on the service's host, `svc admin artifact store --bundle DIR`)"
        ),
        ArtifactError::Unsupported { path, kind } => {
            format!("the stored artifact {digest} holds {} that is a {kind}", in_job(path))
        }
        ArtifactError::NotUtf8 { path } => {
            format!("the stored artifact {digest} holds a name that is not UTF-8 in {}", in_job(path))
        }
        ArtifactError::TooManyFiles { limit, .. } => {
            format!("the stored artifact {digest} holds more than {limit} files, the most an artifact may hold")
        }
        ArtifactError::TooLarge { limit, .. } => {
            format!("the stored artifact {digest} holds more than {limit} bytes, the most an artifact may hold")
        }
        ArtifactError::NotADirectory { .. }
        | ArtifactError::Io(_)
        | ArtifactError::BadPath { .. }
        | ArtifactError::FileAndDirectory { .. } => {
            format!("the stored artifact {digest} cannot be read on the job's processor")
        }
    };
    Refusal::Artifact(told).on_host(e)
}

/// `path` if it names something inside a directory: relative, only names (no `..`, `.`).
fn relative(path: &str) -> Option<PathBuf> {
    let path = Path::new(path);
    let mut components = path.components().peekable();
    components.peek()?;
    components.all(|c| matches!(c, Component::Normal(_))).then(|| path.to_owned())
}

/// Writes each secret file under `scratch/secrets` (0700; files 0600) and shows it read-only
/// at its own path.
fn secret_files(files: &[(PathBuf, Vec<u8>)], scratch: &Path) -> Result<Vec<Mount>, Refusal> {
    if files.is_empty() {
        return Ok(Vec::new());
    }
    for (i, (inside, _)) in files.iter().enumerate() {
        check_secret_path(inside)?;
        if files[..i].iter().any(|(other, _)| other == inside) {
            return Err(Refusal::Start(format!("the secret file {} is given twice", inside.display())));
        }
    }
    let fail = |e: std::io::Error| Refusal::Start("cannot write the job's secret files".to_owned()).on_host(e);
    let dir = scratch.join("secrets");
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&dir)
        .map_err(|e| fail(std::io::Error::new(e.kind(), format!("failed to create `{}`: {e}", dir.display()))))?;
    fs_err::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).map_err(fail)?;
    let mut mounts = Vec::with_capacity(files.len());
    for (i, (inside, bytes)) in files.iter().enumerate() {
        let host = dir.join(i.to_string());
        let mut file = fs_err::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&host).map_err(fail)?;
        file.write_all(bytes).map_err(fail)?;
        fs_err::set_permissions(&host, std::fs::Permissions::from_mode(0o600)).map_err(fail)?;
        // The job's own: given to its uid when jobs get their own.
        mounts.push(Mount { host, inside: inside.clone(), writable: false, job_owned: true });
    }
    Ok(mounts)
}

/// The sidecar's process: its state directory is `scratch/sidecar` (0700, its files 0600),
/// writable at `sidecar.state_dir`, which is also its working directory.
pub(super) fn confine_sidecar(sidecar: &Sidecar, scratch: &Path) -> Result<Confined, Refusal> {
    let refuse = |why: String| Refusal::Start(format!("the job's sidecar cannot start: {why}"));
    let Some(program) = sidecar.argv.first() else { return Err(refuse("it names no program".into())) };
    let program =
        svc_runner::which(OsStr::new(program)).map_err(|e| refuse("its program is not installed".into()).on_host(e))?;
    let inside = &sidecar.state_dir;
    let plain = inside.is_absolute() && inside.components().skip(1).all(|c| matches!(c, Component::Normal(_)));
    if !plain || inside.components().count() < 2 || RESERVED.iter().any(|r| inside.starts_with(r)) {
        return Err(refuse(format!("its state directory {} must be absolute, plain and its own", inside.display())));
    }
    let fail =
        |e: std::io::Error| refuse(format!("its state directory {} cannot be made", inside.display())).on_host(e);
    let host = match &sidecar.kept_state {
        Some(kept) => {
            std::fs::DirBuilder::new().recursive(true).mode(0o700).create(kept).map_err(fail)?;
            // Its own, and a directory: never a link the job planted in its place.
            let meta = fs_err::symlink_metadata(kept).map_err(fail)?;
            if !meta.is_dir() {
                return Err(refuse(format!("its kept state at {} is not a directory", inside.display()))
                    .on_host(format_args!("{} is not a directory", kept.display())));
            }
            fs_err::set_permissions(kept, std::fs::Permissions::from_mode(0o700)).map_err(fail)?;
            kept.clone()
        }
        None => {
            let host = scratch.join("sidecar");
            std::fs::DirBuilder::new().mode(0o700).create(&host).map_err(fail)?;
            host
        }
    };
    for (name, bytes) in &sidecar.files {
        if Path::new(name).components().count() != 1 || relative(name).is_none() {
            return Err(refuse(format!("its file {name:?} must be a plain name")));
        }
        // Replaced by a rename (0600 from the start): a link the job planted under the name
        // is replaced, never written through.
        let mut file = tempfile::NamedTempFile::new_in(&host).map_err(fail)?;
        file.write_all(bytes).map_err(fail)?;
        file.persist(host.join(name)).map_err(|e| fail(e.error))?;
    }
    let mut argv = vec![program.into_os_string()];
    argv.extend(sidecar.argv.iter().skip(1).map(OsString::from));
    Ok(Confined {
        argv,
        env: sidecar.env.clone(),
        mounts: vec![Mount { host, inside: inside.clone(), writable: true, job_owned: true }],
        cwd: inside.clone(),
    })
}

/// A secret file's path must be absolute, plain (no `..`, `.`), and outside the job's other
/// mounts and the system's directories.
fn check_secret_path(inside: &Path) -> Result<(), Refusal> {
    let refuse =
        |why: &str| Err(Refusal::Start(format!("the secret file {} cannot be placed: {why}", inside.display())));
    let mut components = inside.components();
    if components.next() != Some(Component::RootDir) {
        return refuse("its path must be absolute");
    }
    if !components.clone().all(|c| matches!(c, Component::Normal(_))) || components.next().is_none() {
        return refuse("its path must name a file, without `.` or `..`");
    }
    if let Some(reserved) = RESERVED.iter().find(|r| inside.starts_with(r)) {
        return refuse(&format!("{reserved} is not the job's to write"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_inside_an_artifact_are_relative_and_plain() {
        assert_eq!(relative("server.js"), Some(PathBuf::from("server.js")));
        assert_eq!(relative("bin/run"), Some(PathBuf::from("bin/run")));
        for bad in ["", "/etc/passwd", "../x", "a/../../x", "./x"] {
            assert_eq!(relative(bad), None, "{bad}");
        }
    }

    #[test]
    fn secret_files_go_only_where_the_job_may_have_them() {
        assert_eq!(check_secret_path(Path::new("/run/secrets/db")), Ok(()));
        assert_eq!(check_secret_path(Path::new("/etc/app/key.pem")), Ok(()));
        let refused = |p: &str| match check_secret_path(Path::new(p)) {
            Err(Refusal::Start(why)) => why,
            other => panic!("{p}: {other:?}"),
        };
        assert_eq!(refused("run/x"), "the secret file run/x cannot be placed: its path must be absolute");
        assert_eq!(refused("/"), "the secret file / cannot be placed: its path must name a file, without `.` or `..`");
        assert!(refused("/run/../app/x").contains("without `.` or `..`"));
        assert_eq!(
            refused("/app/secret"),
            "the secret file /app/secret cannot be placed: /app is not the job's to write"
        );
        assert!(refused("/usr/lib/x").contains("/usr is not"));
    }

    #[test]
    fn secret_files_are_private_to_the_job() {
        let scratch = tempfile::tempdir().expect("a scratch directory");
        let files = vec![(PathBuf::from("/run/secrets/a"), b"one".to_vec()), (PathBuf::from("/b"), b"two".to_vec())];
        let mounts = secret_files(&files, scratch.path()).expect("written");
        assert_eq!(mounts.len(), 2);
        let mode = |p: &Path| fs_err::metadata(p).expect("stat").permissions().mode() & 0o777;
        assert_eq!(mode(&scratch.path().join("secrets")), 0o700);
        for (mount, (inside, bytes)) in mounts.iter().zip(&files) {
            assert_eq!((&mount.inside, mount.writable, mount.job_owned), (inside, false, true));
            assert_eq!(mode(&mount.host), 0o600);
            assert_eq!(&fs_err::read(&mount.host).expect("read"), bytes);
        }
        let twice = vec![(PathBuf::from("/b"), Vec::new()), (PathBuf::from("/b"), Vec::new())];
        assert_eq!(
            secret_files(&twice, scratch.path()),
            Err(Refusal::Start("the secret file /b is given twice".into()))
        );
    }
}
