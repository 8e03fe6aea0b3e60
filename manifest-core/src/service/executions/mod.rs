//! Executions of published applications: the scheduler run by the publication service.
//!
//! - [`projection`]: `svc.execution-convergence.v1`, what the console and `svc app
//!   executions` read;
//! - [`runner`]: the executor's thread: steps at every due time and at every wakeup.

pub mod projection;
pub mod runner;
