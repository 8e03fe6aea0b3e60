//! Pricing: the quotes that fund a deployment (which project and hostnames they bind, which
//! one is still open to fund) and how long its money lasts.

use super::Engine;
use crate::coordinator::model::{Deployment, Funding, Quote, SuccessorState};
use crate::coordinator::money;
use crate::coordinator::state::DeploymentState;
use crate::coordinator::store::{StoreError, now_ms, random_hex};

impl Engine {
    /// The hostnames a quote binds: canonical first, then the customer's not removed.
    pub fn quoted_hostnames(&self, d: &Deployment) -> Result<Vec<String>, StoreError> {
        let mut names = vec![d.canonical_hostname.clone()];
        names.extend(self.db(|store| store.hostnames(&d.id))?.into_iter().map(|h| h.hostname));
        Ok(names)
    }

    /// Prices `periods` periods of the deployment and records the quote.
    pub fn quote(&self, d: &Deployment, periods: u64) -> Result<Quote, StoreError> {
        let quote = self.price(&d.id, &self.quoted_digest(d)?, self.quoted_hostnames(d)?, periods)?;
        self.db(|store| store.add_quote(&quote))?;
        Ok(quote)
    }

    /// The project digest a quote of the deployment binds: its own, or its successor's when
    /// it serves nothing (the successor takes over at once, `engine::redeploy`, and only its
    /// quote funds the deployment then).
    ///
    /// Read from the store, the successor first and the deployment then: a deploy's answer
    /// holds the deployment as it was before its successor was recorded, and the engine may
    /// switch to the successor (removing it) between two reads; read in this order, either the
    /// successor is seen or the deployment already runs its project (CI found the stale quote
    /// offered again when the deployment was read first, from before the switch).
    pub(super) fn quoted_digest(&self, d: &Deployment) -> Result<String, StoreError> {
        let successor = self.db(|store| store.successor(&d.id))?.filter(|s| s.state != SuccessorState::Failed);
        let now = self.db(|store| store.deployment(&d.id))?;
        if now.state.spends() {
            return Ok(now.project_digest);
        }
        Ok(successor.map_or(now.project_digest, |s| s.project_digest))
    }

    /// The quote a deployment waiting for funds is to fund: its newest if that can still be
    /// funded (unfunded, not about to expire, for the project it runs next and its
    /// hostnames), else a new one of `periods` periods. A stale or expired quote is never
    /// handed out to fund (issue 41).
    pub fn open_quote(&self, d: &Deployment, periods: u64) -> Result<Quote, StoreError> {
        let (digest, hostnames) = (self.quoted_digest(d)?, self.quoted_hostnames(d)?);
        let newest = self.db(|store| store.quotes(&d.id))?.into_iter().next();
        match newest {
            Some(q) if q.is_open_for(&digest, &hostnames, now_ms()) => Ok(q),
            _ => {
                let quote = self.price(&d.id, &digest, hostnames, periods)?;
                self.db(|store| store.add_quote(&quote))?;
                Ok(quote)
            }
        }
    }

    /// Prices `periods` periods of a deployment serving `hostnames` (not recorded).
    pub fn price(
        &self,
        deployment_id: &str,
        project_digest: &str,
        hostnames: Vec<String>,
        periods: u64,
    ) -> Result<Quote, StoreError> {
        let config = &self.parts.config;
        let total = config.price_micros.checked_mul(periods).ok_or_else(|| StoreError::Refused {
            code: "amount_too_large",
            message: format!("{periods} periods are beyond what can be quoted"),
        })?;
        let now = now_ms();
        Ok(Quote {
            id: format!("quo_{}", random_hex(8)?),
            deployment_id: deployment_id.to_owned(),
            project_digest: project_digest.to_owned(),
            hostnames,
            price_micros: config.price_micros,
            period_secs: config.period.as_secs().max(1),
            periods,
            total_micros: total,
            created_at: now,
            expires_at: now.saturating_add(i64::try_from(config.quote_ttl.as_millis()).unwrap_or(i64::MAX)),
            funded_at: None,
        })
    }

    /// How long the deployment's money lasts, at the engine's clock.
    pub fn funding(&self, d: &Deployment) -> Result<Funding, StoreError> {
        let sessions = self.db(|store| store.sessions(&d.id))?;
        let now = i64::try_from(self.parts.clock.now()).unwrap_or(i64::MAX);
        let runs = matches!(
            d.state,
            DeploymentState::Provisioning
                | DeploymentState::Validating
                | DeploymentState::Live
                | DeploymentState::Degraded
        );
        Ok(money::funding(&sessions, runs, now))
    }
}
