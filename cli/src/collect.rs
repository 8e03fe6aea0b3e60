//! Giving the allocator's freed memory back when a runtime worker goes idle (issue 44, point
//! 2; `docs/performance.md`, "Agent memory per idle tunneled connection").
//!
//! mimalloc takes back a page emptied by frees (this thread's, or another's: tokio moves tasks
//! between its workers) only when the page's own thread allocates again or collects, and it
//! gives freed memory to the system only from a collection. A tokio worker that parks after a
//! burst does neither: an idle agent kept what its connections had freed when they hibernated
//! (10.0-13.6 MiB per 1,000 idle tunneled connections against 6.8 MiB live). So the agent's
//! runtime collects when a worker parks, at most once per [`INTERVAL`] (100 ms) per worker.
//!
//! The collection is the binary's (`main.rs`: the one audited FFI call into the allocator it
//! installs, `docs/decisions.md`); this library forbids unsafe code and takes it as a plain
//! function through [`set_allocator_collect`]. Without one (tests, another allocator), the
//! runtime has no hook.

use std::cell::Cell;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The shortest time between two collections on one worker. A collection costs microseconds
/// (it visits the worker's pages and returns the empty ones); at most ten a second per worker
/// did not show in a busy agent's CPU per GiB, and a worker that parks for good after a
/// burst leaves at most 100 ms of its frees uncollected (once a second read 7.6-9.4 MiB per
/// 1,000 idle connections on a loaded machine, 100 ms 7.2-7.5: docs/performance.md, "Fourth
/// round").
const INTERVAL: Duration = Duration::from_millis(100);

static COLLECT: OnceLock<fn()> = OnceLock::new();

/// Sets the allocator's collection for the calling thread's heap, which the agent's runtime
/// calls when a worker parks (`svc agent run`). The first call wins; the binary makes it once,
/// before any runtime starts.
pub fn set_allocator_collect(collect: fn()) {
    // A second call keeps the first: one allocator per process.
    let _ = COLLECT.set(collect);
}

/// The collection the binary set, if any.
pub(crate) fn allocator_collect() -> Option<fn()> {
    COLLECT.get().copied()
}

/// Calls `collect` on `builder`'s worker threads just before one parks, when [`due`]: the first
/// park of a worker, then at most once per [`INTERVAL`].
pub(crate) fn on_park(builder: &mut tokio::runtime::Builder, collect: fn()) -> &mut tokio::runtime::Builder {
    builder.on_thread_park(move || {
        thread_local! {
            // When this worker last collected.
            static LAST: Cell<Option<Instant>> = const { Cell::new(None) };
        }
        LAST.with(|last| {
            if due(last.get(), Instant::now()) {
                collect();
                last.set(Some(Instant::now()));
            }
        });
    })
}

/// Whether a worker that last collected at `last` (never: `None`) collects when it parks at
/// `now`.
fn due(last: Option<Instant>, now: Instant) -> bool {
    last.is_none_or(|last| now.saturating_duration_since(last) >= INTERVAL)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn a_worker_collects_at_its_first_park_then_at_most_once_per_interval() {
        let t0 = Instant::now();
        assert!(due(None, t0), "the first park collects");
        assert!(!due(Some(t0), t0), "not again at once");
        assert!(!due(Some(t0), t0 + INTERVAL - Duration::from_millis(1)), "not within the interval");
        assert!(due(Some(t0), t0 + INTERVAL), "once the interval has passed");
        assert!(!due(Some(t0 + INTERVAL), t0), "a clock read before the collection is not late");
    }

    static COLLECTED: AtomicUsize = AtomicUsize::new(0);

    fn count() {
        COLLECTED.fetch_add(1, Ordering::SeqCst);
    }

    #[test]
    fn the_agent_runtime_collects_when_a_worker_parks() {
        // A spawned task that sleeps makes a worker park (the timer is waited for parked), so
        // the hook has run by the time the task is joined: no clock in the assertion.
        let sleep_on_a_worker = |rt: &tokio::runtime::Runtime| {
            rt.block_on(async {
                tokio::spawn(tokio::time::sleep(Duration::from_millis(1))).await.expect("the task ends");
            });
        };
        let agent = crate::ingress::agent_runtime(Some(count)).expect("a runtime");
        sleep_on_a_worker(&agent);
        assert!(COLLECTED.load(Ordering::SeqCst) >= 1, "a parking worker of the agent's runtime collects");
    }
}
