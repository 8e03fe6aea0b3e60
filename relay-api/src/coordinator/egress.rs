//! Where an ingress job's agent may connect ([`AgentDestinations`], its job's
//! [`svc_runner::EgressPolicy`]): its job's network namespace holds nothing of the host, so the
//! runner's egress broker connects for it, to these only: the coordinator's own gateway
//! tunnel, the agent API (route refresh, ACME turns, the development CA), the ACME server, and
//! the gateway hosts serving its deployment (those it was launched with, and those added
//! since, read from the store).

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::store::{RelayStore, now_ms};

/// How often a destination not in the known set sends the broker to the store: a host added
/// to the deployment since the last look is found within this.
const REFRESH: Duration = Duration::from_secs(2);

/// The destinations of one deployment's agents.
pub(crate) struct AgentDestinations {
    /// The tunnel, the agent API, the ACME server, and the gateway hosts at launch.
    fixed: BTreeSet<String>,
    deployment_id: String,
    store: Arc<RelayStore>,
    per_route: Option<usize>,
    /// The deployment's gateway hosts as last read, and when.
    hosts: Mutex<(Option<Instant>, BTreeSet<String>)>,
}

impl std::fmt::Debug for AgentDestinations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentDestinations")
            .field("fixed", &self.fixed)
            .field("deployment", &self.deployment_id)
            .finish()
    }
}

impl AgentDestinations {
    /// `fixed` (`host:port` each) and, read when needed, the gateway hosts serving
    /// `deployment_id`.
    pub(crate) fn new(
        fixed: impl IntoIterator<Item = String>,
        deployment_id: &str,
        store: Arc<RelayStore>,
        per_route: Option<usize>,
    ) -> AgentDestinations {
        AgentDestinations {
            fixed: fixed.into_iter().collect(),
            deployment_id: deployment_id.to_owned(),
            store,
            per_route,
            hosts: Mutex::new((None, BTreeSet::new())),
        }
    }
}

impl svc_runner::EgressPolicy for AgentDestinations {
    fn allows(&self, destination: &str) -> bool {
        if self.fixed.contains(destination) {
            return true;
        }
        let mut hosts = self.hosts.lock().unwrap_or_else(PoisonError::into_inner);
        if hosts.0.is_none_or(|read| read.elapsed() >= REFRESH) {
            let read = self.store.gateway_hosts(&self.deployment_id, now_ms(), self.per_route);
            match read {
                Ok(list) => {
                    hosts.1 =
                        list.iter().map(|(operator, presence)| presence.reachable(&operator.hostname).1).collect();
                }
                Err(e) => tracing::warn!("svc relay: the gateway hosts of {} not read: {e}", self.deployment_id),
            }
            hosts.0 = Some(Instant::now());
        }
        hosts.1.contains(destination)
    }
}

/// `host:port` of an `http://` or `https://` URL (the scheme's port if none is given).
pub(crate) fn authority(url: &str) -> Option<String> {
    let (rest, default_port) = match url.split_once("://") {
        Some(("https", rest)) => (rest, 443),
        Some(("http", rest)) => (rest, 80),
        _ => return None,
    };
    let host_port = rest.split(['/', '?', '#']).next()?;
    let host_port = host_port.rsplit_once('@').map_or(host_port, |(_, h)| h);
    if host_port.is_empty() {
        return None;
    }
    let has_port = match host_port.rsplit_once(':') {
        // An IPv6 literal's colons are inside brackets.
        Some((host, port)) => !host.ends_with(':') && port.chars().all(|c| c.is_ascii_digit()) && !port.is_empty(),
        None => false,
    };
    Some(if has_port { host_port.to_owned() } else { format!("{host_port}:{default_port}") })
}

#[cfg(test)]
mod tests {
    use super::authority;

    #[test]
    fn a_urls_authority_has_its_port_or_the_schemes() {
        assert_eq!(authority("http://127.0.0.1:7300").as_deref(), Some("127.0.0.1:7300"));
        assert_eq!(authority("https://acme.example/dir").as_deref(), Some("acme.example:443"));
        assert_eq!(authority("https://localhost:14000/dir?x").as_deref(), Some("localhost:14000"));
        assert_eq!(authority("https://[::1]:14000/dir").as_deref(), Some("[::1]:14000"));
        assert_eq!(authority("ftp://x").as_deref(), None);
    }
}
