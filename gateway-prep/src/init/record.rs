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

impl Registration {
    /// The record's host path.
    pub fn path() -> PathBuf {
        PathBuf::from(layout::CONFIG_DIR).join(layout::REGISTRATION)
    }

    /// Reads the record under `root`: `Ok(None)` when there is none.
    pub fn read(root: &Root) -> Result<Option<Registration>, String> {
        let path = root.path(Registration::path());
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
        };
        let record: Registration = serde_json::from_str(&text)
            .map_err(|e| format!("{} is not a valid registration record: {e}", Registration::path().display()))?;
        if record.version != VERSION {
            return Err(format!(
                "{} has version {}; this gateway-prep reads version {VERSION}",
                Registration::path().display(),
                record.version
            ));
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
