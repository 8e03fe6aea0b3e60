//! A route's agents (its replicas: one per job, named in their `Hello`) and which one a new
//! connection goes to.
//!
//! A replica is **in rotation** while all of these hold:
//!
//! - its last heartbeat is at most 2.5 heartbeats old (1 s heartbeats: a silent agent is out
//!   within 2.5 s, long before its control connection is closed as dead);
//! - that heartbeat said its app answers its health path (`ready`; an agent that does not say
//!   is taken as ready; a session is not ready before its first heartbeat);
//! - it has not left a `Connect` unanswered within the last [`UNANSWERED_OUT_FOR`].
//!
//! A new connection goes to a replica in rotation by the **power of two choices**: two picked
//! at random, the one with fewer open connections wins. It comes within a small factor of
//! least-connections without scanning every replica, and without sending every newcomer to
//! the one replica that just freed a slot. When no replica is in rotation every session is
//! asked alike (fail open): a route whose only agent is late with a heartbeat, or whose apps
//! fail their health check, is tried as it was before replicas (the agent answers 503 itself).
//!
//! A newer session of a replica name takes over from the older one, which is told to close
//! ([`Replica::retired`]): a restarted agent does not wait for its old session to time out.
//! A route has at most [`MAX_REPLICAS`] sessions; each replica's routed connections are
//! counted by name (at most [`MAX_REPLICAS`] names per route, the rest as `other`) for as
//! long as the route is configured.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use relay_wire::wire::{MAX_REPLICAS, TICKET_LEN};
use tokio::sync::{Notify, mpsc};
use tokio::time::Instant;

use super::pool::ReplicaPool;

/// How long a replica that left a `Connect` unanswered stays out of rotation.
pub(super) const UNANSWERED_OUT_FOR: Duration = Duration::from_secs(5);

/// The label of routed connections counted beyond a route's first [`MAX_REPLICAS`] names.
const OTHER: &str = "other";

/// A request for a data connection.
#[derive(Debug, Clone, Copy)]
pub(super) struct Ask {
    /// The ticket the data connection presents.
    pub(super) ticket: [u8; TICKET_LEN],
    /// The connection may do an ACME validation handshake and nothing more (it passed the
    /// route's allow-list only as one).
    pub(super) acme_only: bool,
}

/// One agent session of a route.
#[derive(Debug)]
pub(super) struct Replica {
    /// The tunnel connection's number (unique in the gateway).
    pub(super) session: u64,
    /// The replica's name from its `Hello` (empty: the route's one agent).
    pub(super) name: String,
    /// Where its session takes `Connect` requests.
    connect: mpsc::Sender<Ask>,
    /// Woken when a newer session of the same name takes over.
    retired: Notify,
    /// Milliseconds since the table's epoch when it last sent a heartbeat.
    heard_ms: AtomicU64,
    /// Whether its last heartbeat said its app is ready.
    ready: AtomicBool,
    /// Whether any heartbeat of its session said so: one that never did (its app not up, or
    /// its agent still without a certificate) is not asked even when none is in rotation.
    ever_ready: AtomicBool,
    /// Since when (milliseconds since the epoch) its heartbeats say it has an ACME challenge
    /// pending; 0: none pending.
    acme_since_ms: AtomicU64,
    /// Out of rotation until then (milliseconds since the epoch): it left a `Connect`
    /// unanswered.
    unanswered_until_ms: AtomicU64,
    /// Routed connections open through it now.
    open: AtomicUsize,
    /// Its pre-dialed data connections ([`super::pool`]).
    pub(super) pool: Arc<ReplicaPool>,
}

impl Replica {
    /// Asks its agent for a data connection: `false` if its session is gone or too far
    /// behind to take more (the caller asks another).
    pub(super) fn ask(&self, ask: Ask) -> bool {
        self.connect.try_send(ask).is_ok()
    }

    /// Returns when a newer session of the same replica took over. Cancel-safe; a take-over
    /// before the first wait is not missed.
    pub(super) async fn retired(&self) {
        self.retired.notified().await;
    }

    /// Counts one routed connection open through it until the guard is dropped.
    pub(super) fn hold(self: &Arc<Self>) -> Held {
        self.open.fetch_add(1, Ordering::Relaxed);
        Held(self.clone())
    }
}

/// A routed connection's place in its replica's open count.
#[derive(Debug)]
pub(super) struct Held(Arc<Replica>);

impl Drop for Held {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The route already has [`MAX_REPLICAS`] agents connected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Full;

/// A replica chosen for a new connection.
#[derive(Debug)]
pub(super) struct Choice {
    /// The replica.
    pub(super) replica: Arc<Replica>,
    /// Whether another replica (not yet tried) could be asked if this one does not answer.
    pub(super) others: bool,
}

/// One route's replicas, as the metrics show them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaRow {
    /// The route.
    pub route_id: String,
    /// Sessions in rotation now.
    pub in_rotation: usize,
    /// Sessions connected but out of rotation now.
    pub out_of_rotation: usize,
    /// Routed connections by replica name, since the route was configured.
    pub routed: BTreeMap<String, u64>,
}

#[derive(Debug, Default)]
struct Table {
    sessions: HashMap<String, Vec<Arc<Replica>>>,
    /// Routed connections by route, then replica name.
    routed: HashMap<String, BTreeMap<String, u64>>,
}

/// Every route's replicas.
#[derive(Debug)]
pub(super) struct Replicas {
    table: Mutex<Table>,
    epoch: Instant,
    /// A replica whose last heartbeat is older than this is out of rotation.
    silent_after: Duration,
}

impl Replicas {
    /// No replica yet; agents heartbeat every `heartbeat`.
    pub(super) fn new(heartbeat: Duration) -> Replicas {
        Replicas { table: Mutex::default(), epoch: Instant::now(), silent_after: heartbeat * 5 / 2 }
    }

    fn table(&self) -> MutexGuard<'_, Table> {
        // Plain map updates: consistent after any panic.
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Adds session `session` of replica `name` of `route_id`, heard now but not ready until
    /// its first heartbeat, retiring an older session of the same name; it holds up to
    /// `pool` pre-dialed data connections.
    pub(super) fn join(
        &self,
        route_id: &str,
        name: &str,
        session: u64,
        connect: mpsc::Sender<Ask>,
        pool: usize,
    ) -> Result<Arc<Replica>, Full> {
        let replica = Arc::new(Replica {
            session,
            name: name.to_owned(),
            connect,
            retired: Notify::new(),
            heard_ms: AtomicU64::new(self.now_ms()),
            // Until its first heartbeat says (at once: agents ping as their session opens).
            ready: AtomicBool::new(false),
            ever_ready: AtomicBool::new(false),
            acme_since_ms: AtomicU64::new(0),
            unanswered_until_ms: AtomicU64::new(0),
            open: AtomicUsize::new(0),
            pool: Arc::new(ReplicaPool::new(pool)),
        });
        let mut table = self.table();
        let sessions = table.sessions.entry(route_id.to_owned()).or_default();
        if let Some(i) = sessions.iter().position(|r| r.name == name) {
            sessions.swap_remove(i).retired.notify_one();
        }
        if sessions.len() >= MAX_REPLICAS {
            return Err(Full);
        }
        sessions.push(replica.clone());
        Ok(replica)
    }

    /// Removes `replica`'s session (if a newer one has not replaced it already).
    pub(super) fn leave(&self, route_id: &str, replica: &Replica) {
        let mut table = self.table();
        if let Some(sessions) = table.sessions.get_mut(route_id) {
            sessions.retain(|r| r.session != replica.session);
            if sessions.is_empty() {
                table.sessions.remove(route_id);
            }
        }
    }

    /// A heartbeat of `replica`, saying whether its app is ready (`None`: not said) and
    /// whether it has an ACME challenge pending.
    pub(super) fn heard(&self, replica: &Replica, ready: Option<bool>, acme: bool) {
        let now = self.now_ms();
        replica.heard_ms.store(now, Ordering::Relaxed);
        let ready = ready.unwrap_or(true);
        replica.ready.store(ready, Ordering::Relaxed);
        if ready {
            replica.ever_ready.store(true, Ordering::Relaxed);
        }
        // The first heartbeat saying so dates it (at least 1: 0 is "none pending").
        let since = match (acme, replica.acme_since_ms.load(Ordering::Relaxed)) {
            (false, _) => 0,
            (true, 0) => now.max(1),
            (true, since) => since,
        };
        replica.acme_since_ms.store(since, Ordering::Relaxed);
    }

    /// The replica of `route_id` an ACME validation goes to: the one whose heartbeats say it
    /// has a challenge pending, and not silent; if several say so (a turn that lapsed), the
    /// one that said so last, which holds the turn now. `None`: none says so, and the
    /// validation is routed as any connection is (an agent from before the word).
    pub(super) fn with_acme_pending(&self, route_id: &str) -> Option<String> {
        let now = self.now_ms();
        let table = self.table();
        table
            .sessions
            .get(route_id)?
            .iter()
            .filter(|r| r.acme_since_ms.load(Ordering::Relaxed) > 0)
            .filter(|r| {
                u128::from(now.saturating_sub(r.heard_ms.load(Ordering::Relaxed))) <= self.silent_after.as_millis()
            })
            .max_by_key(|r| r.acme_since_ms.load(Ordering::Relaxed))
            .map(|r| r.name.clone())
    }

    /// `replica` left a `Connect` unanswered: out of rotation for [`UNANSWERED_OUT_FOR`].
    pub(super) fn unanswered(&self, replica: &Replica) {
        let until = self.now_ms().saturating_add(UNANSWERED_OUT_FOR.as_millis() as u64);
        replica.unanswered_until_ms.store(until, Ordering::Relaxed);
    }

    /// Whether `replica` is in rotation now (its pool is refilled only then).
    pub(super) fn in_rotation_now(&self, replica: &Replica) -> bool {
        self.in_rotation(replica, self.now_ms())
    }

    fn in_rotation(&self, replica: &Replica, now_ms: u64) -> bool {
        let silent_ms = now_ms.saturating_sub(replica.heard_ms.load(Ordering::Relaxed));
        u128::from(silent_ms) <= self.silent_after.as_millis()
            && replica.ready.load(Ordering::Relaxed)
            && replica.unanswered_until_ms.load(Ordering::Relaxed) <= now_ms
    }

    /// The replica of `route_id` a new connection asks next, leaving out the sessions in
    /// `tried`: two in rotation picked by `entropy`, the one with fewer open connections;
    /// or, with none in rotation, the one heard from last. `None`: no session is left.
    pub(super) fn pick(&self, route_id: &str, tried: &[u64], entropy: u64) -> Option<Choice> {
        let now = self.now_ms();
        let table = self.table();
        let sessions = table.sessions.get(route_id)?;
        // The common route, one agent: no choice to make, nothing to allocate.
        if let [only] = sessions.as_slice() {
            return (!tried.contains(&only.session)).then(|| Choice { replica: only.clone(), others: false });
        }
        let left: Vec<&Arc<Replica>> = sessions.iter().filter(|r| !tried.contains(&r.session)).collect();
        let rotation: Vec<&Arc<Replica>> = left.iter().copied().filter(|r| self.in_rotation(r, now)).collect();
        // None in rotation: every session left that has ever been ready is asked alike, so
        // that a route whose apps all fail their health check (or whose heartbeats are all
        // late on a busy host) is not sent to one of them; a session never ready (its agent
        // without a certificate yet: CI found handshakes failing there) only when no other is.
        let seasoned: Vec<&Arc<Replica>> =
            left.iter().copied().filter(|r| r.ever_ready.load(Ordering::Relaxed)).collect();
        let pool = match (rotation.is_empty(), seasoned.is_empty()) {
            (false, _) => &rotation,
            (true, false) => &seasoned,
            (true, true) => &left,
        };
        let chosen = two_choices(pool, entropy)?;
        Some(Choice { replica: chosen.clone(), others: left.len() > 1 })
    }

    /// The session of replica `name` of `route_id`, in rotation or not, unless it is in
    /// `tried` (a validation of that replica: it is asked whatever its health says).
    pub(super) fn named(&self, route_id: &str, name: &str, tried: &[u64]) -> Option<Choice> {
        let table = self.table();
        let replica = table.sessions.get(route_id)?.iter().find(|r| r.name == name && !tried.contains(&r.session))?;
        Some(Choice { replica: replica.clone(), others: false })
    }

    /// Each session of `route_id`: its pre-dialed connections held plus tickets out now.
    pub(super) fn pooled(&self, route_id: &str) -> Vec<usize> {
        let table = self.table();
        table.sessions.get(route_id).map_or_else(Vec::new, |s| s.iter().map(|r| r.pool.len()).collect())
    }

    /// Counts a connection routed through `replica` of `route_id`.
    pub(super) fn routed(&self, route_id: &str, replica: &Replica) {
        let mut table = self.table();
        // Every routed connection passes here: the route's key is copied only the first time.
        if !table.routed.contains_key(route_id) {
            table.routed.insert(route_id.to_owned(), BTreeMap::new());
        }
        let Some(by_name) = table.routed.get_mut(route_id) else { return };
        let name = if by_name.contains_key(&replica.name) || by_name.len() < MAX_REPLICAS {
            replica.name.as_str()
        } else {
            OTHER
        };
        match by_name.get_mut(name) {
            Some(n) => *n += 1,
            None => {
                by_name.insert(name.to_owned(), 1);
            }
        }
    }

    /// Forgets the routed counts of routes no longer configured and without a session.
    pub(super) fn keep_counts_of<'a>(&self, configured: impl IntoIterator<Item = &'a str>) {
        let configured: HashSet<&str> = configured.into_iter().collect();
        let mut table = self.table();
        let Table { sessions, routed } = &mut *table;
        routed.retain(|route, _| configured.contains(route.as_str()) || sessions.contains_key(route));
    }

    /// Every route with sessions or counts, by route ID.
    pub(super) fn rows(&self) -> Vec<ReplicaRow> {
        let now = self.now_ms();
        let table = self.table();
        let routes: std::collections::BTreeSet<&String> = table.sessions.keys().chain(table.routed.keys()).collect();
        routes
            .into_iter()
            .map(|route| {
                let sessions = table.sessions.get(route).map_or(&[][..], Vec::as_slice);
                let in_rotation = sessions.iter().filter(|r| self.in_rotation(r, now)).count();
                ReplicaRow {
                    route_id: route.clone(),
                    in_rotation,
                    out_of_rotation: sessions.len() - in_rotation,
                    routed: table.routed.get(route).cloned().unwrap_or_default(),
                }
            })
            .collect()
    }
}

/// Randomness to pick replicas by: the standard hasher's per-thread keys, seeded once and
/// stepped at each call, so no syscall per connection (a ticket's bytes were drawn for it
/// before, even for a connection that sends no ticket). Not secret: a client that guessed it
/// could only choose which of the route's replicas serves it.
pub(super) fn entropy() -> u64 {
    std::hash::BuildHasher::hash_one(&std::collections::hash_map::RandomState::new(), 0u8)
}

/// Of two of `pool` picked by `entropy` (distinct when it has two or more), the one with
/// fewer open connections.
fn two_choices<'a>(pool: &[&'a Arc<Replica>], entropy: u64) -> Option<&'a Arc<Replica>> {
    let n = pool.len() as u64;
    match n {
        0 => None,
        1 => Some(pool[0]),
        _ => {
            // Two distinct indices from one draw.
            let first = (entropy % n) as usize;
            let second = ((first as u64 + 1 + (entropy >> 32) % (n - 1)) % n) as usize;
            let (a, b) = (pool[first], pool[second]);
            Some(if b.open.load(Ordering::Relaxed) < a.open.load(Ordering::Relaxed) { b } else { a })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A session that has sent its first heartbeat, ready.
    fn session(replicas: &Replicas, route: &str, name: &str, id: u64) -> (Arc<Replica>, mpsc::Receiver<Ask>) {
        let (tx, rx) = mpsc::channel(4);
        let replica = replicas.join(route, name, id, tx, 0).expect("room");
        replicas.heard(&replica, None, false);
        (replica, rx)
    }

    #[test]
    fn entropy_differs_from_call_to_call() {
        let drawn: HashSet<u64> = (0..64).map(|_| entropy()).collect();
        assert_eq!(drawn.len(), 64);
    }

    fn picks(replicas: &Replicas, tried: &[u64], draws: u64) -> BTreeMap<String, u64> {
        let mut seen = BTreeMap::new();
        for i in 0..draws {
            let entropy = i.wrapping_mul(0x9E37_79B9_7F4A_7C15);
            let choice = replicas.pick("r", tried, entropy).expect("a replica");
            *seen.entry(choice.replica.name.clone()).or_default() += 1;
        }
        seen
    }

    #[tokio::test(start_paused = true)]
    async fn new_connections_spread_over_the_replicas_in_rotation_and_favour_the_less_loaded() {
        let replicas = Replicas::new(Duration::from_secs(1));
        let (a, _ra) = session(&replicas, "r", "a", 1);
        let (_b, _rb) = session(&replicas, "r", "b", 2);
        let (_c, _rc) = session(&replicas, "r", "c", 3);
        let even = picks(&replicas, &[], 3000);
        assert_eq!(even.len(), 3, "{even:?}");
        assert!(even.values().all(|&n| (800..=1200).contains(&n)), "about a third each: {even:?}");
        // `a` holding many connections loses every draw it is in.
        let held: Vec<Held> = (0..10).map(|_| a.hold()).collect();
        let loaded = picks(&replicas, &[], 3000);
        assert_eq!(loaded.get("a"), None, "{loaded:?}");
        drop(held);
        assert_eq!(a.open.load(Ordering::Relaxed), 0, "the count returns to zero");
    }

    #[tokio::test(start_paused = true)]
    async fn a_silent_unready_or_unanswering_replica_is_out_of_rotation_and_back_when_it_recovers() {
        let replicas = Replicas::new(Duration::from_secs(1));
        let (a, _ra) = session(&replicas, "r", "a", 1);
        let (b, _rb) = session(&replicas, "r", "b", 2);
        let only_a = |why: &str| {
            assert_eq!(picks(&replicas, &[], 50).keys().collect::<Vec<_>>(), ["a"], "{why}");
        };
        // Silent: `b` stops heartbeating, `a` goes on.
        tokio::time::advance(Duration::from_millis(2000)).await;
        replicas.heard(&a, Some(true), false);
        assert_eq!(replicas.rows()[0].in_rotation, 2, "2 s of silence is within 2.5 heartbeats");
        tokio::time::advance(Duration::from_millis(600)).await;
        only_a("b silent for 2.6 s");
        assert_eq!((replicas.rows()[0].in_rotation, replicas.rows()[0].out_of_rotation), (1, 1));
        replicas.heard(&b, None, false);
        assert_eq!(replicas.rows()[0].in_rotation, 2, "a heartbeat brings it back");
        // Not ready.
        replicas.heard(&b, Some(false), false);
        only_a("b's app is not ready");
        replicas.heard(&b, Some(true), false);
        // Left a Connect unanswered.
        replicas.unanswered(&b);
        only_a("b left a Connect unanswered");
        tokio::time::advance(UNANSWERED_OUT_FOR).await;
        replicas.heard(&a, Some(true), false);
        replicas.heard(&b, Some(true), false);
        assert_eq!(picks(&replicas, &[], 200).len(), 2, "back after {UNANSWERED_OUT_FOR:?}");
    }

    /// CI finding: a replica whose agent had no certificate yet (waiting for its ACME turn)
    /// got a client when its sibling's heartbeat was late on a busy host, and the client's
    /// handshake failed. A session never ready is asked only when no other could be.
    #[tokio::test(start_paused = true)]
    async fn with_none_in_rotation_a_replica_never_ready_is_not_asked_while_another_was() {
        let replicas = Replicas::new(Duration::from_secs(1));
        let (a, _ra) = session(&replicas, "r", "a", 1);
        let (tx, _rb) = mpsc::channel(4);
        let b = replicas.join("r", "b", 2, tx, 0).expect("room");
        replicas.heard(&a, Some(true), false);
        replicas.heard(&b, Some(false), false);
        // a's heartbeats are late: none in rotation.
        tokio::time::advance(Duration::from_millis(2_600)).await;
        replicas.heard(&b, Some(false), false);
        assert_eq!(replicas.rows()[0].in_rotation, 0);
        assert_eq!(picks(&replicas, &[], 100).keys().collect::<Vec<_>>(), ["a"], "b was never ready");
        let choice = replicas.pick("r", &[a.session], 7).expect("b, the last left");
        assert_eq!(choice.replica.name, "b", "asked when it is the only one left");
    }

    #[tokio::test(start_paused = true)]
    async fn with_none_in_rotation_all_are_asked_alike_and_tried_ones_are_left_out() {
        let replicas = Replicas::new(Duration::from_secs(1));
        let (a, _ra) = session(&replicas, "r", "a", 1);
        let (b, _rb) = session(&replicas, "r", "b", 2);
        replicas.heard(&a, Some(false), false);
        replicas.heard(&b, Some(false), false);
        let both = picks(&replicas, &[], 1000);
        assert!(both.values().all(|&n| (350..=650).contains(&n)) && both.len() == 2, "fail open, spread: {both:?}");
        let choice = replicas.pick("r", &[b.session], 7).expect("the other");
        assert_eq!((choice.replica.name.as_str(), choice.others), ("a", false));
        // A session that has not sent its first heartbeat is not in rotation yet.
        let (tx, _rc) = mpsc::channel(1);
        let c = replicas.join("r", "c", 3, tx, 0).expect("room");
        replicas.heard(&a, Some(true), false);
        assert_eq!(picks(&replicas, &[], 50).keys().collect::<Vec<_>>(), ["a"]);
        replicas.heard(&c, None, false);
        assert_eq!(picks(&replicas, &[], 200).len(), 2, "a and c once c heartbeats");
        assert!(replicas.pick("r", &[1, 2, 3], 7).is_none(), "all tried");
        assert!(replicas.pick("unknown", &[], 7).is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn an_acme_validation_goes_to_the_replica_whose_challenge_is_pending() {
        let replicas = Replicas::new(Duration::from_secs(1));
        let (a, _ra) = session(&replicas, "r", "a", 1);
        replicas.heard(&a, Some(true), false);
        assert_eq!(replicas.with_acme_pending("r"), None, "none pending: routed as any connection");
        replicas.heard(&a, Some(true), true);
        assert_eq!(replicas.with_acme_pending("r").as_deref(), Some("a"), "one agent, pending");
        replicas.heard(&a, Some(true), false);
        let (b, _rb) = session(&replicas, "r", "b", 2);
        replicas.heard(&b, Some(true), false);
        replicas.heard(&b, Some(false), true);
        assert_eq!(replicas.with_acme_pending("r").as_deref(), Some("b"), "pending, ready or not");
        tokio::time::advance(Duration::from_millis(10)).await;
        replicas.heard(&a, Some(true), true);
        assert_eq!(replicas.with_acme_pending("r").as_deref(), Some("a"), "several: the one pending last");
        // Later heartbeats of the earlier one do not take it back.
        tokio::time::advance(Duration::from_millis(10)).await;
        replicas.heard(&b, Some(true), true);
        assert_eq!(replicas.with_acme_pending("r").as_deref(), Some("a"), "still the one pending last");
        // A silent one is passed over.
        tokio::time::advance(Duration::from_millis(2_600)).await;
        replicas.heard(&b, Some(true), true);
        assert_eq!(replicas.with_acme_pending("r").as_deref(), Some("b"), "a is silent");
        replicas.heard(&a, Some(true), false);
        replicas.heard(&b, Some(true), false);
        assert_eq!(replicas.with_acme_pending("r"), None, "done");
        assert_eq!(replicas.with_acme_pending("unknown"), None);
    }

    #[tokio::test]
    async fn a_newer_session_of_a_replica_takes_over_and_the_route_is_capped() {
        let replicas = Replicas::new(Duration::from_secs(1));
        let (old, _r1) = session(&replicas, "r", "a", 1);
        let (new, _r2) = session(&replicas, "r", "a", 2);
        tokio::time::timeout(Duration::from_secs(1), old.retired()).await.expect("the old session is told");
        replicas.leave("r", &old);
        assert_eq!(
            replicas.pick("r", &[], 0).expect("one").replica.session,
            new.session,
            "leaving late spares the new"
        );
        let mut held = Vec::new();
        for i in 0..MAX_REPLICAS as u64 - 1 {
            held.push(session(&replicas, "r", &format!("n{i}"), 10 + i));
        }
        let (tx, _rx) = mpsc::channel(1);
        assert_eq!(replicas.join("r", "one-too-many", 9999, tx, 0).err(), Some(Full));
        let (tx, _rx) = mpsc::channel(1);
        assert!(replicas.join("r", "n0", 10_000, tx, 0).is_ok(), "a take-over is not a newcomer");
        for (r, _) in &held {
            replicas.leave("r", r);
        }
        replicas.leave("r", &new);
        replicas.keep_counts_of([]);
        let rows = replicas.rows();
        assert_eq!(rows.len(), 1, "the take-over's session is left: {rows:?}");
    }

    #[test]
    fn routed_counts_are_bounded_per_route_and_go_with_the_route() {
        let replicas = Replicas::new(Duration::from_secs(1));
        for i in 0..MAX_REPLICAS + 10 {
            let (tx, _rx) = mpsc::channel(1);
            let r = replicas.join("r", &format!("n{i}"), i as u64, tx, 0).ok();
            let replica = r.unwrap_or_else(|| {
                // Past the cap: count through a stand-in of that name.
                Arc::new(Replica {
                    session: u64::MAX,
                    name: format!("n{i}"),
                    connect: mpsc::channel(1).0,
                    retired: Notify::new(),
                    heard_ms: AtomicU64::new(0),
                    ready: AtomicBool::new(true),
                    ever_ready: AtomicBool::new(true),
                    acme_since_ms: AtomicU64::new(0),
                    unanswered_until_ms: AtomicU64::new(0),
                    open: AtomicUsize::new(0),
                    pool: Arc::new(ReplicaPool::new(0)),
                })
            });
            replicas.routed("r", &replica);
        }
        let row = replicas.rows().into_iter().find(|r| r.route_id == "r").expect("a row");
        assert_eq!(row.routed.len(), MAX_REPLICAS + 1, "the first names, then `other`");
        assert_eq!(row.routed.get(OTHER), Some(&10));
        replicas.keep_counts_of(["r"]);
        assert_eq!(replicas.rows().len(), 1);
        for _ in 0..MAX_REPLICAS {
            replicas.leave("r", &replicas.pick("r", &[], 0).expect("a session").replica);
        }
        replicas.keep_counts_of([]);
        assert!(replicas.rows().is_empty(), "no session and not configured: forgotten");
    }
}
