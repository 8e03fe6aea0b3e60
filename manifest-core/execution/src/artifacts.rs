//! A local store of artifact bundles, keyed by digest: what the local pool mounts at `/app`
//! (and a native image at `/image`).
//!
//! An artifact is a directory tree of regular files: no symbolic link, device, pipe or socket
//! (each is refused, naming its path), names in UTF-8, at most [`ArtifactLimits`] in files and
//! bytes. Its digest is the bundle digest of its files ([`bundle_digest`]): the relay's deploy
//! digest (`relay_api::project::Project::digest_with_files`) without the project, so the same
//! files have the same `files` member in both.
//!
//! On disk (`<data-dir>/artifacts/`, 0700): one directory per artifact, `sha256-<hex>`, its
//! directories 0755 and files 0644, or 0755 for a file executable in the bundle (a native
//! image's executable must run); the jobs' own uids read them through a read-only mount. The
//! digest covers names and bytes only, as the relay's does: not whether a file is executable.
//! An artifact is copied into a temporary directory beside them and renamed into place, so a
//! crash never leaves half an artifact under its digest; and [`ArtifactStore::path`] reads an
//! artifact's files again before handing it out, so a changed or missing entry refuses the
//! launch rather than running something else.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt};

use fs_err::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// The most bytes an artifact may hold, by default: 256 MiB.
pub const DEFAULT_MAX_BYTES: u64 = 256 * 1024 * 1024;

/// The most files an artifact may hold, by default.
pub const DEFAULT_MAX_FILES: usize = 10_000;

/// How old a temporary directory of the store (`.incoming-*`, `.damaged-*`) must be to be
/// taken for one a process left when it died storing (`kill -9`, a crash): no store takes
/// this long, and a younger one may be another process's, storing now (`svc serve` and
/// `svc admin artifact store` share a store).
pub const ABANDONED_AFTER: std::time::Duration = std::time::Duration::from_secs(3600);

/// How big an artifact may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArtifactLimits {
    /// The total size of its files, bytes.
    pub max_bytes: u64,
    /// How many files it holds.
    pub max_files: usize,
}

impl Default for ArtifactLimits {
    fn default() -> ArtifactLimits {
        ArtifactLimits { max_bytes: DEFAULT_MAX_BYTES, max_files: DEFAULT_MAX_FILES }
    }
}

/// Why an artifact cannot be stored or used.
#[derive(Debug, thiserror::Error)]
pub enum ArtifactError {
    /// A file or directory could not be read or written (the error names it).
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// A digest is not of the form `sha256:<64 lowercase hex>`.
    #[error("{digest:?} is not an artifact digest: it must be `sha256:` and 64 lowercase hex digits")]
    BadDigest {
        /// The digest as given.
        digest: String,
    },
    /// The files do not have the digest they should.
    #[error("the artifact's files digest to {actual}, not {expected}")]
    Mismatch {
        /// The digest asked for.
        expected: String,
        /// The digest of the files.
        actual: String,
    },
    /// The store has no artifact of this digest.
    #[error("the artifact {digest} is not in the store {}", store.display())]
    Missing {
        /// The digest asked for.
        digest: String,
        /// The store's directory.
        store: PathBuf,
    },
    /// An entry that is neither a regular file nor a directory.
    #[error("{} is a {kind}: an artifact holds only regular files and directories", path.display())]
    Unsupported {
        /// The entry.
        path: PathBuf,
        /// What it is (`symbolic link`, `fifo`, ...).
        kind: &'static str,
    },
    /// A bundle's path that is not a plain relative path inside it.
    #[error("the bundle's path {path:?} {why}")]
    BadPath {
        /// The path as given.
        path: String,
        /// What is wrong with it.
        why: crate::bundle::BundlePathProblem,
    },
    /// A bundle's file that another of its paths needs as a directory.
    #[error("the bundle's path {path:?} is a file, and another path needs it as a directory")]
    FileAndDirectory {
        /// The path.
        path: String,
    },
    /// What should be an artifact's root is not a directory.
    #[error("{} is not a directory: an artifact is a directory of files", path.display())]
    NotADirectory {
        /// The path.
        path: PathBuf,
    },
    /// A name that is not UTF-8.
    #[error("the name of {} is not UTF-8: an artifact's paths must be", path.display())]
    NotUtf8 {
        /// The entry.
        path: PathBuf,
    },
    /// Too many files.
    #[error("{} holds more than {limit} files, the most an artifact may hold", path.display())]
    TooManyFiles {
        /// The artifact's root.
        path: PathBuf,
        /// The limit.
        limit: usize,
    },
    /// Too many bytes.
    #[error("{} holds more than {limit} bytes, the most an artifact may hold", path.display())]
    TooLarge {
        /// The artifact's root.
        path: PathBuf,
        /// The limit.
        limit: u64,
    },
}

/// The bundle digest of some files, each a path relative to the bundle's root (`/` between
/// names) and its bytes: `sha256:` and the hex SHA-256 of the RFC 8785 (canonical) JSON of
/// `{"files": {<path>: "sha256:<hex of its bytes>"}}`. The order the files come in does not
/// count; every byte, name and file does. This is the `files` member of the relay's deploy
/// digest, encoded the same way.
pub fn bundle_digest<'a>(files: impl IntoIterator<Item = (&'a str, &'a [u8])>) -> String {
    listing_digest(&files.into_iter().map(|(path, bytes)| (path.to_owned(), file_digest(bytes))).collect())
}

/// `sha256:<hex>` of some bytes: one file's entry in a bundle digest.
pub fn file_digest(bytes: &[u8]) -> String {
    format!("sha256:{}", hex(&Sha256::digest(bytes)))
}

/// The bundle digest of a listing of path to file digest.
fn listing_digest(files: &BTreeMap<String, String>) -> String {
    let mut hasher = Sha256::new();
    let document = BTreeMap::from([("files", files)]);
    // A map of strings always has a canonical form: no float, no non-string key.
    serde_json_canonicalizer::to_writer(&document, &mut HashWriter(&mut hasher))
        .expect("a map of strings is canonical JSON");
    format!("sha256:{}", hex(&hasher.finalize()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Bytes written into a hash.
struct HashWriter<'h>(&'h mut Sha256);

impl Write for HashWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.update(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Checks that `digest` is `sha256:<64 lowercase hex>`; its hex part.
fn digest_hex(digest: &str) -> Result<&str, ArtifactError> {
    digest
        .strip_prefix("sha256:")
        .filter(|hex| hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
        .ok_or_else(|| ArtifactError::BadDigest { digest: digest.to_owned() })
}

/// The store: artifacts under one directory, by digest.
#[derive(Debug, Clone)]
pub struct ArtifactStore {
    root: PathBuf,
    limits: ArtifactLimits,
}

impl ArtifactStore {
    /// The store in `dir` (made if missing, and made private to the service: 0700), with the
    /// default limits.
    pub fn open(dir: impl Into<PathBuf>) -> Result<ArtifactStore, ArtifactError> {
        let root = dir.into();
        fs_err::create_dir_all(&root)?;
        if !fs_err::symlink_metadata(&root)?.is_dir() {
            return Err(ArtifactError::NotADirectory { path: root });
        }
        fs_err::set_permissions(&root, std::fs::Permissions::from_mode(0o700))?;
        let store = ArtifactStore { root, limits: ArtifactLimits::default() };
        store.sweep();
        Ok(store)
    }

    /// Removes what a process that died while storing left behind: `.incoming-*` (files
    /// being copied in, never taken for an artifact: an entry is only ever renamed into place
    /// whole) and `.damaged-*` directories older than [`ABANDONED_AFTER`]; how many went.
    /// Each crash in the middle of an upload would otherwise keep up to a bundle's bytes on
    /// disk for good.
    fn sweep(&self) -> usize {
        let Ok(entries) = fs_err::read_dir(&self.root) else { return 0 };
        let mut removed = 0;
        for entry in entries.flatten() {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if !(name.starts_with(".incoming-") || name.starts_with(".damaged-")) {
                continue;
            }
            let abandoned = entry.metadata().ok().filter(std::fs::Metadata::is_dir).is_some_and(|m| {
                m.modified().ok().and_then(|t| t.elapsed().ok()).is_some_and(|age| age >= ABANDONED_AFTER)
            });
            if abandoned && std::fs::remove_dir_all(entry.path()).is_ok() {
                removed += 1;
            }
        }
        if removed > 0 {
            tracing::info!(removed, "removed what interrupted stores left in the artifact store");
        }
        removed
    }

    /// This store with other limits (for what is stored or handed out from now on).
    pub fn with_limits(self, limits: ArtifactLimits) -> ArtifactStore {
        ArtifactStore { limits, ..self }
    }

    /// The store's directory.
    pub fn dir(&self) -> &Path {
        &self.root
    }

    /// Copies the tree at `bundle_dir` into the store; its digest. With `expected`, a tree
    /// of another digest is refused and nothing is stored. Storing an artifact the store holds
    /// already changes nothing (a damaged copy is replaced).
    pub fn store(&self, bundle_dir: &Path, expected: Option<&str>) -> Result<String, ArtifactError> {
        if let Some(expected) = expected {
            digest_hex(expected)?;
        }
        let tree = Tree::walk(bundle_dir, self.limits)?;
        let incoming = tempfile::Builder::new().prefix(".incoming-").tempdir_in(&self.root)?;
        for dir in &tree.dirs {
            let path = incoming.path().join(dir);
            std::fs::DirBuilder::new().mode(0o755).create(&path).map_err(|e| io_at(e, "create directory", &path))?;
            fs_err::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
        }
        let mut listing = BTreeMap::new();
        let mut budget = Budget::new(bundle_dir, self.limits.max_bytes);
        for (name, source, executable) in &tree.files {
            let target = incoming.path().join(name);
            let mode = if *executable { 0o755 } else { 0o644 };
            let mut out = fs_err::OpenOptions::new().write(true).create_new(true).mode(mode).open(&target)?;
            let digest = copy_hashed(source, Some(&mut out), &mut budget)?;
            out.sync_all()?;
            fs_err::set_permissions(&target, std::fs::Permissions::from_mode(mode))?;
            listing.insert(name.clone(), digest);
        }
        let digest = listing_digest(&listing);
        if let Some(expected) = expected
            && expected != digest
        {
            return Err(ArtifactError::Mismatch { expected: expected.to_owned(), actual: digest });
        }
        self.install(incoming, &digest)
    }

    /// Stores a bundle given in memory (each relative path, `/` between names, with its
    /// bytes: what an upload carries); its digest, the same as [`ArtifactStore::store`] gives
    /// the same files in a directory. Every path is checked
    /// ([`check_bundle_path`](crate::bundle::check_bundle_path)), a file that another path
    /// needs as a directory is refused, and the store's limits hold; each file is written
    /// 0644, or 0755 when `executable` names it (as a tree's executable files: the digest
    /// does not cover it). With `expected`, another digest is refused and nothing is stored.
    pub fn store_files(
        &self,
        files: &BTreeMap<String, Vec<u8>>,
        executable: &std::collections::BTreeSet<String>,
        expected: Option<&str>,
    ) -> Result<String, ArtifactError> {
        if let Some(expected) = expected {
            digest_hex(expected)?;
        }
        let root = Path::new("the bundle");
        if files.len() > self.limits.max_files {
            return Err(ArtifactError::TooManyFiles { path: root.to_owned(), limit: self.limits.max_files });
        }
        let bytes = files.values().fold(0u64, |sum, b| sum.saturating_add(u64::try_from(b.len()).unwrap_or(u64::MAX)));
        if bytes > self.limits.max_bytes {
            return Err(ArtifactError::TooLarge { path: root.to_owned(), limit: self.limits.max_bytes });
        }
        for path in files.keys() {
            crate::bundle::check_bundle_path(path).map_err(|why| ArtifactError::BadPath { path: path.clone(), why })?;
        }
        if let Some(path) = crate::bundle::file_and_directory(files.keys().map(String::as_str)) {
            return Err(ArtifactError::FileAndDirectory { path: path.to_owned() });
        }
        let digest = bundle_digest(files.iter().map(|(p, b)| (p.as_str(), b.as_slice())));
        if let Some(expected) = expected
            && expected != digest
        {
            return Err(ArtifactError::Mismatch { expected: expected.to_owned(), actual: digest });
        }
        let incoming = tempfile::Builder::new().prefix(".incoming-").tempdir_in(&self.root)?;
        // Parents before children (a parent's name is a prefix, so it sorts first).
        let dirs: std::collections::BTreeSet<&str> =
            files.keys().flat_map(|p| p.match_indices('/').map(move |(at, _)| &p[..at])).collect();
        for dir in dirs {
            let path = incoming.path().join(dir);
            std::fs::DirBuilder::new().mode(0o755).create(&path).map_err(|e| io_at(e, "create directory", &path))?;
            fs_err::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
        }
        for (name, bytes) in files {
            let target = incoming.path().join(name);
            let mode = if executable.contains(name) { 0o755 } else { 0o644 };
            let mut out = fs_err::OpenOptions::new().write(true).create_new(true).mode(mode).open(&target)?;
            out.write_all(bytes)?;
            out.sync_all()?;
            fs_err::set_permissions(&target, std::fs::Permissions::from_mode(mode))?;
        }
        self.install(incoming, &digest)
    }

    /// Moves a complete artifact, written in `incoming` and of `digest`, into place (unless
    /// a good copy is there already); its digest.
    fn install(&self, incoming: tempfile::TempDir, digest: &str) -> Result<String, ArtifactError> {
        let digest = digest.to_owned();
        fs_err::set_permissions(incoming.path(), std::fs::Permissions::from_mode(0o755))?;
        let target = self.entry(&digest)?;
        if fs_err::symlink_metadata(&target).is_ok() {
            if self.verify(&target, &digest).is_ok() {
                // The same files, stored before, perhaps with fewer of them executable (the
                // digest does not cover it: another upload of the same bytes, maybe another
                // organization's): what this copy makes executable becomes so, or its
                // program would never run.
                self.add_executable(incoming.path(), &target)?;
                return Ok(digest);
            }
            // A damaged copy: set aside, then removed once the good one is in place.
            let damaged = tempfile::Builder::new().prefix(".damaged-").tempdir_in(&self.root)?;
            fs_err::rename(&target, damaged.path().join("entry"))?;
        }
        match std::fs::rename(incoming.path(), &target) {
            Ok(()) => {
                // Renamed into place: nothing is left to remove.
                let _ = incoming.keep();
            }
            // Stored meanwhile by another caller: the same files.
            Err(_) if self.verify(&target, &digest).is_ok() => self.add_executable(incoming.path(), &target)?,
            Err(e) => return Err(io_at(e, "rename into", &target)),
        }
        fs_err::File::open(&self.root)?.sync_all()?;
        Ok(digest)
    }

    /// Makes executable (0755) each file of `target` that is executable in `incoming` (the
    /// same files); a file executable in `target` stays so.
    fn add_executable(&self, incoming: &Path, target: &Path) -> Result<(), ArtifactError> {
        for (name, _, executable) in Tree::walk(incoming, self.limits)?.files {
            let path = target.join(&name);
            if executable && fs_err::symlink_metadata(&path)?.mode() & 0o111 == 0 {
                fs_err::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
            }
        }
        Ok(())
    }

    /// Where the artifact `digest` is, once its files have been read again and still have
    /// that digest: a missing entry is [`ArtifactError::Missing`], a changed one
    /// [`ArtifactError::Mismatch`] (or the error that names what is wrong in it).
    pub fn path(&self, digest: &str) -> Result<PathBuf, ArtifactError> {
        let target = self.entry(digest)?;
        match fs_err::symlink_metadata(&target) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(ArtifactError::Missing { digest: digest.to_owned(), store: self.root.clone() });
            }
            Err(e) => return Err(e.into()),
            Ok(_) => {}
        }
        self.verify(&target, digest)?;
        Ok(target)
    }

    /// Removes every artifact but those of `keep` (digests); returns how many went. For a store whose artifacts are
    /// copies of files kept elsewhere and stored again at each launch (the relay's revisions),
    /// so that nothing outlives its last job.
    pub fn retain(&self, keep: &[String]) -> usize {
        let keep: Vec<PathBuf> = keep.iter().filter_map(|digest| self.entry(digest).ok()).collect();
        let Ok(entries) = fs_err::read_dir(&self.root) else { return 0 };
        let mut removed = 0;
        for entry in entries.flatten() {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            let artifact = name.strip_prefix("sha256-").is_some_and(|hex| digest_hex(&format!("sha256:{hex}")).is_ok());
            if artifact && !keep.contains(&entry.path()) && std::fs::remove_dir_all(entry.path()).is_ok() {
                removed += 1;
            }
        }
        removed
    }

    /// The directory of the artifact `digest`.
    fn entry(&self, digest: &str) -> Result<PathBuf, ArtifactError> {
        Ok(self.root.join(format!("sha256-{}", digest_hex(digest)?)))
    }

    /// Reads the tree at `path` and checks it has `digest`.
    fn verify(&self, path: &Path, digest: &str) -> Result<(), ArtifactError> {
        let tree = Tree::walk(path, self.limits)?;
        let mut budget = Budget::new(path, self.limits.max_bytes);
        let mut listing = BTreeMap::new();
        for (name, file, _) in &tree.files {
            listing.insert(name.clone(), copy_hashed(file, None, &mut budget)?);
        }
        let actual = listing_digest(&listing);
        if actual != digest {
            return Err(ArtifactError::Mismatch { expected: digest.to_owned(), actual });
        }
        Ok(())
    }
}

/// An I/O error from `std` (whose errors name no path), with the path and what was done.
fn io_at(e: std::io::Error, action: &str, path: &Path) -> ArtifactError {
    ArtifactError::Io(std::io::Error::new(e.kind(), format!("failed to {action} `{}`: {e}", path.display())))
}

/// A tree's directories and files (relative names with `/`, where each file is, and whether
/// it is executable), each in name order, parents before children.
struct Tree {
    dirs: Vec<String>,
    files: Vec<(String, PathBuf, bool)>,
}

impl Tree {
    /// Reads the tree at `root` (never following a link), refusing what an artifact may not
    /// hold and stopping at the limits.
    fn walk(root: &Path, limits: ArtifactLimits) -> Result<Tree, ArtifactError> {
        let meta = fs_err::symlink_metadata(root)?;
        if !meta.is_dir() {
            return Err(match kind(&meta.file_type()) {
                Some(kind) => ArtifactError::Unsupported { path: root.to_owned(), kind },
                None => ArtifactError::NotADirectory { path: root.to_owned() },
            });
        }
        let (mut dirs, mut files) = (Vec::new(), Vec::new());
        let mut bytes = 0u64;
        let mut pending = vec![(root.to_owned(), String::new())];
        while let Some((dir, prefix)) = pending.pop() {
            for entry in fs_err::read_dir(&dir)? {
                let entry = entry?;
                let path = entry.path();
                let name =
                    entry.file_name().into_string().map_err(|_| ArtifactError::NotUtf8 { path: path.clone() })?;
                let name = if prefix.is_empty() { name } else { format!("{prefix}/{name}") };
                let file_type = entry.file_type().map_err(|e| io_at(e, "read the type of", &path))?;
                if file_type.is_dir() {
                    dirs.push(name.clone());
                    pending.push((path, name));
                } else if file_type.is_file() {
                    if files.len() >= limits.max_files {
                        return Err(ArtifactError::TooManyFiles { path: root.to_owned(), limit: limits.max_files });
                    }
                    let meta = fs_err::symlink_metadata(&path)?;
                    bytes = bytes.saturating_add(meta.len());
                    if bytes > limits.max_bytes {
                        return Err(ArtifactError::TooLarge { path: root.to_owned(), limit: limits.max_bytes });
                    }
                    files.push((name, path, meta.mode() & 0o111 != 0));
                } else {
                    return Err(ArtifactError::Unsupported { path, kind: kind(&file_type).unwrap_or("special file") });
                }
            }
        }
        dirs.sort();
        files.sort();
        Ok(Tree { dirs, files })
    }
}

/// What a file type is, in words, if it is not a regular file or a directory.
fn kind(file_type: &std::fs::FileType) -> Option<&'static str> {
    if file_type.is_symlink() {
        Some("symbolic link")
    } else if file_type.is_block_device() {
        Some("block device")
    } else if file_type.is_char_device() {
        Some("character device")
    } else if file_type.is_fifo() {
        Some("fifo")
    } else if file_type.is_socket() {
        Some("socket")
    } else if file_type.is_file() || file_type.is_dir() {
        None
    } else {
        Some("special file")
    }
}

/// The bytes an artifact may still hold: a file that grows while it is read cannot take more.
struct Budget<'p> {
    root: &'p Path,
    left: u64,
    limit: u64,
}

impl<'p> Budget<'p> {
    fn new(root: &'p Path, limit: u64) -> Budget<'p> {
        Budget { root, left: limit, limit }
    }
}

/// Reads the regular file `source` (a link or anything else put in its place since the walk
/// is refused), hashing it and copying it into `out`; its file digest.
fn copy_hashed(
    source: &Path,
    mut out: Option<&mut fs_err::File>,
    budget: &mut Budget<'_>,
) -> Result<String, ArtifactError> {
    let seen = fs_err::symlink_metadata(source)?;
    let file = fs_err::File::open(source)?;
    let opened = file.metadata()?;
    if !seen.is_file() || !opened.is_file() || (seen.dev(), seen.ino()) != (opened.dev(), opened.ino()) {
        return Err(ArtifactError::Unsupported {
            path: source.to_owned(),
            kind: kind(&seen.file_type()).unwrap_or("file replaced while it was read"),
        });
    }
    let mut hasher = Sha256::new();
    let mut reader = file.take(budget.left.saturating_add(1));
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = reader.read(&mut buf)?;
        if n == 0 {
            break;
        }
        let read = u64::try_from(n).unwrap_or(u64::MAX);
        if read > budget.left {
            return Err(ArtifactError::TooLarge { path: budget.root.to_owned(), limit: budget.limit });
        }
        budget.left -= read;
        hasher.update(&buf[..n]);
        if let Some(out) = out.as_deref_mut() {
            out.write_all(&buf[..n])?;
        }
    }
    Ok(format!("sha256:{}", hex(&hasher.finalize())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// The fixture the relay's test (`relay-api/src/project/tests.rs`) digests too: both
    /// must find this `files` member and so this bundle digest.
    const FIXTURE: [(&str, &[u8]); 2] = [("server.js", b"v1"), ("lib/a.js", b"a")];
    const FIXTURE_DIGEST: &str = "sha256:8547d87a78e5884ff17a2dad84d2ed72359e9d9d67db2821414c357abce97af1";

    fn bundle(dir: &Path, files: &[(&str, &[u8])]) -> PathBuf {
        let root = dir.join("bundle");
        for (name, bytes) in files {
            let path = root.join(name);
            fs_err::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
            fs_err::write(&path, bytes).expect("write");
        }
        fs_err::create_dir_all(&root).expect("mkdir");
        root
    }

    fn store(dir: &Path) -> ArtifactStore {
        ArtifactStore::open(dir.join("artifacts")).expect("a store")
    }

    #[test]
    fn the_bundle_digest_is_the_relays_files_member() {
        assert_eq!(bundle_digest(FIXTURE), FIXTURE_DIGEST);
        assert_eq!(bundle_digest(FIXTURE.into_iter().rev()), FIXTURE_DIGEST, "order is not meaning");
        assert_ne!(bundle_digest([("server.js", &b"v2"[..]), ("lib/a.js", &b"a"[..])]), FIXTURE_DIGEST);
        assert_ne!(bundle_digest([("server.js", &b"v1"[..]), ("lib/b.js", &b"a"[..])]), FIXTURE_DIGEST);
        assert_eq!(file_digest(b""), "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    }

    #[test]
    fn a_stored_artifact_is_handed_out_by_its_digest() {
        let scratch = tempfile::tempdir().expect("a scratch directory");
        let store = store(scratch.path());
        let digest = store.store(&bundle(scratch.path(), &FIXTURE), None).expect("stored");
        assert_eq!(digest, FIXTURE_DIGEST, "the digest of the files");
        assert_eq!(store.store(&bundle(scratch.path(), &FIXTURE), Some(&digest)).expect("again"), digest);
        let path = store.path(&digest).expect("handed out");
        assert_eq!(fs_err::read(path.join("lib/a.js")).expect("read"), b"a");
        let mode = |p: &Path| fs_err::metadata(p).expect("stat").permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o755);
        assert_eq!(mode(&path.join("lib")), 0o755);
        assert_eq!(mode(&path.join("server.js")), 0o644);
        // An executable stays one (a native image's).
        let tool = bundle(&scratch.path().join("tool"), &[("bin/run", b"#!/bin/sh\n")]);
        fs_err::set_permissions(tool.join("bin/run"), std::fs::Permissions::from_mode(0o700)).expect("chmod");
        let tool = store.path(&store.store(&tool, None).expect("stored")).expect("handed out");
        assert_eq!(mode(&tool.join("bin/run")), 0o755);
        assert_eq!(mode(store.dir()), 0o700);
        let leftovers: Vec<_> = fs_err::read_dir(store.dir()).expect("list").flatten().map(|e| e.file_name()).collect();
        assert_eq!(leftovers.len(), 2, "only the artifacts: {leftovers:?}");
    }

    /// What a store killed in the middle left (`kill -9` of the service during an upload) is
    /// never an artifact, and goes when the store is opened once it is old enough; a young
    /// one may be another process's store in progress and stays.
    #[test]
    fn what_a_killed_store_left_goes_at_open_once_abandoned() {
        let scratch = tempfile::tempdir().expect("a scratch directory");
        let store = store(scratch.path());
        let digest = store.store(&bundle(scratch.path(), &FIXTURE), None).expect("stored");
        let left = |name: &str, age: std::time::Duration| {
            let dir = store.dir().join(name);
            fs_err::create_dir_all(dir.join("lib")).expect("mkdir");
            fs_err::write(dir.join("lib/a.js"), b"half").expect("write");
            let at = std::time::SystemTime::now() - age;
            std::fs::File::open(&dir).expect("open").set_modified(at).expect("mtime");
            dir
        };
        let old = left(".incoming-old", ABANDONED_AFTER + std::time::Duration::from_secs(60));
        let damaged = left(".damaged-old", ABANDONED_AFTER * 2);
        let young = left(".incoming-young", std::time::Duration::from_secs(5));
        let store = ArtifactStore::open(store.dir()).expect("opened again");
        assert!(!old.exists() && !damaged.exists(), "abandoned: removed");
        assert!(young.exists(), "maybe another process's, storing now: kept");
        assert_eq!(store.path(&digest).expect("the artifact stays"), store.dir().join(digest.replace(':', "-")));
    }

    #[test]
    fn an_artifact_of_another_digest_is_refused_and_not_stored() {
        let scratch = tempfile::tempdir().expect("a scratch directory");
        let store = store(scratch.path());
        let other = bundle_digest([("server.js", &b"v2"[..])]);
        let refused = store.store(&bundle(scratch.path(), &FIXTURE), Some(&other)).expect_err("refused");
        assert!(
            matches!(&refused, ArtifactError::Mismatch { expected, actual } if *expected == other && actual == FIXTURE_DIGEST)
        );
        assert_eq!(refused.to_string(), format!("the artifact's files digest to {FIXTURE_DIGEST}, not {other}"));
        assert!(matches!(store.path(&other), Err(ArtifactError::Missing { .. })));
        assert!(matches!(store.path(FIXTURE_DIGEST), Err(ArtifactError::Missing { .. })));
        assert_eq!(fs_err::read_dir(store.dir()).expect("list").count(), 0, "nothing left");
        let bad = store.store(&bundle(scratch.path(), &FIXTURE), Some("sha256:ABC")).expect_err("refused");
        assert!(bad.to_string().contains("is not an artifact digest"), "{bad}");
    }

    #[test]
    fn a_tampered_or_missing_artifact_is_not_handed_out() {
        let scratch = tempfile::tempdir().expect("a scratch directory");
        let store = store(scratch.path());
        let digest = store.store(&bundle(scratch.path(), &FIXTURE), None).expect("stored");
        let path = store.path(&digest).expect("handed out");
        fs_err::write(path.join("server.js"), b"v2").expect("tamper");
        let refused = store.path(&digest).expect_err("refused");
        assert!(matches!(&refused, ArtifactError::Mismatch { expected, .. } if *expected == digest), "{refused}");
        // Storing the files again mends it.
        assert_eq!(store.store(&bundle(scratch.path(), &FIXTURE), Some(&digest)).expect("stored"), digest);
        assert_eq!(fs_err::read(store.path(&digest).expect("mended").join("server.js")).expect("read"), b"v1");
        // An added file is a change too.
        fs_err::write(path.join("extra.js"), b"").expect("add");
        assert!(matches!(store.path(&digest), Err(ArtifactError::Mismatch { .. })));
        fs_err::remove_dir_all(&path).expect("remove");
        let missing = store.path(&digest).expect_err("missing");
        assert!(matches!(missing, ArtifactError::Missing { .. }), "{missing}");
    }

    #[test]
    fn retain_keeps_only_the_artifacts_named_and_nothing_else_of_the_directory_goes() {
        let scratch = tempfile::tempdir().expect("a scratch directory");
        let store = store(scratch.path());
        let one = store.store(&bundle(&scratch.path().join("a"), &FIXTURE), None).expect("stored");
        let two = store.store(&bundle(&scratch.path().join("b"), &[("server.js", &b"v2"[..])]), None).expect("stored");
        fs_err::write(store.dir().join("notes.txt"), b"not an artifact").expect("write");
        assert_eq!(store.retain(std::slice::from_ref(&two)), 1);
        assert!(matches!(store.path(&one), Err(ArtifactError::Missing { .. })));
        assert!(store.path(&two).is_ok(), "kept");
        assert!(store.dir().join("notes.txt").exists(), "only artifacts are removed");
        assert_eq!(store.retain(&[]), 1);
        assert_eq!(store.retain(&[]), 0);
    }

    #[test]
    fn links_and_special_files_are_refused_by_name() {
        let scratch = tempfile::tempdir().expect("a scratch directory");
        let store = store(scratch.path());
        let root = bundle(scratch.path(), &FIXTURE);
        std::os::unix::fs::symlink("/etc/passwd", root.join("lib/passwd")).expect("link");
        let refused = store.store(&root, None).expect_err("refused");
        assert!(matches!(&refused, ArtifactError::Unsupported { kind: "symbolic link", .. }), "{refused}");
        assert_eq!(
            refused.to_string(),
            format!(
                "{} is a symbolic link: an artifact holds only regular files and directories",
                root.join("lib/passwd").display()
            )
        );
        fs_err::remove_file(root.join("lib/passwd")).expect("unlink");
        // The root itself as a link.
        let link = scratch.path().join("link");
        std::os::unix::fs::symlink(&root, &link).expect("link");
        assert!(matches!(store.store(&link, None), Err(ArtifactError::Unsupported { kind: "symbolic link", .. })));
        // A link planted in a stored artifact.
        let digest = store.store(&root, None).expect("stored");
        std::os::unix::fs::symlink("/etc/passwd", store.path(&digest).expect("path").join("x")).expect("link");
        assert!(matches!(store.path(&digest), Err(ArtifactError::Unsupported { .. })));
    }

    #[test]
    fn the_same_files_stored_again_as_executable_are_made_executable() {
        // Another upload of the same bytes (another organization's, or an earlier one before a
        // `chmod +x`) stored the program not executable: the digest is the same, and the
        // program must still be executable for the upload that says so.
        let scratch = tempfile::tempdir().expect("a scratch directory");
        let store = store(scratch.path());
        let files: BTreeMap<String, Vec<u8>> =
            [("bin/run".to_owned(), b"#!/bin/sh\n".to_vec()), ("data".to_owned(), b"x".to_vec())].into();
        let digest = store.store_files(&files, &BTreeSet::new(), None).expect("stored");
        let mode = |name: &str| {
            fs_err::metadata(store.path(&digest).expect("path").join(name)).expect("stat").permissions().mode() & 0o777
        };
        assert_eq!(mode("bin/run"), 0o644);
        let program = BTreeSet::from(["bin/run".to_owned()]);
        assert_eq!(store.store_files(&files, &program, None).expect("again"), digest);
        assert_eq!((mode("bin/run"), mode("data")), (0o755, 0o644));
        // Stored again without it: what was made executable stays so.
        store.store_files(&files, &BTreeSet::new(), None).expect("again");
        assert_eq!(mode("bin/run"), 0o755);
        // The same through a directory.
        let tool = bundle(&scratch.path().join("tool"), &[("bin/run", b"#!/bin/sh\n"), ("data", b"x")]);
        fs_err::set_permissions(tool.join("data"), std::fs::Permissions::from_mode(0o700)).expect("chmod");
        assert_eq!(store.store(&tool, None).expect("again"), digest);
        assert_eq!(mode("data"), 0o755);
    }

    #[test]
    fn files_stored_from_memory_have_the_digest_of_the_same_tree() {
        let scratch = tempfile::tempdir().expect("a scratch directory");
        let store = store(scratch.path());
        let files: BTreeMap<String, Vec<u8>> = FIXTURE.iter().map(|(p, b)| ((*p).to_owned(), b.to_vec())).collect();
        let digest = store.store_files(&files, &BTreeSet::from(["lib/a.js".to_owned()]), None).expect("stored");
        assert_eq!(digest, FIXTURE_DIGEST);
        let path = store.path(&digest).expect("handed out");
        assert_eq!(fs_err::read(path.join("lib/a.js")).expect("read"), b"a");
        let mode = |p: &Path| fs_err::metadata(p).expect("stat").permissions().mode() & 0o777;
        assert_eq!((mode(&path), mode(&path.join("lib")), mode(&path.join("server.js"))), (0o755, 0o755, 0o644));
        assert_eq!(mode(&path.join("lib/a.js")), 0o755, "executable as asked");
        assert_eq!(store.store_files(&files, &BTreeSet::new(), Some(FIXTURE_DIGEST)).expect("again"), digest);
        let other = bundle_digest([("x", &b""[..])]);
        assert!(matches!(
            store.store_files(&files, &BTreeSet::new(), Some(&other)),
            Err(ArtifactError::Mismatch { .. })
        ));
        let leftovers: Vec<_> = fs_err::read_dir(store.dir()).expect("list").flatten().map(|e| e.file_name()).collect();
        assert_eq!(leftovers.len(), 1, "only the artifact: {leftovers:?}");
    }

    #[test]
    fn files_from_memory_with_bad_paths_or_over_the_limits_are_refused() {
        let scratch = tempfile::tempdir().expect("a scratch directory");
        let store = store(scratch.path());
        let of = |paths: &[&str]| paths.iter().map(|p| ((*p).to_owned(), b"x".to_vec())).collect::<BTreeMap<_, _>>();
        let refused = store.store_files(&of(&["a/../../etc/passwd"]), &BTreeSet::new(), None).expect_err("outside");
        assert!(matches!(&refused, ArtifactError::BadPath { .. }), "{refused}");
        assert!(refused.to_string().starts_with("the bundle's path \"a/../../etc/passwd\" is not a relative path"));
        let refused = store.store_files(&of(&["lib", "lib/a.js"]), &BTreeSet::new(), None).expect_err("both");
        assert_eq!(
            refused.to_string(),
            "the bundle's path \"lib\" is a file, and another path needs it as a directory"
        );
        let few = store.clone().with_limits(ArtifactLimits { max_bytes: 1, max_files: 10 });
        let refused = few.store_files(&of(&["a", "b"]), &BTreeSet::new(), None).expect_err("too large");
        assert_eq!(refused.to_string(), "the bundle holds more than 1 bytes, the most an artifact may hold");
        let few = store.clone().with_limits(ArtifactLimits { max_bytes: 10, max_files: 1 });
        let refused = few.store_files(&of(&["a", "b"]), &BTreeSet::new(), None).expect_err("too many");
        assert_eq!(refused.to_string(), "the bundle holds more than 1 files, the most an artifact may hold");
        assert_eq!(fs_err::read_dir(store.dir()).expect("list").count(), 0, "nothing stored");
    }

    #[test]
    fn the_limits_are_named_when_passed() {
        let scratch = tempfile::tempdir().expect("a scratch directory");
        let root = bundle(scratch.path(), &FIXTURE);
        let few = store(scratch.path()).with_limits(ArtifactLimits { max_bytes: 1024, max_files: 1 });
        let refused = few.store(&root, None).expect_err("too many");
        assert_eq!(
            refused.to_string(),
            format!("{} holds more than 1 files, the most an artifact may hold", root.display())
        );
        let small = store(scratch.path()).with_limits(ArtifactLimits { max_bytes: 2, max_files: 10 });
        let refused = small.store(&root, None).expect_err("too large");
        assert_eq!(
            refused.to_string(),
            format!("{} holds more than 2 bytes, the most an artifact may hold", root.display())
        );
        let file = root.join("server.js");
        assert!(matches!(small.store(&file, None), Err(ArtifactError::NotADirectory { .. })));
    }
}
