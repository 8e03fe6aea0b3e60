//! Executions of published applications: the scheduler run by the publication service.
//!
//! - [`plan`]: a stored policy version as the scheduler's plan and a job's workload;
//! - [`projection`]: `svc.execution-convergence.v1`, what the console and `svc app
//!   executions` read;
//! - [`runner`]: the executor's thread: steps at every due time and at every wakeup.

pub mod plan;
pub mod projection;
pub mod runner;
