//! Files and directories only their owner may read (keys, credentials, logs, data).
//!
//! Every error names its path (`fs-err`).

use std::io::Write;
use std::path::Path;

#[cfg(unix)]
use fs_err::os::unix::fs::OpenOptionsExt;
#[cfg(unix)]
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};

/// Writes `contents` to `path` with mode 0600 (created so, never world-readable in between).
pub fn write_private(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    let mut options = fs_err::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    options.mode(0o600);
    let mut file = options.open(path)?;
    file.write_all(contents)
}

/// Creates `dir` and its missing parents with mode 0700; an existing `dir` is made 0700.
pub fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    builder.mode(0o700);
    // fs-err has no `DirBuilder`: the same words as its `create_dir_all`.
    builder
        .create(dir)
        .map_err(|e| std::io::Error::new(e.kind(), format!("failed to create directory `{}`: {e}", dir.display())))?;
    #[cfg(unix)]
    fs_err::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    Ok(())
}

/// Creates `path` empty with mode 0600 if it does not exist, else makes it 0600: for files
/// another library then opens (a database).
pub fn make_private(path: &Path) -> std::io::Result<()> {
    let mut options = fs_err::OpenOptions::new();
    options.append(true).create(true);
    #[cfg(unix)]
    options.mode(0o600);
    let file = options.open(path)?;
    #[cfg(unix)]
    file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    Ok(())
}

/// Replaces `path` with `contents` (mode 0600) without following what is there: the bytes go
/// to a new file beside it (created exclusively, so a planted link is never written through)
/// that is then renamed over `path` (replacing a link itself, not its target). For files in a
/// directory someone else can write to, such as a job's state.
pub fn replace_private(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    let name = path.file_name().ok_or_else(|| std::io::Error::other("no file name"))?;
    let mut random = [0u8; 8];
    getrandom::fill(&mut random).map_err(|e| std::io::Error::other(e.to_string()))?;
    let mut temp_name = std::ffi::OsString::from(".");
    temp_name.push(name);
    temp_name.push(format!(".{}.tmp", crate::wire::hex(&random)));
    let temp = path.with_file_name(temp_name);
    let mut options = fs_err::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    options.mode(0o600);
    let written = options.open(&temp).and_then(|mut file| file.write_all(contents));
    match written.and_then(|()| fs_err::rename(&temp, path)) {
        Ok(()) => Ok(()),
        Err(e) => {
            let _ = fs_err::remove_file(&temp);
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_planted_link_is_replaced_not_written_through() {
        let scratch = tempfile::tempdir().expect("a scratch directory");
        let dir = scratch.path().join("state");
        create_private_dir(&dir).expect("mkdir");
        let target = dir.join("precious");
        std::fs::write(&target, b"keep me").expect("write");
        let link = dir.join("gateway-ca.pem");
        std::os::unix::fs::symlink(&target, &link).expect("link");
        replace_private(&link, b"new contents").expect("replaced");
        assert_eq!(std::fs::read(&target).expect("read"), b"keep me", "the link's target is untouched");
        assert!(!std::fs::symlink_metadata(&link).expect("meta").file_type().is_symlink());
        assert_eq!(std::fs::read(&link).expect("read"), b"new contents");
        let mode = std::fs::metadata(&link).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(std::fs::read_dir(&dir).expect("read").count(), 2, "no temporary file left");
    }
}
