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
//! The lease is renewed by a task of its own, whatever a tick waits for (a probe of a route
//! that never answers must not hand the jobs over). The engine steps only while its lease is
//! valid by its own clock (the last renewal's start plus [`LEASE_MS`], less a margin), and the
//! scheduler's transactions check the lease under the writers' lock
//! ([`crate::coordinator::scheduling`]). One that cannot reach the database keeps its jobs
//! serving, without stepping, until it can, and learns then whether another took over: a
//! route goes on serving through an outage of the database rather than going dark for it
//! (docs/decisions.md).

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU16, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use super::Engine;
use crate::coordinator::lease_rule::{self, OwnClock};
use crate::coordinator::store::{StoreError, random_hex};

/// How long the engine lease lasts unless renewed.
pub(super) const LEASE_MS: i64 = lease_rule::LEASE_MS;
/// How often the holder renews the lease.
pub(super) const RENEW: Duration = lease_rule::RENEW;
/// How often a coordinator standing by tries for the lease.
pub(super) const STANDBY_POLL: Duration = lease_rule::STANDBY_POLL;
/// Every this many polls (10 s), a coordinator standing by sweeps the files of deploys it
/// received that no revision in use needs.
const STANDBY_SWEEP_EVERY: u32 = 10;

/// This coordinator's claim on the engine lease.
#[derive(Debug)]
pub(super) struct Lease {
    /// The coordinator, as the lease names its holder: unique per process run.
    pub(super) holder: String,
    /// Whether this coordinator's engine leads (runs the jobs) now.
    leading: AtomicBool,
    /// Set once another coordinator holds the lease this one held.
    lost: AtomicBool,
    /// Wakes the engine when the lease is lost.
    lost_now: Notify,
    /// Until when the lease holds by this coordinator's clock (the last renewal's start,
    /// plus the lease, less [`lease_rule::MARGIN`]).
    valid_until: Mutex<OwnClock<Instant>>,
    /// The renewing task, stopped before the lease is given up.
    renewer: Mutex<Option<tokio::task::AbortHandle>>,
    /// The holder's gateway port, which the URLs name: the route is served there.
    pub(super) public_port: AtomicU16,
}

impl Lease {
    pub(super) fn new(public_port: u16) -> Lease {
        let nonce = random_hex(6).unwrap_or_else(|_| format!("{:x}", now_nanos()));
        Lease {
            holder: format!("pid{}-{nonce}", std::process::id()),
            leading: AtomicBool::new(false),
            lost: AtomicBool::new(false),
            lost_now: Notify::new(),
            valid_until: Mutex::new(OwnClock::default()),
            renewer: Mutex::new(None),
            public_port: AtomicU16::new(public_port),
        }
    }

    /// Whether the lease holds by this coordinator's clock, and was not lost.
    pub(super) fn valid(&self) -> bool {
        !self.lost.load(Ordering::Relaxed) && self.valid_until.lock().is_ok_and(|until| until.valid(Instant::now()))
    }

    pub(super) fn lost(&self) -> bool {
        self.lost.load(Ordering::Relaxed)
    }

    /// Notes a renewal that started at `started`.
    fn renewed(&self, started: Instant) {
        if let Ok(mut until) = self.valid_until.lock() {
            until.renewed(started);
        }
    }

    fn stop_renewing(&self) {
        if let Some(task) = self.renewer.lock().ok().and_then(|mut task| task.take()) {
            task.abort();
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

    /// Stands by until this coordinator holds the engine lease, then renews it from a task of
    /// its own until it is lost.
    pub(super) async fn wait_for_lease(self: &Arc<Self>) {
        let (mut standing_by, mut unreachable, mut polls) = (false, false, 0u32);
        loop {
            let started = Instant::now();
            match self.try_lease() {
                Ok(true) => {
                    if standing_by {
                        tracing::info!("svc relay: this coordinator holds the engine lease now; taking the jobs over");
                    }
                    self.lease.renewed(started);
                    self.lease.lost.store(false, Ordering::Relaxed);
                    self.lease.leading.store(true, Ordering::Relaxed);
                    let renewer = tokio::spawn(Arc::clone(self).renew_lease());
                    if let Ok(mut task) = self.lease.renewer.lock() {
                        *task = Some(renewer.abort_handle());
                    }
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
            polls = polls.wrapping_add(1);
            if standing_by && polls.is_multiple_of(STANDBY_SWEEP_EVERY) {
                let config = &self.parts.config;
                self.db(|store| {
                    crate::coordinator::files::sweep(store, &config.deployments_dir(), &config.jobs_dir, false)
                });
            }
            tokio::time::sleep(STANDBY_POLL).await;
        }
    }

    /// Renews the lease every [`RENEW`] until another coordinator holds it. A database this
    /// coordinator cannot reach does not take the lease from it (see the module's comment).
    async fn renew_lease(self: Arc<Self>) {
        let mut failing = false;
        loop {
            tokio::time::sleep(RENEW).await;
            let started = Instant::now();
            match self.try_lease() {
                Ok(true) => {
                    if failing {
                        tracing::info!(
                            "svc relay: the engine lease is renewed again; this coordinator still runs the jobs"
                        );
                    }
                    self.lease.renewed(started);
                    failing = false;
                }
                Ok(false) => {
                    tracing::warn!(
                        "svc relay: another coordinator took the engine lease over; stopping this one's jobs and \
                         standing by"
                    );
                    self.lease.lost.store(true, Ordering::Relaxed);
                    self.lease.lost_now.notify_one();
                    return;
                }
                Err(e) => {
                    if !failing {
                        tracing::warn!(
                            "svc relay: renewing the engine lease (again every second; the jobs go on serving, and \
                             the deployments are stepped once it is renewed): {e}"
                        );
                    }
                    failing = true;
                }
            }
        }
    }

    /// Waits until the lease is valid again (`true`), or lost (`false`), or `limit` passed
    /// (`true` if valid).
    pub(super) async fn lease_valid_within(&self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        while !self.lease.valid() && !self.lease.lost() && Instant::now() < deadline {
            tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(100)) => {}
                () = self.lease.lost_now.notified() => {}
            }
        }
        self.lease.valid()
    }

    /// Sleeps a tick, or less if woken or the lease is lost.
    pub(super) async fn pause(&self, tick: Duration) {
        tokio::select! {
            () = tokio::time::sleep(tick) => {}
            () = self.wake.notified() => {}
            () = self.lease.lost_now.notified() => {}
        }
    }

    /// Tries for (or renews) the lease: whether this coordinator holds it. Learns where the
    /// holder's gateway is, for the URLs.
    fn try_lease(&self) -> Result<bool, StoreError> {
        let own = self.parts.public_port;
        let state = self.db(|store| store.lead(&self.lease.holder, LEASE_MS, own))?;
        if let Some(port) = state.public_port {
            self.lease.public_port.store(port, Ordering::Relaxed);
        }
        Ok(state.held)
    }

    /// Stops this coordinator's jobs and routes after another took the lease: their records
    /// are the new holder's to keep, so nothing is written.
    pub(super) async fn step_down(&self) {
        self.lease.stop_renewing();
        self.lease.leading.store(false, Ordering::Relaxed);
        self.stop_local_jobs().await;
        {
            let _in_order = self.syncing.lock().await;
            self.parts.gateway.set_routes(Vec::new());
            self.parts.signer.set_routes(Vec::new());
        }
        if let Ok(mut due) = self.validate_at.lock() {
            due.clear();
        }
        if let Ok(mut agenda) = self.agenda.lock() {
            agenda.clear();
        }
        if let Ok(mut endings) = self.endings.lock() {
            endings.clear();
        }
    }

    /// Stops every job as the coordinator shuts down. The leader records them as stopped with
    /// it (only while it holds the lease, checked in the same transaction) and gives the lease
    /// up, so another coordinator takes over at once; one standing by has no jobs and leaves
    /// the records alone.
    pub async fn shut_down(&self) {
        self.lease.stop_renewing();
        if !self.leading() {
            return;
        }
        self.stop_local_jobs().await;
        let stopped =
            svc_execution::Reason::new("coordinator_stopped", "the coordinator stopped; its jobs end with it");
        match self.db(|store| store.stop_live_executions(&self.lease.holder, &stopped)) {
            Ok(_) => self.db(|store| store.resign(&self.lease.holder)),
            Err(StoreError::NotLeader(_)) => {
                tracing::warn!("svc relay: another coordinator took the jobs over as this one stopped");
            }
            Err(e) => tracing::error!("svc relay: recording the jobs stopped with the coordinator: {e}"),
        }
    }
}
