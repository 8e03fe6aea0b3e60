//! Checks of an existing configuration: the gateway file `svc gateway run` reads, with its
//! tunnel certificate and key, the registration with its operator key, and the route feed the
//! file follows.

use std::path::{Path, PathBuf};

use relay_gateway::file::GatewayFile;

use super::CheckResult;
use crate::init::record::Registration;
use crate::key::{IdentityError, KeyError, OperatorKey, check_tls_identity, shared_mode};
use crate::{Root, layout};

fn config_path(name: &str) -> PathBuf {
    Path::new(layout::CONFIG_DIR).join(name)
}

fn private_mode_fail(id: &str, host: &Path, mode: u32) -> CheckResult {
    CheckResult::fail(
        id,
        format!("{} has mode {mode:04o}: others can read the key", host.display()),
        format!("chmod 600 {}", host.display()),
    )
}

/// `config.gateway`: `gateway.json` parses as the gateway's configuration, its tunnel
/// certificate and key make a TLS identity, the key is private (0600) and the metrics
/// address is on loopback. No file yet is a warning (init writes it).
pub fn gateway(root: &Root) -> CheckResult {
    const ID: &str = "config.gateway";
    let host = config_path(layout::GATEWAY_FILE);
    let path = root.path(&host);
    if !path.exists() {
        return CheckResult::warn(
            ID,
            format!("no gateway configuration yet ({})", host.display()),
            "run `gateway-prep init --coordinator URL --admission-token TOKEN --hostname NAME`",
        );
    }
    let file = match GatewayFile::read_as_written(&path) {
        Ok(f) => f,
        Err(e) => {
            return CheckResult::fail(
                ID,
                e.to_string(),
                "fix the file, or let init write it again: `gateway-prep init --force`",
            );
        }
    };
    // Paths in the file are relative to its directory (as the gateway reads them).
    let dir = Path::new(layout::CONFIG_DIR);
    let (tunnel_cert, tunnel_key) = (dir.join(&file.tunnel_cert), dir.join(&file.tunnel_key));
    let read = |p: &Path| root.read(p).map_err(KeyFileError::Read);
    let identity = read(&tunnel_cert)
        .and_then(|cert| read(&tunnel_key).map(|key| (cert, key)))
        .and_then(|(cert, key)| check_tls_identity(&cert, &key).map_err(KeyFileError::Identity));
    if let Err(e) = identity {
        return CheckResult::fail(
            ID,
            format!("{}: the tunnel certificate: {e}", host.display()),
            "restore the tunnel certificate and key, or remove both and run `gateway-prep init` to make new ones",
        );
    }
    if let Some(mode) = shared_mode(&root.path(&tunnel_key)) {
        return private_mode_fail(ID, &tunnel_key, mode);
    }
    let found = format!(
        "{} is valid: public {}, tunnel {}, metrics {}, {} route{}",
        host.display(),
        file.public,
        file.tunnel,
        file.admin,
        file.routes.len(),
        if file.routes.len() == 1 { "" } else { "s" }
    );
    if !file.admin.ip().is_loopback() {
        return CheckResult::warn(
            ID,
            format!("{found}; the metrics address is not on loopback"),
            "serve metrics on 127.0.0.1 (init --admin 127.0.0.1:7444) or firewall the port",
        );
    }
    CheckResult::pass(ID, found)
}

/// `config.registration`: the registration record parses and the operator key beside it is
/// private (0600), readable and the key the coordinator registered. Not registered yet is a
/// warning.
pub fn registration(root: &Root) -> CheckResult {
    const ID: &str = "config.registration";
    let key_host = config_path(layout::OPERATOR_KEY);
    let record = match Registration::read(root) {
        Ok(Some(r)) => r,
        Ok(None) => {
            let found = if root.path(&key_host).exists() {
                format!("{} exists but this host is not registered", key_host.display())
            } else {
                "this host is not registered with a coordinator".to_owned()
            };
            return CheckResult::warn(
                ID,
                found,
                "run `gateway-prep init --coordinator URL --admission-token TOKEN --hostname NAME`",
            );
        }
        Err(e) => {
            return CheckResult::fail(
                ID,
                e.to_string(),
                "restore the record from a backup; without it init would register again, which needs a new admission token",
            );
        }
    };
    let key_path = root.path(&key_host);
    let key =
        fs_err::read_to_string(&key_path).map_err(KeyFileError::Read).and_then(|text| operator_key(&text, &key_host));
    let key = match key {
        Ok(k) => k,
        Err(e) => {
            return CheckResult::fail(
                ID,
                e.to_string(),
                "restore the operator key from a backup, or register again with a new admission token \
                 (remove operator.json and the key, then run init)",
            );
        }
    };
    if let Some(mode) = shared_mode(&key_path) {
        return private_mode_fail(ID, &key_host, mode);
    }
    if key.public_key() != record.operator.public_key {
        return CheckResult::fail(
            ID,
            format!("{} is not the key registered for {}", key_host.display(), record.operator.hostname),
            "restore the registered key from a backup, or register again with a new admission token",
        );
    }
    CheckResult::pass(
        ID,
        format!(
            "operator \"{}\" registered gateway {} with {}",
            record.operator.name, record.operator.hostname, record.coordinator
        ),
    )
}

/// `config.feed`: `gateway.json` follows the route feed of the coordinator this host is
/// registered with, as the registered operator, signing with the registered key (mode 0600).
/// A file without a coordinator is a warning: its routes are the file's alone.
pub fn feed(root: &Root) -> CheckResult {
    const ID: &str = "config.feed";
    const REWRITE: &str = "let init write it again: `gateway-prep init --force`";
    let host = config_path(layout::GATEWAY_FILE);
    let Ok(file) = GatewayFile::read_as_written(&root.path(&host)) else {
        return CheckResult::warn(
            ID,
            format!("no usable {} (see config.gateway)", host.display()),
            "run `gateway-prep init`",
        );
    };
    let Some(source) = file.coordinator else {
        return CheckResult::warn(
            ID,
            format!(
                "{} names no coordinator: `svc gateway run` serves the file's routes and no others",
                host.display()
            ),
            "run `gateway-prep init` again: it adds the coordinator this host is registered with",
        );
    };
    let Ok(Some(record)) = Registration::read(root) else {
        return CheckResult::warn(
            ID,
            "this host is not registered (see config.registration)",
            "run `gateway-prep init`",
        );
    };
    let url = source.url.trim_end_matches('/');
    if url != record.coordinator || source.operator_id != record.operator.id {
        return CheckResult::fail(
            ID,
            format!(
                "{} follows {url} as {}, but this host is registered with {} as {}",
                host.display(),
                source.operator_id,
                record.coordinator,
                record.operator.id
            ),
            REWRITE,
        );
    }
    let key_host = Path::new(layout::CONFIG_DIR).join(&source.operator_key);
    let key = root.read(&key_host).map_err(KeyFileError::Read).and_then(|text| operator_key(&text, &key_host));
    match key {
        Err(e) => CheckResult::fail(ID, format!("the feed's operator key: {e}"), REWRITE),
        Ok(key) if key.public_key() != record.operator.public_key => CheckResult::fail(
            ID,
            format!("the feed's operator key {} is not the registered one", key_host.display()),
            REWRITE,
        ),
        Ok(_) => match shared_mode(&root.path(&key_host)) {
            Some(mode) => private_mode_fail(ID, &key_host, mode),
            None => CheckResult::pass(
                ID,
                format!(
                    "`svc gateway run` follows the route feed of {url} as operator \"{}\" ({})",
                    record.operator.name, record.operator.id
                ),
            ),
        },
    }
}

/// Why a key or certificate file of the configuration cannot be used: said in its check's
/// result (the one place it becomes text).
#[derive(Debug, thiserror::Error)]
enum KeyFileError {
    /// The file cannot be read (the error names it).
    #[error(transparent)]
    Read(std::io::Error),
    /// The tunnel certificate and key do not make a TLS identity.
    #[error(transparent)]
    Identity(IdentityError),
    /// The operator key file holds no operator key.
    #[error("{}: {source}", path.display())]
    OperatorKey {
        /// The file, as the host names it.
        path: PathBuf,
        /// Why.
        #[source]
        source: KeyError,
    },
}

/// The operator key in `text`, read from the host file `path`.
fn operator_key(text: &str, path: &Path) -> Result<OperatorKey, KeyFileError> {
    OperatorKey::from_pem(text).map_err(|source| KeyFileError::OperatorKey { path: path.to_owned(), source })
}
