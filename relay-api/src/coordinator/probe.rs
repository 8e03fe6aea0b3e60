//! How the coordinator looks at a route from outside: route validation through the public
//! gateway path, and a customer hostname's DNS records. Behind a trait so the engine's
//! decisions stay apart from the network; [`PublicProbe`] is the real one.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;

use relay_wire::alpn::{ProbeKey, ProbeSigner};

use crate::coordinator::store::RouteKeys;
use crate::dns::{DnsChecker, DnsConfig};
use crate::hint::{Hint, Stage};
use crate::validation::{Resolve, RouteTarget, RouteValidator, VALIDATOR_VERSION, ValidatorConfig};

use super::CoordinatorConfig;

/// A boxed future, for the trait's object safety.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The outcome of validating one hostname of a route.
#[derive(Debug, Clone)]
pub struct Probed {
    /// What was seen when it passed, or what to fix.
    pub outcome: Result<serde_json::Value, Hint>,
}

/// Looks at routes from outside.
pub trait Probe: Send + Sync {
    /// The validation procedure's version (recorded with every validation).
    fn version(&self) -> &str;
    /// The `sha256:` digest of that version's canonical definition.
    fn digest(&self) -> &str;
    /// Validates `hostname` of a route, whose jobs hold `keys`, through the public path; a
    /// `standby` route (a redeploy's successor) is asked for by its ID, as the gateway routes
    /// no client to it; `replica`: that replica of the route alone (one job of several).
    fn validate<'a>(
        &'a self,
        route_id: &'a str,
        hostname: &'a str,
        keys: &'a RouteKeys,
        standby: bool,
        replica: Option<&'a str>,
    ) -> BoxFuture<'a, Probed>;
    /// Checks a customer hostname's DNS records; no hints means verified.
    fn check_dns<'a>(&'a self, hostname: &'a str, canonical: &'a str, token: &'a str) -> BoxFuture<'a, Vec<Hint>>;
    /// The public half of the key this probe signs its probe tokens with, if it signs any:
    /// recorded in the store for every gateway to check them with ([`ProbeKey`]).
    fn probe_key(&self) -> Option<ProbeKey> {
        None
    }
}

/// In the data directory: the coordinator's probe key (Ed25519, PKCS#8, 0600), which signs the
/// probe tokens its validations show the gateways (issue 40). Made on first use; each
/// coordinator on a database has its own, and records its public half in the store.
pub const PROBE_KEY_FILE: &str = "probe-signing-key.pk8";

/// The probe key kept in `data_dir` ([`PROBE_KEY_FILE`]), made (0600) if there is none. One
/// that others may read is made the owner's alone; one that does not read is an error (the
/// file is left for the operator to look at, not replaced).
pub fn probe_signer(data_dir: &Path) -> Result<ProbeSigner, ProbeSetupError> {
    let path = data_dir.join(PROBE_KEY_FILE);
    let file = |source: std::io::Error| ProbeSetupError::KeyFile { path: path.clone(), source };
    match std::fs::read(&path) {
        Ok(bytes) => {
            relay_wire::files::make_private(&path).map_err(file)?;
            ProbeSigner::from_pkcs8(&bytes).map_err(|source| ProbeSetupError::Key { path: path.clone(), source })
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let (signer, pkcs8) =
                ProbeSigner::generate().map_err(|source| ProbeSetupError::Key { path: path.clone(), source })?;
            relay_wire::files::replace_private(&path, &pkcs8).map_err(file)?;
            Ok(signer)
        }
        Err(e) => Err(file(e)),
    }
}

/// The real probe: [`RouteValidator`] over the public port, [`DnsChecker`] for DNS.
pub struct PublicProbe {
    validator: RouteValidator,
    signer: Arc<ProbeSigner>,
    dns: Arc<DnsChecker>,
    caa_identities: Vec<String>,
}

impl std::fmt::Debug for PublicProbe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PublicProbe").field("caa_identities", &self.caa_identities).finish_non_exhaustive()
    }
}

struct DnsResolve(Arc<DnsChecker>);

impl Resolve for DnsResolve {
    fn resolve<'a>(&'a self, host: &'a str) -> crate::validation::Resolved<'a> {
        Box::pin(async move { self.0.lookup_ips(host).await.map_err(crate::validation::ResolveError::new) })
    }
}

/// Why the real probe could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum ProbeSetupError {
    /// The DNS checker (its nameservers).
    #[error("the DNS checker: {0}")]
    Dns(#[source] crate::dns::DnsError),
    /// The route validator (its trusted roots).
    #[error(transparent)]
    Validator(#[from] crate::validation::ValidationSetupError),
    /// The probe key file cannot be read or written.
    #[error("the probe key {path}: {source}", path = path.display())]
    KeyFile {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The probe key file holds no usable key.
    #[error(
        "the probe key {path}: {source}; restore it from a backup, or move it away for a new one (gateways learn \
         the new key from the route feed)",
        path = path.display()
    )]
    Key {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: relay_wire::alpn::ProbeKeyError,
    },
}

impl PublicProbe {
    /// A probe for routes served on `public_port`, trusting `roots_pem` for their certificates,
    /// signing its probe tokens with the data directory's probe key ([`probe_signer`]).
    pub fn new(
        config: &CoordinatorConfig,
        public: std::net::SocketAddr,
        roots_pem: String,
    ) -> Result<PublicProbe, ProbeSetupError> {
        let signer = Arc::new(probe_signer(&config.data_dir)?);
        let dns = Arc::new(
            DnsChecker::new(&DnsConfig {
                nameservers: config.nameservers.clone(),
                timeout: std::time::Duration::from_secs(3),
            })
            .map_err(ProbeSetupError::Dns)?,
        );
        let validator = RouteValidator::new(
            ValidatorConfig {
                public_port: public.port(),
                roots_pem,
                allow_private_addresses: config.allow_private_targets,
                local_gateway: crate::validation::local_gateway(public.ip()),
                relay_domain: config.relay_domain.clone(),
                // A validation ends before the next is due, so a broken route shows within
                // two intervals.
                timeout: (config.revalidate / 2)
                    .clamp(std::time::Duration::from_millis(500), std::time::Duration::from_secs(5)),
            },
            Arc::new(DnsResolve(dns.clone())),
        )?;
        Ok(PublicProbe { validator, signer, dns, caa_identities: config.caa_identities.clone() })
    }
}

impl Probe for PublicProbe {
    fn version(&self) -> &str {
        VALIDATOR_VERSION
    }

    fn digest(&self) -> &str {
        &crate::validation::procedure::current().digest
    }

    fn validate<'a>(
        &'a self,
        route_id: &'a str,
        hostname: &'a str,
        keys: &'a RouteKeys,
        standby: bool,
        replica: Option<&'a str>,
    ) -> BoxFuture<'a, Probed> {
        Box::pin(async move {
            let target = RouteTarget {
                route_id: route_id.to_owned(),
                hostname: hostname.to_owned(),
                route_public_key: keys.route_public_key.clone(),
                standby,
                probe_signer: Some(self.signer.clone()),
                replica: replica.map(str::to_owned),
            };
            let v = self.validator.validate(&target).await;
            let outcome = v.outcome.map(|p| {
                serde_json::json!({
                    "address": v.address.map(|a| a.to_string()),
                    "certificateSerial": p.certificate_serial,
                    // RFC 3339, as every time a person reads (not serde's `secs_since_epoch`).
                    "notAfter": humantime::format_rfc3339_seconds(p.not_after).to_string(),
                    "healthStatus": p.health_status,
                    "latencyMs": u64::try_from(p.latency.as_millis()).unwrap_or(u64::MAX),
                })
            });
            Probed { outcome }
        })
    }

    fn probe_key(&self) -> Option<ProbeKey> {
        Some(self.signer.public_key())
    }

    fn check_dns<'a>(&'a self, hostname: &'a str, canonical: &'a str, token: &'a str) -> BoxFuture<'a, Vec<Hint>> {
        Box::pin(async move {
            match self.dns.verify_hostname(hostname, canonical, token, &self.caa_identities).await {
                Ok(verdict) => verdict.hints(),
                Err(e) => vec![
                    Hint::new(
                        "dns_check_refused",
                        Stage::Dns,
                        e.to_string(),
                        "remove the hostname and add a valid one",
                    )
                    .for_host(hostname),
                ],
            }
        })
    }
}
