//! Where each open connection is in its request cycle, what deadline that gives it, and the
//! table of open connections the accept loop picks from when it must close one to make room.
//!
//! A connection is waiting (nothing of its next request yet), reading a head, reading a body
//! (head complete), or handling (body complete or none; until the response is written). Only
//! the first two have a connection deadline (the header or idle timeout); a body has its own
//! ([`crate::body`]). At the cap, the one waiting longest without a complete head goes first;
//! if there is none, the one waiting longest for its body.

use std::collections::HashMap;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::settings::Settings;

/// Where a connection is.
#[derive(Debug, Clone, Copy)]
enum Phase {
    /// Nothing of the next request yet, since `since` (the connection's start for its first).
    Waiting { since: Instant, first: bool },
    /// Part of a request head; its deadline counts from `since`.
    Head { since: Instant },
    /// The head is complete (at `since`) and the body is still arriving.
    Body { since: Instant },
    /// The request is being handled or its response written.
    Handling,
}

#[derive(Debug)]
struct State {
    phase: Phase,
    /// Closed to make room: the connection's task drops it.
    evicted: bool,
}

/// One open connection.
#[derive(Debug)]
pub(crate) struct Conn {
    id: u64,
    state: Mutex<State>,
    /// Wakes the connection's task: its deadline moved, or it was evicted.
    wake: Notify,
    table: Arc<Table>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // The state stays consistent under any panic (plain assignments); keep serving.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Conn {
    /// When the connection must be closed if nothing changes: `None` while a request is
    /// under way.
    pub(crate) fn deadline(&self, settings: &Settings) -> Option<Instant> {
        match lock(&self.state).phase {
            Phase::Waiting { since, first: true } | Phase::Head { since } => Some(since + settings.header_timeout),
            Phase::Waiting { since, first: false } => Some(since + settings.idle_timeout),
            Phase::Body { .. } | Phase::Handling => None,
        }
    }

    pub(crate) fn is_evicted(&self) -> bool {
        lock(&self.state).evicted
    }

    /// Whether a request is under way (its head complete).
    pub(crate) fn in_request(&self) -> bool {
        matches!(lock(&self.state).phase, Phase::Body { .. } | Phase::Handling)
    }

    /// Resolves when the deadline may have moved or the connection was evicted.
    pub(crate) async fn changed(&self) {
        self.wake.notified().await;
    }

    /// Bytes arrived: a waiting connection is now reading a head.
    fn saw_bytes(&self) {
        let mut state = lock(&self.state);
        match state.phase {
            // The first head's deadline still counts from the connection's start.
            Phase::Waiting { since, first: true } => state.phase = Phase::Head { since },
            Phase::Waiting { first: false, .. } => {
                state.phase = Phase::Head { since: Instant::now() };
                drop(state);
                self.wake.notify_one();
            }
            _ => {}
        }
    }

    /// A complete head arrived: the request is under way until the guard is dropped (when its
    /// response has been written, or the request abandoned).
    pub(crate) fn request_started(self: &Arc<Self>, has_body: bool) -> RequestGuard {
        lock(&self.state).phase = if has_body { Phase::Body { since: Instant::now() } } else { Phase::Handling };
        RequestGuard(self.clone())
    }

    /// The request's body has fully arrived.
    pub(crate) fn body_done(&self) {
        let mut state = lock(&self.state);
        if let Phase::Body { .. } = state.phase {
            state.phase = Phase::Handling;
        }
    }

    /// Which connection to close first at the cap: (tier, since), lowest first; `None` if it
    /// must not be closed (handling a request, or already evicted).
    fn eviction_rank(&self) -> Option<(u8, Instant)> {
        let state = lock(&self.state);
        if state.evicted {
            return None;
        }
        match state.phase {
            Phase::Waiting { since, .. } | Phase::Head { since } => Some((0, since)),
            Phase::Body { since } => Some((1, since)),
            Phase::Handling => None,
        }
    }
}

/// Held while a request is under way; dropping it makes the connection wait for the next.
#[derive(Debug)]
pub(crate) struct RequestGuard(Arc<Conn>);

impl Drop for RequestGuard {
    fn drop(&mut self) {
        lock(&self.0.state).phase = Phase::Waiting { since: Instant::now(), first: false };
        self.0.wake.notify_one();
        // A connection the accept loop may close, if it is waiting for room.
        self.0.table.room.notify_one();
    }
}

/// The open connections of one listener.
#[derive(Debug, Default)]
pub(crate) struct Table {
    conns: Mutex<HashMap<u64, Arc<Conn>>>,
    next_id: AtomicU64,
    /// A connection closed or became closable.
    room: Notify,
}

impl Table {
    /// Registers a new connection; it leaves the table when the registration is dropped.
    pub(crate) fn register(self: &Arc<Self>) -> Registration {
        let conn = Arc::new(Conn {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            state: Mutex::new(State { phase: Phase::Waiting { since: Instant::now(), first: true }, evicted: false }),
            wake: Notify::new(),
            table: self.clone(),
        });
        lock(&self.conns).insert(conn.id, conn.clone());
        Registration(conn)
    }

    /// Open connections, not counting those already told to close.
    pub(crate) fn len(&self) -> usize {
        lock(&self.conns).len()
    }

    /// Whether some connection could be closed to make room (one not handling a request).
    pub(crate) fn any_evictable(&self) -> bool {
        lock(&self.conns).values().any(|c| c.eviction_rank().is_some())
    }

    /// Closes the connection, other than `newcomer`, that has waited longest without a
    /// complete request head (else the one waiting longest for its body); false if every
    /// other connection is handling a request. It leaves the count at once; its task drops it
    /// promptly.
    pub(crate) fn evict_oldest(&self, newcomer: &Registration) -> bool {
        let victim = {
            let mut conns = lock(&self.conns);
            let oldest = conns
                .values()
                .filter(|c| c.id != newcomer.0.id)
                .filter_map(|c| Some((c.eviction_rank()?, c.id)))
                .min()
                .map(|(_, id)| id);
            oldest.and_then(|id| conns.remove(&id))
        };
        let Some(conn) = victim else { return false };
        lock(&conn.state).evicted = true;
        conn.wake.notify_one();
        true
    }

    /// Resolves when a connection closed or became closable.
    pub(crate) async fn room(&self) {
        self.room.notified().await;
    }
}

/// A connection's place in the table.
#[derive(Debug)]
pub(crate) struct Registration(Arc<Conn>);

impl Registration {
    pub(crate) fn conn(&self) -> &Arc<Conn> {
        &self.0
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        lock(&self.0.table.conns).remove(&self.0.id);
        self.0.table.room.notify_one();
    }
}

/// A connection's stream, telling the connection when bytes arrive.
#[derive(Debug)]
pub(crate) struct TrackedIo<T> {
    inner: T,
    conn: Arc<Conn>,
}

impl<T> TrackedIo<T> {
    pub(crate) fn new(inner: T, conn: Arc<Conn>) -> TrackedIo<T> {
        TrackedIo { inner, conn }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for TrackedIo<T> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.conn.saw_bytes();
        }
        polled
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for TrackedIo<T> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn at_the_cap_the_oldest_without_a_head_goes_first_and_a_request_in_flight_never() {
        let table = Arc::new(Table::default());
        let busy = table.register();
        let _guard = busy.conn().request_started(false);
        tokio::time::advance(Duration::from_secs(1)).await;
        let body = table.register();
        let _body_guard = body.conn().request_started(true);
        tokio::time::advance(Duration::from_secs(1)).await;
        let old = table.register();
        tokio::time::advance(Duration::from_secs(1)).await;
        let young = table.register();
        tokio::time::advance(Duration::from_secs(1)).await;
        let newcomer = table.register();
        assert_eq!(table.len(), 5);
        assert!(table.any_evictable());

        assert!(table.evict_oldest(&newcomer));
        assert!(old.conn().is_evicted(), "the oldest waiting for a head goes first");
        assert!(table.evict_oldest(&newcomer));
        assert!(young.conn().is_evicted());
        assert!(table.evict_oldest(&newcomer));
        assert!(body.conn().is_evicted(), "then the one waiting for its body");
        assert!(!table.evict_oldest(&newcomer), "a request being handled, and the newcomer, are never closed");
        assert!(!busy.conn().is_evicted() && !newcomer.conn().is_evicted());
        assert_eq!(table.len(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn deadlines_follow_the_phase() {
        let table = Arc::new(Table::default());
        let settings = Settings::DEFAULT;
        let reg = table.register();
        let conn = reg.conn();
        let start = Instant::now();
        assert_eq!(conn.deadline(&settings), Some(start + settings.header_timeout));
        tokio::time::advance(Duration::from_secs(2)).await;
        conn.saw_bytes();
        assert_eq!(
            conn.deadline(&settings),
            Some(start + settings.header_timeout),
            "the first head counts from connect"
        );
        let guard = conn.request_started(true);
        assert_eq!(conn.deadline(&settings), None);
        drop(guard);
        let idle = Instant::now();
        assert_eq!(conn.deadline(&settings), Some(idle + settings.idle_timeout));
        tokio::time::advance(Duration::from_secs(5)).await;
        conn.saw_bytes();
        assert_eq!(conn.deadline(&settings), Some(Instant::now() + settings.header_timeout));
    }
}
