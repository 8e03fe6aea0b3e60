//! What to fix about a deployment, ranked: its funding, its job's failure, its failed
//! validations, its replicas, its hostnames and a failed successor.

use svc_execution::money::{usd, usd_per};

use super::{Engine, JOB_EXITED, redeploy};
use crate::coordinator::model::{Deployment, SuccessorState};
use crate::coordinator::state::DeploymentState;
use crate::coordinator::store::StoreError;
use crate::hint::{self, Hint, Stage};

impl Engine {
    /// What to fix, ranked.
    pub fn hints(&self, d: &Deployment) -> Result<Vec<Hint>, StoreError> {
        let mut hints = Vec::new();
        let balance = self.db(|store| store.balance(&d.id))?;
        let price = self.parts.config.price_micros;
        match d.state {
            DeploymentState::PendingFunding => hints.push(Hint::new(
                "quote_unfunded",
                Stage::Funding,
                format!(
                    "the deployment has {} available, less than one period ({})",
                    usd(balance.available_micros),
                    usd_per(price, self.parts.config.period.as_secs())
                ),
                "fund a quote: `svc ingress fund` (within the project's spend.ceilingMicros)",
            )),
            DeploymentState::Failed if d.failure_code.as_deref() == Some(JOB_EXITED) => hints.push(Hint::new(
                JOB_EXITED,
                Stage::Job,
                d.state_reason.clone(),
                "read why in `svc ingress logs` (the app's last lines and its exit status), fix the app, then \
                 `svc ingress deploy` again (the deployment relaunches with the fixed revision)",
            )),
            DeploymentState::Failed => hints.push(Hint::new(
                "job_failed",
                Stage::Job,
                d.state_reason.clone(),
                "fix the app, then `svc ingress deploy` again (the deployment relaunches with the fixed revision)",
            )),
            DeploymentState::Live | DeploymentState::Degraded => {
                let funding = self.funding(d)?;
                if let Some(end) = funding.runs_out_at.filter(|_| funding.low) {
                    let now = i64::try_from(self.parts.clock.now()).unwrap_or(i64::MAX);
                    hints.push(Hint::new(
                        "funds_low",
                        Stage::Funding,
                        format!(
                            "the funds run out {} ({} left); the route stops serving then",
                            svc_execution::money::relative(now, end),
                            usd(funding.remaining_micros)
                        ),
                        "fund more periods before then: `svc ingress fund`",
                    ))
                }
            }
            _ => {}
        }
        if d.state.runs_job() {
            for v in self.db(|store| store.latest_validations(&d.id))? {
                if !v.passed
                    && let Ok(h) = serde_json::from_value::<Hint>(v.detail.clone())
                {
                    hints.push(h);
                }
            }
        }
        if d.state.runs_job() {
            hints.extend(self.replica_hints(d));
        }
        for h in self.db(|store| store.hostnames(&d.id))? {
            hints.extend(h.hints);
        }
        if let Some(s) = self.db(|store| store.successor(&d.id))?.filter(|s| s.state == SuccessorState::Failed) {
            hints.push(redeploy::failed_hint(d, &s));
        }
        hint::rank(&mut hints);
        hints.dedup();
        Ok(hints)
    }
}
