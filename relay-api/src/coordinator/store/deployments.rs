//! Organizations, tokens and deployments: creation with hostnames and quote, the state
//! machine, and stopping (which settles the running period).

use super::backend::{NewEntry, StateChange, Transaction};
use super::{
    Caller, NewDeployment, NewToken, PublishedPolicy, RelayStore, RouteKeys, StoreError, TokenRole, get_deployment,
    not_found, now_ms, random_hex,
};
use super::{ledger, refused};
use crate::coordinator::model::{Deployment, EntryKind, Quote, Transition};
use crate::coordinator::money::Terms;
use crate::coordinator::state::{DeploymentState, TransitionError};

/// Writes a state change of `d`, its transition and its log line.
fn record_change(tx: &mut dyn Transaction, d: &Deployment, change: &StateChange<'_>) -> Result<(), StoreError> {
    tx.set_state(&d.id, change)?;
    tx.insert_transition(&d.id, Some(d.state), change.to, change.reason, change.at)?;
    let line = format!("{} -> {}: {}", d.state, change.to, change.reason);
    tx.append_logs(&d.id, "route", &[line], change.at)?;
    // What the deployment's jobs should be changed with it: the scheduler decides now.
    tx.wake(&d.id, change.at)
}

impl RelayStore {
    /// Creates the organization if needed and records its invitation; returns its ID.
    pub fn invite(&self, org: &str) -> Result<String, StoreError> {
        self.write(|tx| {
            let id = ensure_org(tx, org)?;
            tx.mark_invited(&id, now_ms())?;
            Ok(id)
        })
    }

    /// Creates the organization if needed (without an invitation); returns its ID.
    pub fn ensure_org(&self, org: &str) -> Result<String, StoreError> {
        self.write(|tx| ensure_org(tx, org))
    }

    /// Records a token (by its hash) for organization `org`. A customer token needs the
    /// organization invited (refused `not_invited`, nothing created: a token that could only
    /// ever be answered 403 helps no one); an operator token names its gateway operator, which
    /// is recorded as an organization if new. Returns the organization's ID.
    pub fn add_token(&self, org: &str, token: &NewToken<'_>) -> Result<String, StoreError> {
        self.write(|tx| {
            if token.role == TokenRole::Customer && tx.org_invited(org)? != Some(true) {
                return Err(refused(
                    "not_invited",
                    format!("organization \"{org}\" is not invited to the ingress add-on; no token was issued"),
                ));
            }
            let org_id = ensure_org(tx, org)?;
            tx.insert_token(&org_id, token, now_ms())?;
            Ok(org_id)
        })
    }

    /// Whether organization `org` holds an invitation (`None`: there is no such organization).
    pub fn invited(&self, org: &str) -> Result<Option<bool>, StoreError> {
        self.read(|tx| tx.org_invited(org))
    }

    /// Who presents the token with this hash.
    pub fn caller(&self, token_hash: &str) -> Result<Option<Caller>, StoreError> {
        self.read(|tx| tx.caller(token_hash))
    }

    /// Creates a deployment in `pending_funding` with its customer hostnames and its first
    /// quote, recording the transition: all of it, or (a hostname taken, a crash) none.
    pub fn create_deployment(&self, new: &NewDeployment) -> Result<Deployment, StoreError> {
        self.write(|tx| {
            let now = now_ms();
            let reason = "created; fund the quote to launch it";
            if !tx.insert_deployment(new, reason, now)? {
                return Err(refused(
                    "hostname_taken",
                    format!("{} is already served by another running deployment", new.canonical_hostname),
                ));
            }
            tx.insert_transition(&new.id, None, DeploymentState::PendingFunding, reason, now)?;
            for (hostname, token) in &new.hostnames {
                if !tx.insert_hostname(&new.id, hostname, token, now)? {
                    return Err(refused("hostname_taken", format!("{hostname} belongs to another deployment")));
                }
            }
            if let Some(quote) = &new.quote {
                tx.insert_quote(quote)?;
            }
            tx.insert_policy(&new.id, &PublishedPolicy { revision: 1, published_at: now, ..new.policy.clone() })?;
            super::revisions::put_bundle(&self.keys, tx, &new.id, 1, &new.bundle)?;
            tx.wake(&new.id, now)?;
            get_deployment(tx, &new.id)
        })
    }

    /// Whether another organization ever had a deployment under `canonical`: a canonical
    /// name stays its first organization's, stopped or not (`<project>-<org>` is not
    /// injective: org `c` with project `a-b` and org `b-c` with project `a` both make `a-b-c`).
    pub fn canonical_held_elsewhere(&self, canonical: &str, org_id: &str) -> Result<bool, StoreError> {
        self.read(|tx| tx.canonical_held_elsewhere(canonical, org_id))
    }

    /// A deployment by ID.
    pub fn deployment(&self, id: &str) -> Result<Deployment, StoreError> {
        self.read(|tx| get_deployment(tx, id))
    }

    /// The newest deployment of `project` in the organization, or, for a deployment ID
    /// (`dep_...`; project names hold no `_`), that deployment if it is the organization's:
    /// older and stopped deployments stay reachable, their money included.
    pub fn deployment_of(&self, org_id: &str, project: &str) -> Result<Option<Deployment>, StoreError> {
        self.read(|tx| {
            if project.starts_with("dep_") {
                tx.org_deployment(org_id, project)
            } else {
                tx.newest_deployment(org_id, project)
            }
        })
    }

    /// The organization's deployments, newest first.
    pub fn deployments_of(&self, org_id: &str) -> Result<Vec<Deployment>, StoreError> {
        self.read(|tx| tx.deployments_of(org_id))
    }

    /// Every deployment not stopped (the engine's work list).
    pub fn active_deployments(&self) -> Result<Vec<Deployment>, StoreError> {
        self.read(|tx| tx.active_deployments())
    }

    /// The project file of a deployment, as JSON text.
    pub fn project_json(&self, id: &str) -> Result<String, StoreError> {
        self.read(|tx| tx.project_json(id))?.ok_or_else(|| not_found(format!("deployment {id}")))
    }

    /// How the coordinator recognises the deployment's current job; `None` before its first
    /// launch.
    pub fn route_keys(&self, id: &str) -> Result<Option<RouteKeys>, StoreError> {
        self.read(|tx| tx.route_keys(id))?.ok_or_else(|| not_found(format!("deployment {id}")))
    }

    /// Records the keys of the job about to be launched (the previous job's stop working).
    pub fn set_route_keys(&self, id: &str, keys: &RouteKeys) -> Result<(), StoreError> {
        self.write(|tx| if tx.set_route_keys(id, keys)? { Ok(()) } else { Err(not_found(format!("deployment {id}"))) })
    }

    /// Moves a deployment to `to` (when the machine allows it) and records why. Moving to the
    /// state it is already in changes nothing and records nothing. Returns the deployment.
    pub fn transition(&self, id: &str, to: DeploymentState, reason: &str) -> Result<Deployment, StoreError> {
        self.transition_at(id, to, reason, now_ms())
    }

    /// [`RelayStore::transition`] at a given time (tests drive their own clock).
    pub fn transition_at(
        &self,
        id: &str,
        to: DeploymentState,
        reason: &str,
        now: i64,
    ) -> Result<Deployment, StoreError> {
        self.transition_with(id, to, reason, None, now)
    }

    /// Moves a deployment to `failed`, with a stable code for its hint (`job_exited`).
    pub fn fail(&self, id: &str, code: &str, reason: &str) -> Result<Deployment, StoreError> {
        self.transition_with(id, DeploymentState::Failed, reason, Some(code), now_ms())
    }

    fn transition_with(
        &self,
        id: &str,
        to: DeploymentState,
        reason: &str,
        failure_code: Option<&str>,
        now: i64,
    ) -> Result<Deployment, StoreError> {
        let (from, d) = self.write(|tx| -> Result<_, StoreError> {
            let d = get_deployment(tx, id)?;
            if d.state == to {
                return Ok((to, d));
            }
            if !d.state.may_become(to) {
                return Err(TransitionError { from: d.state, to }.into());
            }
            // Leaving the spending states ends the period clock; a new one starts when live again.
            let next_period_at = if to.runs_job() { d.next_period_at } else { None };
            record_change(tx, &d, &StateChange { to, reason, next_period_at, failure_code, at: now })?;
            Ok((d.state, get_deployment(tx, id)?))
        })?;
        // One line per change, once it is committed (issue 42): what an operator watching the
        // relay's terminal wants to see; a step that changes nothing writes none.
        if from != to {
            tracing::info!(deployment = %id, "svc relay: deployment {id} ({}) {from} -> {to}: {reason}", d.project);
        }
        Ok(d)
    }

    /// Updates the reason of the current state (without a transition) when it changed.
    pub fn set_reason(&self, id: &str, reason: &str) -> Result<(), StoreError> {
        self.write(|tx| tx.set_reason(id, reason, now_ms()))
    }

    /// The deployment's newest `limit` transitions, newest first.
    pub fn recent_transitions(&self, id: &str, limit: u32) -> Result<Vec<Transition>, StoreError> {
        self.read(|tx| tx.recent_transitions(id, limit))
    }

    /// Every transition of a deployment, oldest first.
    pub fn transitions(&self, id: &str) -> Result<Vec<Transition>, StoreError> {
        self.read(|tx| tx.transitions(id))
    }

    /// Records a quote.
    pub fn add_quote(&self, quote: &Quote) -> Result<(), StoreError> {
        self.write(|tx| tx.insert_quote(quote))
    }

    /// The deployment's quotes, newest first.
    pub fn quotes(&self, deployment_id: &str) -> Result<Vec<Quote>, StoreError> {
        self.read(|tx| tx.quotes(deployment_id))
    }

    /// Stops a deployment, in one transaction: the transition, the running period settled at
    /// `now` (the rest of it unserved, so refundable), and a `stop` entry. Periods never
    /// started stay refundable (`refund`). Stopping twice changes nothing.
    pub fn stop(&self, deployment_id: &str, reason: &str, terms: &Terms, now: i64) -> Result<Deployment, StoreError> {
        self.write(|tx| {
            let d = get_deployment(tx, deployment_id)?;
            if d.state == DeploymentState::Stopped {
                return Ok(d);
            }
            let change =
                StateChange { to: DeploymentState::Stopped, reason, next_period_at: None, failure_code: None, at: now };
            // The failure code stays what it was: a stop is not a failure.
            tx.set_state(deployment_id, &StateChange { failure_code: d.failure_code.as_deref(), ..change })?;
            tx.insert_transition(deployment_id, Some(d.state), change.to, reason, now)?;
            tx.append_logs(deployment_id, "route", &[format!("{} -> stopped: {reason}", d.state)], now)?;
            ledger::settle_running(tx, deployment_id, terms, now)?;
            let entry = NewEntry {
                kind: EntryKind::Stop,
                amount_micros: 0,
                quote_id: None,
                period_index: None,
                note: "spending stopped",
                at: now,
            };
            tx.insert_entry(deployment_id, &entry)?;
            tx.remove_hostnames(deployment_id)?;
            tx.delete_successors(deployment_id)?;
            // Its jobs stop now: the scheduler decides at once.
            tx.wake(deployment_id, now)?;
            get_deployment(tx, deployment_id)
        })
    }
}

/// The organization's ID, creating it (its name checked by the one organization rule) if
/// new; existing names stay reachable whatever rule they were made under.
fn ensure_org(tx: &mut dyn Transaction, org: &str) -> Result<String, StoreError> {
    if let Some(id) = tx.org_id(org)? {
        return Ok(id);
    }
    manifest_core::names::organization(org).map_err(|e| refused("invalid_org", e.to_string()))?;
    let id = format!("org_{}", random_hex(8)?);
    tx.insert_org(&id, org, now_ms())?;
    Ok(id)
}
