//! How the accept loop waits after a failed `accept`: out of descriptors (EMFILE, ENFILE)
//! or memory, retrying at once only spins both cores; 10 ms doubling to 1 s, reset by the
//! next success. An error about one connection (reset or aborted before it was accepted)
//! is not the listener's and is retried at once.

use std::io;
use std::time::Duration;

/// The first wait.
const FIRST: Duration = Duration::from_millis(10);
/// The longest wait.
const MAX: Duration = Duration::from_secs(1);

/// The wait after the next accept error.
#[derive(Debug)]
pub(crate) struct Backoff {
    next: Duration,
}

impl Backoff {
    pub(crate) fn new() -> Backoff {
        Backoff { next: FIRST }
    }

    /// An accept failed: how long to wait before the next.
    pub(crate) fn failed(&mut self) -> Duration {
        let wait = self.next;
        self.next = (self.next * 2).min(MAX);
        wait
    }

    /// An accept succeeded.
    pub(crate) fn reset(&mut self) {
        self.next = FIRST;
    }

    /// Whether the last accept failed (a streak is under way).
    pub(crate) fn in_streak(&self) -> bool {
        self.next > FIRST
    }
}

/// An error about one pending connection, not the listener: retry at once.
pub(crate) fn is_connection_error(e: &io::Error) -> bool {
    matches!(e.kind(), io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset | io::ErrorKind::Interrupted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_double_from_10_ms_to_1_s_and_reset_on_success() {
        let mut b = Backoff::new();
        let waits: Vec<u128> = (0..9).map(|_| b.failed().as_millis()).collect();
        assert_eq!(waits, [10, 20, 40, 80, 160, 320, 640, 1000, 1000]);
        assert!(b.in_streak());
        b.reset();
        assert!(!b.in_streak());
        assert_eq!(b.failed(), FIRST);
    }

    #[test]
    fn only_errors_of_one_connection_are_retried_at_once() {
        assert!(is_connection_error(&io::Error::from(io::ErrorKind::ConnectionAborted)));
        // EMFILE (24) and ENFILE (23) are the listener's trouble.
        assert!(!is_connection_error(&io::Error::from_raw_os_error(24)));
        assert!(!is_connection_error(&io::Error::from_raw_os_error(23)));
    }
}
