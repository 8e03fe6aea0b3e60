//! A host's files under a scratch root, for tests: this crate's own (`init`'s steps) and the
//! end-to-end suite's (`tests/gateway_prep`, with the `test-support` feature). The directory
//! is removed when the value is dropped.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use crate::Root;

/// A fresh, empty root directory, removed on drop.
pub struct ScratchRoot(tempfile::TempDir);

impl ScratchRoot {
    /// A new empty root; `name` goes into the directory's name, to tell tests' roots apart.
    pub fn new(name: &str) -> ScratchRoot {
        let prefix = format!("gateway-prep-{name}-");
        ScratchRoot(tempfile::Builder::new().prefix(&prefix).tempdir().expect("a scratch root"))
    }

    /// The directory itself.
    pub fn dir(&self) -> &Path {
        self.0.path()
    }

    /// The host's file system under it.
    pub fn root(&self) -> Root {
        Root::new(self.dir())
    }

    /// The host file `path`, as text.
    pub fn read(&self, path: &str) -> String {
        self.root().read(path).expect("read")
    }

    /// Writes the host file `path` (and its directories); where it is under the root.
    pub fn write(&self, path: &str, content: &str) -> PathBuf {
        let real = self.root().path(path);
        fs_err::create_dir_all(real.parent().expect("a parent")).expect("dirs");
        fs_err::write(&real, content).expect("write");
        real
    }

    /// Sets the host file `path`'s mode.
    pub fn chmod(&self, path: &str, mode: u32) {
        fs_err::set_permissions(self.root().path(path), std::fs::Permissions::from_mode(mode)).expect("chmod");
    }

    /// Every file under the root (relative paths), sorted.
    pub fn files(&self) -> Vec<String> {
        fn walk(dir: &Path, base: &Path, out: &mut Vec<String>) {
            for entry in fs_err::read_dir(dir).expect("read_dir").flatten() {
                let path = entry.path();
                if path.is_dir() {
                    walk(&path, base, out);
                } else {
                    out.push(path.strip_prefix(base).expect("under").display().to_string());
                }
            }
        }
        let mut out = Vec::new();
        walk(self.dir(), self.dir(), &mut out);
        out.sort();
        out
    }
}
