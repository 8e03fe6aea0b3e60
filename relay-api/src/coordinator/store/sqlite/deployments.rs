//! Organizations, tokens, deployments and their transitions, in SQL.

use rusqlite::{OptionalExtension, params};

use super::rows::{DEPLOYMENT_COLUMNS, deployment_row, i64_of, route_keys_row, spelled};
use super::{SqliteTransaction, unique_violation};
use crate::coordinator::model::{Deployment, Transition};
use crate::coordinator::state::DeploymentState;
use crate::coordinator::store::backend::{DeploymentRows, OrgRows, StateChange};
use crate::coordinator::store::{Caller, NewDeployment, RouteKeys, StoreError, TokenRole};

impl OrgRows for SqliteTransaction<'_> {
    fn org_id(&mut self, name: &str) -> Result<Option<String>, StoreError> {
        Ok(self.conn.query_row("SELECT id FROM orgs WHERE name = ?1", [name], |r| r.get(0)).optional()?)
    }

    fn insert_org(&mut self, id: &str, name: &str, now: i64) -> Result<(), StoreError> {
        self.conn.execute("INSERT INTO orgs (id, name, created_at) VALUES (?1, ?2, ?3)", params![id, name, now])?;
        Ok(())
    }

    fn mark_invited(&mut self, org_id: &str, now: i64) -> Result<(), StoreError> {
        self.conn
            .execute("UPDATE orgs SET invited_at = COALESCE(invited_at, ?1) WHERE id = ?2", params![now, org_id])?;
        Ok(())
    }

    fn insert_token(
        &mut self,
        org_id: &str,
        token_id: &str,
        hash: &str,
        role: TokenRole,
        now: i64,
    ) -> Result<(), StoreError> {
        self.conn.execute(
            "INSERT INTO tokens (hash, id, org_id, created_at, role) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![hash, token_id, org_id, now, role.as_str()],
        )?;
        Ok(())
    }

    fn caller(&mut self, token_hash: &str) -> Result<Option<Caller>, StoreError> {
        let caller = self
            .conn
            .prepare_cached(
                "SELECT o.id, o.name, o.invited_at IS NOT NULL, t.id, t.role FROM tokens t JOIN orgs o ON o.id = t.org_id \
                 WHERE t.hash = ?1",
            )?
            .query_row([token_hash], |r| {
                Ok(Caller {
                    org_id: r.get(0)?,
                    org_name: r.get(1)?,
                    invited: r.get(2)?,
                    token_id: r.get(3)?,
                    role: spelled(r, 4, TokenRole::parse)?,
                })
            })
            .optional()?;
        Ok(caller)
    }
}

impl SqliteTransaction<'_> {
    fn deployments_where(&mut self, filter: &str, args: &[&str]) -> Result<Vec<Deployment>, StoreError> {
        let sql = format!("SELECT {DEPLOYMENT_COLUMNS} FROM deployments {filter}");
        let mut stmt = self.conn.prepare_cached(&sql)?;
        let rows = stmt.query_map(rusqlite::params_from_iter(args), deployment_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn one_deployment(&mut self, filter: &str, args: &[&str]) -> Result<Option<Deployment>, StoreError> {
        Ok(self.deployments_where(filter, args)?.into_iter().next())
    }
}

impl DeploymentRows for SqliteTransaction<'_> {
    fn insert_deployment(&mut self, new: &NewDeployment, reason: &str, now: i64) -> Result<bool, StoreError> {
        let inserted = self.conn.execute(
            "INSERT INTO deployments (id, org_id, project, project_json, project_digest, manifest_digest, \
             canonical_hostname, route_id, ceiling_micros, state, state_reason, created_at, updated_at, \
             gateway_operator) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?12, ?13)",
            params![
                new.id,
                new.org_id,
                new.project,
                new.project_json,
                new.project_digest,
                new.manifest_digest,
                new.canonical_hostname,
                new.route_id,
                i64_of(new.ceiling_micros)?,
                DeploymentState::PendingFunding.as_str(),
                reason,
                now,
                new.gateway_operator
            ],
        );
        if unique_violation(&inserted) {
            return Ok(false);
        }
        inserted?;
        Ok(true)
    }

    fn deployment(&mut self, id: &str) -> Result<Option<Deployment>, StoreError> {
        self.one_deployment("WHERE id = ?1", &[id])
    }

    fn org_deployment(&mut self, org_id: &str, id: &str) -> Result<Option<Deployment>, StoreError> {
        self.one_deployment("WHERE org_id = ?1 AND id = ?2", &[org_id, id])
    }

    fn newest_deployment(&mut self, org_id: &str, project: &str) -> Result<Option<Deployment>, StoreError> {
        self.one_deployment(
            "WHERE org_id = ?1 AND project = ?2 ORDER BY created_at DESC, rowid DESC LIMIT 1",
            &[org_id, project],
        )
    }

    fn deployments_of(&mut self, org_id: &str) -> Result<Vec<Deployment>, StoreError> {
        self.deployments_where("WHERE org_id = ?1 ORDER BY created_at DESC, rowid DESC", &[org_id])
    }

    fn active_deployments(&mut self) -> Result<Vec<Deployment>, StoreError> {
        self.deployments_where("WHERE state <> 'stopped' ORDER BY created_at", &[])
    }

    fn canonical_held_elsewhere(&mut self, canonical: &str, org_id: &str) -> Result<bool, StoreError> {
        let held: Option<i64> = self
            .conn
            .query_row(
                "SELECT 1 FROM deployments WHERE canonical_hostname = ?1 AND org_id <> ?2 LIMIT 1",
                params![canonical, org_id],
                |r| r.get(0),
            )
            .optional()?;
        Ok(held.is_some())
    }

    fn project_json(&mut self, id: &str) -> Result<Option<String>, StoreError> {
        Ok(self.conn.query_row("SELECT project_json FROM deployments WHERE id = ?1", [id], |r| r.get(0)).optional()?)
    }

    fn gateway_operator(&mut self, id: &str) -> Result<Option<String>, StoreError> {
        Ok(self
            .conn
            .query_row("SELECT gateway_operator FROM deployments WHERE id = ?1", [id], |r| r.get(0))
            .optional()?)
    }

    fn route_keys(&mut self, id: &str) -> Result<Option<Option<RouteKeys>>, StoreError> {
        Ok(self
            .conn
            .query_row(
                "SELECT credential_sha256, route_public_key FROM deployments WHERE id = ?1",
                [id],
                route_keys_row,
            )
            .optional()?)
    }

    fn set_route_keys(&mut self, id: &str, keys: &RouteKeys) -> Result<bool, StoreError> {
        let changed = self.conn.execute(
            "UPDATE deployments SET credential_sha256 = ?1, route_public_key = ?2 WHERE id = ?3",
            params![keys.credential_sha256, keys.route_public_key, id],
        )?;
        Ok(changed > 0)
    }

    fn set_state(&mut self, id: &str, change: &StateChange<'_>) -> Result<(), StoreError> {
        self.conn.execute(
            "UPDATE deployments SET state = ?1, state_reason = ?2, updated_at = ?3, next_period_at = ?4, \
             failure_code = ?5 WHERE id = ?6",
            params![change.to.as_str(), change.reason, change.at, change.next_period_at, change.failure_code, id],
        )?;
        Ok(())
    }

    fn set_reason(&mut self, id: &str, reason: &str, now: i64) -> Result<(), StoreError> {
        self.conn.execute(
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
        self.conn.execute(
            "INSERT INTO transitions (deployment_id, from_state, to_state, reason, at) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![id, from.map(DeploymentState::as_str), to.as_str(), reason, at],
        )?;
        Ok(())
    }

    fn transitions(&mut self, id: &str) -> Result<Vec<Transition>, StoreError> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT seq, from_state, to_state, reason, at FROM transitions WHERE deployment_id = ?1 ORDER BY seq",
        )?;
        let rows = stmt.query_map([id], transition_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn recent_transitions(&mut self, id: &str, limit: u32) -> Result<Vec<Transition>, StoreError> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT seq, from_state, to_state, reason, at FROM transitions WHERE deployment_id = ?1 \
             ORDER BY seq DESC LIMIT ?2",
        )?;
        let rows = stmt.query_map(rusqlite::params![id, limit], transition_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn set_periods(&mut self, id: &str, periods_spent: u64, next_period_at: i64, now: i64) -> Result<(), StoreError> {
        self.conn.execute(
            "UPDATE deployments SET periods_spent = ?1, next_period_at = ?2, updated_at = ?3 WHERE id = ?4",
            params![i64_of(periods_spent)?, next_period_at, now, id],
        )?;
        Ok(())
    }
}

/// One transition row (`seq, from_state, to_state, reason, at`).
fn transition_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Transition> {
    let from: Option<String> = r.get(1)?;
    Ok(Transition {
        seq: r.get(0)?,
        from: match from {
            Some(_) => Some(spelled(r, 1, DeploymentState::parse)?),
            None => None,
        },
        to: spelled(r, 2, DeploymentState::parse)?,
        reason: r.get(3)?,
        at: r.get(4)?,
    })
}
