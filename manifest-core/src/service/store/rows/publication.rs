//! The publication's rows: organizations, tokens, applications, policy versions, activity,
//! artifacts, images and secrets.

use std::collections::BTreeSet;

use svc_sql::{Sql, SqlError, SqlRow, params};

use super::decided::{self, global_inputs_changed, inputs_changed};
use super::{
    ORGANIZATION_COLUMNS, Tx, VERSION_COLUMNS, accepted_row, evidence_row, int, organization_row, version_row,
};
use crate::service::auth::Role;
use crate::service::capability::Tier;
use crate::service::store::{
    AcceptedArtifact, Activity, Application, ArtifactEvidence, Caller, DecidedOn, DecidedWrite, ExecutionSummary,
    LayerReads, NewToken, Organization, PolicyVersion, PublicationInputs, RuntimeImage, Status, StoreError,
    Transaction,
};

const APPLICATION_COLUMNS: &str = "id, organization_id, application_id, application_uid, status, pause_reason, \
     active_pointer_version, settled, rearmed_version";

fn application_row(r: &SqlRow) -> Result<Application, svc_sql::SqlError> {
    Ok(Application {
        key: r.i64(0)?,
        organization: r.i64(1)?,
        application_id: r.text(2)?,
        application_uid: r.text(3)?,
        status: r.spelled(4, Status::parse)?,
        pause_reason: r.opt_text(5)?,
        active_pointer_version: r.u64(6)?,
        settled: r.bool(7)?,
        rearmed_version: r.u64(8)?,
    })
}

const ACTIVITY_COLUMNS: &str = "at, actor, action, policy_version, status, reason";

fn activity_row(r: &SqlRow) -> Result<Activity, svc_sql::SqlError> {
    Ok(Activity {
        at: r.text(0)?,
        actor: r.text(1)?,
        action: r.text(2)?,
        policy_version: r.opt_u64(3)?,
        status: r.opt_text(4)?,
        reason: r.opt_text(5)?,
    })
}

/// Every row's first column as text.
fn texts<T: FromIterator<String>>(rows: &[SqlRow]) -> Result<T, StoreError> {
    Ok(rows.iter().map(|r| r.text(0)).collect::<Result<T, _>>()?)
}

/// Every row read by `read`.
fn each<T>(rows: &[SqlRow], read: impl Fn(&SqlRow) -> Result<T, svc_sql::SqlError>) -> Result<Vec<T>, StoreError> {
    Ok(rows.iter().map(read).collect::<Result<_, _>>()?)
}

impl<S: Sql> LayerReads for Tx<S> {
    fn grants(&mut self, organization: i64) -> Result<BTreeSet<String>, StoreError> {
        let rows = self
            .sql()
            .query("SELECT capability FROM capability_grants WHERE organization_id = ?1", params![organization])?;
        texts(&rows)
    }

    fn ssh_keys(&mut self, organization: i64) -> Result<Vec<String>, StoreError> {
        let rows = self.sql().query(
            "SELECT public_key FROM ssh_keys WHERE organization_id = ?1 ORDER BY public_key",
            params![organization],
        )?;
        texts(&rows)
    }

    fn jobs_in_use(&mut self, organization: i64, except: i64) -> Result<u64, StoreError> {
        Ok(self.sql().query_one(decided::JOBS_IN_USE, params![organization, except])?.u64(0)?)
    }

    fn curated(&mut self, digest: &str) -> Result<Vec<ArtifactEvidence>, StoreError> {
        let rows = self.sql().query(
            "SELECT cid, digest, kind, encryption, image_digest FROM curated_artifacts WHERE digest = ?1 ORDER BY cid",
            params![digest],
        )?;
        each(&rows, |r| evidence_row(r, 0))
    }

    fn accepted(&mut self, organization: i64, application_id: &str) -> Result<Vec<AcceptedArtifact>, StoreError> {
        let rows = self.sql().query(
            "SELECT repository, ref, workflow_ref, manifest_path, cid, digest, kind, encryption, image_digest
             FROM accepted_artifacts WHERE organization_id = ?1 AND application_id = ?2 ORDER BY id DESC",
            params![organization, application_id],
        )?;
        each(&rows, |r| accepted_row(r, 0))
    }

    fn runtime_images(&mut self, catalog: &str, name: &str) -> Result<Vec<RuntimeImage>, StoreError> {
        let rows = self.sql().query(
            "SELECT catalog, name, version, digest FROM runtime_images WHERE catalog = ?1 AND name = ?2",
            params![catalog, name],
        )?;
        each(&rows, |r| {
            Ok(RuntimeImage { catalog: r.text(0)?, name: r.text(1)?, version: r.text(2)?, digest: r.text(3)? })
        })
    }

    fn provisioned_secrets(&mut self, organization: i64, application_id: &str) -> Result<BTreeSet<String>, StoreError> {
        let rows = self.sql().query(
            "SELECT secret_id FROM provisioned_secrets WHERE organization_id = ?1 AND application_id = ?2",
            params![organization, application_id],
        )?;
        texts(&rows)
    }
}

/// The caller a token's hash (`?1`) names. Every request asks: one fixed statement
/// ([`ORGANIZATION_COLUMNS`], prefixed).
pub(in crate::service::store) const CALLER: &str = "SELECT t.id, t.name, t.role, o.id, o.name, o.entitlement, \
     o.spend_authority_micros FROM tokens t JOIN organizations o ON o.id = t.organization_id WHERE t.token_hash = ?1";

/// A caller from [`CALLER`].
pub(in crate::service::store) fn caller_row(r: &SqlRow) -> Result<Caller, SqlError> {
    Ok(Caller {
        organization: organization_row(r, 3)?,
        token_id: r.text(0)?,
        name: r.text(1)?,
        role: r.spelled(2, Role::parse)?,
    })
}

impl<S: Sql> Transaction for Tx<S> {
    fn commit(mut self: Box<Self>) -> Result<(), StoreError> {
        Ok(self.sql().commit_tx()?)
    }

    fn caller(&mut self, token_hash: &str) -> Result<Option<Caller>, StoreError> {
        Ok(self.sql().query_opt(CALLER, params![token_hash])?.map(|r| caller_row(&r)).transpose()?)
    }

    fn organization(&mut self, name: &str) -> Result<Option<Organization>, StoreError> {
        let sql = format!("SELECT {ORGANIZATION_COLUMNS} FROM organizations WHERE name = ?1");
        Ok(self.sql().query_opt(&sql, params![name])?.map(|r| organization_row(&r, 0)).transpose()?)
    }

    fn publication_inputs(
        &mut self,
        organization: i64,
        application_id: &str,
    ) -> Result<Option<PublicationInputs>, StoreError> {
        decided::publication_inputs(self.sql(), organization, application_id)
    }

    fn organization_inputs(&mut self, organization: i64) -> Result<Option<(Organization, i64)>, StoreError> {
        decided::organization_inputs(self.sql(), organization)
    }

    fn ensure_organization(&mut self, name: &str) -> Result<Organization, StoreError> {
        self.sql().execute("INSERT INTO organizations (name) VALUES (?1) ON CONFLICT DO NOTHING", params![name])?;
        self.organization(name)?.ok_or_else(|| StoreError::NotFound(format!("organization {name}")))
    }

    fn insert_token(&mut self, organization: i64, token: &NewToken) -> Result<(), StoreError> {
        self.sql().execute(
            "INSERT INTO tokens (id, organization_id, role, name, token_hash) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![&token.id, organization, token.role.as_str(), &token.name, &token.hash],
        )?;
        Ok(())
    }

    fn set_grant(&mut self, organization: i64, capability: &str, granted: bool) -> Result<(), StoreError> {
        let sql = if granted {
            "INSERT INTO capability_grants (organization_id, capability) VALUES (?1, ?2) ON CONFLICT DO NOTHING"
        } else {
            "DELETE FROM capability_grants WHERE organization_id = ?1 AND capability = ?2"
        };
        self.sql().execute(sql, params![organization, capability])?;
        inputs_changed(self.sql(), organization)?;
        Ok(())
    }

    fn set_tier(&mut self, organization: i64, tier: Tier) -> Result<(), StoreError> {
        self.sql()
            .execute("UPDATE organizations SET entitlement = ?2 WHERE id = ?1", params![organization, tier.as_str()])?;
        inputs_changed(self.sql(), organization)?;
        Ok(())
    }

    fn set_spend_authority(&mut self, organization: i64, micros: Option<u64>) -> Result<(), StoreError> {
        self.sql().execute(
            "UPDATE organizations SET spend_authority_micros = ?2 WHERE id = ?1",
            params![organization, micros.map(int)],
        )?;
        inputs_changed(self.sql(), organization)?;
        Ok(())
    }

    fn add_ssh_key(&mut self, organization: i64, public_key: &str) -> Result<(), StoreError> {
        self.sql().execute(
            "INSERT INTO ssh_keys (organization_id, public_key) VALUES (?1, ?2) ON CONFLICT DO NOTHING",
            params![organization, public_key],
        )?;
        inputs_changed(self.sql(), organization)?;
        Ok(())
    }

    fn application(&mut self, organization: i64, application_id: &str) -> Result<Option<Application>, StoreError> {
        let sql = format!(
            "SELECT {APPLICATION_COLUMNS} FROM applications WHERE organization_id = ?1 AND application_id = ?2"
        );
        Ok(self
            .sql()
            .query_opt(&sql, params![organization, application_id])?
            .as_ref()
            .map(application_row)
            .transpose()?)
    }

    fn applications(&mut self, organization: i64) -> Result<Vec<Application>, StoreError> {
        let sql = format!(
            "SELECT {APPLICATION_COLUMNS} FROM applications WHERE organization_id = ?1 ORDER BY application_id"
        );
        let rows = self.sql().query(&sql, params![organization])?;
        each(&rows, application_row)
    }

    fn insert_application(
        &mut self,
        organization: i64,
        application_id: &str,
        application_uid: &str,
    ) -> Result<Application, StoreError> {
        let inserted = self.sql().execute(
            "INSERT INTO applications (organization_id, application_id, application_uid) VALUES (?1, ?2, ?3)
             ON CONFLICT DO NOTHING",
            params![organization, application_id, application_uid],
        )?;
        if inserted == 0 {
            return Err(StoreError::Conflict(format!("the application \"{application_id}\" already exists")));
        }
        self.application(organization, application_id)?
            .ok_or_else(|| StoreError::NotFound(format!("application {application_id}")))
    }

    fn update_application(&mut self, a: &Application) -> Result<(), StoreError> {
        // The scheduler looks at the application at once: a pause, a resume or a new pointer
        // changes what it must do.
        self.sql().execute(
            "UPDATE applications SET status = ?2, pause_reason = ?3, active_pointer_version = ?4, settled = ?5,
                 exec_next_at = ?6, rearmed_version = ?7
             WHERE id = ?1",
            params![
                a.key,
                a.status.as_str(),
                a.pause_reason.as_ref(),
                int(a.active_pointer_version),
                a.settled,
                int(crate::service::clock::now_ms()),
                int(a.rearmed_version)
            ],
        )?;
        Ok(())
    }

    fn publish_decided(&mut self, on: &DecidedOn, write: &DecidedWrite) -> Result<Option<u64>, StoreError> {
        decided::publish(self.sql(), on, write)
    }

    fn policy_versions(&mut self, application: i64) -> Result<Vec<PolicyVersion>, StoreError> {
        let sql = format!("SELECT {VERSION_COLUMNS} FROM policy_versions WHERE application_id = ?1 ORDER BY version");
        let rows = self.sql().query(&sql, params![application])?;
        each(&rows, version_row)
    }

    fn policy_version(&mut self, application: i64, version: u64) -> Result<Option<PolicyVersion>, StoreError> {
        let sql = format!("SELECT {VERSION_COLUMNS} FROM policy_versions WHERE application_id = ?1 AND version = ?2");
        Ok(self.sql().query_opt(&sql, params![application, int(version)])?.as_ref().map(version_row).transpose()?)
    }

    fn insert_policy_version(&mut self, application: i64, v: &PolicyVersion) -> Result<(), StoreError> {
        // `ON CONFLICT DO NOTHING` rather than a refused statement: on PostgreSQL a refusal
        // needs a savepoint around it (three round trips, not one).
        let inserted = 0 < self.sql().execute(
            "INSERT INTO policy_versions (application_id, version, schema_version, authored_digest, policy_digest,
             policy, authored, jobs, execution, published_by) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
             ON CONFLICT DO NOTHING",
            params![
                application,
                int(v.version),
                v.schema_version,
                &v.authored_digest,
                &v.policy_digest,
                &v.policy,
                &v.authored,
                int(v.jobs),
                &v.execution,
                &v.published_by
            ],
        )?;
        if !inserted {
            return Err(StoreError::Conflict(format!("policy version {} already exists", v.version)));
        }
        Ok(())
    }

    fn record_activity(&mut self, application: i64, e: &Activity) -> Result<(), StoreError> {
        self.sql().execute(
            "INSERT INTO activity (application_id, at, actor, action, policy_version, status, reason)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![
                application,
                &e.at,
                &e.actor,
                &e.action,
                e.policy_version.map(int),
                e.status.as_ref(),
                e.reason.as_ref()
            ],
        )?;
        Ok(())
    }

    fn activity(&mut self, application: i64) -> Result<Vec<Activity>, StoreError> {
        let sql = format!("SELECT {ACTIVITY_COLUMNS} FROM activity WHERE application_id = ?1 ORDER BY id");
        let rows = self.sql().query(&sql, params![application])?;
        each(&rows, activity_row)
    }

    fn recent_activity(&mut self, application: i64, limit: u32) -> Result<Vec<Activity>, StoreError> {
        let sql =
            format!("SELECT {ACTIVITY_COLUMNS} FROM activity WHERE application_id = ?1 ORDER BY id DESC LIMIT ?2");
        let rows = self.sql().query(&sql, params![application, limit])?;
        each(&rows, activity_row)
    }

    fn record_wakeup(&mut self, application: i64, version: u64) -> Result<(), StoreError> {
        // The scheduler decides at its next step: `update_application`, in the same
        // transaction, set the application due (one statement less per publication).
        self.sql().execute(
            "INSERT INTO wakeups (application_id, policy_version) VALUES (?1, ?2)",
            params![application, int(version)],
        )?;
        Ok(())
    }

    fn wakeups(&mut self, application: i64) -> Result<u64, StoreError> {
        Ok(self
            .sql()
            .query_one("SELECT COUNT(*) FROM wakeups WHERE application_id = ?1", params![application])?
            .u64(0)?)
    }

    fn execution_summary(&mut self, application: i64) -> Result<ExecutionSummary, StoreError> {
        Ok(super::executions::summary(self.sql(), application)?)
    }

    fn executions_page(
        &mut self,
        application: i64,
        before: Option<i64>,
        limit: usize,
    ) -> Result<Vec<svc_execution::Execution>, StoreError> {
        Ok(super::executions::page(self.sql(), application, before, limit)?)
    }

    fn output_after(
        &mut self,
        application: i64,
        execution: Option<&str>,
        after: i64,
        limit: u32,
    ) -> Result<Vec<crate::service::store::OutputRecord>, StoreError> {
        Ok(super::output::after(self.sql(), application, execution, after, limit)?)
    }

    fn output_tail(
        &mut self,
        application: i64,
        execution_id: &str,
        limit: u32,
    ) -> Result<Vec<crate::service::store::OutputRecord>, StoreError> {
        Ok(super::output::tail(self.sql(), application, execution_id, limit)?)
    }

    fn output_drops(
        &mut self,
        application: i64,
        executions: &[&str],
    ) -> Result<Vec<crate::service::store::OutputDrop>, StoreError> {
        Ok(super::output::drops(self.sql(), application, executions)?)
    }

    fn set_secret_value(
        &mut self,
        organization: i64,
        application_id: &str,
        secret_id: &str,
        value: &[u8],
    ) -> Result<(), StoreError> {
        // Sealed in this transaction, under the data key it reads as current.
        let (sealed, data_key) = self.seal_secret(organization, application_id, secret_id, value)?;
        self.sql().execute(
            "INSERT INTO provisioned_secrets (organization_id, application_id, secret_id, value, data_key_id)
             VALUES (?1, ?2, ?3, ?4, ?5)
             ON CONFLICT (organization_id, application_id, secret_id)
             DO UPDATE SET value = excluded.value, data_key_id = excluded.data_key_id",
            params![organization, application_id, secret_id, sealed.as_slice(), data_key],
        )?;
        inputs_changed(self.sql(), organization)?;
        Ok(())
    }

    fn curate(&mut self, a: &ArtifactEvidence) -> Result<(), StoreError> {
        self.sql().execute(
            "INSERT INTO curated_artifacts (cid, digest, kind, encryption, image_digest) VALUES (?1, ?2, ?3, ?4, ?5)
             ON CONFLICT (cid, digest) DO UPDATE SET kind = excluded.kind, encryption = excluded.encryption,
                 image_digest = excluded.image_digest",
            params![&a.cid, &a.digest, &a.kind, &a.encryption, a.image_digest.as_ref()],
        )?;
        global_inputs_changed(self.sql())?;
        Ok(())
    }

    fn accept(&mut self, organization: i64, application_id: &str, a: &AcceptedArtifact) -> Result<(), StoreError> {
        let e = &a.evidence;
        self.sql().execute(
            "INSERT INTO accepted_artifacts (organization_id, application_id, repository, ref, workflow_ref,
             manifest_path, cid, digest, kind, encryption, image_digest)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
            params![
                organization,
                application_id,
                &a.repository,
                &a.git_ref,
                &a.workflow_ref,
                &a.manifest_path,
                &e.cid,
                &e.digest,
                &e.kind,
                &e.encryption,
                e.image_digest.as_ref()
            ],
        )?;
        inputs_changed(self.sql(), organization)?;
        Ok(())
    }

    fn add_runtime_image(&mut self, i: &RuntimeImage) -> Result<(), StoreError> {
        self.sql().execute(
            "INSERT INTO runtime_images (catalog, name, version, digest) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (catalog, name, version) DO UPDATE SET digest = excluded.digest",
            params![&i.catalog, &i.name, &i.version, &i.digest],
        )?;
        global_inputs_changed(self.sql())?;
        Ok(())
    }

    fn provision_secret(&mut self, organization: i64, application_id: &str, secret_id: &str) -> Result<(), StoreError> {
        self.sql().execute(
            "INSERT INTO provisioned_secrets (organization_id, application_id, secret_id) VALUES (?1, ?2, ?3)
             ON CONFLICT DO NOTHING",
            params![organization, application_id, secret_id],
        )?;
        inputs_changed(self.sql(), organization)?;
        Ok(())
    }
}
