//! The coordinator's side: its signing key, the sequence, the latest rotation statement and
//! the last signed catalog, as files in `DATA_DIR/catalog/`; [`Publisher::current`] serves
//! the last catalog while its content is unchanged and more than half its validity remains,
//! and signs a new one with the next sequence otherwise.
//!
//! Files (read on every request, so `svc relay admin rotate-catalog-key` takes effect on a
//! running coordinator): `signing-key.pk8` (PKCS#8, mode 0600), `sequence` (the highest
//! sequence ever issued, written before a catalog carrying it is served), `rotation.json`
//! (the latest rotation statement), `signed.json` (the last catalog served).

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use super::CatalogError;
use super::key::{CatalogKey, PublicKey};
use super::model::{CatalogContent, Rotation, SignedCatalog};

/// The folder in the data directory.
pub const CATALOG_DIR: &str = "catalog";
const KEY_FILE: &str = "signing-key.pk8";
const SEQUENCE_FILE: &str = "sequence";
const ROTATION_FILE: &str = "rotation.json";
const SIGNED_FILE: &str = "signed.json";

/// The default validity of a catalog.
pub const DEFAULT_VALIDITY: Duration = Duration::from_secs(24 * 3600);

fn storage(path: &Path) -> impl FnOnce(std::io::Error) -> CatalogError + '_ {
    move |e| CatalogError::Storage { path: path.display().to_string(), reason: e.to_string() }
}

/// Writes a file whole or not at all (a temporary file synced, then renamed over it), 0600
/// like every file of the data directory.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), CatalogError> {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".tmp");
    let tmp = path.with_file_name(name);
    relay_wire::files::write_private(&tmp, bytes).map_err(storage(&tmp))?;
    fs_err::File::open(&tmp).and_then(|f| f.sync_all()).map_err(storage(&tmp))?;
    fs_err::rename(&tmp, path).map_err(storage(path))
}

/// Reads a file that may not exist yet.
fn read_optional(path: &Path) -> Result<Option<Vec<u8>>, CatalogError> {
    match fs_err::read(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(storage(path)(e)),
    }
}

/// The catalog state of one data directory.
#[derive(Debug, Clone)]
struct Files {
    dir: PathBuf,
}

impl Files {
    fn new(data_dir: &Path) -> Result<Files, CatalogError> {
        let dir = data_dir.join(CATALOG_DIR);
        relay_wire::files::create_private_dir(&dir).map_err(storage(&dir))?;
        Ok(Files { dir })
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// The signing key, created if there is none.
    fn key_or_create(&self) -> Result<CatalogKey, CatalogError> {
        if let Some(key) = self.key()? {
            return Ok(key);
        }
        let (key, pkcs8) = CatalogKey::generate()?;
        write_atomic(&self.path(KEY_FILE), &pkcs8)?;
        Ok(key)
    }

    fn key(&self) -> Result<Option<CatalogKey>, CatalogError> {
        let path = self.path(KEY_FILE);
        read_optional(&path)?
            .map(|bytes| {
                CatalogKey::from_pkcs8(&bytes).map_err(|e| CatalogError::Key(format!("{}: {e}", path.display())))
            })
            .transpose()
    }

    fn sequence(&self) -> Result<u64, CatalogError> {
        let path = self.path(SEQUENCE_FILE);
        match read_optional(&path)? {
            None => Ok(0),
            Some(bytes) => String::from_utf8_lossy(&bytes).trim().parse().map_err(|_| CatalogError::Storage {
                path: path.display().to_string(),
                reason: "not a sequence number; restore it from a backup, or write a number above every catalog \
                         customers have seen"
                    .into(),
            }),
        }
    }

    fn set_sequence(&self, sequence: u64) -> Result<(), CatalogError> {
        write_atomic(&self.path(SEQUENCE_FILE), format!("{sequence}\n").as_bytes())
    }

    /// The latest rotation statement, if it is signed and names `key` as the new key (one
    /// written for a key not in place yet is not served).
    fn rotation_to(&self, key: PublicKey) -> Result<Option<Rotation>, CatalogError> {
        let Some(bytes) = read_optional(&self.path(ROTATION_FILE))? else { return Ok(None) };
        let rotation: Option<Rotation> = serde_json::from_slice(&bytes).ok();
        Ok(rotation.filter(|r| r.to == key && r.is_signed()))
    }

    /// The last catalog served, if it still verifies.
    fn signed(&self) -> Result<Option<SignedCatalog>, CatalogError> {
        let Some(bytes) = read_optional(&self.path(SIGNED_FILE))? else { return Ok(None) };
        Ok(SignedCatalog::from_json(&bytes).ok().filter(|s| s.open().is_ok()))
    }

    /// The highest sequence issued: the sequence file, or the last catalog if it is higher.
    fn highest(&self) -> Result<u64, CatalogError> {
        let last = self.signed()?.and_then(|s| s.open().ok()).map_or(0, |o| o.catalog.sequence);
        Ok(self.sequence()?.max(last))
    }
}

/// Signs and serves a coordinator's catalogs.
#[derive(Debug)]
pub struct Publisher {
    files: Files,
    validity: Duration,
    lock: Mutex<()>,
}

impl Publisher {
    /// The publisher of a data directory, creating its signing key on first use. A catalog
    /// is valid for `validity` (at least one second).
    pub fn open(data_dir: &Path, validity: Duration) -> Result<Publisher, CatalogError> {
        let files = Files::new(data_dir)?;
        files.key_or_create()?;
        Ok(Publisher { files, validity: validity.max(Duration::from_secs(1)), lock: Mutex::new(()) })
    }

    /// The current signing key.
    pub fn public_key(&self) -> Result<PublicKey, CatalogError> {
        Ok(self.key()?.public_key())
    }

    /// The signing key, which must exist (a new one would make every customer refuse).
    fn key(&self) -> Result<CatalogKey, CatalogError> {
        self.files.key()?.ok_or_else(|| {
            CatalogError::Key(format!(
                "{} is missing; restore it from a backup (a new key would make every customer refuse the catalog)",
                self.files.path(KEY_FILE).display()
            ))
        })
    }

    /// The catalog to serve at `now_ms` for `content`: the last one while it has the same
    /// content, keys and rotation and more than half its validity left (and no more than the
    /// whole); otherwise a new one with the next sequence, recorded before it is returned.
    pub fn current(&self, content: CatalogContent, now_ms: i64) -> Result<SignedCatalog, CatalogError> {
        let _guard = self.lock.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let key = self.key()?;
        let rotation = self.files.rotation_to(key.public_key())?;
        let previous_key = rotation.as_ref().map(|r| r.from);
        let validity_ms = i64::try_from(self.validity.as_millis()).unwrap_or(i64::MAX);
        let highest = self.files.highest()?;
        if let Some(last) = self.files.signed()?
            && let Ok(opened) = last.open()
        {
            let c = &opened.catalog;
            let unchanged = c.content() == content
                && c.signing_key == key.public_key()
                && c.previous_key == previous_key
                && last.rotation == rotation
                && c.sequence == highest;
            // Reused only while more than half the validity is left, and never one valid
            // for longer than the validity now configured.
            let left = c.expires_at.saturating_sub(now_ms);
            if unchanged && left > validity_ms / 2 && left <= validity_ms {
                return Ok(last);
            }
        }
        let sequence =
            highest.checked_add(1).ok_or_else(|| CatalogError::Malformed("the sequence is exhausted".into()))?;
        let catalog =
            content.catalog(sequence, now_ms, now_ms.saturating_add(validity_ms), key.public_key(), previous_key);
        let signed = SignedCatalog::sign(&catalog, &key, rotation)?;
        self.files.set_sequence(sequence)?;
        let json = serde_json::to_vec_pretty(&signed).map_err(|e| CatalogError::Malformed(e.to_string()))?;
        write_atomic(&self.files.path(SIGNED_FILE), &json)?;
        Ok(signed)
    }
}

/// The data directory's catalog signing key, created if there is none.
pub fn signing_key(data_dir: &Path) -> Result<PublicKey, CatalogError> {
    Ok(Files::new(data_dir)?.key_or_create()?.public_key())
}

/// Replaces the signing key: a new key, and the old key's statement that the new one
/// replaces it from the next sequence on. Every later catalog carries the statement (until
/// the next rotation), so a customer who pinned the old key follows; the old key is
/// deleted. Works while the coordinator runs: its next catalog is signed by the new key.
pub fn rotate_key(data_dir: &Path) -> Result<Rotation, CatalogError> {
    let files = Files::new(data_dir)?;
    let old = files.key()?.ok_or_else(|| {
        CatalogError::Key(format!(
            "{} has no catalog signing key yet: start the coordinator (or run `svc relay admin catalog-key`) first",
            data_dir.display()
        ))
    })?;
    let (new, pkcs8) = CatalogKey::generate()?;
    let rotation = Rotation::sign(&old, new.public_key(), files.highest()?.saturating_add(1))?;
    let json = serde_json::to_vec_pretty(&rotation).map_err(|e| CatalogError::Malformed(e.to_string()))?;
    // The statement first: a coordinator reading between the two writes ignores a statement
    // for a key not in place yet, and never sees the new key without its statement.
    write_atomic(&files.path(ROTATION_FILE), &json)?;
    write_atomic(&files.path(KEY_FILE), &pkcs8)?;
    Ok(rotation)
}
