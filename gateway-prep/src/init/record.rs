//! The registration record (`/etc/svc-gateway/operator.json`): the operator as the
//! coordinator recorded it, the coordinator's URL, and the SHA-256 of every file init wrote,
//! so a later run tells a file init wrote (safe to update) from one changed since (refused
//! without `--force`).

use std::collections::BTreeMap;
use std::path::PathBuf;

use relay_wire::admission::Operator;
use serde::{Deserialize, Serialize};

use crate::{Root, layout};

/// The record's format version.
pub const VERSION: u32 = 1;

/// `operator.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Registration {
    /// [`VERSION`].
    pub version: u32,
    /// The coordinator registered with (its base URL).
    pub coordinator: String,
    /// The operator record the coordinator answered.
    pub operator: Operator,
    /// Host path to the SHA-256 (hex) of the content init last wrote there.
    pub files: BTreeMap<String, String>,
}

/// Why the registration record cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// It could not be read.
    #[error("cannot read the registration record: {0}")]
    Read(
        /// Why, naming the file (`fs-err`).
        #[source]
        std::io::Error,
    ),
    /// It is not a registration record.
    #[error("{path} is not a valid registration record: {source}", path = path.display())]
    Invalid {
        /// The record's host path.
        path: PathBuf,
        /// What serde found.
        #[source]
        source: serde_json::Error,
    },
    /// It was written by another version.
    #[error("{path} has version {version}; this gateway-prep reads version {VERSION}", path = path.display())]
    Version {
        /// The record's host path.
        path: PathBuf,
        /// Its version.
        version: u32,
    },
}

impl Registration {
    /// The record's host path.
    pub fn path() -> PathBuf {
        PathBuf::from(layout::CONFIG_DIR).join(layout::REGISTRATION)
    }

    /// Reads the record under `root`: `Ok(None)` when there is none.
    pub fn read(root: &Root) -> Result<Option<Registration>, RecordError> {
        let path = root.path(Registration::path());
        let text = match fs_err::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(RecordError::Read(source)),
        };
        let record: Registration = serde_json::from_str(&text)
            .map_err(|source| RecordError::Invalid { path: Registration::path(), source })?;
        if record.version != VERSION {
            return Err(RecordError::Version { path: Registration::path(), version: record.version });
        }
        Ok(Some(record))
    }

    /// The file's text (pretty JSON, newline-terminated).
    pub fn to_text(&self) -> String {
        let mut text = serde_json::to_string_pretty(self).unwrap_or_default();
        text.push('\n');
        text
    }
}
