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
//! - one client holds at most its share of them (a quarter by default, at least one);
//! - **fair under pressure**: when the route is full, a newcomer whose client holds fewer of
//!   its connections than the largest holder is admitted by closing one connection of the
//!   largest holder (the one idle longest); only a newcomer whose client already holds the
//!   most is refused. A fixed share alone is beaten by enough addresses (four at a quarter
//!   each fill a route); with this, holding every slot buys nothing against a new client.
//!
//! A connection's slot is its entry in its route's table, under its client, with its
//! [`Activity`] (when bytes last moved, and the switch that closes it). Routing a connection
//! costs a hash insert and a remove; only at the limit is anything scanned: the clients, to
//! find the largest holder, then that client's connections (at most its share), to find the
//! one idle longest. A closed connection's entry goes at once, so the newcomer takes its slot
//! and the count never exceeds the limit; its task ends at its next poll and then has nothing
//! to give back.
//!
//! A route's row lives while the route is configured or still has connections or agents; a
//! removed route's row, and with it its metrics series, goes once the last of them is gone.
//! Rows of unknown names are never made, so the table is bounded by the configured routes
//! plus the removed ones still in use.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};

use relay_wire::idle::Activity;

use super::client::Client;

/// Why a connection got no slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Refusal {
    /// The route holds `max_connections` already, and no client holds more than this one.
    RouteFull,
    /// This client holds its share of the route already.
    ClientShare,
}

/// Whether admitting a connection closed another one to make room.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Admitted {
    /// There was room.
    Free,
    /// The longest-idle connection of the route's largest holder was closed.
    Evicted,
}

/// One client's open connections of one route, by connection number.
type Held = HashMap<u64, Arc<Activity>>;

/// One route's live counts.
#[derive(Debug, Default)]
struct RouteLoad {
    configured: bool,
    /// Connections holding a slot: the sum of `by_client`'s sizes.
    active: usize,
    by_client: HashMap<Client, Held>,
    routed: u64,
    agents: u64,
}

impl RouteLoad {
    fn unused(&self) -> bool {
        !self.configured && self.active == 0 && self.agents == 0
    }

    fn held(&self, client: Client) -> usize {
        self.by_client.get(&client).map_or(0, HashMap::len)
    }

    /// Makes room for a client holding `held` connections: closes the longest-idle connection
    /// of the client holding the most, if that client holds more than `held` (so never one of
    /// the newcomer's own). Ties between largest holders go either way.
    fn make_room(&mut self, held: usize) -> bool {
        let largest = self.by_client.iter().max_by_key(|(_, conns)| conns.len());
        let Some((&client, conns)) = largest.filter(|(_, conns)| conns.len() > held) else { return false };
        let Some(id) = conns.iter().min_by_key(|(id, activity)| (activity.last_move(), **id)).map(|(id, _)| *id) else {
            return false;
        };
        if let Some(activity) = self.remove(client, id) {
            activity.close();
            return true;
        }
        false
    }

    /// Takes connection `id` of `client` out of the counts, if it is still in them.
    fn remove(&mut self, client: Client, id: u64) -> Option<Arc<Activity>> {
        let conns = self.by_client.get_mut(&client)?;
        let activity = conns.remove(&id)?;
        if conns.is_empty() {
            self.by_client.remove(&client);
        }
        self.active -= 1;
        Some(activity)
    }
}

#[derive(Debug, Default)]
struct Table {
    routes: HashMap<String, RouteLoad>,
    /// The next connection's number.
    next_id: u64,
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
        // integer and map operations), so a poisoned lock is still used.
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

    /// A slot of `route` for `client`, within the route's `max` and the client's `share`.
    /// At `max`, a client holding fewer than the largest holder gets the slot of that
    /// holder's longest-idle connection, which is closed.
    pub(super) fn acquire(
        self: &Arc<Self>,
        route: &str,
        client: Client,
        max: usize,
        share: usize,
    ) -> Result<(Slot, Admitted), Refusal> {
        let mut table = self.table();
        let id = table.next_id;
        table.next_id += 1;
        let load = table.routes.entry(route.to_owned()).or_default();
        let held = load.held(client);
        let admitted = if load.active >= max {
            (held < share && load.make_room(held)).then_some(Admitted::Evicted).ok_or(Refusal::RouteFull)
        } else if held >= share {
            Err(Refusal::ClientShare)
        } else {
            Ok(Admitted::Free)
        };
        let admitted = match admitted {
            Ok(admitted) => admitted,
            Err(refusal) => {
                table.tidy(route);
                return Err(refusal);
            }
        };
        let activity = Arc::new(Activity::new());
        load.by_client.entry(client).or_default().insert(id, activity.clone());
        load.active += 1;
        Ok((Slot { accounting: self.clone(), route: route.to_owned(), client, id, activity }, admitted))
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

    /// Agents of `route` connected now.
    pub(super) fn agents(&self, route: &str) -> u64 {
        self.table().routes.get(route).map_or(0, |l| l.agents)
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

/// A connection's slot in its route, given back when dropped (unless the connection was
/// closed to make room: its slot went to the newcomer then).
#[derive(Debug)]
pub(super) struct Slot {
    accounting: Arc<Accounting>,
    route: String,
    client: Client,
    id: u64,
    activity: Arc<Activity>,
}

impl Slot {
    /// The connection reached the route's agent.
    pub(super) fn routed(&self) {
        if let Some(load) = self.accounting.table().routes.get_mut(&self.route) {
            load.routed += 1;
        }
    }

    /// The connection's activity: the relay records its moves there, and the accounting
    /// closes it through it to make room.
    pub(super) fn activity(&self) -> &Activity {
        &self.activity
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut table = self.accounting.table();
        let Some(load) = table.routes.get_mut(&self.route) else { return };
        load.remove(self.client, self.id);
        table.tidy(&self.route);
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
    use std::time::Duration;

    use super::*;

    fn client(ip: &str) -> Client {
        Client::of(ip.parse().expect("an address"))
    }

    fn slot(accounting: &Arc<Accounting>, ip: &str, max: usize, share: usize) -> Result<(Slot, Admitted), Refusal> {
        accounting.acquire("r1", client(ip), max, share)
    }

    /// The sum of the per-client counts, which `active` must equal.
    fn held_sum(accounting: &Accounting) -> usize {
        accounting.table().routes.get("r1").map_or(0, |l| l.by_client.values().map(HashMap::len).sum())
    }

    #[test]
    fn a_refresh_never_changes_a_count() {
        let accounting = Arc::new(Accounting::default());
        accounting.configure(["r1"], || {});
        let slots: Vec<_> = (0..10).map(|_| slot(&accounting, "10.0.0.1", 100, 100).expect("a slot")).collect();
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
        let first: Vec<_> = (0..2).map(|_| slot(&accounting, "10.0.0.1", 3, 2).expect("a slot")).collect();
        assert_eq!(slot(&accounting, "10.0.0.1", 3, 2).err(), Some(Refusal::ClientShare));
        let (other, admitted) = slot(&accounting, "10.0.0.2", 3, 2).expect("another client's slot");
        assert_eq!(admitted, Admitted::Free);
        // Full: 10.0.0.3 holds none, 10.0.0.1 holds two, so one of those makes room.
        let (third, admitted) = slot(&accounting, "10.0.0.3", 3, 2).expect("a slot made for a newcomer");
        assert_eq!(admitted, Admitted::Evicted);
        assert!(first.iter().filter(|(s, _)| s.activity().is_closed()).count() == 1);
        assert_eq!(accounting.active("r1"), 3);
        // Now every client holds one: nobody holds more than a newcomer's next connection.
        assert_eq!(slot(&accounting, "10.0.0.3", 3, 2).err(), Some(Refusal::RouteFull));
        drop((first, other, third));
        assert_eq!(accounting.active("r1"), 0);
        assert!(accounting.table().routes["r1"].by_client.is_empty(), "no client entry is kept");
    }

    #[test]
    fn a_full_route_closes_the_largest_holders_longest_idle_connection_for_a_smaller_client() {
        let accounting = Arc::new(Accounting::default());
        accounting.configure(["r1"], || {});
        // 10.0.0.1 holds 3 (the largest), 10.0.0.2 holds 2, 10.0.0.3 holds 1.
        let mut slots = Vec::new();
        for (ip, n) in [("10.0.0.1", 3), ("10.0.0.2", 2), ("10.0.0.3", 1)] {
            for _ in 0..n {
                slots.push((ip, slot(&accounting, ip, 6, 6).expect("a slot").0));
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        // 10.0.0.1's first connection moves bytes now: its second is the one idle longest.
        slots[0].1.activity().touch();
        let (newcomer, admitted) = slot(&accounting, "10.0.0.4", 6, 6).expect("room is made");
        assert_eq!(admitted, Admitted::Evicted);
        let closed: Vec<usize> = (0..slots.len()).filter(|&i| slots[i].1.activity().is_closed()).collect();
        assert_eq!(closed, [1], "10.0.0.1's longest-idle connection");
        assert_eq!((accounting.active("r1"), held_sum(&accounting)), (6, 6));
        // The closed connection's slot went to the newcomer: dropping it gives nothing back.
        slots.remove(1);
        assert_eq!(accounting.active("r1"), 6);
        // 10.0.0.3 (one) may still displace the largest holders (two each), by idle time.
        let (kept, admitted) = slot(&accounting, "10.0.0.3", 6, 6).expect("room is made");
        assert_eq!(admitted, Admitted::Evicted);
        // Now no client holds more than 10.0.0.3 (two): its next connection is refused.
        assert_eq!(slot(&accounting, "10.0.0.3", 6, 6).err(), Some(Refusal::RouteFull));
        assert_eq!((accounting.active("r1"), held_sum(&accounting)), (6, 6));
        drop((slots, newcomer, kept));
        assert_eq!((accounting.active("r1"), held_sum(&accounting)), (0, 0));
    }

    #[test]
    fn a_client_at_its_share_makes_no_room_on_a_full_route() {
        let accounting = Arc::new(Accounting::default());
        accounting.configure(["r1"], || {});
        let a: Vec<_> = (0..3).map(|_| slot(&accounting, "10.0.0.1", 4, 3).expect("a slot")).collect();
        let b = slot(&accounting, "10.0.0.2", 4, 3).expect("a slot");
        // The share was lowered (a new configuration) while 10.0.0.1 holds more than it: a
        // client at the new share is refused on the full route, though another holds more.
        assert_eq!(slot(&accounting, "10.0.0.2", 4, 1).err(), Some(Refusal::RouteFull));
        assert!(a.iter().all(|(s, _)| !s.activity().is_closed()));
        drop((a, b));
        assert_eq!((accounting.active("r1"), held_sum(&accounting)), (0, 0));
    }

    #[test]
    fn a_removed_routes_row_goes_with_its_last_connection_and_agent() {
        let accounting = Arc::new(Accounting::default());
        accounting.configure(["r1", "r2"], || {});
        let (slot, _) = accounting.acquire("r1", client("10.0.0.1"), 10, 10).expect("a slot");
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
