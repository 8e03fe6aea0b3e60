//! The key file: the key-encryption keys (KEKs) that wrap a store's data keys, kept outside
//! the store.
//!
//! ```text
//! # svc key-encryption keys: keep this file 0600 and back it up apart from the database.
//! # Without it the store's secrets cannot be read. The first key is the current one.
//! kek-v1 3f2a9c0d11b4e6f7 <32 bytes, base64url>
//! kek-v1 0c1d2e3f40516273 <an older key, kept until no data key needs it>
//! ```
//!
//! Text, so an operator can copy it into a secrets manager and diff two copies by their ids.
//! A KEK's id is a digest of the key, so a store can say which key it needs without holding it.

use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use zeroize::Zeroizing;

use crate::KeyError;

const HEADER: &str = "# svc key-encryption keys: keep this file 0600 and back it up apart from the database.\n\
                      # Without it the store's secrets cannot be read. The first key is the current one.\n";
const TAG: &str = "kek-v1";
/// The largest key file read (a few hundred keys): the file is ours, but a path given by a
/// flag could name anything.
const MAX_BYTES: u64 = 64 * 1024;

/// A key-encryption key's id: the first 8 bytes of SHA-256 over a label and the key, in hex.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KekId(String);

impl KekId {
    /// The id of `key`.
    fn of(key: &[u8; 32]) -> Self {
        let mut input = b"svc-kek-id\0".to_vec();
        input.extend_from_slice(key);
        let digest = ring::digest::digest(&ring::digest::SHA256, &input);
        Self(hex(&digest.as_ref()[..8]))
    }

    /// An id as the store keeps it.
    pub fn from_stored(text: &str) -> Self {
        Self(text.to_owned())
    }

    /// The id as text (16 hex digits).
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for KekId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One key-encryption key.
pub(crate) struct Kek {
    pub(crate) id: KekId,
    pub(crate) key: Zeroizing<[u8; 32]>,
}

impl fmt::Debug for Kek {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Kek").field("id", &self.id).finish_non_exhaustive()
    }
}

/// A key file's keys, the first one current.
#[derive(Debug)]
pub struct KeyFile {
    path: PathBuf,
    keys: Vec<Kek>,
}

impl KeyFile {
    /// Reads the key file at `path`: `None` when there is none. Refused when group or others
    /// may read or write it, or when it is not what [`KeyFile::create`] writes.
    pub fn read(path: &Path) -> Result<Option<Self>, KeyError> {
        let io = |source| KeyError::Io { path: path.to_owned(), source };
        let file = match std::fs::File::open(path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io(e)),
        };
        let metadata = file.metadata().map_err(io)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = metadata.permissions().mode() & 0o7777;
            if mode & 0o077 != 0 {
                return Err(KeyError::Permissions { path: path.to_owned(), mode });
            }
        }
        if !metadata.is_file() || metadata.len() > MAX_BYTES {
            return Err(KeyError::Malformed {
                path: path.to_owned(),
                line: 1,
                reason: "not a key file written by svc",
            });
        }
        let mut text = Zeroizing::new(String::new());
        std::io::Read::read_to_string(&mut std::io::Read::take(file, MAX_BYTES), &mut text).map_err(io)?;
        let mut keys = Vec::new();
        for (index, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let malformed = |reason| KeyError::Malformed { path: path.to_owned(), line: index + 1, reason };
            let mut fields = line.split_ascii_whitespace();
            let (Some(TAG), Some(id), Some(encoded), None) =
                (fields.next(), fields.next(), fields.next(), fields.next())
            else {
                return Err(malformed("expected `kek-v1 ID KEY`"));
            };
            let bytes =
                Zeroizing::new(URL_SAFE_NO_PAD.decode(encoded).map_err(|_| malformed("the key is not base64url"))?);
            let key: Zeroizing<[u8; 32]> =
                Zeroizing::new(bytes.as_slice().try_into().map_err(|_| malformed("the key is not 32 bytes"))?);
            let kek = Kek { id: KekId::of(&key), key };
            if kek.id.as_str() != id {
                return Err(malformed("the id does not match the key (the line was edited)"));
            }
            keys.push(kek);
        }
        if keys.is_empty() {
            return Err(KeyError::Malformed { path: path.to_owned(), line: 1, reason: "no key in the file" });
        }
        Ok(Some(Self { path: path.to_owned(), keys }))
    }

    /// Creates a key file with one fresh key at `path` (mode 0600, its directory 0700 if
    /// missing). Never replaces a file already there.
    pub fn create(path: &Path) -> Result<Self, KeyError> {
        let file = Self { path: path.to_owned(), keys: vec![fresh()?] };
        file.write(true)?;
        Ok(file)
    }

    /// A key file with a fresh key as the current one, the others kept after it (a rotation's
    /// first step). Saved with [`KeyFile::save`].
    pub fn with_new_current(mut self) -> Result<Self, KeyError> {
        self.keys.insert(0, fresh()?);
        Ok(self)
    }

    /// The key file without the keys `needed` says no, the current one always kept (a
    /// rotation's last step). Saved with [`KeyFile::save`].
    pub fn retain(mut self, needed: impl Fn(&KekId) -> bool) -> Self {
        let mut index = 0;
        self.keys.retain(|kek| {
            index += 1;
            index == 1 || needed(&kek.id)
        });
        self
    }

    /// Replaces the file on disk with these keys: a new 0600 file beside it, flushed to disk,
    /// renamed over it, so a crash leaves the old file or the new one, never half of one.
    pub fn save(&self) -> Result<(), KeyError> {
        self.write(false)
    }

    /// Where the file is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The current key's id.
    pub fn current_id(&self) -> &KekId {
        &self.keys[0].id
    }

    /// Every key's id, the current one first.
    pub fn ids(&self) -> impl Iterator<Item = &KekId> {
        self.keys.iter().map(|kek| &kek.id)
    }

    pub(crate) fn current(&self) -> &Kek {
        &self.keys[0]
    }

    pub(crate) fn get(&self, id: &KekId) -> Option<&Kek> {
        self.keys.iter().find(|kek| &kek.id == id)
    }

    fn write(&self, create_only: bool) -> Result<(), KeyError> {
        let path = &self.path;
        let io = |source| KeyError::Io { path: path.clone(), source };
        let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        if !dir.exists() {
            let mut builder = std::fs::DirBuilder::new();
            builder.recursive(true);
            #[cfg(unix)]
            std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
            builder.create(dir).map_err(io)?;
        }
        let mut text = Zeroizing::new(String::from(HEADER));
        for kek in &self.keys {
            text.push_str(&format!("{TAG} {} {}\n", kek.id, URL_SAFE_NO_PAD.encode(kek.key.as_slice())));
        }
        let mut random = [0u8; 8];
        crate::random(&mut random)?;
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let temp = dir.join(format!(".{name}.{}.tmp", hex(&random)));
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let written = options.open(&temp).and_then(|mut file| {
            file.write_all(text.as_bytes())?;
            file.sync_all()
        });
        // `create` links the new file into place (failing if one appeared meanwhile);
        // `save` renames over the old one.
        let placed = written
            .and_then(|()| if create_only { std::fs::hard_link(&temp, path) } else { std::fs::rename(&temp, path) });
        let _ = std::fs::remove_file(&temp);
        placed.map_err(io)?;
        if let Ok(dir) = std::fs::File::open(dir) {
            let _ = dir.sync_all();
        }
        Ok(())
    }
}

fn fresh() -> Result<Kek, KeyError> {
    let mut key = Zeroizing::new([0u8; 32]);
    crate::random(key.as_mut_slice())?;
    Ok(Kek { id: KekId::of(&key), key })
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_created_file_is_0600_and_reads_back_the_same_key() {
        let dir = tempfile::tempdir().expect("scratch");
        let path = dir.path().join("keys/secrets.key");
        let created = KeyFile::create(&path).expect("created");
        let mode = std::fs::metadata(&path).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let read = KeyFile::read(&path).expect("read").expect("there");
        assert_eq!(read.current_id(), created.current_id());
        assert_eq!(*read.current().key, *created.current().key);
        assert!(KeyFile::create(&path).is_err(), "create never replaces a key file");
        assert_eq!(std::fs::read_dir(path.parent().expect("dir")).expect("list").count(), 1, "no temporary file left");
    }

    #[test]
    fn a_file_others_may_read_is_refused_with_the_fix() {
        let dir = tempfile::tempdir().expect("scratch");
        let path = dir.path().join("secrets.key");
        KeyFile::create(&path).expect("created");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let error = KeyFile::read(&path).expect_err("refused").to_string();
        assert!(error.contains("mode 0644") && error.contains("chmod 600"), "{error}");
    }

    #[test]
    fn an_edited_key_is_refused_and_a_missing_file_is_none() {
        let dir = tempfile::tempdir().expect("scratch");
        let path = dir.path().join("secrets.key");
        assert!(KeyFile::read(&path).expect("read").is_none());
        let created = KeyFile::create(&path).expect("created");
        // The same id with another key: 32 zero bytes.
        let header: String =
            std::fs::read_to_string(&path).expect("read").lines().take(2).map(|l| format!("{l}\n")).collect();
        std::fs::write(&path, format!("{header}kek-v1 {} {}\n", created.current_id(), "A".repeat(43))).expect("write");
        let error = KeyFile::read(&path).expect_err("refused").to_string();
        assert!(error.contains("line 3") && error.contains("does not match"), "{error}");
    }

    #[test]
    fn a_rotation_keeps_the_old_key_after_the_new_until_retained_away() {
        let dir = tempfile::tempdir().expect("scratch");
        let path = dir.path().join("secrets.key");
        let first = KeyFile::create(&path).expect("created").current_id().clone();
        let rotated = KeyFile::read(&path).expect("read").expect("there").with_new_current().expect("new");
        rotated.save().expect("saved");
        let read = KeyFile::read(&path).expect("read").expect("there");
        let ids: Vec<_> = read.ids().cloned().collect();
        assert_eq!(ids.len(), 2);
        assert_eq!(ids[1], first);
        let trimmed = read.retain(|_| false);
        trimmed.save().expect("saved");
        let ids: Vec<_> = KeyFile::read(&path).expect("read").expect("there").ids().cloned().collect();
        assert_eq!(ids, vec![ids[0].clone()]);
        assert_ne!(ids[0], first);
    }
}
