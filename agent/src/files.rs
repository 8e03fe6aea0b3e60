//! Files only their owner may read (keys, credentials).

use std::io::Write;
use std::path::Path;

/// Writes `contents` to `path` with mode 0600 (created so, never world-readable in between).
pub fn write_private(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path)?;
    file.write_all(contents)
}
