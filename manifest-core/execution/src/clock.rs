//! Time as the scheduler sees it: Unix milliseconds from a [`Clock`], so tests run windows of
//! hours in microseconds ([`ManualClock`]) while users get real time ([`SystemClock`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Unix time in milliseconds.
pub type Millis = u64;

/// Where the scheduler reads the time.
pub trait Clock: Send + Sync {
    /// Now, in Unix milliseconds.
    fn now(&self) -> Millis;
}

/// The system's real-time clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Millis {
        let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
    }
}

/// A clock that moves only when told: shared by clones.
#[derive(Debug, Clone, Default)]
pub struct ManualClock(Arc<AtomicU64>);

impl ManualClock {
    /// A clock reading `at`.
    pub fn at(at: Millis) -> ManualClock {
        ManualClock(Arc::new(AtomicU64::new(at)))
    }

    /// Moves the clock forward by `ms`.
    pub fn advance(&self, ms: Millis) {
        self.0.fetch_add(ms, Ordering::SeqCst);
    }

    /// Sets the clock (never backwards: an earlier time is ignored).
    pub fn set(&self, at: Millis) {
        self.0.fetch_max(at, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Millis {
        self.0.load(Ordering::SeqCst)
    }
}
