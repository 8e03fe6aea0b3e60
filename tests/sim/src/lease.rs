//! The relay's engine lease between several coordinators on one database, as a pure event
//! loop over true time (ms). The rule is the relay's own code: `relay-api`'s `lease_rule.rs`
//! is included here as it is ([`rule::grant`] for the database, [`rule::OwnClock`] for each
//! holder), and each coordinator runs the loops of `engine/lease.rs`: standing by, it tries
//! at once and then every `STANDBY_POLL` after each try ends; holding, it renews every
//! `RENEW` after each try ends; a refusal while holding is the lease lost (it stands by
//! again); a failed call changes nothing. Faults: each coordinator's clock is skewed
//! (±500 ms) and drifts (±1%), the database's too; calls take 1-20 ms, or up to 2 s in slow
//! spells (the database decides at a random point of the call); the database is down for
//! 0-15 s at a time; coordinators are killed (kill -9: its answers are lost, a request
//! already sent still reaches the database) and others start.
//!
//! Invariants, at every event: no two coordinators believe they may step at one true
//! instant; the lease does not move from a live holder whose tries reached the database
//! within the last two leases (10 s) by the database's clock; a dead holder's lease is taken within [`TAKEOVER_BOUND_MS`] of its death when
//! another coordinator lives and the database is up meanwhile.

#[path = "../../../relay-api/src/coordinator/lease_rule.rs"]
#[allow(dead_code, unreachable_pub, reason = "the relay's file, included as it is")]
mod rule;

use std::collections::BTreeMap;
use std::ops::Add;
use std::time::Duration;

use fastrand::Rng;

use crate::trace::{Failure, Trace};

/// How long a dead holder's lease may take to move: `docs/scale-out.md` (a kill -9 hands the
/// jobs over within 12 s).
pub const TAKEOVER_BOUND_MS: i64 = 12_000;
/// True time a seed runs.
const RUN_MS: i64 = 180_000;

/// A coordinator's own clock reading, ms (the `Instant` of `engine/lease.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Own(i64);

impl Add<Duration> for Own {
    type Output = Own;
    fn add(self, d: Duration) -> Own {
        Own(self.0 + i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
    }
}

/// A clock: skew plus drift over true time.
#[derive(Debug, Clone, Copy)]
struct ClockModel {
    skew_ms: i64,
    drift_ppm: i64,
}

impl ClockModel {
    fn random(rng: &mut Rng) -> ClockModel {
        ClockModel { skew_ms: rng.i64(-500..=500), drift_ppm: rng.i64(-10_000..=10_000) }
    }
    fn at(self, t: i64) -> i64 {
        t + self.skew_ms + t * self.drift_ppm / 1_000_000
    }
}

#[derive(Debug)]
struct Coordinator {
    name: String,
    clock: ClockModel,
    alive: bool,
    /// Holding the lease (renewing), as opposed to standing by.
    leading: bool,
    lost: bool,
    own: rule::OwnClock<Own>,
    /// A try in flight: its start by the coordinator's clock.
    in_flight: Option<Own>,
    /// When its last try reached the database (decided while it was up), by the database's
    /// clock: a holder's renewal then set `expires_at` to that plus the lease.
    reached_db: Option<i64>,
}

impl Coordinator {
    /// Whether it believes it may step at true time `t`.
    fn steps(&self, t: i64) -> bool {
        self.alive && self.leading && !self.lost && self.own.valid(Own(self.clock.at(t)))
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Event {
    /// Coordinator `i` starts a try.
    Try(usize),
    /// The database decides coordinator `i`'s try.
    Decide(usize),
    /// Coordinator `i` gets the answer (`None`: the call failed).
    Answer(usize, Option<bool>),
    Kill(usize),
    Start,
    OutageStart(i64),
    OutageEnd,
    Slow(i64),
}

struct World {
    rng: Rng,
    now: i64,
    queue: BTreeMap<(i64, u64), Event>,
    seq: u64,
    db_clock: ClockModel,
    row: Option<rule::LeaseRow>,
    db_down: bool,
    slow_ms: i64,
    coordinators: Vec<Coordinator>,
    /// The longest outage so far.
    longest_outage: i64,
    outage_since: Option<i64>,
    /// Outages overlap [from, to): for the takeover bound.
    outages: Vec<(i64, i64)>,
    /// When the row's holder died (true time), while its row stays.
    holder_died_at: Option<i64>,
    trace: Trace,
    started: u32,
    /// The slowest call allowed since the holder died (ms): each slow call of the standby's
    /// last two tries delays a takeover by up to that much.
    slow_since_death: i64,
    /// Each try in flight: when its answer comes (the queue's key).
    pending: BTreeMap<usize, (i64, u64)>,
}

impl World {
    fn at(&mut self, t: i64, event: Event) {
        self.seq += 1;
        self.queue.insert((t, self.seq), event);
    }

    fn log(&mut self, line: impl std::fmt::Display) {
        let at = u64::try_from(self.now).unwrap_or(0);
        self.trace.push(at, line);
    }

    fn start_coordinator(&mut self) {
        self.started += 1;
        let c = Coordinator {
            name: format!("c{}", self.started),
            clock: ClockModel::random(&mut self.rng),
            alive: true,
            leading: false,
            lost: false,
            own: rule::OwnClock::default(),
            in_flight: None,
            reached_db: None,
        };
        self.log(format!("{} starts (skew {} ms, drift {} ppm)", c.name, c.clock.skew_ms, c.clock.drift_ppm));
        self.coordinators.push(c);
        let i = self.coordinators.len() - 1;
        let now = self.now;
        self.at(now, Event::Try(i));
    }

    /// How long a call takes, and when in it the database decides.
    fn call_times(&mut self) -> (i64, i64) {
        let total = if self.slow_ms > 0 { self.rng.i64(1..=self.slow_ms) } else { self.rng.i64(1..=20) };
        let decide = self.rng.i64(0..=total);
        (decide, total)
    }

    fn handle(&mut self, event: Event) -> Result<(), (&'static str, String)> {
        let now = self.now;
        match event {
            Event::Try(i) => {
                let c = &mut self.coordinators[i];
                if !c.alive {
                    return Ok(());
                }
                c.in_flight = Some(Own(c.clock.at(now)));
                let (decide, total) = self.call_times();
                self.at(now + decide, Event::Decide(i));
                // The answer is scheduled when the database decides (or fails).
                self.seq += 1;
                let key = (now + total, self.seq);
                self.pending.insert(i, key);
            }
            Event::Decide(i) => {
                let key = self.pending.remove(&i).unwrap_or((now, 0));
                let answer = if self.db_down {
                    None
                } else {
                    let holder = self.coordinators[i].name.clone();
                    let db_now = self.db_clock.at(now);
                    self.coordinators[i].reached_db = Some(db_now);
                    let g = rule::grant(self.row.as_ref(), &holder, 443, db_now, rule::LEASE_MS);
                    let before = self.row.as_ref().map(|r| r.holder.clone());
                    if g.held && before.as_deref() != Some(holder.as_str()) {
                        self.moved(before, &holder)?;
                    }
                    self.row = g.row;
                    Some(g.held)
                };
                self.queue.insert(key, Event::Answer(i, answer));
            }
            Event::Answer(i, answer) => {
                let c = &mut self.coordinators[i];
                let Some(started) = c.in_flight.take() else { return Ok(()) };
                if !c.alive {
                    return Ok(());
                }
                let wait = if c.leading { rule::RENEW } else { rule::STANDBY_POLL };
                match answer {
                    Some(true) => {
                        c.own.renewed(started);
                        c.lost = false;
                        if !c.leading {
                            c.leading = true;
                            let name = c.name.clone();
                            self.log(format!("{name} takes the lease and leads"));
                        }
                    }
                    Some(false) if c.leading => {
                        c.lost = true;
                        c.leading = false;
                        let name = c.name.clone();
                        self.log(format!("{name} lost the lease: stands by"));
                    }
                    Some(false) | None => {}
                }
                let wait = i64::try_from(wait.as_millis()).unwrap_or(0);
                self.at(now + wait, Event::Try(i));
            }
            Event::Kill(pick) => {
                let alive: Vec<usize> = (0..self.coordinators.len()).filter(|&i| self.coordinators[i].alive).collect();
                if alive.is_empty() {
                    return Ok(());
                }
                let i = alive[pick % alive.len()];
                self.coordinators[i].alive = false;
                let name = self.coordinators[i].name.clone();
                self.log(format!("kill -9 {name}"));
                if self.row.as_ref().is_some_and(|r| r.holder == name) {
                    self.holder_died_at = Some(now);
                    self.slow_since_death = self.slow_ms;
                }
            }
            Event::Start => {
                // The bound counts from when a coordinator lives to take the lease over.
                if self.holder_died_at.is_some() && !self.coordinators.iter().any(|c| c.alive) {
                    self.holder_died_at = Some(now);
                }
                self.start_coordinator();
            }
            Event::OutageStart(ms) => {
                if !self.db_down {
                    self.db_down = true;
                    self.outage_since = Some(now);
                    self.log(format!("database down for {ms} ms"));
                    self.at(now + ms, Event::OutageEnd);
                }
            }
            Event::OutageEnd => {
                self.db_down = false;
                if let Some(since) = self.outage_since.take() {
                    self.longest_outage = self.longest_outage.max(now - since);
                    self.outages.push((since, now));
                }
                self.log("database up");
            }
            Event::Slow(ms) => {
                self.slow_ms = ms;
                self.slow_since_death = self.slow_since_death.max(ms);
                self.log(format!("calls take up to {ms} ms"));
            }
        }
        Ok(())
    }

    /// The row's holder changes from `before` to `holder`.
    fn moved(&mut self, before: Option<String>, holder: &str) -> Result<(), (&'static str, String)> {
        let now = self.now;
        self.log(format!("the database grants the lease to {holder} (was {before:?})"));
        let Some(before) = before else { return Ok(()) };
        let previous = self.coordinators.iter().find(|c| c.name == before && c.alive);
        if let Some(previous) = previous {
            // The guarantee: the holder keeps the lease while its tries reach the database at
            // least once every two leases (its last renewal set `expires_at` a lease on; another
            // may take it a lease after that), by the database's clock. Not each outage: the
            // holder may miss a short gap between two (a second's wait and two calls).
            let unreached = self.db_clock.at(now) - previous.reached_db.unwrap_or(i64::MIN / 2);
            let longest = self.longest_outage.max(self.outage_since.map_or(0, |s| now - s));
            if unreached < 2 * rule::LEASE_MS {
                return Err((
                    "lease-moved",
                    format!(
                        "the lease moved from {before}, alive, to {holder}, though {before}'s tries reached the \
                         database {unreached} ms before (database clock), within two leases"
                    ),
                ));
            }
            self.log(format!(
                "{before}, alive, loses the lease: its tries had not reached the database for {unreached} ms \
                 (database clock; the longest outage {longest} ms)"
            ));
        }
        if let Some(died) = self.holder_died_at.take() {
            let took = now - died;
            let down = self.outages.iter().any(|&(a, b)| a < now && b > died) || self.outage_since.is_some();
            if took > self.takeover_bound() && !down {
                return Err((
                    "takeover-slow",
                    format!("{holder} took the dead holder's lease {took} ms after its death"),
                ));
            }
            self.log(format!("taken over {took} ms after the holder died"));
        }
        Ok(())
    }

    /// The documented bound, plus two slow calls (the standby's last refused try and the
    /// try that takes the lease) when calls are slow: the 12 s assume fast calls.
    fn takeover_bound(&self) -> i64 {
        TAKEOVER_BOUND_MS + 2 * self.slow_since_death
    }

    /// No two coordinators believe they may step now.
    fn check(&self) -> Result<(), (&'static str, String)> {
        let stepping: Vec<&str> =
            self.coordinators.iter().filter(|c| c.steps(self.now)).map(|c| c.name.as_str()).collect();
        if stepping.len() > 1 {
            return Err(("two-leaders", format!("{stepping:?} all believe they may step")));
        }
        // A dead holder's lease not taken within the bound, though a coordinator lives and
        // the database is up: found without waiting for a takeover that never comes.
        if let Some(died) = self.holder_died_at {
            let down = self.outages.iter().any(|&(_, b)| b > died) || self.outage_since.is_some();
            let standby = self.coordinators.iter().any(|c| c.alive);
            if standby && !down && self.now - died > self.takeover_bound() {
                return Err((
                    "takeover-slow",
                    format!("the dead holder's lease is not taken {} ms after its death", self.now - died),
                ));
            }
        }
        Ok(())
    }
}

/// Runs seed `seed` of the lease: its trace, and the first invariant broken.
fn simulate(seed: u64) -> (Trace, Result<(), Failure>) {
    // Another stream than the executor's for the same seed.
    let mut rng = Rng::with_seed(seed ^ 0x6c65_6173_6500_0000);
    let db_clock = ClockModel::random(&mut rng);
    let mut w = World {
        rng,
        now: 0,
        queue: BTreeMap::new(),
        seq: 0,
        db_clock,
        row: None,
        db_down: false,
        slow_ms: 0,
        coordinators: Vec::new(),
        longest_outage: 0,
        outage_since: None,
        outages: Vec::new(),
        holder_died_at: None,
        trace: Trace::default(),
        started: 0,
        pending: BTreeMap::new(),
        slow_since_death: 0,
    };
    let first = w.rng.usize(2..=4);
    for _ in 0..first {
        w.start_coordinator();
    }
    // The schedule of faults.
    let mut t = 0;
    while t < RUN_MS {
        t += w.rng.i64(2_000..=20_000);
        let event = match w.rng.u8(0..10) {
            0..=2 => Event::OutageStart(w.rng.i64(0..=15_000)),
            3 | 4 => Event::Slow([0, 0, 500, 2_000][w.rng.usize(0..4)]),
            5 | 6 => Event::Kill(w.rng.usize(..)),
            7 | 8 => Event::Start,
            _ => continue,
        };
        w.at(t, event);
    }
    let mut outcome = Ok(());
    while let Some(((at, _), event)) = w.queue.pop_first() {
        if at > RUN_MS {
            break;
        }
        w.now = at;
        if let Err(broken) = w.handle(event).and_then(|()| w.check()) {
            outcome = Err(broken);
            break;
        }
    }
    let trace = w.trace.clone();
    let outcome = outcome.map_err(|(code, invariant)| Failure { part: "lease", seed, code, invariant, trace: w.trace });
    (trace, outcome)
}

/// Runs seed `seed` of the lease.
pub fn run(seed: u64) -> Result<(), Failure> {
    simulate(seed).1
}

/// Runs seed `seed` of the lease, and returns its whole trace too (`--seed`).
pub fn replay(seed: u64) -> (Trace, Result<(), Failure>) {
    simulate(seed)
}
