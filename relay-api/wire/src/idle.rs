//! When a connection that carries bytes both ways is over though neither side closed it: the
//! gateway's relay and the agent's served connections share these rules.
//!
//! - **Idle**: no byte has moved either way for [`Timeouts::idle`] (default 5 minutes): the
//!   connection is closed.
//! - **Linger after a half-close**: once one side has ended its sending (its FIN arrived, or
//!   our side shut its write), the other direction may go on only while it moves bytes: it is
//!   closed once it has been quiet for [`Timeouts::linger`] (default 10 s). A reply still
//!   streaming after the client's half-close goes on; a peer that never closes its side (a
//!   client in FIN-WAIT-2 on our end, an agent that never answers) is let go quickly.
//!
//! Every move of bytes is one clock read and one relaxed store; one timer per connection
//! sleeps until the deadline and checks again, so a busy connection costs one timer wake per
//! idle period.
//!
//! A connection can also be closed from outside ([`Activity::close`]): the gateway closes a
//! route's longest-idle connection of its largest holder to admit a newcomer. That wakes the
//! same timer, so it costs the relay nothing until it happens.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::Notify;
use tokio::time::Instant;

/// How long a connection may stay quiet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// No byte either way for this long closes the connection.
    pub idle: Duration,
    /// After one side has ended its sending, the other direction quiet for this long closes
    /// the connection.
    pub linger: Duration,
}

impl Timeouts {
    /// 5 minutes idle (longer than browsers keep idle connections and than most long polls),
    /// 10 s after a half-close.
    pub const DEFAULT: Timeouts = Timeouts { idle: Duration::from_secs(300), linger: Duration::from_secs(10) };
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts::DEFAULT
    }
}

/// When bytes last moved on one connection, and whether a side has ended its sending.
#[derive(Debug)]
pub struct Activity {
    start: Instant,
    /// Milliseconds from `start` to the last move.
    last: AtomicU64,
    ended: AtomicBool,
    /// Closed from outside: over now, whatever the timeouts.
    closed: AtomicBool,
    /// Wakes [`Activity::expired`] when a side ends (its deadline moves closer) or the
    /// connection is closed.
    end: Notify,
}

impl Default for Activity {
    fn default() -> Self {
        Activity::new()
    }
}

impl Activity {
    /// A connection active now.
    pub fn new() -> Activity {
        Activity {
            start: Instant::now(),
            last: AtomicU64::new(0),
            ended: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            end: Notify::new(),
        }
    }

    /// Bytes moved.
    pub fn touch(&self) {
        let now = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last.store(now, Ordering::Relaxed);
    }

    /// A side has ended its sending; from now on the linger applies.
    pub fn end(&self) {
        self.touch();
        if !self.ended.swap(true, Ordering::Relaxed) {
            self.end.notify_one();
        }
    }

    /// Whether a side has ended its sending.
    pub fn has_ended(&self) -> bool {
        self.ended.load(Ordering::Relaxed)
    }

    /// When bytes last moved (the connection's start if none has).
    pub fn last_move(&self) -> Instant {
        self.start + Duration::from_millis(self.last.load(Ordering::Relaxed))
    }

    /// Closes the connection now: [`Activity::expired`] and [`Activity::closed`] return.
    pub fn close(&self) {
        self.closed.store(true, Ordering::Relaxed);
        // Stores a permit if nothing waits yet, so a waiter that comes later returns too.
        self.end.notify_one();
    }

    /// Whether [`Activity::close`] was called.
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Relaxed)
    }

    /// Returns once [`Activity::close`] is called: for the time before bytes move (the
    /// gateway waiting for a data connection). Not to be awaited beside
    /// [`Activity::expired`], which shares its wake-up.
    pub async fn closed(&self) {
        while !self.is_closed() {
            self.end.notified().await;
        }
    }

    /// The moment the connection is over if nothing moves before it.
    fn deadline(&self, timeouts: Timeouts) -> Instant {
        let quiet = if self.has_ended() { timeouts.linger } else { timeouts.idle };
        self.last_move() + quiet
    }

    /// Returns once the connection has been quiet for longer than `timeouts` allow, or has
    /// been closed.
    pub async fn expired(&self, timeouts: Timeouts) {
        loop {
            if self.is_closed() {
                return;
            }
            let deadline = self.deadline(timeouts);
            if Instant::now() >= deadline {
                return;
            }
            tokio::select! {
                () = tokio::time::sleep_until(deadline) => {}
                () = self.end.notified() => {}
            }
        }
    }
}

/// A stream that records its reads and writes in an [`Activity`]: a read of 0 bytes (the
/// peer's FIN) and a shutdown of our side both end a side's sending.
#[derive(Debug)]
pub struct Watched<S> {
    inner: S,
    activity: Arc<Activity>,
}

impl<S> Watched<S> {
    /// Watches `inner`.
    pub fn new(inner: S, activity: Arc<Activity>) -> Watched<S> {
        Watched { inner, activity }
    }

    /// The watched stream.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let room = buf.remaining() > 0;
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = polled {
            if buf.filled().len() > before {
                self.activity.touch();
            } else if room {
                self.activity.end();
            }
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = polled
            && n > 0
        {
            self.activity.touch();
        }
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if let Poll::Ready(Ok(n)) = polled
            && n > 0
        {
            self.activity.touch();
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let polled = Pin::new(&mut self.inner).poll_shutdown(cx);
        if polled.is_ready() {
            self.activity.end();
        }
        polled
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Real time: the runtime's paused clock needs a tokio feature the workspace does not
    // build. The bounds below allow a loaded machine 150 ms late.
    const T: Timeouts = Timeouts { idle: Duration::from_millis(400), linger: Duration::from_millis(100) };
    const LATE: Duration = Duration::from_millis(150);

    fn within(elapsed: Duration, expected: Duration) -> bool {
        elapsed >= expected && elapsed <= expected + LATE
    }

    #[tokio::test]
    async fn a_quiet_connection_expires_after_the_idle_timeout() {
        let activity = Activity::new();
        let start = Instant::now();
        activity.expired(T).await;
        assert!(within(start.elapsed(), T.idle), "{:?}", start.elapsed());
    }

    #[tokio::test]
    async fn moving_bytes_puts_the_deadline_off() {
        let activity = Arc::new(Activity::new());
        let start = Instant::now();
        let mover = {
            let activity = activity.clone();
            tokio::spawn(async move {
                for _ in 0..3 {
                    tokio::time::sleep(Duration::from_millis(250)).await;
                    activity.touch();
                }
            })
        };
        activity.expired(T).await;
        mover.await.expect("mover");
        // The last move after about 750 ms, then the idle timeout of quiet.
        assert!(start.elapsed() >= Duration::from_millis(750) + T.idle, "{:?}", start.elapsed());
    }

    #[tokio::test]
    async fn after_a_side_ends_the_linger_applies_at_once() {
        let activity = Arc::new(Activity::new());
        let start = Instant::now();
        let ender = {
            let activity = activity.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(100)).await;
                activity.end();
            })
        };
        // The watchdog sleeps towards the idle deadline and is woken by the end.
        activity.expired(T).await;
        ender.await.expect("ender");
        assert!(within(start.elapsed(), Duration::from_millis(100) + T.linger), "{:?}", start.elapsed());
        assert!(activity.has_ended());
    }

    #[tokio::test]
    async fn closing_ends_a_wait_at_once() {
        let activity = Arc::new(Activity::new());
        let start = Instant::now();
        let closer = {
            let activity = activity.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(50)).await;
                activity.close();
            })
        };
        activity.expired(T).await;
        closer.await.expect("closer");
        assert!(start.elapsed() < T.idle, "closed, not expired: {:?}", start.elapsed());
        // Closed before anyone waits: both waits return at once.
        let early = Activity::new();
        early.close();
        tokio::time::timeout(LATE, early.closed()).await.expect("closed() returns");
        tokio::time::timeout(LATE, early.expired(T)).await.expect("expired() returns");
    }

    #[tokio::test]
    async fn the_last_move_is_the_start_until_bytes_move() {
        let activity = Activity::new();
        let started = activity.last_move();
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(activity.last_move(), started);
        activity.touch();
        assert!(activity.last_move() >= started + Duration::from_millis(20));
    }

    #[tokio::test]
    async fn a_watched_stream_records_moves_and_ends() {
        let (a, b) = tokio::io::duplex(64);
        let activity = Arc::new(Activity::new());
        let mut watched = Watched::new(a, activity.clone());
        let mut peer = b;
        tokio::time::sleep(Duration::from_millis(20)).await;
        tokio::io::AsyncWriteExt::write_all(&mut watched, b"hello").await.expect("write");
        assert!(activity.last.load(Ordering::Relaxed) >= 20, "the write was recorded");
        let mut got = [0u8; 5];
        tokio::io::AsyncReadExt::read_exact(&mut peer, &mut got).await.expect("read");
        assert!(!activity.has_ended());
        drop(peer);
        let mut rest = Vec::new();
        tokio::io::AsyncReadExt::read_to_end(&mut watched, &mut rest).await.expect("read to the end");
        assert!(activity.has_ended(), "the peer's end was seen");
    }
}
