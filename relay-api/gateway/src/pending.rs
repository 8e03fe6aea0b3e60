//! Connections not yet routed or authenticated: public connections still sending their
//! ClientHello, and tunnel connections before their first bytes (a data connection's tag and
//! ticket) or, once they turned out to be TLS, before their handshake and an accepted `Hello`.
//! Each holds a descriptor and costs its sender almost nothing, so they are bounded twice:
//!
//! - **per source** (a client as [`Client`] counts it), per [`Stage`]. A public source at its
//!   cap has its next connection refused. A tunnel source at its cap in a stage has its
//!   *oldest* connection in that stage closed for the newcomer: the agents of a host share its
//!   address with every other process there, so refusing newcomers would let any of them lock
//!   the agents out by holding connections (issue 39). Closing its own oldest, a flood from
//!   the agents' address only churns itself; an agent's connection proves itself within a
//!   round trip, so it is never the oldest for long. Its handshake and `Hello` are counted
//!   apart from the connections whose first bytes have not come, so stalled handshakes cannot
//!   close a data connection, nor silent connections an agent mid-handshake.
//! - **across the gateway**, by a cap derived from the open-file limit
//!   ([`super::GatewayConfig::max_pending`]): at the cap the *oldest* pending connection is
//!   closed to admit the newcomer. A real client's ClientHello and an agent's ticket arrive
//!   within a round trip of connecting, so the oldest are the stalled ones, and a flood can
//!   never take the descriptors that routed connections, agents and the process's other
//!   listeners need. A source at its own cap replaces its own oldest, so it never closes
//!   anyone else's connection.
//!
//! Admitting, moving and releasing are map inserts and removes under one lock; the oldest is
//! the first key of an ordered map (the gateway's, or the source's in the stage).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::oneshot;

use super::client::Client;

/// What a pending connection is waiting for: each stage counts its sources apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Stage {
    /// Public port: its ClientHello. A source at its cap has its newcomer refused.
    ClientHello,
    /// Tunnel port: its first bytes (a data connection's tag and ticket, or the start of a
    /// TLS handshake). A source at its cap has its oldest here closed for the newcomer.
    TunnelHead,
    /// Tunnel port: its TLS handshake and an accepted `Hello`. As [`Stage::TunnelHead`].
    TunnelHandshake,
}

impl Stage {
    /// Whether a source at its cap in this stage has its oldest connection there closed for a
    /// newcomer, rather than the newcomer refused.
    fn replaces_oldest(self) -> bool {
        !matches!(self, Stage::ClientHello)
    }
}

/// Why a pending connection was closed to make room.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Evicted {
    /// The gateway was at its cap: it was the oldest pending connection.
    Cap,
    /// Its source was at its cap in its stage: it was the source's oldest there.
    SourceCap,
}

/// Whether admitting (or moving) a pending connection closed another one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Admitted {
    /// There was room.
    Free,
    /// Another pending connection was closed to make room, for this reason.
    Evicted(Evicted),
}

/// The source already has its cap of pending connections in this stage, and the stage
/// refuses newcomers (or the cap is 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct SourceLimit;

type Key = (Stage, Client);

#[derive(Debug)]
struct Entry {
    /// Sent the reason when the connection is closed to make room (never otherwise).
    close: oneshot::Sender<Evicted>,
    key: Key,
}

#[derive(Debug)]
struct Table {
    cap: usize,
    next_id: u64,
    /// Every pending connection, oldest first.
    open: BTreeMap<u64, Entry>,
    /// Each source's pending connections in each stage, oldest first; no empty set.
    per_source: HashMap<Key, BTreeSet<u64>>,
}

impl Table {
    /// Takes connection `id` out of the counts; `Some` of its entry if it was counted.
    fn remove(&mut self, id: u64) -> Option<Entry> {
        let entry = self.open.remove(&id)?;
        if let Some(ids) = self.per_source.get_mut(&entry.key) {
            ids.remove(&id);
            if ids.is_empty() {
                self.per_source.remove(&entry.key);
            }
        }
        Some(entry)
    }

    /// Closes connection `id` to make room, telling it why.
    fn evict(&mut self, id: u64, why: Evicted) {
        if let Some(entry) = self.remove(id) {
            // Its task may have ended already: then there is nothing to close.
            let _ = entry.close.send(why);
        }
    }

    /// Makes room for one more connection of `key` in its source's count, where at most
    /// `per_source` are allowed: `Err` if the stage refuses instead.
    fn room_in_source(&mut self, key: Key, per_source: usize) -> Result<Admitted, SourceLimit> {
        let held = self.per_source.get(&key).map_or(0, BTreeSet::len);
        if held < per_source {
            return Ok(Admitted::Free);
        }
        if per_source == 0 || !key.0.replaces_oldest() {
            return Err(SourceLimit);
        }
        let oldest: Vec<u64> = self
            .per_source
            .get(&key)
            .map(|ids| ids.iter().take(held + 1 - per_source).copied().collect())
            .unwrap_or_default();
        for id in oldest {
            self.evict(id, Evicted::SourceCap);
        }
        Ok(Admitted::Evicted(Evicted::SourceCap))
    }
}

/// The gateway's pending connections.
#[derive(Debug)]
pub(super) struct Pending {
    table: Mutex<Table>,
}

impl Pending {
    /// No pending connection yet; at most `cap` at once (at least one).
    pub(super) fn new(cap: usize) -> Pending {
        let table = Table { cap: cap.max(1), next_id: 0, open: BTreeMap::new(), per_source: HashMap::new() };
        Pending { table: Mutex::new(table) }
    }

    fn table(&self) -> MutexGuard<'_, Table> {
        // Plain map updates: consistent after any panic.
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Admits a connection from `client` in `stage`, where a source may have `per_source`:
    /// at that count the stage either refuses it or closes the source's oldest there; at the
    /// gateway's cap the oldest pending connection is closed to make room.
    pub(super) fn admit(
        self: &Arc<Self>,
        stage: Stage,
        client: Client,
        per_source: usize,
    ) -> Result<(PendingSlot, Admitted), SourceLimit> {
        let mut table = self.table();
        let key = (stage, client);
        let mut admitted = table.room_in_source(key, per_source)?;
        while table.open.len() >= table.cap {
            let Some((&oldest, _)) = table.open.first_key_value() else { break };
            table.evict(oldest, Evicted::Cap);
            admitted = Admitted::Evicted(Evicted::Cap);
        }
        let id = table.next_id;
        table.next_id += 1;
        let (close, closed) = oneshot::channel();
        table.open.insert(id, Entry { close, key });
        table.per_source.entry(key).or_default().insert(id);
        Ok((PendingSlot { pending: self.clone(), id, closed }, admitted))
    }

    /// Pending connections now (not counting those closed to make room whose tasks have not
    /// ended yet).
    pub(super) fn len(&self) -> usize {
        self.table().open.len()
    }

    /// The most pending connections at once.
    pub(super) fn cap(&self) -> usize {
        self.table().cap
    }

    /// Whether no source has a pending connection counted (every count back to zero).
    pub(super) fn is_idle(&self) -> bool {
        let table = self.table();
        table.open.is_empty() && table.per_source.is_empty()
    }
}

/// A pending connection's place, given back when dropped (once it is routed or
/// authenticated, or when it ends).
#[derive(Debug)]
pub(super) struct PendingSlot {
    pending: Arc<Pending>,
    id: u64,
    closed: oneshot::Receiver<Evicted>,
}

impl PendingSlot {
    /// Returns, with the reason, when the connection was closed to make room for a newer
    /// one. Cancel-safe.
    pub(super) async fn evicted(&mut self) -> Evicted {
        // Sent only on eviction; a sender dropped unsent (the gateway gone) closes it too.
        (&mut self.closed).await.unwrap_or(Evicted::Cap)
    }

    /// Moves the connection to `stage`, counted there against its source's `per_source`,
    /// keeping its place (its age) in the gateway's count: at that count the stage closes
    /// the source's oldest there, or refuses this one (`Err`: the caller closes it). A
    /// connection already closed to make room is left as it is: [`PendingSlot::evicted`]
    /// says so.
    pub(super) fn advance(&mut self, stage: Stage, per_source: usize) -> Result<Admitted, SourceLimit> {
        let mut table = self.pending.table();
        let Some(entry) = table.remove(self.id) else { return Ok(Admitted::Free) };
        let key = (stage, entry.key.1);
        // Refused here, it is out of every count already: the caller closes it.
        let admitted = table.room_in_source(key, per_source)?;
        table.open.insert(self.id, Entry { key, ..entry });
        table.per_source.entry(key).or_default().insert(self.id);
        Ok(admitted)
    }
}

impl Drop for PendingSlot {
    fn drop(&mut self) {
        // Nothing to give back if it was closed to make room: it left the counts then.
        self.pending.table().remove(self.id);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn client(ip: &str) -> Client {
        Client::of(ip.parse().expect("an address"))
    }

    /// Whether the connection was closed to make room, and why.
    async fn closed(slot: &mut PendingSlot) -> Option<Evicted> {
        tokio::time::timeout(Duration::from_millis(20), slot.evicted()).await.ok()
    }

    #[tokio::test]
    async fn each_source_is_capped_per_stage() {
        let pending = Arc::new(Pending::new(100));
        let a = client("10.0.0.1");
        let held: Vec<_> = (0..3).map(|_| pending.admit(Stage::ClientHello, a, 3).expect("admitted")).collect();
        assert_eq!(pending.admit(Stage::ClientHello, a, 3).err(), Some(SourceLimit), "public: the newcomer refused");
        let tunnel = pending.admit(Stage::TunnelHead, a, 3).expect("the tunnel counts apart");
        let other = pending.admit(Stage::ClientHello, client("10.0.0.2"), 3).expect("another source");
        assert_eq!(pending.len(), 5);
        drop((held, tunnel, other));
        assert!(pending.is_idle());
        for stage in [Stage::ClientHello, Stage::TunnelHead, Stage::TunnelHandshake] {
            assert_eq!(pending.admit(stage, a, 0).err(), Some(SourceLimit), "a cap of 0 refuses all");
        }
        assert!(pending.is_idle());
    }

    /// Issue 39: a tunnel source at its cap (the agents' address, shared with whatever else
    /// runs on their host) never has a newcomer refused: its own oldest connection in that
    /// stage is closed instead, and no other source's.
    #[tokio::test]
    async fn a_tunnel_source_at_its_cap_has_its_oldest_closed_for_the_newcomer() {
        let pending = Arc::new(Pending::new(100));
        let (agents, other) = (client("127.0.0.1"), client("127.0.0.2"));
        let mut theirs = pending.admit(Stage::TunnelHead, other, 2).expect("room").0;
        let mut slots: Vec<_> = (0..2).map(|_| pending.admit(Stage::TunnelHead, agents, 2).expect("room").0).collect();
        for round in 0..3 {
            let (newest, admitted) = pending.admit(Stage::TunnelHead, agents, 2).expect("never refused");
            assert_eq!(admitted, Admitted::Evicted(Evicted::SourceCap));
            assert_eq!(closed(&mut slots[0]).await, Some(Evicted::SourceCap), "round {round}: the source's oldest");
            assert_eq!(closed(&mut slots[1]).await, None, "round {round}");
            assert_eq!(pending.len(), 3, "the gateway's count is unchanged");
            slots.remove(0);
            slots.push(newest);
        }
        assert_eq!(closed(&mut theirs).await, None, "another source's connection is never closed for it");
        // A connection closed to make room gives nothing back when it ends.
        let (mut newest, _) = pending.admit(Stage::TunnelHead, agents, 2).expect("never refused");
        drop(slots.remove(0));
        assert_eq!(pending.len(), 3);
        assert_eq!(closed(&mut newest).await, None);
        drop((slots, newest, theirs));
        assert!(pending.is_idle());
    }

    /// A connection moving to its handshake is counted there apart: stalled handshakes from
    /// its address close only each other, and keep their age in the gateway's count.
    #[tokio::test]
    async fn the_handshake_stage_counts_apart_from_the_first_bytes() {
        let pending = Arc::new(Pending::new(100));
        let agents = client("127.0.0.1");
        let mut handshakes = Vec::new();
        for _ in 0..2 {
            let (mut slot, _) = pending.admit(Stage::TunnelHead, agents, 2).expect("room");
            assert_eq!(slot.advance(Stage::TunnelHandshake, 2), Ok(Admitted::Free));
            handshakes.push(slot);
        }
        let mut heads: Vec<_> = (0..2).map(|_| pending.admit(Stage::TunnelHead, agents, 2).expect("room").0).collect();
        assert_eq!(pending.len(), 4, "two in each stage: neither full stage closed the other's");
        for slot in handshakes.iter_mut().chain(&mut heads) {
            assert_eq!(closed(slot).await, None);
        }
        // A third handshake closes the oldest handshake, not a connection of the other stage.
        let (mut third, _) = pending.admit(Stage::TunnelHead, agents, 3).expect("room");
        assert_eq!(third.advance(Stage::TunnelHandshake, 2), Ok(Admitted::Evicted(Evicted::SourceCap)));
        assert_eq!(closed(&mut handshakes[0]).await, Some(Evicted::SourceCap));
        assert_eq!(closed(&mut handshakes[1]).await, None);
        for slot in &mut heads {
            assert_eq!(closed(slot).await, None);
        }
        assert_eq!(pending.len(), 4);
        // Moved, a connection keeps its age: at the gateway's cap the oldest goes first.
        let small = Arc::new(Pending::new(2));
        let (mut older, _) = small.admit(Stage::TunnelHead, agents, 8).expect("room");
        let (mut newer, _) = small.admit(Stage::TunnelHead, agents, 8).expect("room");
        assert_eq!(older.advance(Stage::TunnelHandshake, 8), Ok(Admitted::Free));
        let (_newest, admitted) = small.admit(Stage::ClientHello, client("10.0.0.9"), 8).expect("room made");
        assert_eq!(admitted, Admitted::Evicted(Evicted::Cap));
        assert_eq!(closed(&mut older).await, Some(Evicted::Cap));
        assert_eq!(closed(&mut newer).await, None);
        // Moving a connection already closed changes nothing.
        assert_eq!(older.advance(Stage::TunnelHandshake, 8), Ok(Admitted::Free));
        assert_eq!(small.len(), 2);
        drop((handshakes, heads, third));
        assert!(pending.is_idle());
    }

    #[tokio::test]
    async fn at_the_cap_the_oldest_pending_connection_is_closed_for_the_newcomer() {
        let pending = Arc::new(Pending::new(3));
        let mut slots = Vec::new();
        for i in 1..=3 {
            let (slot, admitted) = pending.admit(Stage::ClientHello, client(&format!("10.0.0.{i}")), 64).expect("room");
            assert_eq!(admitted, Admitted::Free);
            slots.push(slot);
        }
        let (mut newest, admitted) = pending.admit(Stage::TunnelHead, client("10.0.0.9"), 64).expect("made room");
        assert_eq!(admitted, Admitted::Evicted(Evicted::Cap));
        assert_eq!(pending.len(), 3, "never more than the cap");
        assert_eq!(closed(&mut slots[0]).await, Some(Evicted::Cap), "the oldest is closed");
        assert_eq!((closed(&mut slots[1]).await, closed(&mut slots[2]).await), (None, None));
        assert_eq!(closed(&mut newest).await, None);
        // The one that ended by itself makes room without closing anyone.
        slots.remove(1);
        let (_fourth, admitted) = pending.admit(Stage::ClientHello, client("10.0.0.1"), 64).expect("room");
        assert_eq!(admitted, Admitted::Free);
        drop((slots, newest));
        assert_eq!(pending.len(), 1);
    }
}
