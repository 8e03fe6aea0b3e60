//! `gateway-prep`: the operator tool that checks and prepares a gateway host for an admitted
//! operator (docs/gateway-prep.md).
//!
//! - [`check`] runs preflight checks (ports, limits, sysctls, clock, DNS, the coordinator,
//!   disk space, the existing configuration) and reports each as pass, warn or fail with a
//!   fix hint.
//! - [`init`] generates the operator's Ed25519 key ([`key`]), registers it with the
//!   coordinator using an admission token ([`coordinator`]), and writes the gateway
//!   configuration and its systemd unit, idempotently and never over a changed file without
//!   `--force`.
//!
//! Every file is read and written under a root directory ([`Root`], `--root`, default `/`),
//! so tests run against a fake root.

#![forbid(unsafe_code)]

pub mod args;
pub mod check;
pub mod init;
pub mod run;
#[cfg(any(test, feature = "test-support"))]
pub mod scratch;

// The operator key and the coordinator's API are shared with `svc gateway run`.
pub use relay_gateway_host::{coordinator, key};

use std::path::{Path, PathBuf};

pub use run::run;

/// Where things live on a gateway host (absolute paths as the host sees them).
pub mod layout {
    /// The configuration directory.
    pub const CONFIG_DIR: &str = "/etc/svc-gateway";
    /// The gateway configuration read by `svc gateway run --config`.
    pub const GATEWAY_FILE: &str = "gateway.json";
    /// The operator's Ed25519 key (PKCS#8, PEM), mode 0600.
    pub const OPERATOR_KEY: &str = "operator.key";
    /// The registration record: who registered, where, and what init wrote.
    pub const REGISTRATION: &str = "operator.json";
    /// The tunnel port's certificate (PEM).
    pub const TUNNEL_CERT: &str = "tunnel.crt";
    /// Its key (PEM), mode 0600.
    pub const TUNNEL_KEY: &str = "tunnel.key";
    /// The systemd unit.
    pub const UNIT: &str = "/etc/systemd/system/svc-gateway.service";
    /// The gateway's state directory (systemd's `StateDirectory=`); disk space is checked there.
    pub const STATE_DIR: &str = "/var/lib/svc-gateway";
    /// The open-files limit the unit sets (`LimitNOFILE=`): a relay holds two descriptors per
    /// client connection plus the agents' tunnels, most of them idle.
    pub const LIMIT_NOFILE: u64 = 1_048_576;
    /// The default public TLS address.
    pub const PUBLIC: &str = "0.0.0.0:443";
    /// The default tunnel address (agents dial it).
    pub const TUNNEL: &str = "0.0.0.0:7443";
    /// The default metrics address (loopback only).
    pub const ADMIN: &str = "127.0.0.1:7444";
    /// The default `svc` binary the unit runs.
    pub const SVC_BINARY: &str = "/usr/local/bin/svc";

    /// The host path of the file `name` in [`CONFIG_DIR`] (`/etc/svc-gateway/gateway.json`).
    pub fn config_file(name: &str) -> std::path::PathBuf {
        std::path::Path::new(CONFIG_DIR).join(name)
    }
}

/// The host's file system as seen under a root directory: `/etc/x` is `ROOT/etc/x`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Root(PathBuf);

impl Root {
    /// The root directory (`/` on a real host).
    pub fn new(dir: impl Into<PathBuf>) -> Root {
        Root(dir.into())
    }

    /// The root directory itself.
    pub fn dir(&self) -> &Path {
        &self.0
    }

    /// Where the host path `path` (absolute or not) is under the root. `..` components are
    /// dropped, so a path named in a configuration file cannot leave the root.
    pub fn path(&self, path: impl AsRef<Path>) -> PathBuf {
        let rel: PathBuf =
            path.as_ref().components().filter(|c| matches!(c, std::path::Component::Normal(_))).collect();
        self.0.join(rel)
    }

    /// The contents of the host file `path`, as text.
    pub fn read(&self, path: impl AsRef<Path>) -> std::io::Result<String> {
        fs_err::read_to_string(self.path(path))
    }
}

/// SHA-256 of `bytes`, lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    ring::digest::digest(&ring::digest::SHA256, bytes).as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_paths_stay_under_the_root() {
        let root = Root::new("/tmp/fake");
        assert_eq!(root.path("/etc/svc-gateway/gateway.json"), Path::new("/tmp/fake/etc/svc-gateway/gateway.json"));
        assert_eq!(root.path("proc/sys/fs/nr_open"), Path::new("/tmp/fake/proc/sys/fs/nr_open"));
        assert_eq!(Root::new("/").path("/etc/x"), Path::new("/etc/x"));
        assert_eq!(sha256_hex(b"abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }
}
