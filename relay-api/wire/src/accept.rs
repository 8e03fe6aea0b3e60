//! Accepting connections without spinning. A listener that cannot accept for want of a
//! resource (`EMFILE`/`ENFILE`: no descriptor left; `ENOBUFS`/`ENOMEM`) stays readable, so
//! retrying at once keeps a core busy until something closes. Such an error waits 10 ms, then
//! twice as long after each further error up to 1 s; the next accepted connection resets the
//! wait. Errors that belong to the one connection being accepted (it was reset or aborted
//! while queued) are retried at once: that connection has left the queue, so nothing spins.
//!
//! Used by every accept loop of the gateway (public and tunnel ports) and the agent's direct
//! listener; the gateway's admin port is served by axum, which waits 1 s after such errors.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};

/// The wait after the first resource error of a streak.
pub const FIRST_WAIT: Duration = Duration::from_millis(10);

/// The longest wait.
pub const MAX_WAIT: Duration = Duration::from_secs(1);

/// The accept backoff of one listener.
#[derive(Debug, Default)]
pub struct Backoff {
    /// Resource errors since the last accepted connection.
    errors: u32,
}

impl Backoff {
    /// Accepts the next connection. On an error, first waits as long as the error calls for,
    /// then returns it: a caller that loops on errors never spins.
    pub async fn accept(&mut self, listener: &TcpListener) -> io::Result<(TcpStream, SocketAddr)> {
        match listener.accept().await {
            Ok(accepted) => {
                self.accepted();
                Ok(accepted)
            }
            Err(e) => {
                if let Some(wait) = self.wait_after(&e) {
                    tokio::time::sleep(wait).await;
                }
                Err(e)
            }
        }
    }

    /// A connection was accepted: the streak of errors, if any, is over.
    pub fn accepted(&mut self) {
        self.errors = 0;
    }

    /// How long to wait after `error` before accepting again (`None`: retry at once).
    pub fn wait_after(&mut self, error: &io::Error) -> Option<Duration> {
        if concerns_one_connection(error) {
            return None;
        }
        self.errors = self.errors.saturating_add(1);
        Some(FIRST_WAIT.saturating_mul(1 << (self.errors - 1).min(16)).min(MAX_WAIT))
    }

    /// Resource errors since the last accepted connection: callers log the first of a streak.
    pub fn errors(&self) -> u32 {
        self.errors
    }
}

/// Errors of the queued connection itself, which accept(2) reports on Linux for a connection
/// reset or aborted before it was accepted; the listener is fine.
fn concerns_one_connection(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionRefused
            | io::ErrorKind::Interrupted
            | io::ErrorKind::WouldBlock
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `EMFILE` ("Too many open files") on Linux and the BSDs.
    fn emfile() -> io::Error {
        io::Error::from_raw_os_error(24)
    }

    #[test]
    fn resource_errors_wait_ten_milliseconds_doubling_to_one_second() {
        let mut backoff = Backoff::default();
        let waits: Vec<u64> =
            (0..10).map(|_| backoff.wait_after(&emfile()).map_or(0, |w| w.as_millis() as u64)).collect();
        assert_eq!(waits, [10, 20, 40, 80, 160, 320, 640, 1000, 1000, 1000]);
        assert_eq!(backoff.errors(), 10);
    }

    #[test]
    fn an_accepted_connection_resets_the_wait() {
        let mut backoff = Backoff::default();
        for _ in 0..5 {
            backoff.wait_after(&emfile());
        }
        backoff.accepted();
        assert_eq!(backoff.errors(), 0);
        assert_eq!(backoff.wait_after(&emfile()), Some(FIRST_WAIT));
    }

    #[test]
    fn errors_of_the_queued_connection_are_retried_at_once() {
        let mut backoff = Backoff::default();
        for kind in [io::ErrorKind::ConnectionAborted, io::ErrorKind::ConnectionReset, io::ErrorKind::Interrupted] {
            assert_eq!(backoff.wait_after(&io::Error::from(kind)), None, "{kind:?}");
        }
        assert_eq!(backoff.errors(), 0, "they start no streak");
        // Anything else is taken for a resource error: waiting is the safe side.
        assert_eq!(backoff.wait_after(&io::Error::other("unknown")), Some(FIRST_WAIT));
    }

    #[tokio::test]
    async fn a_listener_that_keeps_failing_is_retried_slowly() {
        // A listener whose socket is shut for reading fails every accept at once (EINVAL),
        // the way one out of descriptors does: the loop must sleep, not spin.
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        socket2::SockRef::from(&listener).shutdown(std::net::Shutdown::Read).expect("shutdown");
        let mut backoff = Backoff::default();
        let start = tokio::time::Instant::now();
        let mut errors = 0;
        while start.elapsed() < Duration::from_millis(300) {
            if backoff.accept(&listener).await.is_err() {
                errors += 1;
            }
        }
        // 10 + 20 + 40 + 80 + 160 ms: six tries in 300 ms, where a busy loop makes thousands.
        assert!((3..=8).contains(&errors), "{errors} accept errors in 300 ms");
    }
}
