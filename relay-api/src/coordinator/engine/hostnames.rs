//! A deployment's hostnames: its public URLs (the leader's gateway's, then each gateway
//! host's) and the DNS check of a customer hostname.

use super::Engine;
use crate::coordinator::AgentCertificates;
use crate::coordinator::model::{Deployment, HostnameState};
use crate::coordinator::store::{StoreError, now_ms};

impl Engine {
    /// The public URL of a hostname, at the gateway of the coordinator that runs the jobs
    /// (this one's, unless another holds the engine lease).
    pub fn url(&self, hostname: &str) -> String {
        match self.lease.public_port.load(std::sync::atomic::Ordering::Relaxed) {
            443 => format!("https://{hostname}/"),
            port => format!("https://{hostname}:{port}/"),
        }
    }

    /// A deployment with its URLs filled in: the coordinator's gateway's, then each gateway
    /// host's serving it (its public port; the canonical hostname resolves to the hosts).
    pub fn with_url(&self, mut d: Deployment) -> Deployment {
        d.url = self.url(&d.canonical_hostname);
        d.urls = vec![d.url.clone()];
        let hosts = self
            .db(|store| store.offered_gateway_hosts(&d.id, now_ms(), self.parts.config.gateway_hosts_per_route))
            .unwrap_or_default();
        for (_, presence) in hosts {
            let url = match presence.public.port() {
                443 => format!("https://{}/", d.canonical_hostname),
                port => format!("https://{}:{port}/", d.canonical_hostname),
            };
            if !d.urls.contains(&url) {
                d.urls.push(url);
            }
        }
        d
    }

    /// Whether customer hostnames can get certificates here.
    pub fn issues_customer_certificates(&self) -> bool {
        matches!(self.parts.config.certificates, AgentCertificates::Acme { .. })
    }

    /// Checks a customer hostname's DNS now and records what it found.
    pub async fn check_hostname(&self, d: &Deployment, hostname: &str) -> Result<(), StoreError> {
        let Some(h) = self.db(|store| store.hostname(&d.id, hostname))? else {
            return Err(StoreError::NotFound(format!("hostname {hostname}")));
        };
        if h.state == HostnameState::Removed {
            return Err(StoreError::NotFound(format!("hostname {hostname}")));
        }
        let hints = self.parts.probe.check_dns(hostname, &d.canonical_hostname, &h.token).await;
        let state = match (h.state, hints.is_empty()) {
            (HostnameState::PendingDns, true) => HostnameState::Verified,
            (HostnameState::PendingDns, false) => HostnameState::PendingDns,
            // A verified or live name whose records broke goes back to waiting for DNS.
            (_, false) => HostnameState::PendingDns,
            (state, true) => state,
        };
        self.db(|store| store.set_hostname(&d.id, hostname, state, &hints))?;
        // The lease holder's gateway serves the routes: a coordinator standing by leaves them
        // to it (its next tick reads the hostname's new state).
        if state != h.state && self.leading() {
            self.sync_routes().await;
            self.due_now(d);
        }
        Ok(())
    }
}
