//! A redeploy's route switch through the gateway hosts following the feed (issue 41), as a
//! pure event loop over true time (ms). The decision is the relay's own code:
//! `relay-api/src/coordinator/engine/switch.rs` is included here as it is ([`rule::may_switch`]),
//! and the engine's step acts on its answer as `engine/redeploy.rs` does: wait; or mark the
//! hosts left out lagging, then flip the hosts' tables at a new feed sequence (the first
//! wait) or promote the successor and stop the predecessor once it has drained (the second,
//! or the first when no host is left to flip). Around it, the rest is modelled on the code:
//!
//! - the store (`store/feed.rs`): the feed sequence, each host's last report (that of its
//!   newest signed request: [`rule::newer_report`]), the hosts lagging (each with the route
//!   and the least feed sequence it waits for; a host rejoins as [`rule::rejoins`] says: no
//!   switch under way, a table at that sequence or later, the route's agents; a switch's end
//!   makes every host lagging wait for the route serving then, at a sequence moved on after
//!   it, `end_route_switch_serving`), the tables
//!   (`engine/routes.rs`: a flipped switch makes the successor serve on each host but a
//!   lagging one; a promotion, on every host);
//! - the feed (`coordinator/feed.rs`): a request naming the table its host serves is held
//!   until the table differs (woken by the sequence) or 20 s; each records its report first;
//! - each gateway host (`gateway-host/src/follow.rs`): asks with its report (the sequence of
//!   the table applied, its routes' agents), applies the answer's table and sequence, asks
//!   again at once (a new table) or a second after it asked (the same one); gives a held
//!   request up and asks again when its agents change (looked at every 50 ms); after a failed
//!   request, asks again after 1 s doubling to 30 s (less up to a quarter), naming no table;
//! - agents: each replica's agent tunnels to every host serving the deployment (a lagging one
//!   too), retrying while the host is frozen, dead or cut off from them;
//! - the engine steps every 250 ms, and at once after a host's report.
//!
//! Faults: 1-4 hosts; a host frozen (SIGSTOP: it neither asks, applies, looks nor accepts a
//! tunnel) for 0.3-15 s, killed (table, agents and request gone) and back after 1-20 s, its
//! agents cut off for 1-20 s, slow (its calls up to 0.5-3 s); an agent's tunnel dropped;
//! requests or answers lost (a quarter of them, for 1-10 s); 1-4 redeploys of 1-3 replicas.
//! A quarter of the seeds have no fault at all.
//!
//! Invariants, after every event (`docs/simulation.md`): a host offered for the deployment
//! (serving it, not lagging, not dead) sends a client to a route that is not stopped
//! (`stopped-route`) and whose agents have connected to it (`successor-early`; an agent
//! dropped since is a fault, not the switch's; either, by a host that rejoined and has not
//! settled since, is `rejoined-early`); a lagging host rejoins only once it reported the
//! route's agents and has them (`lagging-offered`); a switch ends within the two waits'
//! bound (`switch-stuck`), and, with every host well from its start to its end, within
//! [`rule::SWITCH_BOUND`] and with no host left out (`switch-slow`); the store never records
//! a host's report from a request older than the one whose report it recorded (`stale-report`:
//! a request given up may arrive after a newer one, and left a healthy host out of a switch).

#[path = "../../../relay-api/src/coordinator/engine/switch.rs"]
#[allow(dead_code, unreachable_pub, reason = "the relay's file, included as it is")]
mod rule;

use std::collections::{BTreeMap, BTreeSet};

use fastrand::Rng;
use relay_wire::feed::Report;
use rule::{HostAck, Lagging, SWITCH_BOUND, Switch, Want, may_switch, newer_report, rejoins};

use crate::trace::{Failure, Trace};

/// True time a seed runs.
const RUN_MS: i64 = 120_000;
/// The engine's tick (`engine.rs`'s `TICK`).
const TICK_MS: i64 = 250;
/// How often a host looks at its agents while a request is held (`follow.rs`'s `REPORT_LOOK`).
const REPORT_LOOK_MS: i64 = 50;
/// The least time between two requests answered with the same table (`follow.rs`).
const MIN_INTERVAL_MS: i64 = 1_000;
/// A failed request's first backoff, and the longest (`follow.rs`).
const FIRST_BACKOFF_MS: i64 = 1_000;
const MAX_BACKOFF_MS: i64 = 30_000;
/// How long the feed holds a request whose table has not changed (`FEED_WAIT_SECS`).
const FEED_WAIT_MS: i64 = 20_000;

fn bound_ms() -> i64 {
    i64::try_from(SWITCH_BOUND.as_millis()).unwrap_or(i64::MAX)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HostState {
    Up,
    Frozen,
    Dead,
}

/// A host's table, for the deployment: the route its hostnames send clients to, and the one
/// on standby (a successor before its flip; the predecessor after).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Table {
    serving: usize,
    standby: Option<usize>,
}

#[derive(Debug)]
struct Request {
    id: u64,
    asked: i64,
    report: Report,
}

#[derive(Debug)]
struct Host {
    name: String,
    state: HostState,
    /// The table applied, and the feed sequence it was read at.
    table: Option<Table>,
    applied: u64,
    /// Agents in rotation here, by route.
    agents: BTreeMap<usize, u32>,
    /// Routes whose agents have connected here.
    ever: BTreeSet<usize>,
    request: Option<Request>,
    failing: bool,
    backoff: i64,
    /// Its agents cannot reach it.
    cut: bool,
    /// Its calls take up to this long (0: 1-20 ms).
    slow_ms: i64,
    /// The route it rejoined the deployment's hosts on (its report named that route's agents,
    /// the route it lagged behind), until it is settled ([`World::settle`]).
    rejoined: Option<usize>,
    /// What reached it while frozen: handled when it thaws.
    parked: Vec<Event>,
}

#[derive(Debug)]
struct Route {
    id: String,
    replicas: u32,
    stopped_at: Option<i64>,
}

#[derive(Debug, Clone, Copy)]
enum Phase {
    Validating { passes_at: i64 },
    Switching { began: i64, flipped: Option<(u64, i64)>, faulted: bool, left_out: bool },
}

#[derive(Debug, Clone, Copy)]
struct Successor {
    route: usize,
    phase: Phase,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Event {
    Tick,
    Wake,
    /// Host `h` asks the feed.
    Ask(usize),
    /// Host `h`'s request `id` reaches the coordinator, naming the table it serves.
    Arrive {
        h: usize,
        id: u64,
        /// When the host signed it.
        at: i64,
        after: Option<Table>,
        report: Report,
    },
    /// The feed's hold of request `id` is up.
    HoldEnd {
        h: usize,
        id: u64,
    },
    /// An answer reaches host `h`.
    Answer {
        h: usize,
        id: u64,
        table: Table,
        seq: u64,
    },
    /// Host `h`'s request `id` failed (it or its answer was lost).
    Failed {
        h: usize,
        id: u64,
    },
    /// Host `h` looks at its agents while request `id` is out.
    Look {
        h: usize,
        id: u64,
    },
    /// An agent of route `r` tries to tunnel to host `h`.
    Connect {
        h: usize,
        r: usize,
    },
    /// Route `r`'s job has drained and stops.
    Stop(usize),
    Deploy,
    Freeze(usize, i64),
    Thaw(usize),
    Kill(usize, i64),
    Restart(usize),
    Cut(usize, i64),
    Uncut(usize),
    SlowHost(usize, i64),
    /// An agent's tunnel drops (picked among those up).
    Drop(usize),
    Lossy(bool),
}

struct World {
    rng: Rng,
    now: i64,
    queue: BTreeMap<(i64, u64), Event>,
    n: u64,
    trace: Trace,
    hosts: Vec<Host>,
    routes: Vec<Route>,
    /// The deployment's route.
    current: usize,
    successor: Option<Successor>,
    // The store.
    seq: u64,
    reports: BTreeMap<usize, Report>,
    /// Hosts lagging, with the route they wait for and the least feed sequence of the table
    /// they must have applied (`lagging_hosts`'s `route_id` and `min_seq`).
    lagging: BTreeMap<usize, (usize, u64)>,
    /// What the hosts' tables were last made of (`feed_digest`).
    digest: Digest,
    /// Requests the feed holds, each on its own (a host that gave one up may have another
    /// held): by request, its host and the table it named.
    held: BTreeMap<u64, (usize, Option<Table>)>,
    next_id: u64,
    lossy: bool,
    /// Switches done.
    switches: u32,
    /// By host, the last request whose report the store recorded.
    recorded: BTreeMap<usize, u64>,
    /// By host, when the request whose report the store recorded was signed (`signed_at`).
    recorded_at: BTreeMap<usize, i64>,
}

type Broken = (&'static str, String);

/// The deployment's route, the switch under way (its route, the flip's sequence) and the
/// hosts lagging.
type Digest = (usize, Option<(usize, Option<u64>)>, Vec<(usize, usize)>);

impl World {
    fn at(&mut self, t: i64, event: Event) {
        self.n += 1;
        self.queue.insert((t, self.n), event);
    }

    fn log(&mut self, line: impl std::fmt::Display) {
        let at = u64::try_from(self.now).unwrap_or(0);
        self.trace.push(at, line);
    }

    fn route(&self, r: usize) -> &str {
        &self.routes[r].id
    }

    /// How long one way of host `h`'s call takes.
    fn latency(&mut self, h: usize) -> i64 {
        let slow = self.hosts[h].slow_ms;
        if slow > 0 { self.rng.i64(1..=slow) } else { self.rng.i64(1..=20) }
    }

    fn lost(&mut self) -> bool {
        self.lossy && self.rng.u8(0..4) == 0
    }

    /// The table the feed gives host `h` now (`engine/routes.rs`).
    fn table_for(&self, h: usize) -> Table {
        let flipped = match self.successor {
            Some(Successor { route, phase: Phase::Switching { flipped: Some(_), .. } })
                if !self.lagging.contains_key(&h) =>
            {
                Some(route)
            }
            _ => None,
        };
        match (flipped, self.successor) {
            (Some(route), _) => Table { serving: route, standby: Some(self.current) },
            (None, Some(s)) => Table { serving: self.current, standby: Some(s.route) },
            (None, None) => Table { serving: self.current, standby: None },
        }
    }

    fn report_of(&self, h: usize) -> Report {
        let host = &self.hosts[h];
        let mut agents: Vec<(String, u32)> =
            host.agents.iter().filter(|&(_, &n)| n > 0).map(|(&r, &n)| (self.routes[r].id.clone(), n)).collect();
        agents.sort();
        Report { applied: host.applied, agents }
    }

    /// Host `h`'s agents changed: its request out is looked at when its 50 ms sleep next
    /// ends (counted from when it asked).
    fn agents_changed(&mut self, h: usize) {
        if let Some((id, asked)) = self.hosts[h].request.as_ref().map(|r| (r.id, r.asked)) {
            let looks = (self.now - asked) / REPORT_LOOK_MS + 1;
            self.at(asked + looks * REPORT_LOOK_MS, Event::Look { h, id });
        }
    }

    /// The feed answers host `h`'s request `id` with its table now.
    fn respond(&mut self, h: usize, id: u64) {
        let table = self.table_for(h);
        let back = self.now + self.latency(h);
        if self.lost() {
            self.at(back, Event::Failed { h, id });
        } else {
            let seq = self.seq;
            self.at(back, Event::Answer { h, id, table, seq });
        }
    }

    /// The held requests whose table differs now are answered (the feed's sequence moved).
    fn wake_held(&mut self) {
        let held: Vec<(u64, usize, Option<Table>)> =
            self.held.iter().map(|(&id, (h, t))| (id, *h, t.clone())).collect();
        for (id, h, after) in held {
            if after.as_ref() != Some(&self.table_for(h)) {
                self.held.remove(&id);
                self.respond(h, id);
            }
        }
    }

    /// `sync_routes`: when what a host's table is made of changed, the sequence moves on.
    fn sync(&mut self) {
        let switch = self.successor.map(|s| {
            let flipped = match s.phase {
                Phase::Switching { flipped: Some((seq, _)), .. } => Some(seq),
                _ => None,
            };
            (s.route, flipped)
        });
        let digest = (self.current, switch, self.lagging.iter().map(|(&h, &(r, _))| (h, r)).collect());
        if digest != self.digest {
            self.digest = digest;
            self.seq += 1;
            self.wake_held();
        }
    }

    /// One step of the engine (`engine/redeploy.rs`): the successor's validation, then its
    /// switch, with the relay's `may_switch`.
    fn engine(&mut self) -> Result<(), Broken> {
        let now = self.now;
        let Some(mut s) = self.successor else { return Ok(()) };
        if let Phase::Validating { passes_at } = s.phase {
            if now < passes_at {
                return Ok(());
            }
            let faulted = self.unwell();
            s.phase = Phase::Switching { began: now, flipped: None, faulted, left_out: false };
            self.successor = Some(s);
            let well = if faulted { "" } else { ", every host well" };
            self.log(format!("{} validated: its switch begins{well}", self.route(s.route)));
        }
        let Phase::Switching { began, flipped, faulted, left_out } = s.phase else { return Ok(()) };
        let hosts: Vec<HostAck> = (0..self.hosts.len())
            .filter(|h| !self.lagging.contains_key(h))
            .map(|h| HostAck { operator_id: self.hosts[h].name.clone(), report: self.reports.get(&h).cloned() })
            .collect();
        let route_id = self.routes[s.route].id.clone();
        let replicas = self.routes[s.route].replicas.max(1);
        let want = match flipped {
            None => Want { route_id, agents: replicas, seq: 0, since_ms: began },
            Some((seq, at)) => Want { route_id, agents: 1, seq, since_ms: at },
        };
        let lagging = match may_switch(&hosts, &want, now) {
            Switch::Wait { .. } => return Ok(()),
            Switch::Go { lagging } => lagging,
        };
        let left: Vec<usize> =
            lagging.iter().filter_map(|name| self.hosts.iter().position(|h| &h.name == name)).collect();
        if !left.is_empty() {
            for &h in &left {
                // `mark_lagging`: the route, and the feed sequence now.
                self.lagging.insert(h, (s.route, self.seq));
                self.hosts[h].rejoined = None;
            }
            self.log(format!(
                "gateway hosts {} did not have {} within {} s: lagging",
                lagging.join(", "),
                self.route(s.route),
                SWITCH_BOUND.as_secs()
            ));
        }
        let left_out = left_out || !left.is_empty();
        let remaining = hosts.len() - left.len();
        if flipped.is_none() && remaining > 0 {
            self.seq += 1;
            let seq = self.seq;
            s.phase = Phase::Switching { began, flipped: Some((seq, now)), faulted, left_out };
            self.successor = Some(s);
            self.log(format!("the hosts' tables flip to {} at seq {seq}", self.route(s.route)));
            self.wake_held();
            return Ok(());
        }
        // Take over: the successor is the deployment's route; the predecessor drains (its
        // open connections end; 1 s at least) and stops.
        let predecessor = self.current;
        self.current = s.route;
        self.successor = None;
        // `end_route_switch_serving`: the switch ends, and each host lagging waits for the
        // successor's agents and a table from after its promotion, at a new sequence.
        self.seq += 1;
        let end = self.seq;
        for lag in self.lagging.values_mut() {
            *lag = (s.route, end);
        }
        self.wake_held();
        let took = now - began;
        self.log(format!(
            "{} promoted {took} ms after its validation; {} drains and stops",
            self.route(s.route),
            self.route(predecessor)
        ));
        let drain = now + self.rng.i64(1_000..=3_000);
        self.at(drain, Event::Stop(predecessor));
        self.switches += 1;
        if !faulted && (left_out || took > bound_ms()) {
            return Err((
                "switch-slow",
                format!(
                    "every host was well, yet the switch to {} took {took} ms{}",
                    self.route(s.route),
                    if left_out { " and left a host out" } else { "" }
                ),
            ));
        }
        Ok(())
    }

    /// Whether a host or the network is not well now (a switch beginning now is not held to
    /// the healthy bound).
    fn unwell(&self) -> bool {
        self.lossy
            || self
                .hosts
                .iter()
                .any(|h| h.state != HostState::Up || h.failing || h.cut || h.slow_ms > 0 || !h.parked.is_empty())
    }

    /// A fault happened: a switch under way is no longer held to the healthy bound.
    fn fault(&mut self) {
        if let Some(Successor { phase: Phase::Switching { faulted, .. }, .. }) = &mut self.successor {
            *faulted = true;
        }
    }

    fn ask(&mut self, h: usize) {
        if self.hosts[h].state != HostState::Up || self.hosts[h].request.is_some() {
            return;
        }
        self.next_id += 1;
        let id = self.next_id;
        let report = self.report_of(h);
        let after = if self.hosts[h].failing { None } else { self.hosts[h].table.clone() };
        self.hosts[h].request = Some(Request { id, asked: self.now, report: report.clone() });
        let there = self.now + self.latency(h);
        if self.lost() {
            let back = there + self.latency(h);
            self.at(back, Event::Failed { h, id });
        } else {
            let at = self.now;
            self.at(there, Event::Arrive { h, id, at, after, report });
        }
    }

    fn handle(&mut self, event: Event) -> Result<(), Broken> {
        let now = self.now;
        // A frozen host handles nothing of its own until it thaws.
        let parks = match &event {
            Event::Ask(h) | Event::Answer { h, .. } | Event::Failed { h, .. } | Event::Look { h, .. } => Some(*h),
            _ => None,
        };
        if let Some(h) = parks {
            match self.hosts[h].state {
                HostState::Frozen => {
                    self.hosts[h].parked.push(event);
                    return Ok(());
                }
                HostState::Dead => return Ok(()),
                HostState::Up => {}
            }
        }
        match event {
            Event::Tick => {
                // Between redeploys a tick has nothing to do: a rejoin's change is synced at
                // the wake its report brings.
                if self.successor.is_some() {
                    self.engine()?;
                    self.sync();
                }
                self.at(now + TICK_MS, Event::Tick);
            }
            Event::Wake => {
                self.engine()?;
                self.sync();
            }
            Event::Ask(h) => self.ask(h),
            Event::Arrive { h, id, at, after, report } => {
                // `record_feed_request`: the report, if its request was signed after the one
                // recorded; and a lagging host rejoins as the relay's `rejoins` says.
                if newer_report(at, self.recorded_at.get(&h).copied()) {
                    self.recorded_at.insert(h, at);
                    let newest = self.recorded.get(&h).copied().unwrap_or(0);
                    if id < newest {
                        return Err((
                            "stale-report",
                            format!(
                                "{}'s request {id}, given up, arrived after its request {newest}, and its older \
                                 report replaced the newer",
                                self.hosts[h].name
                            ),
                        ));
                    }
                    self.recorded.insert(h, id);
                    let under_way = matches!(self.successor, Some(Successor { phase: Phase::Switching { .. }, .. }));
                    if let Some(&(r, seq)) = self.lagging.get(&h)
                        && rejoins(&Lagging { route_id: self.routes[r].id.clone(), seq }, &report, under_way)
                    {
                        self.lagging.remove(&h);
                        self.hosts[h].rejoined = Some(r);
                        self.log(format!(
                            "{} reports {} agent(s) of {} (applied seq {}, at least {seq}): it rejoins",
                            self.hosts[h].name,
                            report.agents_of(&self.routes[r].id),
                            self.route(r),
                            report.applied
                        ));
                        if !self.hosts[h].ever.contains(&r) {
                            return Err((
                                "lagging-offered",
                                format!(
                                    "{} rejoined without ever having {}'s agents",
                                    self.hosts[h].name,
                                    self.route(r)
                                ),
                            ));
                        }
                    }
                    self.reports.insert(h, report);
                } else {
                    self.log(format!(
                        "{}'s request {id}, given up, arrives after a newer one: its report is not recorded",
                        self.hosts[h].name
                    ));
                }
                let wake = now + self.rng.i64(0..=5);
                self.at(wake, Event::Wake);
                if after.as_ref() == Some(&self.table_for(h)) {
                    self.held.insert(id, (h, after));
                    self.at(now + FEED_WAIT_MS, Event::HoldEnd { h, id });
                } else {
                    self.respond(h, id);
                }
            }
            Event::HoldEnd { h, id } => {
                if self.held.remove(&id).is_some() {
                    self.respond(h, id);
                }
            }
            Event::Answer { h, id, table, seq } => {
                let Some(request) = self.hosts[h].request.take_if(|r| r.id == id) else { return Ok(()) };
                let host = &mut self.hosts[h];
                let new = host.table.as_ref() != Some(&table);
                if new {
                    host.table = Some(table.clone());
                }
                host.applied = seq;
                host.failing = false;
                host.backoff = FIRST_BACKOFF_MS;
                let name = host.name.clone();
                if new {
                    let line = format!(
                        "{name} applies seq {seq}: {} serves{}",
                        self.route(table.serving),
                        table.standby.map(|r| format!(", {} stands by", self.route(r))).unwrap_or_default()
                    );
                    self.log(line);
                }
                let next = if new { now } else { (request.asked + MIN_INTERVAL_MS).max(now) };
                self.at(next, Event::Ask(h));
            }
            Event::Failed { h, id } => {
                if self.hosts[h].request.take_if(|r| r.id == id).is_none() {
                    return Ok(());
                }
                let backoff = self.hosts[h].backoff;
                let wait = backoff - self.rng.i64(0..=backoff / 4);
                let host = &mut self.hosts[h];
                host.failing = true;
                host.backoff = (backoff * 2).min(MAX_BACKOFF_MS);
                let name = host.name.clone();
                self.log(format!("{name}'s feed request failed: asks again in {wait} ms"));
                self.at(now + wait, Event::Ask(h));
            }
            Event::Look { h, id } => {
                let current = self.report_of(h).agents;
                let host = &mut self.hosts[h];
                if host.request.as_ref().is_some_and(|r| r.id == id && r.report.agents != current) {
                    host.request = None;
                    self.ask(h);
                }
            }
            Event::Connect { h, r } => {
                if self.routes[r].stopped_at.is_some() {
                    return Ok(());
                }
                let host = &self.hosts[h];
                if host.state != HostState::Up || host.cut {
                    let retry = now + self.rng.i64(300..=1_500);
                    self.at(retry, Event::Connect { h, r });
                    return Ok(());
                }
                let replicas = self.routes[r].replicas;
                let host = &mut self.hosts[h];
                let n = host.agents.entry(r).or_insert(0);
                if *n < replicas {
                    *n += 1;
                    host.ever.insert(r);
                    let line =
                        format!("an agent of {} tunnels to {} ({} of {replicas})", self.routes[r].id, host.name, *n);
                    self.log(line);
                    self.agents_changed(h);
                }
            }
            Event::Stop(r) => {
                self.routes[r].stopped_at = Some(now);
                self.log(format!("{} stopped", self.route(r)));
                for h in 0..self.hosts.len() {
                    if self.hosts[h].agents.remove(&r).is_some() {
                        self.agents_changed(h);
                    }
                }
            }
            Event::Deploy => {
                if self.successor.is_some() {
                    return Ok(());
                }
                let r = self.routes.len();
                let replicas = self.rng.u32(1..=3);
                self.routes.push(Route { id: format!("rt_{r}"), replicas, stopped_at: None });
                let passes_at = now + self.rng.i64(500..=5_000);
                self.successor = Some(Successor { route: r, phase: Phase::Validating { passes_at } });
                self.log(format!("redeploy: {} ({replicas} replica(s)) launches", self.route(r)));
                self.launch(r);
            }
            Event::Freeze(h, ms) => {
                if self.hosts[h].state == HostState::Up {
                    self.fault();
                    self.hosts[h].state = HostState::Frozen;
                    self.log(format!("{} frozen for {ms} ms", self.hosts[h].name));
                    self.at(now + ms, Event::Thaw(h));
                }
            }
            Event::Thaw(h) => {
                if self.hosts[h].state == HostState::Frozen {
                    self.fault();
                    self.hosts[h].state = HostState::Up;
                    self.log(format!("{} thaws", self.hosts[h].name));
                    for parked in std::mem::take(&mut self.hosts[h].parked) {
                        self.at(now, parked);
                    }
                    if let Some(id) = self.hosts[h].request.as_ref().map(|r| r.id) {
                        self.at(now + 1, Event::Look { h, id });
                    }
                }
            }
            Event::Kill(h, ms) => {
                if self.hosts[h].state == HostState::Dead {
                    return Ok(());
                }
                self.fault();
                let host = &mut self.hosts[h];
                host.state = HostState::Dead;
                host.table = None;
                host.applied = 0;
                host.request = None;
                host.failing = false;
                host.backoff = FIRST_BACKOFF_MS;
                host.parked.clear();
                let tunnels: Vec<(usize, u32)> = std::mem::take(&mut host.agents).into_iter().collect();
                self.held.retain(|_, (held, _)| *held != h);
                self.log(format!("kill -9 {}: back in {ms} ms", self.hosts[h].name));
                for (r, n) in tunnels {
                    for _ in 0..n {
                        let retry = now + self.rng.i64(300..=1_500);
                        self.at(retry, Event::Connect { h, r });
                    }
                }
                self.at(now + ms, Event::Restart(h));
            }
            Event::Restart(h) => {
                self.fault();
                self.hosts[h].state = HostState::Up;
                self.log(format!("{} starts again", self.hosts[h].name));
                self.ask(h);
            }
            Event::Cut(h, ms) => {
                self.fault();
                self.hosts[h].cut = true;
                self.log(format!("{}'s agents cannot reach it for {ms} ms", self.hosts[h].name));
                self.at(now + ms, Event::Uncut(h));
            }
            Event::Uncut(h) => {
                self.hosts[h].cut = false;
            }
            Event::SlowHost(h, ms) => {
                self.fault();
                self.hosts[h].slow_ms = ms;
                self.log(format!("{}'s calls take up to {ms} ms", self.hosts[h].name));
            }
            Event::Drop(pick) => {
                let up: Vec<(usize, usize)> = (0..self.hosts.len())
                    .flat_map(|h| self.hosts[h].agents.iter().filter(|&(_, &n)| n > 0).map(move |(&r, _)| (h, r)))
                    .collect();
                if up.is_empty() {
                    return Ok(());
                }
                self.fault();
                let (h, r) = up[pick % up.len()];
                if let Some(n) = self.hosts[h].agents.get_mut(&r) {
                    *n -= 1;
                }
                self.log(format!("an agent of {} loses its tunnel to {}", self.route(r), self.hosts[h].name));
                self.agents_changed(h);
                let back = now + self.rng.i64(200..=5_000);
                self.at(back, Event::Connect { h, r });
            }
            Event::Lossy(on) => {
                self.fault();
                self.lossy = on;
                self.log(if on { "a quarter of feed calls are lost" } else { "feed calls arrive" });
            }
        }
        Ok(())
    }

    /// Route `r`'s job starts: each replica's agent tunnels to every host.
    fn launch(&mut self, r: usize) {
        for h in 0..self.hosts.len() {
            for _ in 0..self.routes[r].replicas {
                let t = self.now + self.rng.i64(200..=3_000);
                self.at(t, Event::Connect { h, r });
            }
        }
    }

    /// A host that rejoined is settled once its table serves the deployment's route, with
    /// agents here, and no switch has flipped the tables (one that did, did not wait for it).
    fn settle(&mut self) {
        let flipped =
            matches!(self.successor, Some(Successor { phase: Phase::Switching { flipped: Some(_), .. }, .. }));
        for host in &mut self.hosts {
            let serving = host.table.as_ref().map(|t| t.serving);
            if host.rejoined.is_some()
                && !flipped
                && serving == Some(self.current)
                && host.agents.get(&self.current).is_some_and(|&n| n > 0)
            {
                host.rejoined = None;
            }
        }
    }

    /// What a client finds through each host offered for the deployment, and the bound on a
    /// switch's waits.
    fn check(&self) -> Result<(), Broken> {
        for (h, host) in self.hosts.iter().enumerate() {
            if self.lagging.contains_key(&h) || host.state == HostState::Dead {
                continue;
            }
            let Some(table) = &host.table else { continue };
            let r = table.serving;
            if let Some(stopped) = self.routes[r].stopped_at {
                return Err((
                    if host.rejoined.is_some() { "rejoined-early" } else { "stopped-route" },
                    format!(
                        "{} is offered and sends clients to {}, stopped {} ms ago (it applied seq {})",
                        host.name,
                        self.route(r),
                        self.now - stopped,
                        host.applied
                    ),
                ));
            }
            if host.agents.get(&r).copied().unwrap_or(0) == 0 && !host.ever.contains(&r) {
                return Err((
                    if host.rejoined.is_some() { "rejoined-early" } else { "successor-early" },
                    format!(
                        "{} is offered and sends clients to {}, whose agents never connected to it",
                        host.name,
                        self.route(r)
                    ),
                ));
            }
        }
        if let Some(Successor { route, phase: Phase::Switching { began, .. } }) = self.successor {
            // Two waits of the bound each, each ended at the engine's next tick.
            if self.now - began > 2 * (bound_ms() + TICK_MS) {
                return Err((
                    "switch-stuck",
                    format!("the switch to {} is not done {} ms after it began", self.route(route), self.now - began),
                ));
            }
        }
        Ok(())
    }
}

/// Runs seed `seed` of the route switch: its trace, and the first invariant broken.
fn simulate(seed: u64) -> (Trace, Result<(), Failure>) {
    // Another stream than the other parts' for the same seed.
    let mut rng = Rng::with_seed(seed ^ 0x7377_6974_6368_0000);
    let count = rng.usize(1..=4);
    let replicas = rng.u32(1..=2);
    let mut w = World {
        rng,
        now: 0,
        queue: BTreeMap::new(),
        n: 0,
        trace: Trace::default(),
        hosts: Vec::new(),
        routes: vec![Route { id: "rt_0".into(), replicas, stopped_at: None }],
        current: 0,
        successor: None,
        seq: 1,
        reports: BTreeMap::new(),
        lagging: BTreeMap::new(),
        digest: (0, None, Vec::new()),
        held: BTreeMap::new(),
        next_id: 0,
        lossy: false,
        switches: 0,
        recorded: BTreeMap::new(),
        recorded_at: BTreeMap::new(),
    };
    // Every host serves the first route, its agents in rotation, and follows the feed.
    for h in 0..count {
        let name = format!("op_{}", char::from(b'a' + u8::try_from(h).unwrap_or(0)));
        w.hosts.push(Host {
            name,
            state: HostState::Up,
            table: Some(Table { serving: 0, standby: None }),
            applied: 1,
            agents: BTreeMap::from([(0, replicas)]),
            ever: BTreeSet::from([0]),
            request: None,
            failing: false,
            backoff: FIRST_BACKOFF_MS,
            cut: false,
            slow_ms: 0,
            rejoined: None,
            parked: Vec::new(),
        });
        let t = w.rng.i64(0..=50);
        w.at(t, Event::Ask(h));
    }
    w.log(format!("{count} gateway host(s); rt_0 ({replicas} replica(s)) serves"));
    w.at(0, Event::Tick);
    let deploys = w.rng.usize(1..=4);
    for _ in 0..deploys {
        let t = w.rng.i64(1_000..=RUN_MS - 30_000);
        w.at(t, Event::Deploy);
    }
    // A quarter of the seeds: no fault, every switch held to the healthy bound.
    if w.rng.u8(0..4) != 0 {
        let mut t = 0;
        while t < RUN_MS {
            t += w.rng.i64(500..=8_000);
            let h = w.rng.usize(0..count);
            let event = match w.rng.u8(0..12) {
                0..=2 => Event::Freeze(h, w.rng.i64(300..=15_000)),
                3 | 4 => Event::Kill(h, w.rng.i64(1_000..=20_000)),
                5 => Event::Cut(h, w.rng.i64(1_000..=20_000)),
                6 => Event::SlowHost(h, [0, 0, 500, 3_000][w.rng.usize(0..4)]),
                7 | 8 => Event::Drop(w.rng.usize(..)),
                9 => {
                    let end = t + w.rng.i64(1_000..=10_000);
                    w.at(end, Event::Lossy(false));
                    Event::Lossy(true)
                }
                _ => Event::Deploy,
            };
            w.at(t, event);
        }
    }
    let mut outcome = Ok(());
    while let Some(((at, _), event)) = w.queue.pop_first() {
        if at > RUN_MS {
            break;
        }
        w.now = at;
        if let Err(broken) = w.handle(event).and_then(|()| {
            w.settle();
            w.check()
        }) {
            outcome = Err(broken);
            break;
        }
    }
    let switches = w.switches;
    w.log(format!("{switches} switch(es) done"));
    let trace = w.trace.clone();
    let outcome =
        outcome.map_err(|(code, invariant)| Failure { part: "switch", seed, code, invariant, trace: w.trace });
    (trace, outcome)
}

/// Runs seed `seed` of the route switch.
pub fn run(seed: u64) -> Result<(), Failure> {
    simulate(seed).1
}

/// Runs seed `seed` of the route switch, and returns its whole trace too (`--seed`).
pub fn replay(seed: u64) -> (Trace, Result<(), Failure>) {
    simulate(seed)
}
