//! Connections not yet routed or authenticated: public connections still sending their
//! ClientHello, and tunnel connections before their ticket (data) or their TLS handshake and
//! `Hello` (control). Each holds a descriptor and costs its sender almost nothing, so they
//! are bounded twice:
//!
//! - **per source** (a client as [`Client`] counts it), per port: a source at its cap has
//!   its next connection closed at once;
//! - **across the gateway**, by a cap derived from the open-file limit
//!   ([`super::GatewayConfig::max_pending`]): at the cap the *oldest* pending connection is
//!   closed to admit the newcomer. A real client's ClientHello and an agent's ticket arrive
//!   within a round trip of connecting, so the oldest are the stalled ones, and a flood can
//!   never take the descriptors that routed connections, agents and the process's other
//!   listeners need.
//!
//! Admitting and releasing is a map insert and remove under one lock; the oldest is the first
//! key of an ordered map.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::oneshot;

use super::client::Client;

/// The port a pending connection came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Port {
    /// Public: still sending its ClientHello.
    Public,
    /// Tunnel: before its ticket, or its TLS handshake and `Hello`.
    Tunnel,
}

/// Whether admitting a pending connection closed the oldest one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Admitted {
    /// There was room.
    Free,
    /// The gateway was at its cap: the oldest pending connection was closed.
    Evicted,
}

/// The source already has its cap of pending connections on this port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct SourceLimit;

#[derive(Debug)]
struct Table {
    cap: usize,
    next_id: u64,
    /// Every pending connection, oldest first; dropping its sender closes it.
    open: BTreeMap<u64, oneshot::Sender<()>>,
    per_source: HashMap<(Port, Client), usize>,
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

    /// Admits a connection from `client` on `port` if that source has fewer than
    /// `per_source` pending there; at the gateway's cap, the oldest pending connection is
    /// closed to make room.
    pub(super) fn admit(
        self: &Arc<Self>,
        port: Port,
        client: Client,
        per_source: usize,
    ) -> Result<(PendingSlot, Admitted), SourceLimit> {
        let mut table = self.table();
        let key = (port, client);
        if table.per_source.get(&key).copied().unwrap_or(0) >= per_source {
            return Err(SourceLimit);
        }
        let mut admitted = Admitted::Free;
        while table.open.len() >= table.cap {
            // Dropping the sender wakes the connection's task, which closes it; its source
            // count goes when it does.
            table.open.pop_first();
            admitted = Admitted::Evicted;
        }
        let id = table.next_id;
        table.next_id += 1;
        let (tx, closed) = oneshot::channel();
        table.open.insert(id, tx);
        *table.per_source.entry(key).or_default() += 1;
        Ok((PendingSlot { pending: self.clone(), id, key, closed }, admitted))
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
    key: (Port, Client),
    closed: oneshot::Receiver<()>,
}

impl PendingSlot {
    /// Returns when the connection was closed to make room for a newer one. Cancel-safe.
    pub(super) async fn evicted(&mut self) {
        // The sender is never used to send: only dropped, when the connection is evicted.
        let _ = (&mut self.closed).await;
    }
}

impl Drop for PendingSlot {
    fn drop(&mut self) {
        let mut table = self.pending.table();
        table.open.remove(&self.id);
        if let Some(n) = table.per_source.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                table.per_source.remove(&self.key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn client(ip: &str) -> Client {
        Client::of(ip.parse().expect("an address"))
    }

    async fn is_evicted(slot: &mut PendingSlot) -> bool {
        tokio::time::timeout(Duration::from_millis(20), slot.evicted()).await.is_ok()
    }

    #[tokio::test]
    async fn each_source_is_capped_per_port() {
        let pending = Arc::new(Pending::new(100));
        let a = client("10.0.0.1");
        let held: Vec<_> = (0..3).map(|_| pending.admit(Port::Tunnel, a, 3).expect("admitted")).collect();
        assert_eq!(pending.admit(Port::Tunnel, a, 3).err(), Some(SourceLimit));
        let public = pending.admit(Port::Public, a, 3).expect("the other port counts apart");
        let other = pending.admit(Port::Tunnel, client("10.0.0.2"), 3).expect("another source");
        assert_eq!(pending.len(), 5);
        drop((held, public, other));
        assert!(pending.is_idle());
        assert_eq!(pending.admit(Port::Public, a, 0).err(), Some(SourceLimit), "a cap of 0 refuses all");
        assert!(pending.is_idle());
    }

    #[tokio::test]
    async fn at_the_cap_the_oldest_pending_connection_is_closed_for_the_newcomer() {
        let pending = Arc::new(Pending::new(3));
        let mut slots = Vec::new();
        for i in 1..=3 {
            let (slot, admitted) = pending.admit(Port::Public, client(&format!("10.0.0.{i}")), 64).expect("room");
            assert_eq!(admitted, Admitted::Free);
            slots.push(slot);
        }
        let (mut newest, admitted) = pending.admit(Port::Tunnel, client("10.0.0.9"), 64).expect("made room");
        assert_eq!(admitted, Admitted::Evicted);
        assert_eq!(pending.len(), 3, "never more than the cap");
        assert!(is_evicted(&mut slots[0]).await, "the oldest is closed");
        assert!(!is_evicted(&mut slots[1]).await && !is_evicted(&mut slots[2]).await);
        assert!(!is_evicted(&mut newest).await);
        // The one that ended by itself makes room without closing anyone.
        slots.remove(1);
        let (_fourth, admitted) = pending.admit(Port::Public, client("10.0.0.1"), 64).expect("room");
        assert_eq!(admitted, Admitted::Free);
        drop((slots, newest));
        assert_eq!(pending.len(), 1);
    }
}
