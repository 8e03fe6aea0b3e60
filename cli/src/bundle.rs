//! An application directory as the files sent for it: what `svc app deploy DIR` uploads and
//! `svc admin artifact store --bundle DIR` stores, the same files (and so the same digest)
//! whichever does it.
//!
//! Left out, always: `.git`, the ignore file `.svcignore` itself, the manifest the command
//! reads (the policy, sent on its own: editing it is not a new artifact), and a file where
//! one of the manifest's secrets is mounted (`destination: {kind: file}` under `/app`).
//! Left out by default: hidden entries (`.env`, `.cache/`), as `svc ingress deploy` does.
//! `.svcignore` in DIR adds rules in gitignore syntax (`#` comments, `!` to take a rule
//! back, a trailing `/` for directories only, a `/` inside anchoring to DIR, `*`, `?`,
//! `[...]`, `**`), read after the default, so `!.well-known/` sends that directory; the last
//! matching rule wins, and nothing inside a left-out directory comes back (as in git).
//! A symbolic link or special file not left out is refused, naming it (the artifact store
//! holds regular files only); the bounds are a bundle's ([`svc_execution::bundle`]).

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use globset::{GlobBuilder, GlobMatcher};
use svc_execution::bundle::{BUNDLE_MAX_BYTES, BUNDLE_MAX_FILES, check_bundle_path};

/// The ignore file's name.
pub(crate) const IGNORE_FILE: &str = ".svcignore";

/// The largest ignore file read.
const IGNORE_FILE_MAX_BYTES: u64 = 256 * 1024;

/// The files of a directory, by relative path (`/` between names).
#[derive(Debug, Default)]
pub(crate) struct Bundle {
    /// Each file's bytes.
    pub(crate) files: BTreeMap<String, Vec<u8>>,
    /// The files executable here (kept executable in the store: a native image's program).
    pub(crate) executable: BTreeSet<String>,
}

impl Bundle {
    /// The bytes of every file.
    pub(crate) fn bytes(&self) -> u64 {
        self.files.values().map(|b| b.len() as u64).sum()
    }

    /// The listing people read: each file with its size, then the total.
    pub(crate) fn listing(&self) -> String {
        let mut out = String::new();
        for (path, bytes) in &self.files {
            out += &format!("  {path}  {}\n", size(bytes.len() as u64));
        }
        let n = self.files.len();
        out += &format!("{n} file{}, {}\n", if n == 1 { "" } else { "s" }, size(self.bytes()));
        out
    }
}

/// `213 bytes`, `1.5 KiB`, `2.0 MiB`.
pub(crate) fn size(bytes: u64) -> String {
    #[allow(clippy::cast_precision_loss)] // One decimal of a size people read.
    let f = bytes as f64;
    match bytes {
        0..1024 => format!("{bytes} byte{}", if bytes == 1 { "" } else { "s" }),
        1024..1_048_576 => format!("{:.1} KiB", f / 1024.0),
        _ => format!("{:.1} MiB", f / 1_048_576.0),
    }
}

/// Why a directory cannot be bundled.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BundleError {
    /// A file or directory could not be read (the error names it).
    #[error(transparent)]
    Read(#[from] std::io::Error),
    /// DIR is not a directory.
    #[error("{} is not a directory: `svc app deploy` sends an application directory's files", .0.display())]
    NotADirectory(PathBuf),
    /// A rule of `.svcignore` that is not a pattern.
    #[error("{file}:{line}: {why}")]
    BadRule {
        /// The ignore file.
        file: String,
        /// The line, from 1.
        line: usize,
        /// The pattern reader's reason.
        why: globset::Error,
    },
    /// An entry that is not a regular file or a directory.
    #[error(
        "{} is a {kind}: a bundle holds only regular files; copy the file in, or leave it out in {IGNORE_FILE}",
        shown(.path)
    )]
    Unsupported {
        /// The entry.
        path: PathBuf,
        /// What it is.
        kind: &'static str,
    },
    /// A name that cannot be sent (not UTF-8, too long or deep, a control character).
    #[error("{}: {why}; rename it, or leave it out in {IGNORE_FILE}", shown(.path))]
    BadName {
        /// The entry.
        path: PathBuf,
        /// Why.
        why: String,
    },
    /// A file over what may be read of it (the ignore file's bound, or what is left of the
    /// bundle's).
    #[error("{} is over {limit} bytes, more than is read of it", .path.display())]
    FileTooLarge {
        /// The file.
        path: PathBuf,
        /// The bound, bytes.
        limit: u64,
    },
    /// Too many files.
    #[error(
        "{} has more than {BUNDLE_MAX_FILES} files to send, the most a bundle holds; leave build output and dependencies out in {IGNORE_FILE}",
        .dir.display()
    )]
    TooManyFiles {
        /// The directory.
        dir: PathBuf,
    },
    /// Too many bytes.
    #[error(
        "{} has more than {} MiB of files to send (reached at {at}), the most a bundle holds; leave build output and dependencies out in {IGNORE_FILE}",
        .dir.display(),
        BUNDLE_MAX_BYTES / 1024 / 1024
    )]
    TooLarge {
        /// The directory.
        dir: PathBuf,
        /// The file at which the bound was passed.
        at: String,
    },
}

/// A path as an error shows it: a control character in a name (a terminal escape in a cloned
/// repository's file name) as `\u{..}`, never sent to the terminal raw.
fn shown(path: &Path) -> String {
    let text = path.display().to_string();
    if !text.chars().any(char::is_control) {
        return text;
    }
    text.chars().map(|c| if c.is_control() { format!("\\u{{{:04x}}}", u32::from(c)) } else { c.to_string() }).collect()
}

/// One rule of the ignore list.
struct Rule {
    glob: GlobMatcher,
    negated: bool,
    dir_only: bool,
}

/// The default rule and `.svcignore`'s, in order.
struct Rules(Vec<Rule>);

impl Rules {
    /// The default (hidden entries) and the rules of `DIR/.svcignore`, if it exists.
    fn read(dir: &Path) -> Result<Rules, BundleError> {
        let mut rules = Vec::new();
        let default = parse(".*").ok().flatten();
        rules.extend(default);
        let file = dir.join(IGNORE_FILE);
        // Read as the bundle's files are: a link (to `/dev/zero`, to a file outside DIR) or a
        // FIFO is refused, and a file over the bound is not read whole.
        let text = match read_regular(&file, IGNORE_FILE_MAX_BYTES) {
            Ok(bytes) => String::from_utf8(bytes)
                .map_err(|_| BundleError::BadName { path: file.clone(), why: "it is not UTF-8 text".to_owned() })?,
            Err(BundleError::Read(e)) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(e),
        };
        for (n, line) in text.lines().enumerate() {
            let rule = parse(line).map_err(|why| BundleError::BadRule {
                file: file.display().to_string(),
                line: n + 1,
                why,
            })?;
            rules.extend(rule);
        }
        Ok(Rules(rules))
    }

    /// Whether `path` (relative, `/` between names) is left out; the last matching rule wins.
    fn ignored(&self, path: &str, is_dir: bool) -> bool {
        let mut ignored = false;
        for rule in &self.0 {
            if (!rule.dir_only || is_dir) && rule.glob.is_match(path) {
                ignored = !rule.negated;
            }
        }
        ignored
    }
}

/// One gitignore line as a rule (`None` for a blank line or a comment).
fn parse(line: &str) -> Result<Option<Rule>, globset::Error> {
    let line = line.strip_suffix('\r').unwrap_or(line);
    if line.starts_with('#') {
        return Ok(None);
    }
    // Trailing spaces do not count unless escaped.
    let mut pattern = line.trim_end_matches(' ').to_owned();
    if line.ends_with("\\ ") && !pattern.ends_with("\\ ") {
        pattern.push(' ');
    }
    let negated = pattern.starts_with('!');
    if negated {
        pattern.remove(0);
    }
    if pattern.starts_with("\\!") || pattern.starts_with("\\#") {
        pattern.remove(0);
    }
    let dir_only = pattern.ends_with('/');
    let pattern = pattern.trim_end_matches('/');
    if pattern.is_empty() {
        return Ok(None);
    }
    // A `/` at the start or inside anchors the pattern to the directory; otherwise it matches
    // at any depth.
    let glob = match pattern.strip_prefix('/') {
        Some(anchored) => anchored.to_owned(),
        None if pattern.contains('/') => pattern.to_owned(),
        None => format!("**/{pattern}"),
    };
    let glob = GlobBuilder::new(&glob).literal_separator(true).backslash_escape(true).build()?.compile_matcher();
    Ok(Some(Rule { glob, negated, dir_only }))
}

/// What the manifest asks to leave out besides the rules: the manifest file itself (when it
/// is in DIR) and the files where its secrets are mounted.
#[derive(Debug, Default)]
pub(crate) struct Exclude {
    /// Relative paths (`/` between names) never sent.
    pub(crate) paths: Vec<String>,
}

impl Exclude {
    /// The manifest at `manifest` (if it is inside `dir`) and its secrets' file destinations
    /// under `/app` (the directory a job's files are mounted at).
    pub(crate) fn of(dir: &Path, manifest: Option<&Path>, secret_files: &[String]) -> Exclude {
        let mut paths = Vec::new();
        if let Some(m) = manifest {
            let (m, d) = (std::path::absolute(m).ok(), std::path::absolute(dir).ok());
            if let (Some(m), Some(d)) = (m, d)
                && let Ok(relative) = m.strip_prefix(&d)
            {
                paths.push(slashed(relative));
            }
        }
        for path in secret_files {
            if let Some(inside) = path.strip_prefix("/app/") {
                paths.push(inside.trim_matches('/').to_owned());
            }
        }
        Exclude { paths }
    }
}

/// A relative path with `/` between its names.
fn slashed(path: &Path) -> String {
    path.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/")
}

/// The files of `dir` to send, in path order.
pub(crate) fn read(dir: &Path, exclude: &Exclude) -> Result<Bundle, BundleError> {
    if !fs_err::metadata(dir)?.is_dir() {
        return Err(BundleError::NotADirectory(dir.to_owned()));
    }
    let rules = Rules::read(dir)?;
    let mut bundle = Bundle::default();
    let mut total = 0u64;
    let mut pending = vec![(dir.to_owned(), String::new())];
    while let Some((current, prefix)) = pending.pop() {
        let mut entries: Vec<_> = fs_err::read_dir(&current)?.collect::<Result<_, _>>()?;
        entries.sort_by_key(fs_err::DirEntry::file_name);
        for entry in entries {
            let path = entry.path();
            let Ok(name) = entry.file_name().into_string() else {
                return Err(BundleError::BadName { path, why: "its name is not UTF-8".to_owned() });
            };
            let relative = if prefix.is_empty() { name.clone() } else { format!("{prefix}/{name}") };
            let kind = fs_err::symlink_metadata(&path)?.file_type();
            let always = name == ".git" || (prefix.is_empty() && name == IGNORE_FILE);
            if always || exclude.paths.contains(&relative) || rules.ignored(&relative, kind.is_dir()) {
                continue;
            }
            if kind.is_dir() {
                pending.push((path, relative));
                continue;
            }
            if !kind.is_file() {
                let what = if kind.is_symlink() { "symbolic link" } else { "special file" };
                return Err(BundleError::Unsupported { path, kind: what });
            }
            check_bundle_path(&relative)
                .map_err(|why| BundleError::BadName { path: path.clone(), why: format!("the path {why}") })?;
            if bundle.files.len() >= BUNDLE_MAX_FILES {
                return Err(BundleError::TooManyFiles { dir: dir.to_owned() });
            }
            // Read at most what is left of the bound: a file that grows meanwhile cannot pass
            // it; one replaced by a link or a FIFO since it was listed is refused, not followed.
            let left = BUNDLE_MAX_BYTES - total;
            let (bytes, mode) = match open_regular(&path).and_then(|f| read_up_to(f, &path, left)) {
                Ok(read) => read,
                Err(BundleError::FileTooLarge { .. }) => {
                    return Err(BundleError::TooLarge { dir: dir.to_owned(), at: relative });
                }
                Err(e) => return Err(e),
            };
            if mode & 0o111 != 0 {
                bundle.executable.insert(relative.clone());
            }
            total += bytes.len() as u64;
            bundle.files.insert(relative, bytes);
        }
    }
    Ok(bundle)
}

/// `path` opened for reading if it is a regular file: never through a link (`O_NOFOLLOW`),
/// never waiting on a FIFO's writer (`O_NONBLOCK`), and checked on the open file itself, so an
/// entry replaced since it was listed is refused rather than followed.
fn open_regular(path: &Path) -> Result<std::fs::File, BundleError> {
    use rustix::fs::OFlags;
    use std::os::unix::fs::OpenOptionsExt as _;
    let flags = OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(i32::try_from(flags.bits()).unwrap_or(0))
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            // `O_NOFOLLOW` on a link.
            Some(code) if code == rustix::io::Errno::LOOP.raw_os_error() => {
                BundleError::Unsupported { path: path.to_owned(), kind: "symbolic link" }
            }
            _ => BundleError::Read(std::io::Error::new(e.kind(), format!("failed to open `{}`: {e}", path.display()))),
        })?;
    let kind = file.metadata().map_err(|e| io_error(e, path))?.file_type();
    if kind.is_file() {
        return Ok(file);
    }
    let kind = if kind.is_symlink() { "symbolic link" } else { "special file" };
    Err(BundleError::Unsupported { path: path.to_owned(), kind })
}

/// The bytes of `file` (at `path`), at most `limit` (more is [`BundleError::FileTooLarge`]),
/// and its permission bits.
fn read_up_to(file: std::fs::File, path: &Path, limit: u64) -> Result<(Vec<u8>, u32), BundleError> {
    let mode = file.metadata().map_err(|e| io_error(e, path))?.permissions().mode();
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut std::io::Read::take(file, limit + 1), &mut bytes).map_err(|e| io_error(e, path))?;
    if bytes.len() as u64 > limit {
        return Err(BundleError::FileTooLarge { path: path.to_owned(), limit });
    }
    Ok((bytes, mode))
}

/// The regular file at `path`, at most `limit` bytes ([`open_regular`], [`read_up_to`]).
fn read_regular(path: &Path, limit: u64) -> Result<Vec<u8>, BundleError> {
    open_regular(path).and_then(|f| read_up_to(f, path, limit)).map(|(bytes, _)| bytes)
}

/// An I/O error of `std` (which names no path), with the path.
fn io_error(e: std::io::Error, path: &Path) -> BundleError {
    BundleError::Read(std::io::Error::new(e.kind(), format!("failed to read `{}`: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(files: &[&str]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("a directory");
        for f in files {
            let path = dir.path().join(f);
            fs_err::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
            fs_err::write(&path, f.as_bytes()).expect("write");
        }
        dir
    }

    fn sent(dir: &Path, exclude: &Exclude) -> Vec<String> {
        read(dir, exclude).expect("bundled").files.into_keys().collect()
    }

    #[test]
    fn the_ignore_file_rules_hidden_entries_git_and_the_manifest_are_left_out() {
        let dir = tree(&[
            "main.js",
            "manifest.yaml",
            "lib/a.js",
            "lib/a.test.js",
            "build/out.js",
            "src/build/keep.js",
            "node_modules/x/index.js",
            "logs/today.log",
            "keep.log",
            ".env",
            ".git/HEAD",
            ".well-known/security.txt",
            "secrets/key.pem",
        ]);
        fs_err::write(
            dir.path().join(IGNORE_FILE),
            "# build output\n/build\nnode_modules/\n*.log\n!keep.log\n*.test.js\n!.well-known/\n",
        )
        .expect("write");
        let exclude =
            Exclude::of(dir.path(), Some(&dir.path().join("manifest.yaml")), &["/app/secrets/key.pem".to_owned()]);
        assert_eq!(
            sent(dir.path(), &exclude),
            [".well-known/security.txt", "keep.log", "lib/a.js", "main.js", "src/build/keep.js"]
        );
        // Without the ignore file: only the defaults.
        fs_err::remove_file(dir.path().join(IGNORE_FILE)).expect("rm");
        let all = sent(dir.path(), &Exclude::default());
        assert!(all.contains(&"manifest.yaml".to_owned()) && all.contains(&"build/out.js".to_owned()), "{all:?}");
        assert!(!all.iter().any(|p| p.starts_with('.')), "{all:?}");
    }

    #[test]
    fn a_link_is_refused_by_name_unless_left_out() {
        let dir = tree(&["main.js"]);
        std::os::unix::fs::symlink("/etc/passwd", dir.path().join("passwd")).expect("link");
        let e = read(dir.path(), &Exclude::default()).expect_err("refused");
        assert!(e.to_string().contains("passwd is a symbolic link: a bundle holds only regular files"), "{e}");
        fs_err::write(dir.path().join(IGNORE_FILE), "passwd\n").expect("write");
        assert_eq!(sent(dir.path(), &Exclude::default()), ["main.js"]);
    }

    /// `read(dir)` on another thread: its answer, or `None` if it has not come in 5 s (it
    /// waits on something).
    fn read_within_5s(dir: &Path) -> Option<Result<Bundle, BundleError>> {
        let (tx, rx) = std::sync::mpsc::channel();
        let dir = dir.to_owned();
        std::thread::spawn(move || tx.send(read(&dir, &Exclude::default())));
        rx.recv_timeout(std::time::Duration::from_secs(5)).ok()
    }

    #[test]
    fn an_ignore_file_that_is_a_link_or_a_fifo_is_refused_without_being_read() {
        // A link out of DIR (a cloned repository can hold one): its target's lines are not
        // rules, and `/dev/zero` is not read until memory runs out.
        let outside = tree(&["rules"]);
        fs_err::write(outside.path().join("rules"), "main.js\n").expect("write");
        let dir = tree(&["main.js"]);
        std::os::unix::fs::symlink(outside.path().join("rules"), dir.path().join(IGNORE_FILE)).expect("link");
        let e = read_within_5s(dir.path()).expect("an answer").expect_err("refused");
        assert!(e.to_string().contains(".svcignore is a symbolic link"), "{e}");
        // A FIFO: refused at once, not waited on.
        fs_err::remove_file(dir.path().join(IGNORE_FILE)).expect("rm");
        rustix::fs::mkfifoat(rustix::fs::CWD, dir.path().join(IGNORE_FILE), rustix::fs::Mode::from_raw_mode(0o600))
            .expect("mkfifo");
        let e = read_within_5s(dir.path()).expect("an answer within 5 s, not a wait on the FIFO").expect_err("refused");
        assert!(e.to_string().contains(".svcignore is a special file"), "{e}");
        // Over its bound: refused, naming it.
        fs_err::remove_file(dir.path().join(IGNORE_FILE)).expect("rm");
        fs_err::write(dir.path().join(IGNORE_FILE), "x\n".repeat(200_000)).expect("write");
        let e = read_within_5s(dir.path()).expect("an answer").expect_err("refused");
        assert!(e.to_string().contains(".svcignore is over 262144 bytes"), "{e}");
    }

    #[test]
    fn a_file_replaced_by_a_link_or_a_fifo_after_listing_is_not_followed() {
        // What `read` opens a listed file with: a link is refused, not followed (to
        // `/etc/passwd`, outside DIR), and a FIFO is refused without waiting for a writer.
        let dir = tree(&["main.js"]);
        let link = dir.path().join("swapped");
        std::os::unix::fs::symlink("/etc/passwd", &link).expect("link");
        let e = open_regular(&link).expect_err("a link refused");
        assert!(e.to_string().contains("swapped is a symbolic link"), "{e}");
        let fifo = dir.path().join("fifo");
        rustix::fs::mkfifoat(rustix::fs::CWD, &fifo, rustix::fs::Mode::from_raw_mode(0o600)).expect("mkfifo");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || tx.send(open_regular(&fifo).map(|_| ())));
        let e = rx.recv_timeout(std::time::Duration::from_secs(5)).expect("no wait on the FIFO").expect_err("refused");
        assert!(e.to_string().contains("fifo is a special file"), "{e}");
        assert_eq!(read_regular(&dir.path().join("main.js"), 100).expect("a file"), b"main.js");
    }

    #[test]
    fn a_file_name_with_a_terminal_escape_is_named_escaped() {
        let dir = tree(&["main.js"]);
        fs_err::write(dir.path().join("bad\u{1b}[31mname"), "x").expect("write");
        let e = read(dir.path(), &Exclude::default()).expect_err("refused").to_string();
        assert!(e.contains("bad\\u{001b}[31mname: the path holds a control character"), "{e}");
        assert!(!e.contains('\u{1b}'), "{e:?}");
        // Refused as a link too, before its name is checked.
        fs_err::remove_file(dir.path().join("bad\u{1b}[31mname")).expect("rm");
        std::os::unix::fs::symlink("main.js", dir.path().join("link\u{7}")).expect("link");
        let e = read(dir.path(), &Exclude::default()).expect_err("refused").to_string();
        assert!(e.contains("link\\u{0007} is a symbolic link"), "{e:?}");
    }

    #[test]
    fn a_bad_rule_names_its_line() {
        let dir = tree(&["main.js"]);
        fs_err::write(dir.path().join(IGNORE_FILE), "ok\n[z-a\n").expect("write");
        let e = read(dir.path(), &Exclude::default()).expect_err("refused");
        assert!(e.to_string().contains(".svcignore:2: "), "{e}");
    }

    #[test]
    fn sizes_read_as_people_read_them() {
        assert_eq!(size(1), "1 byte");
        assert_eq!(size(213), "213 bytes");
        assert_eq!(size(1536), "1.5 KiB");
        assert_eq!(size(3 * 1_048_576), "3.0 MiB");
    }
}
