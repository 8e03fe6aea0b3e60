//! Exact per-route accounting, kept by route id. The route table is rebuilt at every refresh
//! (the coordinator's engine does it four times a second), so a connection's slot belongs to
//! its route's *id*: it goes back to the same count whatever object holds the route's
//! configuration by then, and a refresh never changes a count.
//!
//! One lock guards every count, so the route's limit, the per-client shares and the metrics
//! gauges read the same numbers. Limits:
//!
//! - a route holds at most `max_connections` connections (routed, or waiting for their data
//!   connection);
//! - one client holds at most its share of them (a quarter by default, at least one), so one
//!   source cannot take every slot of a route;
//! - one client has at most a fixed number of connections still sending their ClientHello,
//!   across the gateway.
//!
//! A client is an IPv4 address, or an IPv6 /64 (what one subscriber is usually given; an
//! IPv4-mapped address counts as its IPv4 address).
//!
//! A route's row lives while the route is configured or still has connections or agents; a
//! removed route's row, and with it its metrics series, goes once the last of them is gone.
//! Rows of unknown names are never made, so the table is bounded by the configured routes
//! plus the removed ones still in use.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::{IpAddr, Ipv6Addr};
use std::sync::{Arc, Mutex, MutexGuard};

/// A client as the limits count it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct Client(IpAddr);

impl Client {
    /// The client of a peer address: the IPv4 address, or the IPv6 /64.
    pub(super) fn of(ip: IpAddr) -> Client {
        match ip.to_canonical() {
            IpAddr::V6(v6) => {
                let prefix = u128::from(v6) & !((1u128 << 64) - 1);
                Client(IpAddr::V6(Ipv6Addr::from(prefix)))
            }
            v4 => Client(v4),
        }
    }
}

/// Why a connection got no slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Refusal {
    /// The route holds `max_connections` already.
    RouteFull,
    /// This client holds its share of the route already.
    ClientShare,
}

/// One route's live counts.
#[derive(Debug, Default)]
struct RouteLoad {
    configured: bool,
    active: usize,
    by_client: HashMap<Client, usize>,
    routed: u64,
    agents: u64,
}

impl RouteLoad {
    fn unused(&self) -> bool {
        !self.configured && self.active == 0 && self.agents == 0
    }
}

#[derive(Debug, Default)]
struct Table {
    routes: HashMap<String, RouteLoad>,
    /// Connections still sending their ClientHello, per client.
    hellos: HashMap<Client, usize>,
}

impl Table {
    /// Drops the row of `route` if nothing needs it any more.
    fn tidy(&mut self, route: &str) {
        if self.routes.get(route).is_some_and(RouteLoad::unused) {
            self.routes.remove(route);
        }
    }
}

/// One route's counts, as the metrics show them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteRow {
    /// The route's ID.
    pub route_id: String,
    /// Connections routed since the gateway started (or since the route's row was made).
    pub routed: u64,
    /// Connections holding a slot now.
    pub active: usize,
    /// Agents connected now.
    pub agents: u64,
}

/// Every count of the gateway's routes.
#[derive(Debug, Default)]
pub(super) struct Accounting {
    table: Mutex<Table>,
}

impl Accounting {
    fn table(&self) -> MutexGuard<'_, Table> {
        // A panic while holding the lock leaves consistent counts (every update is a few
        // integer operations), so a poisoned lock is still used.
        self.table.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Makes `routes` the configured routes and runs `swap` (which installs them) under the
    /// same lock, so refreshes are applied in order. Counts are untouched; rows of removed
    /// routes go once nothing uses them.
    pub(super) fn configure<'a>(&self, routes: impl IntoIterator<Item = &'a str>, swap: impl FnOnce()) {
        let mut table = self.table();
        let configured: HashSet<&str> = routes.into_iter().collect();
        for (id, load) in &mut table.routes {
            load.configured = configured.contains(id.as_str());
        }
        for id in configured {
            table.routes.entry(id.to_owned()).or_default().configured = true;
        }
        table.routes.retain(|_, load| !load.unused());
        swap();
    }

    /// A slot for a connection still sending its ClientHello, if `client` has fewer than
    /// `cap` such connections.
    pub(super) fn hello(self: &Arc<Self>, client: Client, cap: usize) -> Option<HelloSlot> {
        let mut table = self.table();
        let sending = table.hellos.entry(client).or_default();
        if *sending >= cap {
            if *sending == 0 {
                table.hellos.remove(&client);
            }
            return None;
        }
        *sending += 1;
        Some(HelloSlot { accounting: self.clone(), client })
    }

    /// A slot of `route` for `client`, within the route's `max` and the client's `share`.
    pub(super) fn acquire(
        self: &Arc<Self>,
        route: &str,
        client: Client,
        max: usize,
        share: usize,
    ) -> Result<Slot, Refusal> {
        let mut table = self.table();
        let load = table.routes.entry(route.to_owned()).or_default();
        let held = load.by_client.get(&client).copied().unwrap_or(0);
        let refusal = if load.active >= max {
            Some(Refusal::RouteFull)
        } else if held >= share {
            Some(Refusal::ClientShare)
        } else {
            None
        };
        if let Some(refusal) = refusal {
            table.tidy(route);
            return Err(refusal);
        }
        load.active += 1;
        *load.by_client.entry(client).or_default() += 1;
        Ok(Slot { accounting: self.clone(), route: route.to_owned(), client })
    }

    /// An agent of `route` is connected until the returned guard is dropped.
    pub(super) fn agent(self: &Arc<Self>, route: &str) -> AgentPresence {
        self.table().routes.entry(route.to_owned()).or_default().agents += 1;
        AgentPresence { accounting: self.clone(), route: route.to_owned() }
    }

    /// Connections of `route` holding a slot now (0 for a route without a row).
    pub(super) fn active(&self, route: &str) -> usize {
        self.table().routes.get(route).map_or(0, |l| l.active)
    }

    /// Every route's counts, by route ID.
    pub(super) fn rows(&self) -> Vec<RouteRow> {
        let table = self.table();
        let sorted: BTreeMap<&String, &RouteLoad> = table.routes.iter().collect();
        sorted
            .into_iter()
            .map(|(id, l)| RouteRow { route_id: id.clone(), routed: l.routed, active: l.active, agents: l.agents })
            .collect()
    }
}

/// A connection's slot in its route, given back when dropped.
#[derive(Debug)]
pub(super) struct Slot {
    accounting: Arc<Accounting>,
    route: String,
    client: Client,
}

impl Slot {
    /// The connection reached the route's agent.
    pub(super) fn routed(&self) {
        if let Some(load) = self.accounting.table().routes.get_mut(&self.route) {
            load.routed += 1;
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut table = self.accounting.table();
        let Some(load) = table.routes.get_mut(&self.route) else { return };
        load.active = load.active.saturating_sub(1);
        if let Some(held) = load.by_client.get_mut(&self.client) {
            *held -= 1;
            if *held == 0 {
                load.by_client.remove(&self.client);
            }
        }
        table.tidy(&self.route);
    }
}

/// A connection still sending its ClientHello, counted for its client until dropped.
#[derive(Debug)]
pub(super) struct HelloSlot {
    accounting: Arc<Accounting>,
    client: Client,
}

impl Drop for HelloSlot {
    fn drop(&mut self) {
        let mut table = self.accounting.table();
        if let Some(sending) = table.hellos.get_mut(&self.client) {
            *sending -= 1;
            if *sending == 0 {
                table.hellos.remove(&self.client);
            }
        }
    }
}

/// A connected agent of a route, counted until dropped.
#[derive(Debug)]
pub(super) struct AgentPresence {
    accounting: Arc<Accounting>,
    route: String,
}

impl Drop for AgentPresence {
    fn drop(&mut self) {
        let mut table = self.accounting.table();
        if let Some(load) = table.routes.get_mut(&self.route) {
            load.agents = load.agents.saturating_sub(1);
        }
        table.tidy(&self.route);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(ip: &str) -> Client {
        Client::of(ip.parse().expect("an address"))
    }

    #[test]
    fn a_refresh_never_changes_a_count() {
        let accounting = Arc::new(Accounting::default());
        accounting.configure(["r1"], || {});
        let slots: Vec<Slot> =
            (0..10).map(|_| accounting.acquire("r1", client("10.0.0.1"), 100, 100).expect("a slot")).collect();
        for round in 0..50 {
            let routes: &[&str] = if round % 2 == 0 { &["r1", "r2"] } else { &["r1"] };
            accounting.configure(routes.iter().copied(), || {});
            assert_eq!(accounting.active("r1"), 10, "round {round}");
        }
        drop(slots);
        assert_eq!(accounting.active("r1"), 0);
        assert_eq!(accounting.rows()[0].active, 0);
    }

    #[test]
    fn a_route_and_each_client_are_limited() {
        let accounting = Arc::new(Accounting::default());
        accounting.configure(["r1"], || {});
        let a = client("10.0.0.1");
        let first: Vec<Slot> = (0..2).map(|_| accounting.acquire("r1", a, 3, 2).expect("a slot")).collect();
        assert_eq!(accounting.acquire("r1", a, 3, 2).err(), Some(Refusal::ClientShare));
        let other = accounting.acquire("r1", client("10.0.0.2"), 3, 2).expect("another client's slot");
        assert_eq!(accounting.acquire("r1", client("10.0.0.3"), 3, 2).err(), Some(Refusal::RouteFull));
        drop(first);
        drop(other);
        assert_eq!(accounting.active("r1"), 0);
        assert!(accounting.table().routes["r1"].by_client.is_empty(), "no client entry is kept");
    }

    #[test]
    fn clients_are_ipv4_addresses_and_ipv6_prefixes() {
        assert_eq!(client("2001:db8:1:2:aaaa::1"), client("2001:db8:1:2:bbbb::2"));
        assert_ne!(client("2001:db8:1:2::1"), client("2001:db8:1:3::1"));
        assert_eq!(client("::ffff:192.0.2.7"), client("192.0.2.7"));
        assert_ne!(client("192.0.2.7"), client("192.0.2.8"));
    }

    #[test]
    fn hellos_in_progress_are_capped_per_client() {
        let accounting = Arc::new(Accounting::default());
        let a = client("10.0.0.1");
        let held: Vec<HelloSlot> = (0..3).map(|_| accounting.hello(a, 3).expect("a hello slot")).collect();
        assert!(accounting.hello(a, 3).is_none());
        assert!(accounting.hello(client("10.0.0.2"), 3).is_some());
        drop(held);
        assert!(accounting.table().hellos.is_empty());
        assert!(accounting.hello(a, 0).is_none(), "a cap of 0 refuses all");
        assert!(accounting.table().hellos.is_empty());
    }

    #[test]
    fn a_removed_routes_row_goes_with_its_last_connection_and_agent() {
        let accounting = Arc::new(Accounting::default());
        accounting.configure(["r1", "r2"], || {});
        let slot = accounting.acquire("r1", client("10.0.0.1"), 10, 10).expect("a slot");
        slot.routed();
        let agent = accounting.agent("r1");
        accounting.configure(["r2"], || {});
        let ids = |a: &Accounting| a.rows().into_iter().map(|r| r.route_id).collect::<Vec<_>>();
        assert_eq!(ids(&accounting), ["r1", "r2"], "still in use");
        assert_eq!(accounting.rows()[0], RouteRow { route_id: "r1".into(), routed: 1, active: 1, agents: 1 });
        drop(slot);
        assert_eq!(ids(&accounting), ["r1", "r2"], "the agent is still connected");
        drop(agent);
        assert_eq!(ids(&accounting), ["r2"]);
        // An unknown route never gets a row.
        assert!(accounting.acquire("r9", client("10.0.0.1"), 0, 0).is_err());
        assert_eq!(ids(&accounting), ["r2"]);
    }
}
