//! `gateway-prep init`: the operator key, the registration with the coordinator, the
//! gateway configuration, the tunnel certificate and the systemd unit.
//!
//! Three steps, each its own module and tested alone:
//!
//! 1. [`settings`]: the flags, checked and normalized in one step; a value that cannot be
//!    used is refused naming its flag, before any file is read.
//! 2. [`plan`]: from the settings and what is on the host now, every file and what to do
//!    with it: create, update (init wrote it, and the inputs changed), unchanged, or changed
//!    (someone edited it since init wrote it, which the registration record's SHA-256 shows),
//!    and whether to register. A changed file stops init before anything is written or
//!    registered, unless `--force`. Planning reads the host, writes nothing and sends
//!    nothing; `--dry-run` reports the plan.
//! 3. [`apply`]: the key, the registration (once: its record, `operator.json`, makes later
//!    runs skip it), then the other files and the record, each written atomically.

pub mod apply;
pub mod error;
pub mod files;
pub mod gateway;
pub mod keys;
pub mod plan;
pub mod record;
pub mod report;
pub mod settings;
pub mod unit;
pub mod warnings;

#[cfg(test)]
mod fixture;

pub use error::InitError;
pub use report::{InitReport, RegistrationAction, RegistrationReport};
pub use settings::{Settings, SettingsError};

use plan::Plan;
use warnings::operator_warnings;

/// Runs init with checked settings: plans (refusing a changed file, a host registered
/// elsewhere, a missing flag), then applies the plan, or in a dry run reports it with the
/// coordinator's warnings.
pub async fn execute(settings: &Settings) -> Result<InitReport, InitError> {
    let plan = Plan::new(settings)?;
    if settings.dry_run {
        let mut report = plan.report();
        report.warnings = operator_warnings(&plan.client, plan.operator_name()).await;
        return Ok(report);
    }
    apply::apply(settings, plan).await
}
