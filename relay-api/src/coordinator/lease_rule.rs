//! The engine lease's rule, pure (issue 41): who may hold the lease, as the database decides
//! it ([`grant`]: what PostgreSQL's `lead()` does in SQL, `store/postgres.rs`, and a
//! differential test checks they agree), and when a holder may step by its own clock
//! ([`OwnClock`], which `engine/lease.rs` keeps). Only `std`: the simulator (`tests/sim`)
//! includes this file as it is and runs many coordinators over it (`docs/simulation.md`).

use std::ops::Add;
use std::time::Duration;

/// How long the engine lease lasts unless renewed, by the database's clock.
pub const LEASE_MS: i64 = 5_000;
/// How often the holder renews the lease (after its last try ended).
pub const RENEW: Duration = Duration::from_secs(1);
/// How often a coordinator standing by tries for the lease (after its last try ended).
pub const STANDBY_POLL: Duration = Duration::from_secs(1);
/// How much sooner than the database the holder counts its lease as run out: it stops
/// stepping before another coordinator may take over.
pub const MARGIN: Duration = Duration::from_millis(1_500);

/// The lease's row, as the database holds it (`relay_leases`, name `engine`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseRow {
    /// The coordinator holding it.
    pub holder: String,
    /// When it runs out, by the database's clock (Unix ms).
    pub expires_at: i64,
    /// The holder's gateway port.
    pub public_port: u16,
}

/// What one try for the lease gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// Whether the coordinator that tried holds the lease now.
    pub held: bool,
    /// The holder's gateway port, if any coordinator holds it.
    pub public_port: Option<u16>,
    /// The row afterwards.
    pub row: Option<LeaseRow>,
}

/// Coordinator `holder` (its gateway on `public_port`) tries for the lease at `now_db_ms` by
/// the database's clock, for `lease_ms`, over the `current` row. Its holder renews it
/// whenever it can, even once it has run out; another takes it only once it has been out for
/// a further lease (`expires_at + lease_ms <= now`): after a short outage of the database the
/// holder, alive all along, renews first instead of racing the standbys.
pub fn grant(current: Option<&LeaseRow>, holder: &str, public_port: u16, now_db_ms: i64, lease_ms: i64) -> Grant {
    let free = current.is_none_or(|row| row.holder == holder || row.expires_at + lease_ms <= now_db_ms);
    if free {
        let row = LeaseRow { holder: holder.to_owned(), expires_at: now_db_ms + lease_ms, public_port };
        Grant { held: true, public_port: Some(public_port), row: Some(row) }
    } else {
        Grant { held: false, public_port: current.map(|row| row.public_port), row: current.cloned() }
    }
}

/// The holder's own view of its lease: it may step until its last renewal's start plus
/// [`LEASE_MS`], less [`MARGIN`], by its own clock (`T`: an `Instant`, or the simulator's
/// time). Counting from the start of the renewal, not its answer, covers a slow call: the
/// database set the lease's end after the call started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OwnClock<T> {
    valid_until: Option<T>,
}

impl<T> Default for OwnClock<T> {
    fn default() -> OwnClock<T> {
        OwnClock { valid_until: None }
    }
}

impl<T: Copy + Ord + Add<Duration, Output = T>> OwnClock<T> {
    /// A renewal that started at `started` (by this coordinator's clock) was granted.
    pub fn renewed(&mut self, started: T) {
        let lease = Duration::from_millis(u64::try_from(LEASE_MS).unwrap_or(0));
        self.valid_until = Some(started + lease.saturating_sub(MARGIN));
    }

    /// Whether the lease holds at `now` by this coordinator's clock.
    pub fn valid(&self, now: T) -> bool {
        self.valid_until.is_some_and(|until| now < until)
    }

    /// Until when it holds, if it was ever granted.
    pub fn until(&self) -> Option<T> {
        self.valid_until
    }
}
