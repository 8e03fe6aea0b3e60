//! The standalone gateway's configuration file (`svc gateway run --config FILE`). Routes are
//! read again on SIGHUP, unless a coordinator feeds them (`coordinator`). Relative paths in
//! the file are relative to the file's directory ([`GatewayFile::read`]), so a host prepared
//! under another root (`gateway-prep init --root DIR`) runs as it is.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{GatewayConfig, RouteConfig};

/// Why a gateway file cannot be used, naming the file or the field.
#[derive(Debug, thiserror::Error)]
pub enum GatewayFileError {
    /// A file could not be read.
    #[error("{0}")]
    Read(
        /// Why, naming the file (`fs-err`).
        #[source]
        std::io::Error,
    ),
    /// The file is not a gateway configuration.
    #[error("{path} is not a valid gateway configuration: {source}", path = path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What serde found (with its line and column).
        #[source]
        source: serde_json::Error,
    },
    /// A field is out of its range.
    #[error("`{field}` is {value}; {expected}")]
    OutOfRange {
        /// The field.
        field: &'static str,
        /// Its value.
        value: u64,
        /// What it must be.
        expected: &'static str,
    },
}

/// The file's shape.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GatewayFile {
    /// Public TLS address.
    pub public: SocketAddr,
    /// Tunnel address (agents).
    pub tunnel: SocketAddr,
    /// Admin address for `/metrics` (keep it on loopback).
    pub admin: SocketAddr,
    /// PEM file: the tunnel port's certificate chain.
    pub tunnel_cert: PathBuf,
    /// PEM file: its key.
    pub tunnel_key: PathBuf,
    /// Largest ClientHello, bytes (default 16384).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_hello_max_bytes: Option<usize>,
    /// Time allowed for the ClientHello, seconds (default 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_hello_timeout_secs: Option<u64>,
    /// A routed connection without a byte either way for this long is closed, seconds
    /// (default 300).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_timeout_secs: Option<u64>,
    /// After one side of a routed connection ended its sending, the other direction without a
    /// byte for this long closes it, seconds (default 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub half_close_linger_secs: Option<u64>,
    /// The share of a route's `maxConnections` one client address may hold, percent, 1-100
    /// (default 25).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_share_percent: Option<u32>,
    /// Connections one client address may have still sending their ClientHello (default 64).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_hellos_per_client: Option<usize>,
    /// Data connections each agent session holds dialed ahead of clients, at most (default 2,
    /// 0-8; 0: none, each is asked for when its client comes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool_per_replica: Option<usize>,
    /// The coordinator whose route feed this gateway follows (`gateway-prep init` writes it);
    /// without it, the routes are the file's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coordinator: Option<FeedSource>,
    /// The routes (with a `coordinator`: the table served until its first answer).
    #[serde(default)]
    pub routes: Vec<RouteConfig>,
}

/// Where a gateway's routes come from: a coordinator's route feed, each request signed with
/// the operator key the host registered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FeedSource {
    /// The coordinator's base URL (`https://relay.example.com`, `http://127.0.0.1:7300`).
    pub url: String,
    /// The operator's ID (`op_...`), as the coordinator registered it.
    pub operator_id: String,
    /// PEM file: the operator's Ed25519 key (mode 0600).
    pub operator_key: PathBuf,
    /// PEM file: the roots to trust for an https coordinator (default: the system's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca: Option<PathBuf>,
}

impl GatewayFile {
    /// Reads and checks a file, its relative paths made relative to its directory: what a
    /// gateway runs with.
    pub fn read(path: &Path) -> Result<GatewayFile, GatewayFileError> {
        let mut file = GatewayFile::read_as_written(path)?;
        let dir = path.parent().unwrap_or(Path::new("."));
        let beside = |p: &mut PathBuf| *p = dir.join(&*p);
        beside(&mut file.tunnel_cert);
        beside(&mut file.tunnel_key);
        if let Some(source) = &mut file.coordinator {
            beside(&mut source.operator_key);
            if let Some(ca) = &mut source.ca {
                beside(ca);
            }
        }
        Ok(file)
    }

    /// Reads and checks a file, its paths as written (a tool placing them under a root).
    pub fn read_as_written(path: &Path) -> Result<GatewayFile, GatewayFileError> {
        let text = fs_err::read(path).map_err(GatewayFileError::Read)?;
        serde_json::from_slice(&text).map_err(|source| GatewayFileError::Invalid { path: path.to_owned(), source })
    }

    /// The gateway configuration (reads the certificate files).
    pub fn config(&self) -> Result<GatewayConfig, GatewayFileError> {
        let read = |p: &Path| fs_err::read_to_string(p).map_err(GatewayFileError::Read);
        let mut c =
            GatewayConfig::new(self.public, self.tunnel, self.admin, read(&self.tunnel_cert)?, read(&self.tunnel_key)?);
        if let Some(max) = self.client_hello_max_bytes {
            c.client_hello_max = max;
        }
        if let Some(secs) = self.client_hello_timeout_secs {
            c.client_hello_timeout = Duration::from_secs(secs);
        }
        let positive = |field: &'static str, secs: u64| match secs {
            0 => Err(GatewayFileError::OutOfRange { field, value: 0, expected: "it must be at least 1 second" }),
            secs => Ok(Duration::from_secs(secs)),
        };
        if let Some(secs) = self.idle_timeout_secs {
            c.timeouts.idle = positive("idleTimeoutSecs", secs)?;
        }
        if let Some(secs) = self.half_close_linger_secs {
            c.timeouts.linger = positive("halfCloseLingerSecs", secs)?;
        }
        if let Some(percent) = self.client_share_percent {
            if !(1..=100).contains(&percent) {
                return Err(GatewayFileError::OutOfRange {
                    field: "clientSharePercent",
                    value: u64::from(percent),
                    expected: "give a percentage from 1 to 100",
                });
            }
            c.client_share_percent = percent;
        }
        if let Some(n) = self.client_hellos_per_client {
            if n == 0 {
                return Err(GatewayFileError::OutOfRange {
                    field: "clientHellosPerClient",
                    value: 0,
                    expected: "which would refuse every client; give at least 1",
                });
            }
            c.client_hellos_per_client = n;
        }
        if let Some(n) = self.pool_per_replica {
            if n > usize::from(relay_wire::wire::POOL_MAX) {
                return Err(GatewayFileError::OutOfRange {
                    field: "poolPerReplica",
                    value: n as u64,
                    expected: "give 0 to 8 connections dialed ahead per agent",
                });
            }
            c.pool_per_replica = n;
        }
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::super::Timeouts;
    use super::*;

    /// A file with `extra` fields, its certificate files written to a temporary directory.
    fn config(name: &str, extra: serde_json::Value) -> Result<GatewayConfig, GatewayFileError> {
        let scratch =
            tempfile::Builder::new().prefix(&format!("svc-gateway-file-{name}-")).tempdir().expect("a scratch");
        let dir = scratch.path();
        std::fs::write(dir.join("cert.pem"), "CERT").expect("write");
        std::fs::write(dir.join("key.pem"), "KEY").expect("write");
        let mut json = serde_json::json!({
            "public": "127.0.0.1:8443", "tunnel": "127.0.0.1:8444", "admin": "127.0.0.1:9100",
            "tunnelCert": dir.join("cert.pem"), "tunnelKey": dir.join("key.pem"),
        });
        if let (Some(json), Some(extra)) = (json.as_object_mut(), extra.as_object()) {
            json.extend(extra.clone());
        }
        let file: GatewayFile = serde_json::from_value(json).expect("a gateway file");

        file.config()
    }

    #[test]
    fn connection_limits_default_and_can_be_set() {
        let c = config("defaults", serde_json::json!({})).expect("valid");
        assert_eq!((c.timeouts, c.client_share_percent, c.client_hellos_per_client), (Timeouts::DEFAULT, 25, 64));
        assert_eq!((c.client_share(1024), c.client_share(2)), (256, 1));
        let set = serde_json::json!({
            "idleTimeoutSecs": 60, "halfCloseLingerSecs": 2, "clientSharePercent": 50, "clientHellosPerClient": 8,
        });
        let c = config("set", set).expect("valid");
        assert_eq!(c.timeouts, Timeouts { idle: Duration::from_secs(60), linger: Duration::from_secs(2) });
        assert_eq!((c.client_share_percent, c.client_hellos_per_client, c.client_share(1024)), (50, 8, 512));
    }

    #[test]
    fn the_pool_per_replica_defaults_to_two_and_is_bounded() {
        assert_eq!(config("pool-default", serde_json::json!({})).expect("valid").pool_per_replica, 2);
        let none = config("pool-none", serde_json::json!({"poolPerReplica": 0})).expect("valid");
        assert_eq!(none.pool_per_replica, 0);
        let refused = config("pool-many", serde_json::json!({"poolPerReplica": 9}));
        assert!(matches!(refused, Err(GatewayFileError::OutOfRange { field: "poolPerReplica", .. })), "{refused:?}");
    }

    #[test]
    fn limits_that_would_refuse_everyone_are_refused_naming_the_field() {
        for (field, value) in [
            ("clientSharePercent", 0),
            ("clientSharePercent", 101),
            ("clientHellosPerClient", 0),
            ("idleTimeoutSecs", 0),
            ("halfCloseLingerSecs", 0),
        ] {
            let e = config("refused", serde_json::json!({ field: value })).expect_err(field);
            assert!(matches!(e, GatewayFileError::OutOfRange { field: f, .. } if f == field), "{field}: {e}");
            assert!(e.to_string().contains(field), "{field}: {e}");
        }
    }

    #[test]
    fn relative_paths_are_the_files_neighbours_and_absolute_ones_stay() {
        let scratch = tempfile::tempdir().expect("a scratch");
        let path = scratch.path().join("gateway.json");
        let json = serde_json::json!({
            "public": "127.0.0.1:8443", "tunnel": "127.0.0.1:8444", "admin": "127.0.0.1:9100",
            "tunnelCert": "tunnel.crt", "tunnelKey": "/etc/svc-gateway/tunnel.key",
            "coordinator": {"url": "http://127.0.0.1:7300", "operatorId": "op_1", "operatorKey": "operator.key"},
        });
        std::fs::write(&path, json.to_string()).expect("write");
        let file = GatewayFile::read(&path).expect("a gateway file");
        assert_eq!(file.tunnel_cert, scratch.path().join("tunnel.crt"));
        assert_eq!(file.tunnel_key, Path::new("/etc/svc-gateway/tunnel.key"));
        let source = file.coordinator.expect("a coordinator");
        assert_eq!(source.operator_key, scratch.path().join("operator.key"));
        assert_eq!(GatewayFile::read_as_written(&path).expect("as written").tunnel_cert, Path::new("tunnel.crt"));
    }
}
