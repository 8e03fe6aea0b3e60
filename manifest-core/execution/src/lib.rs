//! Executions: how a published application's policy becomes running jobs.
//!
//! - [`plan`]: what one policy version asks for (slots, windows, phasing, modes, renewal,
//!   update, recovery, spend), in the scheduler's terms;
//! - [`scheduler`]: the pure decision: from what is recorded and the time, what to launch,
//!   stop, retry, replace or settle next, each rule citing the SPEC row it runs;
//! - [`spend`]: the charges a launch would add, checked against the spend authority;
//! - [`unserved`]: charges follow the paid window: what a generation's charge covers after
//!   the service's own crash, and the refund of the time nothing served;
//! - [`market`]: the compute network as a trait; [`simulated`] is a pool that runs no
//!   process, for tests and benchmarks; [`local`] runs each job as confined processes on
//!   this machine, from the content-addressed [`artifacts`] store; [`bundle`]: the bounds
//!   and path check of an app's files sent in a request;
//! - [`executor`]: records each decision with its effect in an [`executor::ExecutionStore`]
//!   so that a crash at any moment launches no slot generation twice;
//! - [`reason`]: a stable code and a sentence for people, for holds, failures and refusals;
//! - [`record`]: executions and the view of one application the scheduler reads;
//! - [`memory`]: an in-memory execution store for tests;
//! - [`clock`]: Unix milliseconds from a real or a manual clock;
//! - [`money`]: amounts as people read them (`USD 0.25`, `1.25 DOT`, `USD 0.25 per hour`), the
//!   one formatter of every text for people.

#![forbid(unsafe_code)]

pub mod artifacts;
pub mod bundle;
pub mod clock;
pub mod executor;
pub mod local;
pub mod market;
pub mod memory;
pub use svc_money as money;
pub mod output;
pub mod plan;
pub mod reason;
pub mod record;
pub mod scheduler;
pub mod simulated;
pub mod spend;
pub mod unserved;

pub use clock::{Clock, ManualClock, Millis, SystemClock};
pub use market::{
    JobOrder, JobState, JobStatus, Market, Placement, Quote, Refusal, Sidecar, StopMode, Workload, WorkloadRuntime,
};
pub use plan::Plan;
pub use reason::Reason;
pub use record::{AppKey, AppStatus, AppView, ExecKey, ExecState, Execution};
pub use simulated::SimulatedPool;
