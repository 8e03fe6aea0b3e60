//! Pre-dialed data connections (issue 44, point 4): an agent that offers a pool in its `Hello`
//! is handed tickets ahead of any client (`Control::Pool`), dials a data connection for each
//! and holds it reading nothing; a new public connection to that replica then takes one at
//! once instead of asking for a `Connect` and waiting a control round trip and a dial.
//!
//! Bounds, so that a pool costs a few sockets and never more dials than clients:
//!
//! - per session, tickets out plus connections held are at most its target, the least of the
//!   agent's offer and `GatewayConfig::pool_per_replica` (2 by default); a ticket is handed
//!   only to replace one taken, found dead, aged or unanswered, so the pool adds at most its
//!   target to the dials that on-demand connections would make;
//! - across the gateway, at most `GatewayConfig::max_pooled` (a quarter of the pending cap by
//!   default), under the same open-file budget;
//! - only a replica in rotation is refilled; a pooled connection found dead pauses its
//!   replica's refills for [`DEAD_PAUSE`] (an agent whose connections die at once cannot turn
//!   each client into dials); a held connection has TCP keepalive ([`KEEPALIVE`], set on the
//!   tunnel port's listener, which every connection accepted there copies), so that no
//!   middlebox's idle timeout drops it unseen and a vanished path ends it, and one held
//!   longer than [`POOL_MAX_AGE`] is closed and replaced (before its agent lets it go); a
//!   ticket unanswered for [`ASKED_FOR`] is withdrawn.
//!
//! An idle route's pool costs no dial: keepalive probes are the kernel's, no wake of the
//! gateway or of the agent's egress broker. (It was replaced every 60 s of age: at 100 idle
//! replicas, 3.3 dials a second through the coordinator's brokers; issue 44, point 5.)
//!
//! A held connection is checked before it is used: a read that would block (nothing came, the
//! peer did not close). Anything else (an end, an error, a byte the agent should not have
//! sent) drops it, counted `dead`, and the next is tried, then a `Connect`, as before pools.
//!
//! A connection taken is replaced once its client has been answered ([`Refill`]): the
//! replacement's `Pool` frame, the agent's dial and the gateway's accept then come after the
//! agent's part of the handshake, not at the same time on the same cores.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use relay_wire::wire::{self, TICKET_LEN};
use tokio::net::TcpStream;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::listen::Keepalive;

/// A held connection older than this is closed and replaced (the agent holds one at most 15
/// minutes). Keepalive, not age, is what keeps it usable.
pub(super) const POOL_MAX_AGE: Duration = Duration::from_secs(10 * 60);

/// A held connection's path is probed by the kernel after 30 s without a byte, then every
/// 10 s; 3 unanswered probes end it (found dead at its next use). 30 s is below the idle
/// timeouts of common NATs and load balancers (4 minutes and more). Every connection of the
/// tunnel port has it (`listen`): a routed data connection's vanished agent ends it too.
pub(super) const KEEPALIVE: Keepalive =
    Keepalive { idle: Duration::from_secs(30), interval: Duration::from_secs(10), probes: 3 };

/// A ticket handed ahead and not answered within this is withdrawn (and may be replaced).
pub(super) const ASKED_FOR: Duration = Duration::from_secs(10);

/// After a held connection is found dead, its replica's pool is not refilled for this long.
pub(super) const DEAD_PAUSE: Duration = Duration::from_secs(1);

type Ticket = [u8; TICKET_LEN];

/// One place in the gateway's pooled total, given back when dropped.
#[derive(Debug)]
struct Permit(Arc<AtomicUsize>);

impl Drop for Permit {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

#[derive(Debug)]
struct Held {
    stream: TcpStream,
    since: Instant,
    _permit: Permit,
}

#[derive(Debug)]
struct Asked {
    ticket: Ticket,
    since: Instant,
    permit: Permit,
}

#[derive(Debug, Default)]
struct State {
    held: VecDeque<Held>,
    asked: Vec<Asked>,
    /// The session ended: nothing is held or asked any more.
    closed: bool,
    /// No refill before this (a held connection was found dead).
    paused_until: Option<Instant>,
}

/// One session's pool.
#[derive(Debug)]
pub(super) struct ReplicaPool {
    /// Tickets out plus connections held, at most (0: the agent offered none).
    target: usize,
    state: Mutex<State>,
    /// Woken when a held connection is taken or found dead.
    wanted: Notify,
}

/// What [`ReplicaPool::take`] found.
#[derive(Debug, Default)]
pub(super) struct Taken {
    /// A live held connection, if one was left, and the refill that replaces it.
    pub(super) stream: Option<(TcpStream, Refill)>,
    /// Held connections found dead (dropped).
    pub(super) dead: u64,
}

/// A taken connection's replacement, asked for when this is dropped: once the connection's
/// client has been answered, or its wait for that ended.
#[derive(Debug)]
pub(super) struct Refill(Arc<ReplicaPool>);

impl Drop for Refill {
    fn drop(&mut self) {
        self.0.wanted.notify_one();
    }
}

impl ReplicaPool {
    /// A pool of at most `target` (0: none).
    pub(super) fn new(target: usize) -> ReplicaPool {
        ReplicaPool { target, state: Mutex::default(), wanted: Notify::new() }
    }

    /// Whether the session has a pool at all.
    pub(super) fn offered(&self) -> bool {
        self.target > 0
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // Plain queue updates: consistent after any panic.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The oldest live held connection, dropping dead and aged ones on the way. A refill is
    /// wanted when the taken connection's [`Refill`] is dropped, or at once if none was left
    /// and some were found dead.
    pub(super) fn take(self: &Arc<Self>) -> Taken {
        let mut taken = Taken::default();
        let mut state = self.state();
        let mut now = None;
        while let Some(held) = state.held.pop_front() {
            // One clock read for the lot.
            if now.get_or_insert_with(Instant::now).duration_since(held.since) > POOL_MAX_AGE {
                continue;
            }
            if alive(&held.stream) {
                taken.stream = Some((held.stream, Refill(self.clone())));
                break;
            }
            taken.dead += 1;
        }
        if taken.dead > 0 {
            state.paused_until = Some(now.unwrap_or_else(Instant::now) + DEAD_PAUSE);
        }
        drop(state);
        if taken.stream.is_none() && taken.dead > 0 {
            self.wanted.notify_one();
        }
        taken
    }

    /// Returns when a refill may be due (a connection taken or found dead). Cancel-safe.
    pub(super) async fn wanted(&self) {
        self.wanted.notified().await;
    }

    /// Connections held now.
    #[cfg(test)]
    fn held(&self) -> usize {
        self.state().held.len()
    }

    /// Connections held plus tickets out now.
    pub(super) fn len(&self) -> usize {
        let state = self.state();
        state.held.len() + state.asked.len()
    }
}

/// Whether a held data connection is still usable: nothing came from the agent and it has not
/// closed (a read that would block). Reads the socket itself (non-blocking), not the runtime's
/// readiness, which learns of an end only at its next poll.
fn alive(stream: &TcpStream) -> bool {
    let socket = socket2::SockRef::from(stream);
    let mut byte = [0u8; 1];
    matches!(std::io::Read::read(&mut &*socket, &mut byte), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
}

/// Every session's pool: the tickets handed ahead, and the gateway's total.
#[derive(Debug)]
pub(super) struct Pools {
    tickets: Mutex<HashMap<Ticket, Weak<ReplicaPool>>>,
    total: Arc<AtomicUsize>,
    cap: usize,
}

impl Pools {
    /// No pool yet; at most `cap` tickets out plus connections held across the gateway.
    pub(super) fn new(cap: usize) -> Pools {
        Pools { tickets: Mutex::default(), total: Arc::default(), cap }
    }

    fn tickets(&self) -> MutexGuard<'_, HashMap<Ticket, Weak<ReplicaPool>>> {
        self.tickets.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Tickets out plus connections held now, across the gateway.
    pub(super) fn total(&self) -> usize {
        self.total.load(Ordering::Relaxed)
    }

    fn permit(&self) -> Option<Permit> {
        let cap = self.cap;
        self.total.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| (n < cap).then_some(n + 1)).ok()?;
        Some(Permit(self.total.clone()))
    }

    /// Tidies `pool` (aged connections closed, unanswered tickets withdrawn) and, if its
    /// replica is `ready` and its refills are not paused, hands out the tickets that bring it
    /// back to its target, within the gateway's total: the tickets to send.
    pub(super) fn refill(&self, pool: &Arc<ReplicaPool>, ready: bool) -> Vec<Ticket> {
        if !pool.offered() {
            return Vec::new();
        }
        let now = Instant::now();
        let mut state = pool.state();
        state.held.retain(|h| now.duration_since(h.since) <= POOL_MAX_AGE);
        let (late, asked): (Vec<Asked>, Vec<Asked>) =
            std::mem::take(&mut state.asked).into_iter().partition(|a| now.duration_since(a.since) > ASKED_FOR);
        state.asked = asked;
        let mut tickets = self.tickets();
        for a in &late {
            tickets.remove(&a.ticket);
        }
        drop(late);
        if state.paused_until.is_some_and(|until| now < until) {
            return Vec::new();
        }
        if !ready || state.closed {
            return Vec::new();
        }
        let mut new = Vec::new();
        while state.held.len() + state.asked.len() < pool.target {
            let Some(permit) = self.permit() else { break };
            let Ok(ticket) = wire::new_ticket() else { break };
            tickets.insert(ticket, Arc::downgrade(pool));
            state.asked.push(Asked { ticket, since: now, permit });
            new.push(ticket);
        }
        new
    }

    /// A data connection presenting `ticket`: held in its pool if the ticket was handed ahead
    /// and is still out (`Ok`), else given back.
    pub(super) fn arrived(&self, ticket: &Ticket, stream: TcpStream) -> Result<(), TcpStream> {
        let Some(pool) = self.tickets().remove(ticket).and_then(|p| p.upgrade()) else {
            return Err(stream);
        };
        let mut state = pool.state();
        let Some(i) = state.asked.iter().position(|a| &a.ticket == ticket) else {
            return Err(stream);
        };
        let asked = state.asked.swap_remove(i);
        if state.closed {
            return Err(stream);
        }
        state.held.push_back(Held { stream, since: Instant::now(), _permit: asked.permit });
        Ok(())
    }

    /// The session of `pool` ended: its tickets are withdrawn, its held connections closed.
    pub(super) fn close(&self, pool: &ReplicaPool) {
        let mut state = pool.state();
        state.closed = true;
        state.held.clear();
        let mut tickets = self.tickets();
        for a in state.asked.drain(..) {
            tickets.remove(&a.ticket);
        }
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncWriteExt;

    use super::*;
    use crate::tunnel::tests::pair;

    #[tokio::test]
    async fn a_pool_hands_out_its_target_keeps_the_total_and_skips_the_dead() {
        let pools = Pools::new(3);
        let (a, b) = (Arc::new(ReplicaPool::new(2)), Arc::new(ReplicaPool::new(2)));
        assert!(pools.refill(&a, false).is_empty(), "not ready: nothing");
        let ta = pools.refill(&a, true);
        assert_eq!(ta.len(), 2);
        assert!(pools.refill(&a, true).is_empty(), "tickets out count");
        assert_eq!(pools.refill(&b, true).len(), 1, "the gateway's total");
        assert_eq!(pools.total(), 3);
        let mut peers = Vec::new();
        for t in &ta {
            let (peer, ours) = pair().await;
            assert!(pools.arrived(t, ours).is_ok());
            peers.push(peer);
        }
        let (_peer, ours) = pair().await;
        assert!(pools.arrived(&ta[0], ours).is_err(), "a ticket is used once");
        assert_eq!(a.held(), 2);
        // The oldest is closed by its agent, the other sent a byte it should not have.
        peers[1].write_all(b"x").await.expect("write");
        drop(peers.remove(0));
        tokio::time::sleep(Duration::from_millis(50)).await;
        let taken = a.take();
        assert_eq!((taken.stream.is_none(), taken.dead), (true, 2));
        assert!(pools.refill(&a, true).is_empty(), "paused after a dead one");
        pools.close(&b);
        assert_eq!(pools.total(), 0, "every place given back");
        assert!(pools.tickets().is_empty());
    }

    /// A taken connection is replaced once its client has been answered, not at once: the
    /// session is woken to refill when the [`Refill`] is dropped.
    #[tokio::test]
    async fn a_taken_connection_is_replaced_when_its_refill_is_dropped() {
        let pools = Pools::new(4);
        let pool = Arc::new(ReplicaPool::new(1));
        let ticket = pools.refill(&pool, true)[0];
        let (_peer, ours) = pair().await;
        assert!(pools.arrived(&ticket, ours).is_ok());
        let (_stream, refill) = pool.take().stream.expect("held");
        let woken = |pool: &Arc<ReplicaPool>| {
            let pool = pool.clone();
            async move { tokio::time::timeout(Duration::ZERO, pool.wanted()).await.is_ok() }
        };
        assert!(!woken(&pool).await, "no refill while its client waits for its answer");
        drop(refill);
        assert!(woken(&pool).await, "a refill once it is answered");
        assert_eq!(pools.refill(&pool, true).len(), 1);
    }

    /// An idle route's held connection is kept (kept alive by the kernel: `listen`), not
    /// dialed again each minute; only past [`POOL_MAX_AGE`] is it replaced.
    #[tokio::test(start_paused = true)]
    async fn a_held_connection_is_kept_past_minutes_of_idleness_and_replaced_only_when_old() {
        let pools = Pools::new(4);
        let pool = Arc::new(ReplicaPool::new(1));
        let ticket = pools.refill(&pool, true)[0];
        let (_peer, ours) = pair().await;
        assert!(pools.arrived(&ticket, ours).is_ok());
        tokio::time::advance(Duration::from_secs(5 * 60)).await;
        assert!(pools.refill(&pool, true).is_empty(), "5 idle minutes: nothing to dial again");
        let _taken = pool.take().stream.expect("still held after 5 minutes");

        let ticket = pools.refill(&pool, true)[0];
        let (_peer, ours) = pair().await;
        assert!(pools.arrived(&ticket, ours).is_ok());
        tokio::time::advance(POOL_MAX_AGE + Duration::from_secs(1)).await;
        assert_eq!(pools.refill(&pool, true).len(), 1, "replaced once older than its age");
        assert_eq!(pool.held(), 0);
    }
}
