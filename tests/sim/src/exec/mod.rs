//! The scheduler and executor (`svc-execution`) under a seeded schedule of events and faults:
//! the in-memory store behind a fault wrapper, the simulated pool behind another, a manual
//! clock, and crashes of the service at any commit or market call followed by a restart.

mod apps;
mod faults;
mod invariants;
mod world;

pub use world::{Summary, replay, run};
