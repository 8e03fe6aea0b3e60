//! The files init writes: what each should hold, how that compares with what is there, and
//! writing them atomically with their mode.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use fs_err::os::unix::fs::OpenOptionsExt as _;
use relay_gateway::file::GatewayFile;
use serde::Serialize;

use crate::{Root, sha256_hex};

/// What init does to a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// It does not exist: created.
    Create,
    /// Init wrote it and would now write something else (or only its mode is wrong).
    Update,
    /// It holds what init would write.
    Unchanged,
    /// It changed since init wrote it (or init never wrote it): refused without `--force`.
    Changed,
    /// Changed, and replaced because of `--force`.
    Replace,
}

impl Action {
    /// As printed.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Create => "create",
            Action::Update => "update",
            Action::Unchanged => "unchanged",
            Action::Changed => "changed",
            Action::Replace => "replace",
        }
    }

    /// Whether applying it writes the file.
    pub fn writes(self) -> bool {
        matches!(self, Action::Create | Action::Update | Action::Replace)
    }
}

/// What the record's SHA-256 of a file covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fingerprint {
    /// The bytes.
    Bytes,
    /// The gateway configuration without its routes, re-serialized: the routes are the
    /// gateway's to change, and formatting is not a change.
    GatewayConfig,
}

impl Fingerprint {
    /// The SHA-256 (hex) of what this fingerprint covers in `bytes`.
    pub fn of(self, bytes: &[u8]) -> String {
        match self {
            Fingerprint::Bytes => sha256_hex(bytes),
            Fingerprint::GatewayConfig => match serde_json::from_slice::<GatewayFile>(bytes) {
                Ok(mut file) => {
                    file.routes.clear();
                    sha256_hex(serde_json::to_string(&file).unwrap_or_default().as_bytes())
                }
                Err(_) => sha256_hex(bytes),
            },
        }
    }
}

/// A file as init wants it.
#[derive(Debug, Clone)]
pub struct Planned {
    /// The host path (`/etc/svc-gateway/gateway.json`).
    pub path: PathBuf,
    /// The content.
    pub content: String,
    /// The mode (0600 for keys, 0644 otherwise).
    pub mode: u32,
    /// What the record's digest covers.
    pub fingerprint: Fingerprint,
    /// What applying does.
    pub action: Action,
}

/// One file in init's report: the JSON shape of `init --format json`'s `files`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileReport {
    /// The host path.
    pub path: String,
    /// Octal, `0600`.
    pub mode: String,
    /// `create`, `update`, `unchanged`, `changed`, `replace`.
    pub action: Action,
}

impl Planned {
    /// The file's line in the report.
    pub fn report(&self) -> FileReport {
        FileReport { path: self.path.display().to_string(), mode: format!("{:04o}", self.mode), action: self.action }
    }
}

/// Decides what to do with a file that should hold `content` with `mode`. `recorded` is the
/// fingerprint of what init last wrote there (from the registration record), if anything.
pub fn classify(
    root: &Root,
    path: &Path,
    content: &str,
    mode: u32,
    fingerprint: Fingerprint,
    recorded: Option<&str>,
    force: bool,
) -> Action {
    let real = root.path(path);
    let Ok(existing) = std::fs::read(&real) else {
        return if real.exists() && !force { Action::Changed } else { Action::Create };
    };
    let existing_print = fingerprint.of(&existing);
    if existing_print == fingerprint.of(content.as_bytes()) {
        let current = std::fs::metadata(&real).map(|m| m.permissions().mode() & 0o777).unwrap_or(mode);
        return if current == mode { Action::Unchanged } else { Action::Update };
    }
    if recorded == Some(existing_print.as_str()) {
        Action::Update
    } else if force {
        Action::Replace
    } else {
        Action::Changed
    }
}

/// The fingerprint of each planned file, by host path: what the record keeps.
pub fn digests(files: &[Planned]) -> BTreeMap<String, String> {
    files.iter().map(|f| (f.path.display().to_string(), f.fingerprint.of(f.content.as_bytes()))).collect()
}

/// Writes `content` to `path` with `mode`: a temporary file beside it (created with the
/// mode, so a key is never readable by others, even briefly), flushed to disk, then renamed
/// over the old one, so a crash leaves the old file or the new, never half of one.
pub fn write_atomic(path: &Path, content: &[u8], mode: u32) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    fs_err::create_dir_all(dir)?;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let temp = dir.join(format!(".{name}.gateway-prep-{}", std::process::id()));
    let _ = std::fs::remove_file(&temp);
    let written = (|| {
        let mut file = fs_err::OpenOptions::new().write(true).create_new(true).mode(mode).open(&temp)?;
        file.write_all(content)?;
        // The umask may have narrowed the mode at creation; set it exactly.
        file.set_permissions(std::fs::Permissions::from_mode(mode))?;
        file.sync_all()?;
        fs_err::rename(&temp, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_classified_by_content_mode_and_record() {
        let scratch = tempfile::tempdir().expect("a scratch directory");
        let dir = scratch.path();
        let root = Root::new(dir);
        let path = Path::new("/etc/x.conf");
        const B: Fingerprint = Fingerprint::Bytes;
        assert_eq!(classify(&root, path, "a\n", 0o644, B, None, false), Action::Create);
        write_atomic(&root.path(path), b"a\n", 0o600).expect("write");
        let mode = std::fs::metadata(root.path(path)).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(classify(&root, path, "a\n", 0o600, B, None, false), Action::Unchanged);
        assert_eq!(classify(&root, path, "a\n", 0o644, B, None, false), Action::Update, "mode only");
        let wrote = sha256_hex(b"a\n");
        assert_eq!(classify(&root, path, "b\n", 0o600, B, Some(&wrote), false), Action::Update, "init wrote it");
        assert_eq!(classify(&root, path, "b\n", 0o600, B, Some("other"), false), Action::Changed, "edited by hand");
        assert_eq!(classify(&root, path, "b\n", 0o600, B, None, false), Action::Changed, "never written by init");
        assert_eq!(classify(&root, path, "b\n", 0o600, B, None, true), Action::Replace);
        write_atomic(&root.path(path), b"b\n", 0o644).expect("overwrite");
        assert_eq!(std::fs::read_to_string(root.path(path)).expect("read"), "b\n");
        // The gateway configuration's routes and formatting are not what init wrote.
        let config = r#"{"public":"0.0.0.0:443","tunnel":"0.0.0.0:7443","admin":"127.0.0.1:7444",
            "tunnelCert":"/c","tunnelKey":"/k"}"#;
        let routed = r#"{ "public": "0.0.0.0:443", "tunnel": "0.0.0.0:7443", "admin": "127.0.0.1:7444",
            "tunnelCert": "/c", "tunnelKey": "/k",
            "routes": [{"routeId": "rt_1", "hostnames": ["a.example.test"], "routePublicKey": "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}] }"#;
        let g = Fingerprint::GatewayConfig;
        assert_eq!(g.of(config.as_bytes()), g.of(routed.as_bytes()));
        assert_ne!(g.of(config.as_bytes()), g.of(config.replace("7444", "7445").as_bytes()));
        assert_eq!(g.of(b"not json"), sha256_hex(b"not json"));
        let leftovers: Vec<_> = std::fs::read_dir(dir.join("etc")).expect("dir").collect();
        assert_eq!(leftovers.len(), 1, "no temporary file is left behind");
    }
}
