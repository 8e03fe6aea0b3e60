//! Organizations, tokens, deployments and their transitions.

use super::columns::{DEPLOYMENT_COLUMNS, deployment_row, route_keys_row};
use crate::coordinator::model::{Deployment, Transition};
use crate::coordinator::state::DeploymentState;
use crate::coordinator::store::backend::{DeploymentRows, OrgRows, StateChange};
use crate::coordinator::store::sql::{Param, Sql, SqlRow, i64_of, params};
use crate::coordinator::store::{Caller, NewDeployment, NewToken, RouteKeys, StoreError, TokenRole};

impl<T: Sql> OrgRows for T {
    fn org_id(&mut self, name: &str) -> Result<Option<String>, StoreError> {
        Ok(self.query_opt("SELECT id FROM orgs WHERE name = ?1", params![name])?.map(|r| r.text(0)).transpose()?)
    }

    fn insert_org(&mut self, id: &str, name: &str, now: i64) -> Result<(), StoreError> {
        self.execute("INSERT INTO orgs (id, name, created_at) VALUES (?1, ?2, ?3)", params![id, name, now])?;
        Ok(())
    }

    fn mark_invited(&mut self, org_id: &str, now: i64) -> Result<(), StoreError> {
        self.execute("UPDATE orgs SET invited_at = COALESCE(invited_at, ?1) WHERE id = ?2", params![now, org_id])?;
        Ok(())
    }

    fn insert_token(&mut self, org_id: &str, token: &NewToken<'_>, now: i64) -> Result<(), StoreError> {
        self.execute(
            "INSERT INTO tokens (hash, id, org_id, created_at, role, name) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![token.hash, token.id, org_id, now, token.role.as_str(), token.name],
        )?;
        Ok(())
    }

    fn org_invited(&mut self, name: &str) -> Result<Option<bool>, StoreError> {
        let row = self.query_opt("SELECT invited_at IS NOT NULL FROM orgs WHERE name = ?1", params![name])?;
        row.map(|r| r.bool(0)).transpose().map_err(Into::into)
    }

    fn caller(&mut self, token_hash: &str) -> Result<Option<Caller>, StoreError> {
        let row = self.query_opt(
            "SELECT o.id, o.name, o.invited_at IS NOT NULL, t.id, t.role, t.name FROM tokens t JOIN orgs o ON o.id = t.org_id \
             WHERE t.hash = ?1",
            params![token_hash],
        )?;
        row.map(|r| {
            Ok(Caller {
                org_id: r.text(0)?,
                org_name: r.text(1)?,
                invited: r.bool(2)?,
                token_id: r.text(3)?,
                role: r.spelled(4, TokenRole::parse)?,
                token_name: r.text(5)?,
            })
        })
        .transpose()
    }
}

fn deployments_where<T: Sql>(tx: &mut T, filter: &str, args: &[Param<'_>]) -> Result<Vec<Deployment>, StoreError> {
    let sql = format!("SELECT {DEPLOYMENT_COLUMNS} FROM deployments {filter}");
    tx.query(&sql, args)?.iter().map(deployment_row).collect()
}

fn one_deployment<T: Sql>(tx: &mut T, filter: &str, args: &[Param<'_>]) -> Result<Option<Deployment>, StoreError> {
    Ok(deployments_where(tx, filter, args)?.into_iter().next())
}

impl<T: Sql> DeploymentRows for T {
    fn insert_deployment(&mut self, new: &NewDeployment, reason: &str, now: i64) -> Result<bool, StoreError> {
        Ok(self.execute_unique(
            "INSERT INTO deployments (id, org_id, project, project_json, project_digest, manifest_digest, \
             canonical_hostname, route_id, ceiling_micros, state, state_reason, created_at, updated_at, \
             gateway_operator) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?12, ?13)",
            params![
                &new.id,
                &new.org_id,
                &new.project,
                &new.project_json,
                &new.project_digest,
                &new.manifest_digest,
                &new.canonical_hostname,
                &new.route_id,
                i64_of(new.ceiling_micros)?,
                DeploymentState::PendingFunding.as_str(),
                reason,
                now,
                &new.gateway_operator
            ],
        )?)
    }

    fn deployment(&mut self, id: &str) -> Result<Option<Deployment>, StoreError> {
        one_deployment(self, "WHERE id = ?1", params![id])
    }

    fn org_deployment(&mut self, org_id: &str, id: &str) -> Result<Option<Deployment>, StoreError> {
        one_deployment(self, "WHERE org_id = ?1 AND id = ?2", params![org_id, id])
    }

    fn newest_deployment(&mut self, org_id: &str, project: &str) -> Result<Option<Deployment>, StoreError> {
        let filter =
            format!("WHERE org_id = ?1 AND project = ?2 ORDER BY created_at DESC, {} DESC LIMIT 1", T::ROW_KEY);
        one_deployment(self, &filter, params![org_id, project])
    }

    fn deployments_of(&mut self, org_id: &str) -> Result<Vec<Deployment>, StoreError> {
        let filter = format!("WHERE org_id = ?1 ORDER BY created_at DESC, {} DESC", T::ROW_KEY);
        deployments_where(self, &filter, params![org_id])
    }

    fn active_deployments(&mut self) -> Result<Vec<Deployment>, StoreError> {
        deployments_where(self, "WHERE state <> 'stopped' ORDER BY created_at", &[])
    }

    fn canonical_held_elsewhere(&mut self, canonical: &str, org_id: &str) -> Result<bool, StoreError> {
        let held = self.query_opt(
            "SELECT 1 FROM deployments WHERE canonical_hostname = ?1 AND org_id <> ?2 LIMIT 1",
            params![canonical, org_id],
        )?;
        Ok(held.is_some())
    }

    fn project_json(&mut self, id: &str) -> Result<Option<String>, StoreError> {
        Ok(self
            .query_opt("SELECT project_json FROM deployments WHERE id = ?1", params![id])?
            .map(|r| r.text(0))
            .transpose()?)
    }

    fn gateway_operator(&mut self, id: &str) -> Result<Option<String>, StoreError> {
        Ok(self
            .query_opt("SELECT gateway_operator FROM deployments WHERE id = ?1", params![id])?
            .map(|r| r.text(0))
            .transpose()?)
    }

    fn route_keys(&mut self, id: &str) -> Result<Option<Option<RouteKeys>>, StoreError> {
        self.query_opt("SELECT credential_sha256, route_public_key FROM deployments WHERE id = ?1", params![id])?
            .as_ref()
            .map(route_keys_row)
            .transpose()
    }

    fn set_route_keys(&mut self, id: &str, keys: &RouteKeys) -> Result<bool, StoreError> {
        let changed = self.execute(
            "UPDATE deployments SET credential_sha256 = ?1, route_public_key = ?2 WHERE id = ?3",
            params![&keys.credential_sha256, &keys.route_public_key, id],
        )?;
        Ok(changed > 0)
    }

    fn set_state(&mut self, id: &str, change: &StateChange<'_>) -> Result<(), StoreError> {
        self.execute(
            "UPDATE deployments SET state = ?1, state_reason = ?2, updated_at = ?3, next_period_at = ?4, \
             failure_code = ?5 WHERE id = ?6",
            params![change.to.as_str(), change.reason, change.at, change.next_period_at, change.failure_code, id],
        )?;
        Ok(())
    }

    fn set_reason(&mut self, id: &str, reason: &str, now: i64) -> Result<(), StoreError> {
        self.execute(
            "UPDATE deployments SET state_reason = ?1, updated_at = ?2 WHERE id = ?3 AND state_reason <> ?1",
            params![reason, now, id],
        )?;
        Ok(())
    }

    fn insert_transition(
        &mut self,
        id: &str,
        from: Option<DeploymentState>,
        to: DeploymentState,
        reason: &str,
        at: i64,
    ) -> Result<(), StoreError> {
        self.execute(
            "INSERT INTO transitions (deployment_id, from_state, to_state, reason, at) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![id, from.map(DeploymentState::as_str), to.as_str(), reason, at],
        )?;
        Ok(())
    }

    fn transitions(&mut self, id: &str) -> Result<Vec<Transition>, StoreError> {
        self.query(
            "SELECT seq, from_state, to_state, reason, at FROM transitions WHERE deployment_id = ?1 ORDER BY seq",
            params![id],
        )?
        .iter()
        .map(transition_row)
        .collect()
    }

    fn recent_transitions(&mut self, id: &str, limit: u32) -> Result<Vec<Transition>, StoreError> {
        self.query(
            "SELECT seq, from_state, to_state, reason, at FROM transitions WHERE deployment_id = ?1 \
             ORDER BY seq DESC LIMIT ?2",
            params![id, limit],
        )?
        .iter()
        .map(transition_row)
        .collect()
    }

    fn set_periods(&mut self, id: &str, periods_spent: u64, next_period_at: i64, now: i64) -> Result<(), StoreError> {
        self.execute(
            "UPDATE deployments SET periods_spent = ?1, next_period_at = ?2, updated_at = ?3 WHERE id = ?4",
            params![i64_of(periods_spent)?, next_period_at, now, id],
        )?;
        Ok(())
    }
}

/// One transition row (`seq, from_state, to_state, reason, at`).
fn transition_row(r: &SqlRow) -> Result<Transition, StoreError> {
    Ok(Transition {
        seq: r.i64(0)?,
        from: match r.opt_text(1)? {
            Some(_) => Some(r.spelled(1, DeploymentState::parse)?),
            None => None,
        },
        to: r.spelled(2, DeploymentState::parse)?,
        reason: r.text(3)?,
        at: r.i64(4)?,
    })
}
