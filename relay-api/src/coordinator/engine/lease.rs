//! Which coordinator runs the jobs, when several share one database (issue 19): the one
//! holding the engine lease (a row of `relay_leases`, timed by the database's clock). Every
//! coordinator serves the API, funds, refunds and deploys through the store; only the lease's
//! holder launches jobs, validates routes and moves deployments through their states. The
//! holder renews the lease every [`RENEW`]; the others try for it every [`STANDBY_POLL`], so
//! the jobs of a coordinator killed with `kill -9` run again on another within about
//! [`LEASE_MS`] plus a launch. A coordinator that learns another holds the lease stops its
//! jobs (the new holder's recovery records them as ended with it) and stands by. SQLite's
//! store is one coordinator's: it always holds the lease.
//!
//! The scheduler's transactions check the lease under the writers' lock
//! ([`crate::coordinator::scheduling`]), so a coordinator that stalled past its lease launches
//! nothing more. One that cannot reach the database keeps its jobs serving until it can, and
//! learns then whether another took over: a route goes on serving through an outage of the
//! database rather than going dark for it (docs/decisions.md).

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU16, Ordering};
use std::time::{Duration, Instant};

use super::Engine;
use crate::coordinator::store::random_hex;

/// How long the engine lease lasts unless renewed.
pub(super) const LEASE_MS: i64 = 5_000;
/// How often the holder renews the lease.
pub(super) const RENEW: Duration = Duration::from_secs(1);
/// How often a coordinator standing by tries for the lease.
pub(super) const STANDBY_POLL: Duration = Duration::from_secs(1);

/// This coordinator's claim on the engine lease.
#[derive(Debug)]
pub(super) struct Lease {
    /// The coordinator, as the lease names its holder: unique per process run.
    pub(super) holder: String,
    /// Whether this coordinator's engine leads (runs the jobs) now.
    leading: AtomicBool,
    /// When the lease was last tried for while held, and whether that try failed (the
    /// database out of reach).
    renewed: Mutex<Option<(Instant, bool)>>,
    /// The holder's gateway port, which the URLs name: the route is served there.
    pub(super) public_port: AtomicU16,
}

impl Lease {
    pub(super) fn new(public_port: u16) -> Lease {
        let nonce = random_hex(6).unwrap_or_else(|_| format!("{:x}", now_nanos()));
        Lease {
            holder: format!("pid{}-{nonce}", std::process::id()),
            leading: AtomicBool::new(false),
            renewed: Mutex::new(None),
            public_port: AtomicU16::new(public_port),
        }
    }
}

fn now_nanos() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos())
}

impl Engine {
    /// Whether this coordinator runs the jobs now (it holds the engine lease).
    pub fn leading(&self) -> bool {
        self.lease.leading.load(Ordering::Relaxed)
    }

    /// This coordinator, as the engine lease names it.
    pub fn lease_holder(&self) -> &str {
        &self.lease.holder
    }

    /// Stands by until this coordinator holds the engine lease.
    pub(super) async fn wait_for_lease(&self) {
        let (mut standing_by, mut unreachable) = (false, false);
        loop {
            match self.try_lease() {
                Ok(true) => {
                    if standing_by {
                        tracing::info!("svc relay: this coordinator holds the engine lease now; taking the jobs over");
                    }
                    self.renewed(false);
                    self.lease.leading.store(true, Ordering::Relaxed);
                    return;
                }
                Ok(false) => {
                    if !standing_by {
                        tracing::info!(
                            "svc relay: another coordinator on the database runs the jobs; this one serves the API \
                             and stands by"
                        );
                    }
                    (standing_by, unreachable) = (true, false);
                }
                // Said once per outage, not every second of it.
                Err(e) if !unreachable => {
                    tracing::warn!("svc relay: trying for the engine lease (again every second): {e}");
                    unreachable = true;
                }
                Err(_) => {}
            }
            tokio::time::sleep(STANDBY_POLL).await;
        }
    }

    /// Renews the lease when due: `false` once another coordinator holds it. A database this
    /// coordinator cannot reach does not take the lease from it (see the module's comment).
    pub(super) async fn keep_lease(&self) -> bool {
        let due = self.lease.renewed.lock().map_or(true, |at| at.is_none_or(|(at, _)| at.elapsed() >= RENEW));
        if !due {
            return true;
        }
        let failing = self.lease.renewed.lock().is_ok_and(|at| at.is_some_and(|(_, failed)| failed));
        match self.try_lease() {
            Ok(true) => {
                if failing {
                    tracing::info!(
                        "svc relay: the engine lease is renewed again; this coordinator still runs the jobs"
                    );
                }
                self.renewed(false);
                true
            }
            Ok(false) => {
                tracing::warn!(
                    "svc relay: another coordinator took the engine lease over; stopping this one's jobs and \
                     standing by"
                );
                false
            }
            Err(e) => {
                if !failing {
                    tracing::warn!(
                        "svc relay: renewing the engine lease (again every second; the jobs go on meanwhile): {e}"
                    );
                }
                // Tried again in a second, not at every tick.
                self.renewed(true);
                true
            }
        }
    }

    /// Tries for (or renews) the lease: whether this coordinator holds it. Learns where the
    /// holder's gateway is, for the URLs.
    fn try_lease(&self) -> Result<bool, crate::coordinator::store::StoreError> {
        let own = self.parts.public_port;
        let state = self.db(|store| store.lead(&self.lease.holder, LEASE_MS, own))?;
        if let Some(port) = state.public_port {
            self.lease.public_port.store(port, Ordering::Relaxed);
        }
        Ok(state.held)
    }

    /// Notes a try at renewing, and whether it `failed`.
    fn renewed(&self, failed: bool) {
        if let Ok(mut at) = self.lease.renewed.lock() {
            *at = Some((Instant::now(), failed));
        }
    }

    /// Stops this coordinator's jobs and routes after another took the lease: their records
    /// are the new holder's to keep, so nothing is written.
    pub(super) async fn step_down(&self) {
        self.lease.leading.store(false, Ordering::Relaxed);
        self.stop_local_jobs().await;
        self.parts.gateway.set_routes(Vec::new());
        self.parts.signer.set_routes(Vec::new());
        if let Ok(mut due) = self.validate_at.lock() {
            due.clear();
        }
        if let Ok(mut endings) = self.endings.lock() {
            endings.clear();
        }
    }

    /// Stops every job as the coordinator shuts down. The leader records them as stopped with
    /// it and gives the lease up, so another coordinator takes over at once; one standing by
    /// has no jobs and leaves the records alone.
    pub async fn shut_down(&self) {
        if !self.leading() {
            return;
        }
        self.stop_local_jobs().await;
        // Renewed first: what is recorded next is not written over a successor's jobs.
        if !matches!(self.try_lease(), Ok(true)) {
            return;
        }
        self.record_stopped();
        self.db(|store| store.resign(&self.lease.holder));
    }
}
