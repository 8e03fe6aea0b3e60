//! Admin commands work on a data directory a server made: a mistyped `--data-dir` would
//! otherwise create a second store and print a token no server reads.

use std::path::Path;

/// `dir` if it is an existing directory; otherwise why not, and which command creates it.
pub(crate) fn existing(dir: &Path, created_by: &str) -> Result<(), String> {
    if dir.is_dir() {
        return Ok(());
    }
    Err(format!(
        "{}: no such data directory; check the path (a new one is made by `{created_by} {}`)",
        dir.display(),
        dir.display()
    ))
}
