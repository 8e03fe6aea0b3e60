//! The write of a publication decided on a snapshot ([`crate::service::store::decided`]), and
//! the inputs revision it is checked against.

use std::collections::BTreeSet;

use svc_sql::{Backend, Sql, SqlError, SqlRow, params};

use super::{Tx, accepted_row, int, organization_row};
use crate::service::store::{
    Activity, Application, DecidedOn, DecidedWrite, Organization, PolicyVersion, PublicationInputs, Status, StoreError,
    Transaction,
};

/// Job slots held by an organization's applications other than one: the jobs of each one's
/// active version, unless it is disabled or settled. `?1` is the organization, `?2` the
/// application left out.
pub(super) const JOBS_IN_USE: &str = "SELECT CAST(COALESCE(SUM(v.jobs), 0) AS BIGINT) FROM applications b
     JOIN policy_versions v ON v.application_id = b.id AND v.version = b.active_pointer_version
     WHERE b.organization_id = ?1 AND b.id <> ?2 AND b.status <> 'disabled' AND b.settled = 0";

/// Counts up one organization's inputs revision: a write to what layers 3-7 read.
pub(super) fn inputs_changed<S: Sql>(sql: &mut S, organization: i64) -> Result<(), SqlError> {
    sql.execute("UPDATE organizations SET inputs_rev = inputs_rev + 1 WHERE id = ?1", params![organization])?;
    Ok(())
}

/// Counts up every organization's inputs revision: a write to what layers 3-7 of any
/// organization read (curated artifacts, runtime images; both rare, by an operator).
pub(super) fn global_inputs_changed<S: Sql>(sql: &mut S) -> Result<(), SqlError> {
    sql.execute("UPDATE organizations SET inputs_rev = inputs_rev + 1", params![])?;
    Ok(())
}

pub(super) fn organization_inputs<S: Sql>(
    sql: &mut S,
    organization: i64,
) -> Result<Option<(Organization, i64)>, StoreError> {
    let row = sql.query_opt(
        "SELECT id, name, entitlement, spend_authority_micros, inputs_rev FROM organizations WHERE id = ?1",
        params![organization],
    )?;
    Ok(row.map(|r| Ok::<_, SqlError>((organization_row(&r, 0)?, r.i64(4)?))).transpose()?)
}

/// The application as a decided publication read it (`?1`-`?7`, [`DecidedOn`]): its key and
/// the version it would write, or no row if anything it was decided on changed.
fn still_holds() -> String {
    format!(
        "SELECT a.id AS id, a.active_pointer_version + 1 AS next FROM applications a
         JOIN organizations o ON o.id = a.organization_id
         WHERE a.id = ?1 AND o.inputs_rev = ?2 AND a.settled = ?3 AND a.status = ?4
             AND a.pause_reason IS NOT DISTINCT FROM CAST(?5 AS TEXT)
             AND (CAST(?6 AS BIGINT) IS NULL OR a.active_pointer_version = CAST(?6 AS BIGINT))
             AND CAST(?7 AS BIGINT) = ({})",
        JOBS_IN_USE.replace("?1", "a.organization_id").replace("?2", "a.id")
    )
}

/// The parameters of the decided check, `?1`-`?7` ([`still_holds`]).
fn checked<'a>(on: &'a DecidedOn) -> [svc_sql::Param<'a>; 7] {
    *params![
        on.application,
        on.inputs_revision,
        on.settled,
        on.status.as_str(),
        on.pause_reason.as_ref(),
        on.expected.map(int),
        int(on.jobs_in_use)
    ]
}

/// One call on PostgreSQL: `svc_publish_decided` (its migration 0003) takes the writers' lock
/// (again, if the transaction holds it already), checks, and writes; [`decided_call_params`]
/// in its order. It answers the version written, or NULL.
pub(in crate::service::store) const DECIDED_CALL: &str = "SELECT svc_publish_decided(?1, ?2, ?3, ?4, ?5, ?6, ?7, \
     ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23)";

/// The parameters of [`DECIDED_CALL`].
pub(in crate::service::store) fn decided_call_params<'a>(
    on: &'a DecidedOn,
    w: &'a DecidedWrite,
) -> Vec<svc_sql::Param<'a>> {
    let (v, e) = (&w.version, &w.activity);
    [
        checked(on).as_slice(),
        params![
            v.schema_version,
            &v.authored_digest,
            &v.policy_digest,
            &v.policy,
            &v.authored,
            int(v.jobs),
            &v.execution,
            &v.published_by,
            w.status.as_str(),
            w.pause_reason.as_ref(),
            int(w.due_at_ms),
            w.rearm,
            &e.at,
            &e.actor,
            &e.action,
            e.reason.as_ref()
        ],
    ]
    .concat()
}

pub(super) fn publish<S: Sql>(sql: &mut S, on: &DecidedOn, w: &DecidedWrite) -> Result<Option<u64>, StoreError> {
    if S::BACKEND == Backend::Sqlite {
        return publish_in_steps(sql, &still_holds(), &checked(on), on, w);
    }
    Ok(sql.query_one(DECIDED_CALL, &decided_call_params(on, w))?.opt_u64(0)?)
}

/// The same check and writes as statements in turn, on SQLite (each is a function call, not
/// a round trip).
fn publish_in_steps<S: Sql>(
    sql: &mut S,
    check: &str,
    checked: &[svc_sql::Param<'_>],
    on: &DecidedOn,
    w: &DecidedWrite,
) -> Result<Option<u64>, StoreError> {
    let Some(row) = sql.query_opt(check, checked)? else { return Ok(None) };
    let version = row.u64(1)?;
    // No secret is written here: no keys.
    let mut tx = Tx(&mut *sql, None);
    match tx.insert_policy_version(on.application, &PolicyVersion { version, ..w.version.clone() }) {
        Err(StoreError::Conflict(_)) => return Ok(None),
        written => written?,
    }
    tx.sql().execute(
        "UPDATE applications SET status = ?2, pause_reason = ?3, active_pointer_version = ?4, settled = 0,
             exec_next_at = ?5, rearmed_version = CASE WHEN ?6 = 1 THEN ?4 ELSE rearmed_version END
         WHERE id = ?1",
        params![on.application, w.status.as_str(), w.pause_reason.as_ref(), int(version), int(w.due_at_ms), w.rearm],
    )?;
    let activity =
        Activity { policy_version: Some(version), status: Some(w.status.as_str().to_owned()), ..w.activity.clone() };
    tx.record_activity(on.application, &activity)?;
    tx.record_wakeup(on.application, version)?;
    Ok(Some(version))
}

/// [`inputs_statement`], made once.
pub(in crate::service::store) static INPUTS: std::sync::LazyLock<String> = std::sync::LazyLock::new(inputs_statement);

/// What layers 3-7 read of organization `?1` and its application `?2`, as one statement:
/// each fact is a branch of a `UNION ALL`, its rows tagged by the branch's number and laid
/// out in four integer and nine text columns (NULL where a branch has less).
fn inputs_statement() -> String {
    let application = "(SELECT id FROM applications WHERE organization_id = ?1 AND application_id = ?2)";
    let jobs = JOBS_IN_USE.replace("?2", application);
    let (i, t) = ("CAST(NULL AS BIGINT)", "CAST(NULL AS TEXT)");
    format!(
        "SELECT 0, id, inputs_rev, spend_authority_micros, {i}, name, entitlement, {t}, {t}, {t}, {t}, {t}, {t}, {t}
             FROM organizations WHERE id = ?1
         UNION ALL SELECT 1, id, active_pointer_version, settled, rearmed_version, application_id, application_uid,
             status, pause_reason, {t}, {t}, {t}, {t}, {t}
             FROM applications WHERE organization_id = ?1 AND application_id = ?2
         UNION ALL SELECT 2, ({jobs}), {i}, {i}, {i}, {t}, {t}, {t}, {t}, {t}, {t}, {t}, {t}, {t}
         UNION ALL SELECT 3, {i}, {i}, {i}, {i}, capability, {t}, {t}, {t}, {t}, {t}, {t}, {t}, {t}
             FROM capability_grants WHERE organization_id = ?1
         UNION ALL SELECT 4, {i}, {i}, {i}, {i}, secret_id, {t}, {t}, {t}, {t}, {t}, {t}, {t}, {t}
             FROM provisioned_secrets WHERE organization_id = ?1 AND application_id = ?2
         UNION ALL SELECT 5, id, {i}, {i}, {i}, repository, ref, workflow_ref, manifest_path, cid, digest, kind,
             encryption, image_digest
             FROM accepted_artifacts WHERE organization_id = ?1 AND application_id = ?2
         UNION ALL SELECT 6, {i}, {i}, {i}, {i}, public_key, {t}, {t}, {t}, {t}, {t}, {t}, {t}, {t}
             FROM ssh_keys WHERE organization_id = ?1"
    )
}

pub(super) fn publication_inputs<S: Sql>(
    sql: &mut S,
    organization: i64,
    application_id: &str,
) -> Result<Option<PublicationInputs>, StoreError> {
    let rows = sql.query(&INPUTS, params![organization, application_id])?;
    Ok(inputs_from_rows(&rows, organization)?)
}

/// [`PublicationInputs`] from the rows of [`INPUTS`] (`None`: no such organization).
pub(in crate::service::store) fn inputs_from_rows(
    rows: &[SqlRow],
    organization: i64,
) -> Result<Option<PublicationInputs>, SqlError> {
    let (mut found, mut application, mut jobs_in_use) = (None, None, 0);
    let (mut grants, mut provisioned, mut accepted, mut ssh_keys) =
        (BTreeSet::new(), BTreeSet::new(), Vec::new(), Vec::new());
    for r in rows {
        match r.i64(0)? {
            0 => {
                let spend_authority_micros = r.opt_u64(3)?;
                let tier = r.spelled(6, crate::service::capability::Tier::parse)?;
                let org = Organization { id: r.i64(1)?, name: r.text(5)?, tier, spend_authority_micros };
                found = Some((org, r.i64(2)?));
            }
            1 => {
                application = Some(Application {
                    key: r.i64(1)?,
                    organization,
                    application_id: r.text(5)?,
                    application_uid: r.text(6)?,
                    status: r.spelled(7, Status::parse)?,
                    pause_reason: r.opt_text(8)?,
                    active_pointer_version: r.u64(2)?,
                    settled: r.bool(3)?,
                    rearmed_version: r.u64(4)?,
                });
            }
            2 => jobs_in_use = r.u64(1)?,
            3 => drop(grants.insert(r.text(5)?)),
            4 => drop(provisioned.insert(r.text(5)?)),
            5 => accepted.push((r.i64(1)?, accepted_row(r, 5)?)),
            _ => ssh_keys.push(r.text(5)?),
        }
    }
    let Some((organization, inputs_revision)) = found else { return Ok(None) };
    // As `accepted` and `ssh_keys` order them.
    accepted.sort_by_key(|(id, _)| std::cmp::Reverse(*id));
    ssh_keys.sort();
    Ok(Some(PublicationInputs {
        organization,
        inputs_revision,
        application,
        grants,
        jobs_in_use,
        provisioned,
        accepted: accepted.into_iter().map(|(_, a)| a).collect(),
        ssh_keys,
    }))
}
