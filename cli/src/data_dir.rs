//! Admin commands work on a data directory a server made: a mistyped `--data-dir` would
//! otherwise create a second store and print a token no server reads.

use std::path::Path;

/// A data directory that does not exist, and the command that makes one.
#[derive(Debug, thiserror::Error)]
#[error("{path}: no such data directory; check the path (a new one is made by `{created_by} {path}`)", path = dir.display())]
pub(crate) struct NoDataDir {
    dir: std::path::PathBuf,
    created_by: String,
}

/// `dir` if it is an existing directory; otherwise why not, and which command creates it.
pub(crate) fn existing(dir: &Path, created_by: &str) -> Result<(), NoDataDir> {
    if dir.is_dir() {
        return Ok(());
    }
    Err(NoDataDir { dir: dir.to_owned(), created_by: created_by.to_owned() })
}
