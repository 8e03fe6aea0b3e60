//! Which gateway hosts serve a deployment. By default every host of the deployment's gateway
//! operator that followed the route feed lately serves each of its routes, and the route's
//! agents tunnel to all of them (and to the coordinator's own gateway): a public name that
//! resolves to any of the operator's hosts reaches the route.
//!
//! A large fleet can assign each route a few hosts instead
//! ([`CoordinatorConfig::gateway_hosts_per_route`]), when the relay's DNS answers each route's
//! name with its own hosts (its URLs list them). The assignment is rendezvous hashing
//! (highest random weight) over the deployment's ID and each host's operator ID: every reader
//! computes the same hosts from the same presences without storing an assignment, a host
//! joining or leaving moves only the routes it wins or held, and routes spread evenly.
//!
//! The route feed serves a host the routes assigned to it, and the agents' pinned gateways
//! and the deployment's URLs list the hosts assigned it, by the same rule ([`GatewayHosts`]),
//! each from the presences as it reads them: a route that moves is served by its new host
//! once its agents' next route refresh opens the tunnel.
//!
//! [`CoordinatorConfig::gateway_hosts_per_route`]: super::CoordinatorConfig::gateway_hosts_per_route

use relay_wire::admission::Operator;
use relay_wire::feed::Presence;

use super::store::{RelayStore, StoreError, Transaction};

/// How recently a gateway host must have followed the route feed to count as serving its
/// operator's routes (a gateway following the feed asks at least every 20 s).
pub const PRESENCE_FRESH_MS: i64 = 10 * 60 * 1000;

/// The gateway hosts that followed the route feed within [`PRESENCE_FRESH_MS`], read once for
/// many deployments, and how many each route gets (`None`: all of its operator's).
pub(crate) struct GatewayHosts {
    fresh: Vec<(Operator, Presence)>,
    per_route: Option<usize>,
}

impl GatewayHosts {
    /// Those fresh at `now`, `per_route` of them serving each route (`None`: all).
    pub(crate) fn read(
        tx: &mut dyn Transaction,
        now: i64,
        per_route: Option<usize>,
    ) -> Result<GatewayHosts, StoreError> {
        let operators = tx.operators()?;
        let mut fresh = Vec::new();
        for (id, presence, seen_at) in tx.presences()? {
            if let Some(o) = operators.iter().find(|o| o.id == id)
                && now.saturating_sub(seen_at) <= PRESENCE_FRESH_MS
            {
                fresh.push((o.clone(), presence));
            }
        }
        Ok(GatewayHosts { fresh, per_route })
    }

    /// The fresh hosts' operator IDs, in the order read.
    pub(crate) fn ids(&self) -> Vec<&str> {
        self.fresh.iter().map(|(o, _)| o.id.as_str()).collect()
    }

    /// Those assigned deployment `deployment_id`: its gateway operator's fresh hosts, or the
    /// `per_route` of them ranked highest for it.
    pub(crate) fn of(
        &self,
        tx: &mut dyn Transaction,
        deployment_id: &str,
    ) -> Result<Vec<(Operator, Presence)>, StoreError> {
        if self.fresh.is_empty() {
            return Ok(Vec::new());
        }
        let Some(operator) = tx.gateway_operator(deployment_id)? else { return Ok(Vec::new()) };
        let candidates = self.fresh.iter().filter(|(o, _)| o.name == operator);
        Ok(match self.per_route {
            None => candidates.cloned().collect(),
            Some(n) => top(deployment_id, candidates, |(o, _)| o.id.as_str(), n).into_iter().cloned().collect(),
        })
    }

    /// Whether gateway host `host` serves deployment `deployment_id`, whose gateway operator
    /// is `operator_name`: it is one of the operator's and, when routes get a few hosts each,
    /// it is fresh (the feed records a host's presence before it reads its table) and fewer
    /// than `per_route` of the operator's fresh hosts rank above it. Exactly when
    /// [`GatewayHosts::of`] lists it, without listing: one hash per host, nothing allocated.
    pub(crate) fn serves(&self, host: &Operator, deployment_id: &str, operator_name: &str) -> bool {
        if host.name != operator_name {
            return false;
        }
        let Some(n) = self.per_route else { return true };
        if !self.fresh.iter().any(|(o, _)| o.id == host.id) {
            return false;
        }
        let own = (weight(deployment_id, &host.id), host.id.as_str());
        let above = self
            .fresh
            .iter()
            .filter(|(o, _)| o.name == operator_name && o.id != host.id)
            .filter(|(o, _)| ranks_above((weight(deployment_id, &o.id), o.id.as_str()), own))
            .count();
        above < n
    }

    /// Those of `deployment_id`, as its agents are told of them.
    pub(crate) fn pinned(
        &self,
        tx: &mut dyn Transaction,
        deployment_id: &str,
    ) -> Result<Vec<relay_agent_config::PinnedGateway>, StoreError> {
        Ok(self
            .of(tx, deployment_id)?
            .into_iter()
            .map(|(operator, presence)| relay_agent_config::PinnedGateway {
                address: presence.reachable(&operator.hostname).1,
                tunnel_sha256: presence.tunnel_sha256,
            })
            .collect())
    }
}

impl RelayStore {
    /// The gateway hosts offered for deployment `deployment_id` at `now`, what its URLs list
    /// (and a fleet's DNS answers its name with): those serving it ([`GatewayHosts::of`]) but
    /// the ones lagging behind its route (issue 41: a host that did not have a redeploy's
    /// successor within the bound leaves the route's hosts before the switch, and rejoins
    /// once it reports the route's agents). A lagging host is still served the route by the
    /// feed and tunneled to by its agents: that is how it catches up.
    pub fn offered_gateway_hosts(
        &self,
        deployment_id: &str,
        now: i64,
        per_route: Option<usize>,
    ) -> Result<Vec<(Operator, Presence)>, StoreError> {
        self.read(|tx| {
            let lagging: Vec<String> = tx
                .lagging_hosts()?
                .into_iter()
                .filter(|(d, _, _)| d == deployment_id)
                .map(|(_, operator, _)| operator)
                .collect();
            let mut hosts = GatewayHosts::read(tx, now, per_route)?.of(tx, deployment_id)?;
            hosts.retain(|(o, _)| !lagging.contains(&o.id));
            Ok(hosts)
        })
    }

    /// The gateway hosts serving deployment `deployment_id` at `now` ([`GatewayHosts::of`]):
    /// what its new jobs' agents tunnel to, and what its feed serves.
    pub fn gateway_hosts(
        &self,
        deployment_id: &str,
        now: i64,
        per_route: Option<usize>,
    ) -> Result<Vec<(Operator, Presence)>, StoreError> {
        self.read(|tx| GatewayHosts::read(tx, now, per_route)?.of(tx, deployment_id))
    }
}

/// The `n` of `candidates` with the highest weight for `key`, highest first (ties, which
/// need equal 64-bit hashes, by ID: [`ranks_above`]).
fn top<'a, T>(key: &str, candidates: impl Iterator<Item = &'a T>, id: impl Fn(&T) -> &str, n: usize) -> Vec<&'a T> {
    let mut ranked: Vec<(u64, &'a T)> = candidates.map(|c| (weight(key, id(c)), c)).collect();
    ranked.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| id(a.1).cmp(id(b.1))));
    ranked.into_iter().take(n).map(|(_, c)| c).collect()
}

/// Whether a host of (weight, ID) `a` ranks above `b`: the higher weight, else the lower ID.
fn ranks_above(a: (u64, &str), b: (u64, &str)) -> bool {
    a.0 > b.0 || (a.0 == b.0 && a.1 < b.1)
}

/// The rendezvous weight of host `host` for `key`: the first 8 bytes of SHA-256 over both,
/// a separator between them so no two pairs hash the same bytes.
fn weight(key: &str, host: &str) -> u64 {
    let mut digest = ring::digest::Context::new(&ring::digest::SHA256);
    digest.update(key.as_bytes());
    digest.update(&[0]);
    digest.update(host.as_bytes());
    let digest = digest.finish();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest.as_ref()[..8]);
    u64::from_be_bytes(first)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("op_{i:016x}")).collect()
    }

    fn assigned(key: &str, hosts: &[String], n: usize) -> Vec<String> {
        top(key, hosts.iter(), |h| h.as_str(), n).into_iter().cloned().collect()
    }

    #[test]
    fn every_host_is_assigned_when_there_are_no_more_than_the_routes_share() {
        let two = hosts(2);
        let mut got = assigned("dep_1", &two, 2);
        got.sort();
        assert_eq!(got, two);
        assert_eq!(assigned("dep_1", &two, 5).len(), 2);
        assert!(assigned("dep_1", &[], 2).is_empty());
    }

    #[test]
    fn a_host_serves_a_route_exactly_when_the_routes_list_of_hosts_has_it() {
        let operator = |i: usize, name: &str| Operator {
            id: format!("op_{i:016x}"),
            name: name.to_owned(),
            public_key: String::new(),
            hostname: format!("gw{i}.test"),
            admitted_at: 0,
        };
        let presence = Presence {
            public: "127.0.0.1:1".parse().expect("an address"),
            tunnel: "127.0.0.1:2".parse().expect("an address"),
            tunnel_sha256: "0".repeat(64),
        };
        // Seven hosts of `local`, two of another operator; one of `local`'s is not fresh.
        let mut fresh: Vec<(Operator, Presence)> = (0..7).map(|i| (operator(i, "local"), presence.clone())).collect();
        fresh.extend((7..9).map(|i| (operator(i, "north"), presence.clone())));
        let stale = operator(9, "local");
        for n in [1usize, 2, 3, 7] {
            let hosts = GatewayHosts { fresh: fresh.clone(), per_route: Some(n) };
            for d in (0..200).map(|i| format!("dep_{i}")) {
                let local = fresh.iter().filter(|(o, _)| o.name == "local");
                let listed: Vec<&str> =
                    top(&d, local, |(o, _)| o.id.as_str(), n).iter().map(|(o, _)| o.id.as_str()).collect();
                assert_eq!(listed.len(), n);
                for (o, _) in &fresh {
                    let expected = o.name == "local" && listed.contains(&o.id.as_str());
                    assert_eq!(hosts.serves(o, &d, "local"), expected, "{d}, {}, {n} per route", o.id);
                }
                assert!(!hosts.serves(&stale, &d, "local"), "a host not fresh serves nothing");
            }
        }
        let all = GatewayHosts { fresh, per_route: None };
        assert!(all.serves(&stale, "dep_1", "local"), "by default every host of the operator serves");
        assert!(!all.serves(&operator(7, "north"), "dep_1", "local"));
    }

    #[test]
    fn routes_spread_evenly_over_a_fleet_and_a_host_leaving_moves_only_its_own() {
        let fleet = hosts(10);
        let deployments: Vec<String> = (0..2_000).map(|i| format!("dep_{i}")).collect();
        let mut load = vec![0usize; fleet.len()];
        let before: Vec<Vec<String>> = deployments.iter().map(|d| assigned(d, &fleet, 2)).collect();
        for chosen in &before {
            assert_eq!(chosen.len(), 2);
            assert_ne!(chosen[0], chosen[1]);
            for host in chosen {
                load[fleet.iter().position(|h| h == host).expect("a host of the fleet")] += 1;
            }
        }
        // 4,000 assignments over 10 hosts: 400 each on average.
        assert!(load.iter().all(|&l| (300..=500).contains(&l)), "{load:?}");
        let gone = &fleet[3];
        let rest: Vec<String> = fleet.iter().filter(|h| *h != gone).cloned().collect();
        for (d, old) in deployments.iter().zip(&before) {
            let new = assigned(d, &rest, 2);
            let kept: Vec<&String> = old.iter().filter(|h| *h != gone).collect();
            assert!(kept.iter().all(|h| new.contains(h)), "{d}: {old:?} became {new:?}");
        }
    }
}
