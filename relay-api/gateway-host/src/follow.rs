//! A gateway following its coordinator's route feed (`svc gateway run` with a `coordinator`
//! in its file). It asks for the table after the version it serves (a long poll: the
//! coordinator answers when the table changes, or after `FEED_WAIT_SECS` with the same one),
//! applies each new table at once ([`Gateway::set_routes`] keeps open connections), and while
//! the coordinator cannot be reached or refuses, keeps serving the table it has, says so once
//! in the log and in its metrics (`svc_gateway_feed_connected 0`), and asks again after a
//! backoff of 1 s doubling to 30 s, with jitter so that a fleet does not come back at once;
//! that request is answered at once, and a table equal to the one served is not applied
//! again.
//!
//! Each request reports ([`Report`]) the feed sequence of the table applied and the routes
//! with agents in rotation here; when that set changes while a request is held (a redeploy's
//! successor's agents connected), the request is given up and asked again with the new
//! report at once, so the coordinator's switch learns of it within [`REPORT_LOOK`] (issue
//! 41).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use relay_gateway::file::FeedSource;
use relay_gateway::{Bound, Gateway};
use relay_wire::feed::{MAX_REPORTED_ROUTES, Presence, Report};

use crate::coordinator::{ClientError, CoordinatorClient};
use crate::key::{KeyError, OperatorKey};

/// The first wait after a failed request; it doubles up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
/// The longest wait between failed requests.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// The least time between two requests that brought nothing new (a coordinator that does not
/// hold requests must not be asked in a loop).
const MIN_INTERVAL: Duration = Duration::from_secs(1);

/// How often the routes' agents are looked at while a request is held.
pub const REPORT_LOOK: Duration = Duration::from_millis(50);

/// Why a gateway cannot follow the feed its file names.
#[derive(Debug, thiserror::Error)]
pub enum FollowError {
    /// The operator key could not be read.
    #[error("the operator key {path}: {source}", path = path.display())]
    KeyFile {
        /// The key file.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Others may read the operator key.
    #[error(
        "the operator key {path} may be read by other users (mode {mode:o}); make it the gateway's alone: \
         `chmod 600 {path}`",
        path = path.display()
    )]
    KeyShared {
        /// The key file.
        path: std::path::PathBuf,
        /// Its mode bits.
        mode: u32,
    },
    /// The key file holds no usable key.
    #[error("the operator key {path}: {source}", path = path.display())]
    Key {
        /// The key file.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: KeyError,
    },
    /// The coordinator's URL or CA is not usable.
    #[error(transparent)]
    Client(#[from] ClientError),
}

/// A coordinator's route feed, ready to be followed.
#[derive(Debug)]
pub struct Feed {
    client: CoordinatorClient,
    key: OperatorKey,
    operator_id: String,
    /// Where the gateway is, announced with each request.
    presence: Option<Presence>,
}

impl Feed {
    /// The feed a gateway file names: its key read (and refused if others may read it), its
    /// URL and CA checked.
    pub fn open(source: &FeedSource) -> Result<Feed, FollowError> {
        let key = read_key(&source.operator_key)?;
        let client = CoordinatorClient::new(&source.url, source.ca.as_deref())?;
        Ok(Feed { client, key, operator_id: source.operator_id.clone(), presence: None })
    }

    /// The feed, announcing with each request that the gateway listens on `bound` with the
    /// tunnel certificate chain `tunnel_cert_pem` (agents reach it there and pin its first
    /// certificate). `None` if the chain holds no certificate.
    pub fn announcing(mut self, bound: &Bound, tunnel_cert_pem: &str) -> Option<Feed> {
        self.presence = Some(Presence {
            public: bound.public,
            tunnel: bound.tunnel,
            tunnel_sha256: tunnel_sha256(tunnel_cert_pem)?,
        });
        Some(self)
    }

    /// The coordinator's base URL.
    pub fn url(&self) -> &str {
        self.client.base()
    }
}

fn read_key(path: &Path) -> Result<OperatorKey, FollowError> {
    let text = std::fs::read_to_string(path).map_err(|source| FollowError::KeyFile { path: path.into(), source })?;
    if let Some(mode) = crate::key::shared_mode(path) {
        return Err(FollowError::KeyShared { path: path.into(), mode });
    }
    OperatorKey::from_pem(&text).map_err(|source| FollowError::Key { path: path.into(), source })
}

/// The routes with agents in rotation on `gateway`, how many each, by route ID.
pub fn agents_in_rotation(gateway: &Gateway) -> Vec<(String, u32)> {
    let mut agents: Vec<(String, u32)> = gateway
        .replica_rows()
        .into_iter()
        .filter(|r| r.in_rotation > 0)
        .map(|r| (r.route_id, u32::try_from(r.in_rotation).unwrap_or(u32::MAX)))
        .collect();
    agents.sort();
    agents.truncate(MAX_REPORTED_ROUTES);
    agents
}

/// Follows `feed` for `gateway` until the task is dropped.
pub async fn follow(gateway: Arc<Gateway>, feed: Feed) {
    let mut served: Option<String> = None;
    let mut applied: u64 = 0;
    let mut backoff = FIRST_BACKOFF;
    let mut failing = false;
    loop {
        let asked = Instant::now();
        // After a failure the table is asked for at once, not held until it changes: the
        // gateway learns that the coordinator is back, and whether its table is still current.
        let after = if failing { None } else { served.clone() };
        let report = Report { applied, agents: agents_in_rotation(&gateway) };
        let request =
            feed.client.routes(&feed.key, &feed.operator_id, after.as_deref(), feed.presence.as_ref(), Some(&report));
        tokio::pin!(request);
        // A held request is given up when the routes' agents change, and asked again at once.
        let answered = loop {
            tokio::select! {
                answered = &mut request => break Some(answered),
                () = tokio::time::sleep(REPORT_LOOK) => {
                    if agents_in_rotation(&gateway) != report.agents {
                        break None;
                    }
                }
            }
        };
        let Some(answered) = answered else { continue };
        match answered {
            Ok(answer) => {
                let new = served.as_deref() != Some(answer.version.as_str());
                if new {
                    tracing::info!(
                        routes = answer.routes.len(),
                        version = %answer.version,
                        seq = answer.seq,
                        "svc gateway: applied the route table from {}",
                        feed.url()
                    );
                    // The coordinators' probe keys first: a route's validation may come at once.
                    gateway.set_probe_keys(answer.probe_keys());
                    gateway.set_routes(answer.routes);
                    served = Some(answer.version);
                }
                // The table served is the one read at this sequence (the same, if not new).
                applied = answer.seq;
                gateway.feed().answered(new);
                if failing {
                    tracing::info!("svc gateway: {} answers the route feed again", feed.url());
                }
                (failing, backoff) = (false, FIRST_BACKOFF);
                if !new && asked.elapsed() < MIN_INTERVAL {
                    tokio::time::sleep(MIN_INTERVAL - asked.elapsed()).await;
                }
            }
            Err(e) => {
                gateway.feed().failed();
                if !failing {
                    tracing::warn!(
                        "svc gateway: the route feed failed ({e}); serving the last table ({} routes) and asking \
                         again, from every {} s up to every {} s",
                        gateway.route_count(),
                        FIRST_BACKOFF.as_secs(),
                        MAX_BACKOFF.as_secs()
                    );
                }
                failing = true;
                tokio::time::sleep(jittered(backoff)).await;
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    }
}

/// SHA-256 (lowercase hex) of the first certificate of a PEM chain: what agents pin.
pub fn tunnel_sha256(cert_pem: &str) -> Option<String> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject as _;
    let first = CertificateDer::pem_slice_iter(cert_pem.as_bytes()).next()?.ok()?;
    Some(relay_wire::wire::sha256_hex(first.as_ref()))
}

/// `wait`, less up to a quarter of it.
fn jittered(wait: Duration) -> Duration {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    wait - wait.mul_f64(f64::from(nanos % 1000) / 4000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_jittered_wait_is_at_most_the_wait_and_at_least_three_quarters() {
        for _ in 0..100 {
            let w = jittered(Duration::from_secs(4));
            assert!(w <= Duration::from_secs(4) && w >= Duration::from_secs(3), "{w:?}");
        }
    }

    #[test]
    fn a_key_others_may_read_is_refused_with_the_fix() {
        let dir = tempfile::tempdir().expect("a scratch");
        let path = dir.path().join("operator.key");
        std::fs::write(&path, OperatorKey::generate().expect("a key").pem()).expect("write");
        let source = FeedSource {
            url: "http://127.0.0.1:1".into(),
            operator_id: "op_1".into(),
            operator_key: path.clone(),
            ca: None,
        };
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let e = Feed::open(&source).expect_err("refused");
        assert!(e.to_string().contains("chmod 600"), "{e}");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        assert_eq!(Feed::open(&source).expect("opens").url(), "http://127.0.0.1:1");
        let missing = FeedSource { operator_key: dir.path().join("none.key"), ..source };
        assert!(Feed::open(&missing).expect_err("missing").to_string().contains("none.key"));
    }
}
