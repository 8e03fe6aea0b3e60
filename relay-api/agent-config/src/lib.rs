//! The agent's configuration file (`agent.json` in the job's state directory, mode 0600:
//! it holds the route key and the route's credential for the coordinator): what a launch
//! hands an agent. The coordinator writes it, the agent reads it; a crate of its own below
//! both, so the coordinator does not depend on the agent (and its ACME client) for it. The
//! agent re-exports it as `agent::config`.

#![forbid(unsafe_code)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Everything the agent needs to serve one route.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AgentConfig {
    /// The route's ID.
    pub route_id: String,
    /// The route's canonical hostname: always on the certificate, first. Customer hostnames
    /// come from the coordinator (see [`AgentConfig::coordinator`]).
    pub hostname: String,
    /// The route's credential for the coordinator's agent API (hostnames, certificates, the
    /// ACME turn): sent to the coordinator alone, never to a gateway.
    pub credential: String,
    /// Which of the route's replicas (jobs) this agent serves, named in its `Hello`: a
    /// gateway spreads new connections over a route's replicas, and a newer session of the
    /// same replica takes over from the older. Absent: the route's one agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica: Option<String>,
    /// The route key: signs the challenge proof and the tunnel `Hello` (the coordinator and
    /// the gateways hold only its public half).
    pub route_key: relay_wire::challenge::RouteKey,
    /// The gateway's tunnel port.
    pub gateway: SocketAddr,
    /// The name on the gateway's tunnel certificate.
    pub gateway_name: String,
    /// PEM file of the CA that signs the gateway's tunnel certificate.
    pub gateway_ca: PathBuf,
    /// More gateways serving the route (issue 20: the route's gateway hosts), each recognised
    /// by its tunnel certificate's digest, since a gateway host's certificate is its own:
    /// the agent holds a tunnel to each, besides `gateway`'s.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pinned_gateways: Vec<PinnedGateway>,
    /// The key the relay signs its service catalog with. Given, a gateway host the route
    /// refresh names later is tunnelled to only if the signed catalog it came with lists it
    /// (the agent's `gateways` module); the refresh's channel need not be trusted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catalog_key: Option<relay_catalog::PublicKey>,
    /// The local app's port (on 127.0.0.1).
    pub app_port: u16,
    /// The app's own health path, which `/health` checks.
    #[serde(default = "default_health_path")]
    pub app_health_path: String,
    /// Expect a PROXY v2 header on each tunneled connection.
    #[serde(default)]
    pub proxy_protocol: bool,
    /// Where the certificate comes from.
    pub certificate: CertificateSource,
    /// Also serve HTTPS directly on this address (benchmarks only; a job accepts no inbound
    /// connection in production).
    #[serde(default)]
    pub direct_listen: Option<SocketAddr>,
    /// The coordinator's base URL (`http://127.0.0.1:PORT`). When set, the agent asks it for
    /// the route's hostnames every `refreshSecs` (`POST /api/agent/route`) and, when they
    /// change, gets a certificate covering all of them. Without it the route has only
    /// `hostname`.
    #[serde(default)]
    pub coordinator: Option<String>,
    /// Seconds between asking the coordinator for the route's hostnames (default 30).
    #[serde(default = "default_refresh_secs")]
    pub refresh_secs: u64,
}

/// A gateway an agent tunnels to, recognised by its certificate rather than by a CA.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PinnedGateway {
    /// Its tunnel address, `HOST:PORT` (a name is looked up at each connection).
    pub address: String,
    /// SHA-256 of its tunnel certificate (DER), lowercase hex.
    pub tunnel_sha256: String,
}

fn default_health_path() -> String {
    "/health".to_owned()
}

/// The default of [`AgentConfig::refresh_secs`].
pub const DEFAULT_REFRESH_SECS: u64 = 30;

fn default_refresh_secs() -> u64 {
    DEFAULT_REFRESH_SECS
}

/// Where the agent gets its certificate. Either way the key stays in the state directory.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum CertificateSource {
    /// The local development CA, by CSR over HTTP.
    DevCa {
        /// The coordinator's base URL (`http://127.0.0.1:PORT`).
        url: String,
        /// Requested validity, seconds.
        validity_secs: u64,
    },
    /// An ACME CA (RFC 8555), answered by TLS-ALPN-01 (RFC 8737) on the agent's own TLS
    /// server, reached through the gateway: no port 80, and the key still stays here (the
    /// order is finalized with a CSR). The account key is `acme-account.json` (0600) in the
    /// state directory, created on first use.
    Acme {
        /// The ACME directory URL (`https://acme-v02.api.letsencrypt.org/directory`).
        directory_url: String,
        /// Contact URIs for the account (`mailto:ops@example.com`); none by default.
        #[serde(default)]
        contact: Vec<String>,
        /// A PEM file of the CA to trust, instead of the system's roots, for the ACME
        /// server's own HTTPS (a private or test ACME server such as Pebble).
        #[serde(default)]
        directory_ca: Option<PathBuf>,
    },
}

/// Why the configuration could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read the agent configuration: {source}")]
    Io {
        /// The cause, which names the file.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a valid configuration.
    #[error("{path} is not a valid agent configuration: {source}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: serde_json::Error,
    },
    /// `replica` is not a name a gateway accepts.
    #[error(
        "{path}: `replica` {name:?} is not usable: at most {} bytes of A-Z a-z 0-9 . _ -",
        relay_wire::wire::REPLICA_NAME_MAX
    )]
    Replica {
        /// The file.
        path: PathBuf,
        /// The name given.
        name: String,
    },
}

impl AgentConfig {
    /// Reads a configuration file.
    pub fn read(path: &Path) -> Result<AgentConfig, ConfigError> {
        let text = fs_err::read(path).map_err(|source| ConfigError::Io { source })?;
        let config: AgentConfig =
            serde_json::from_slice(&text).map_err(|source| ConfigError::Invalid { path: path.to_owned(), source })?;
        match &config.replica {
            Some(name) if !relay_wire::wire::valid_replica_name(name) => {
                Err(ConfigError::Replica { path: path.to_owned(), name: name.clone() })
            }
            _ => Ok(config),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_configuration_without_a_coordinator_is_still_valid() {
        let old = serde_json::json!({
            "routeId": "r", "hostname": "a.localhost", "credential": "c",
            "routeKey": relay_wire::challenge::RouteKey::generate().expect("a key"),
            "gateway": "127.0.0.1:1", "gatewayName": "gateway.localhost", "gatewayCa": "/ca.pem",
            "appPort": 3000, "certificate": {"kind": "dev_ca", "url": "http://127.0.0.1:2", "validity_secs": 60},
        });
        let config: AgentConfig = serde_json::from_value(old.clone()).expect("an old configuration");
        assert_eq!(config.coordinator, None);
        assert_eq!(config.refresh_secs, DEFAULT_REFRESH_SECS);
        let mut new = old;
        new["coordinator"] = "http://127.0.0.1:2".into();
        new["refreshSecs"] = 1.into();
        let config: AgentConfig = serde_json::from_value(new).expect("a new configuration");
        assert_eq!(config.coordinator.as_deref(), Some("http://127.0.0.1:2"));
        assert_eq!(config.refresh_secs, 1);
    }
}
