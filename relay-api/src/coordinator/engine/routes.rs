//! The gateway's route table: the routes of the deployments whose job runs, and of their
//! successors on standby. It is read in one transaction, and a read that fails leaves the
//! gateway's table as it was: a database going away in the middle of a tick must not take a
//! live route off the gateway (CI: a route read half-way through a restart of PostgreSQL
//! vanished, and the next validation found the gateway closing its handshakes).

use std::collections::HashMap;

use super::Engine;
use crate::coordinator::admission::Operator;
use crate::coordinator::gateway_hosts::GatewayHosts;
use crate::coordinator::model::{Deployment, HostnameState, SuccessorState};
use crate::coordinator::store::{RouteKeys, RouteSwitch, StoreError, Transaction, now_ms};
use crate::gateway::RouteConfig;
use crate::local::{AgentRoute, GatewayHosts as GatewayHostsSent};

/// Open public connections a route allows at once.
const ROUTE_MAX_CONNECTIONS: usize = 1024;

impl Engine {
    /// Makes the gateway's (and the certificate signer's) routes those of the deployments
    /// whose job runs: the canonical hostname and the customer hostnames whose DNS checks out.
    /// A store that does not answer changes nothing.
    pub(super) async fn sync_routes(&self) {
        let _in_order = self.syncing.lock().await;
        let read = self.db(|store| {
            store.read(|tx| {
                let routes = table(tx, None)?;
                // The gateway hosts serving each route, which its agent learns when it next
                // asks for its hostnames.
                let hosts = GatewayHosts::read(tx, now_ms(), self.parts.config.gateway_hosts_per_route)?;
                let mut by_route = HashMap::new();
                for (deployment_id, agent_route) in &routes {
                    by_route.insert(agent_route.route.route_id.clone(), hosts.pinned(tx, deployment_id)?);
                }
                // Everything a gateway host's table is made of: when it changes, the feed's
                // held requests are woken (on every coordinator, by the sequence).
                let digest = feed_digest(&routes, &hosts, &tx.route_switches()?, &tx.lagging_hosts()?);
                let probe_keys = tx.probe_keys()?;
                Ok((routes.into_iter().map(|(_, r)| r).collect::<Vec<AgentRoute>>(), by_route, digest, probe_keys))
            })
        });
        let (routes, hosts, digest, probe_keys) = match read {
            Ok(read) => read,
            Err(e) => {
                tracing::warn!("svc relay: reading the route table (the gateway keeps its routes): {e}");
                return;
            }
        };
        // Validation schedules of routes no longer in use (a revision replaced, a deployment
        // stopped) go with them.
        if let Ok(mut due) = self.validate_at.lock() {
            due.retain(|route_id, _| routes.iter().any(|r| &r.route.route_id == route_id));
        }
        self.feed_may_have_changed(digest);
        let hosts = self.with_catalog(hosts);
        // The coordinators' probe keys, this one's first (its own validations' tokens pass
        // its gateway whatever the store says), as gateway hosts are given them.
        let probe_keys = self.parts.probe.probe_key().into_iter().chain(
            probe_keys
                .iter()
                .take(relay_wire::alpn::MAX_PROBE_KEYS)
                .filter_map(|k| relay_wire::alpn::ProbeKey::parse(k)),
        );
        self.parts.gateway.set_probe_keys(probe_keys.collect());
        self.parts.gateway.set_routes(routes.iter().map(|r| r.route.clone()).collect());
        self.parts.signer.set_routes(routes);
        self.parts.signer.set_gateway_hosts(hosts);
    }

    /// Moves the feed's sequence on when what the hosts' tables are made of changed since this
    /// coordinator last looked (`digest`), and wakes the feed requests held here at once
    /// (others' are woken by their coordinator's look at the sequence: `feed.rs`).
    fn feed_may_have_changed(&self, digest: String) {
        let Ok(mut last) = self.feed_digest.lock() else { return };
        if last.as_deref() == Some(digest.as_str()) {
            return;
        }
        match self.db(|store| store.bump_feed_seq()) {
            Ok(seq) => {
                *last = Some(digest);
                self.feed_changed(seq);
            }
            Err(e) => tracing::warn!("svc relay: moving the route feed's sequence on (again at the next tick): {e}"),
        }
    }

    /// The gateway hosts `by_route` with the signed catalog an agent checks them against: the
    /// one sent last while the hosts are the same and it is recent (a quarter of its validity,
    /// at most a minute), else the catalog now (signed again if its content changed). None
    /// while no route has a host; a catalog that cannot be had is logged once per error, and
    /// the agents keep their tunnels meanwhile.
    fn with_catalog(&self, by_route: HashMap<String, Vec<relay_agent_config::PinnedGateway>>) -> GatewayHostsSent {
        if by_route.values().all(Vec::is_empty) {
            return GatewayHostsSent { by_route, ..GatewayHostsSent::default() };
        }
        let (catalog, catalog_at, same_hosts) = self.parts.signer.catalog_sent_with(&by_route);
        let recent = (self.parts.config.catalog_validity / 4).min(std::time::Duration::from_secs(60));
        if same_hosts && catalog.is_some() && catalog_at.is_some_and(|at| at.elapsed() < recent) {
            return GatewayHostsSent { by_route, catalog, catalog_at };
        }
        match self.db(|_| crate::coordinator::operations::signed_catalog(self)) {
            Ok(catalog) => {
                if let Ok(mut failing) = self.catalog_failing.lock() {
                    *failing = None;
                }
                GatewayHostsSent {
                    by_route,
                    catalog: Some(std::sync::Arc::new(catalog)),
                    catalog_at: Some(std::time::Instant::now()),
                }
            }
            Err(e) => {
                let message = e.to_string();
                let said = self.catalog_failing.lock().map(|mut f| f.replace(message.clone())).ok().flatten();
                if said.as_deref() != Some(message.as_str()) {
                    tracing::warn!("svc relay: the signed catalog for the agents: {message}");
                }
                GatewayHostsSent { by_route, catalog, catalog_at }
            }
        }
    }

    /// The routes of the deployments whose job runs, and of their successors on standby:
    /// what a gateway serves. Only those assigned to gateway host `host`, if named (the route
    /// feed's table for that host: [`GatewayHosts::serves`]). One read transaction: the table
    /// is whole, or an error.
    pub fn route_table(&self, host: Option<&Operator>) -> Result<Vec<RouteConfig>, StoreError> {
        Ok(self.feed_table(host)?.0)
    }

    /// [`Engine::route_table`], with the feed sequence it was read at (in the same
    /// transaction: a table read at a sequence has every change made before it).
    pub fn feed_table(&self, host: Option<&Operator>) -> Result<(Vec<RouteConfig>, u64), StoreError> {
        let per_route = self.parts.config.gateway_hosts_per_route;
        let (table, seq) = self.db(|store| {
            store.read(|tx| {
                let seq = tx.feed_seq()?;
                let assigned = match host {
                    Some(host) => Some((host, GatewayHosts::read(tx, now_ms(), per_route)?)),
                    None => None,
                };
                Ok((table(tx, assigned.as_ref().map(|(host, hosts)| (*host, hosts)))?, seq))
            })
        })?;
        Ok((table.into_iter().map(|(_, agent_route)| agent_route.route).collect(), seq))
    }
}

/// The digest of what the hosts' tables are made of: every route, the hosts each is assigned
/// to, the switches under way and the hosts lagging.
fn feed_digest(
    routes: &[(String, AgentRoute)],
    hosts: &GatewayHosts,
    switches: &[RouteSwitch],
    lagging: &[(String, String, String)],
) -> String {
    let switches: Vec<(&str, u32, Option<u64>)> =
        switches.iter().map(|s| (s.deployment_id.as_str(), s.revision, s.flipped.map(|(seq, _)| seq))).collect();
    let routes: Vec<(&str, &RouteConfig)> = routes.iter().map(|(id, r)| (id.as_str(), &r.route)).collect();
    let json = serde_json::to_vec(&(routes, hosts.ids(), switches, lagging)).unwrap_or_default();
    relay_wire::wire::sha256_hex(&json)
}

/// The table, each route with its deployment's ID: every route, or those assigned to a
/// gateway host among the hosts.
fn table(
    tx: &mut dyn Transaction,
    assigned_to: Option<(&Operator, &GatewayHosts)>,
) -> Result<Vec<(String, AgentRoute)>, StoreError> {
    let mut active = tx.active_deployments()?;
    if let Some((host, hosts)) = assigned_to {
        let mut assigned = Vec::with_capacity(active.len());
        for d in active {
            if tx.gateway_operator(&d.id)?.is_some_and(|operator| hosts.serves(host, &d.id, &operator)) {
                assigned.push(d);
            }
        }
        active = assigned;
    }
    // A host's table has a redeploy's successor serving once its switch flipped (issue 41:
    // every host had its agents), unless the host lags behind it; the coordinator's own
    // gateway, once it is promoted.
    let flipped: Vec<(String, u32)> = match assigned_to {
        Some((host, _)) => {
            let lagging = tx.lagging_hosts()?;
            tx.route_switches()?
                .into_iter()
                .filter(|s| s.flipped.is_some())
                .filter(|s| !lagging.iter().any(|(d, o, _)| d == &s.deployment_id && o == &host.id))
                .map(|s| (s.deployment_id, s.revision))
                .collect()
        }
        None => Vec::new(),
    };
    let mut routes = Vec::new();
    let mut serving_successor = Vec::new();
    // Successors on standby first: the same hostnames as their deployment's route, reached
    // only as [`RouteConfig::standby`] says.
    for s in tx.successors()? {
        let Some(d) = active.iter().find(|d| d.id == s.deployment_id && d.state.spends()) else { continue };
        if s.state == SuccessorState::Failed {
            continue;
        }
        if let (Some(keys), Some(project_json)) = (tx.successor_keys(&d.id)?, tx.successor_project_json(&d.id)?) {
            let serves = flipped.iter().any(|(id, revision)| id == &d.id && *revision == s.revision);
            if serves {
                serving_successor.push(d.id.clone());
            }
            routes.push((d.id.clone(), route(tx, d, &s.route_id, keys, &project_json, !serves)?));
        }
    }
    for d in active.iter().filter(|d| d.state.runs_job()) {
        // A deployment not launched yet has no keys: no route.
        if let (Some(Some(keys)), Some(project_json)) = (tx.route_keys(&d.id)?, tx.project_json(&d.id)?) {
            let standby = serving_successor.contains(&d.id);
            routes.push((d.id.clone(), route(tx, d, &d.route_id, keys, &project_json, standby)?));
        }
    }
    Ok(routes)
}

/// The route of a revision of `d` (`route_id`, with its job's `keys`).
fn route(
    tx: &mut dyn Transaction,
    d: &Deployment,
    route_id: &str,
    keys: RouteKeys,
    project_json: &str,
    standby: bool,
) -> Result<AgentRoute, StoreError> {
    let mut hostnames = vec![d.canonical_hostname.clone()];
    hostnames.extend(
        tx.hostnames(&d.id)?
            .into_iter()
            .filter(|h| matches!(h.state, HostnameState::Verified | HostnameState::Live))
            .map(|h| h.hostname),
    );
    // A project that no longer reads (a newer validator) keeps its route and its job; its
    // `access` is read on its own, so that a customer's allow-list never silently opens.
    let project = crate::project::read(project_json).ok();
    let guards = match &project {
        Some(p) => p.access.as_ref().map(crate::project::Access::guards).unwrap_or_default(),
        None => crate::project::Access::guards_of_stored(project_json),
    };
    let route = RouteConfig {
        route_id: route_id.to_owned(),
        hostnames,
        route_public_key: keys.route_public_key,
        proxy_protocol: project.as_ref().is_some_and(|p| p.proxy_protocol),
        max_connections: ROUTE_MAX_CONNECTIONS,
        standby,
        guards,
    };
    Ok(AgentRoute { route, credential_sha256: keys.credential_sha256 })
}
