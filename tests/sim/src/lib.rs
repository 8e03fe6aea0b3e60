//! A seeded deterministic simulator, in the manner of FoundationDB's simulation and
//! TigerBeetle's VOPR: each part is a pure step loop over a virtual clock (no threads, no
//! tokio, no wall clock, no IO), every random choice comes from one seeded PRNG, and the
//! invariants are checked after every step. A failing seed prints itself and its trace and
//! replays exactly (`cargo run -p svc-sim --release -- --seed N`). `docs/simulation.md`.
//!
//! - [`exec`]: the scheduler and executor under market faults, store outages and slow calls,
//!   and crashes of the service at any commit or market call;
//! - [`lease`]: the relay's engine lease between coordinators with skewed, drifting clocks,
//!   slow calls, database outages and kill -9;
//! - [`switch`]: a redeploy's route switch (the relay's `may_switch`) through gateway hosts
//!   following the feed, which freeze, die, lag, lose calls and lose agents;
//! - [`trace`]: a run's trace, how a failure prints, and the findings known to be open.

use std::collections::BTreeMap;

pub mod exec;
pub mod lease;
pub mod switch;
pub mod trace;

pub use trace::{Failure, KNOWN_OPEN, Trace, known};

/// Runs every part for `seed`: the first failure, if any.
pub fn run(seed: u64) -> Result<(), Failure> {
    exec::run(seed)?;
    lease::run(seed)?;
    switch::run(seed)
}

/// What exploring a range of seeds found.
#[derive(Debug, Default)]
pub struct Exploration {
    /// Seeds run (every part each).
    pub seeds: u64,
    /// Known open findings hit: by code, how many seeds and the first.
    pub known: BTreeMap<&'static str, (u64, u64)>,
    /// The first failure that is not a known finding (or any, if strict): exploring stops.
    pub failure: Option<Failure>,
}

/// Runs seeds `from..from + count`, every part each, stopping at the first failure that is
/// not a [`KNOWN_OPEN`] finding (at any, if `strict`).
pub fn explore(from: u64, count: u64, strict: bool) -> Exploration {
    let mut found = Exploration::default();
    for seed in from..from.saturating_add(count) {
        found.seeds += 1;
        let failures = [exec::run(seed).err(), lease::run(seed).err(), switch::run(seed).err()];
        for failure in failures.into_iter().flatten() {
            if !strict && known(failure.code) {
                let entry = found.known.entry(failure.code).or_insert((0, seed));
                entry.0 += 1;
            } else {
                found.failure = Some(failure);
                return found;
            }
        }
    }
    found
}
