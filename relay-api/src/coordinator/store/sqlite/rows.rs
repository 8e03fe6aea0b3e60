//! Rows read back into the store's types, and amounts written as SQLite integers. A value no
//! version of this code writes is a corrupt row: it fails loudly (the API answers
//! `internal_error`) instead of passing as some default.

use rusqlite::Row;

use super::super::{RouteKeys, StoreError};
use crate::coordinator::model::{
    CustomerHostname, Deployment, HostnameState, Quote, Session, SessionState, Successor, SuccessorState,
};
use crate::coordinator::money;
use crate::coordinator::state::DeploymentState;
use relay_wire::admission::Operator;

/// A stored spelling read back.
pub(super) fn spelled<T>(row: &Row<'_>, index: usize, parse: impl FnOnce(&str) -> Option<T>) -> rusqlite::Result<T> {
    let text: String = row.get(index)?;
    parse(&text).ok_or_else(|| {
        rusqlite::Error::FromSqlConversionFailure(
            index,
            rusqlite::types::Type::Text,
            format!("{text:?} is not a value this store writes").into(),
        )
    })
}

/// A JSON column read back; unreadable JSON is a corrupt row, as in [`spelled`].
pub(super) fn json_column<T: serde::de::DeserializeOwned>(row: &Row<'_>, index: usize) -> rusqlite::Result<T> {
    let text: String = row.get(index)?;
    serde_json::from_str(&text)
        .map_err(|e| rusqlite::Error::FromSqlConversionFailure(index, rusqlite::types::Type::Text, Box::new(e)))
}

/// An amount as SQLite stores it (signed); beyond its range is refused, never wrapped.
pub(super) fn i64_of(v: u64) -> Result<i64, StoreError> {
    i64::try_from(v).map_err(|_| StoreError::Refused {
        code: "amount_too_large",
        message: format!("{v} is beyond the ledger's range"),
    })
}

/// A job's keys as stored (`credential_sha256`, `route_public_key`): none before its launch.
pub(super) fn route_keys_row(row: &Row<'_>) -> rusqlite::Result<Option<RouteKeys>> {
    let (credential_sha256, route_public_key): (String, String) = (row.get(0)?, row.get(1)?);
    Ok((!credential_sha256.is_empty()).then_some(RouteKeys { credential_sha256, route_public_key }))
}

pub(super) const DEPLOYMENT_COLUMNS: &str = "id, project, project_digest, manifest_digest, canonical_hostname, \
     route_id, ceiling_micros, state, state_reason, periods_spent, next_period_at, created_at, updated_at, \
     failure_code, revision";

pub(super) fn deployment_row(row: &Row<'_>) -> rusqlite::Result<Deployment> {
    Ok(Deployment {
        id: row.get(0)?,
        project: row.get(1)?,
        project_digest: row.get(2)?,
        manifest_digest: row.get(3)?,
        url: String::new(),
        canonical_hostname: row.get(4)?,
        route_id: row.get(5)?,
        ceiling_micros: row.get::<_, u64>(6)?,
        state: spelled(row, 7, DeploymentState::parse)?,
        state_reason: row.get(8)?,
        periods_spent: row.get::<_, u64>(9)?,
        next_period_at: row.get(10)?,
        created_at: row.get(11)?,
        updated_at: row.get(12)?,
        failure_code: row.get(13)?,
        revision: row.get(14)?,
    })
}

pub(super) const QUOTE_COLUMNS: &str = "id, deployment_id, project_digest, hostnames_json, price_micros, \
     period_secs, periods, total_micros, created_at, expires_at, funded_at";

pub(super) fn quote_row(row: &Row<'_>) -> rusqlite::Result<Quote> {
    Ok(Quote {
        id: row.get(0)?,
        deployment_id: row.get(1)?,
        project_digest: row.get(2)?,
        hostnames: json_column(row, 3)?,
        price_micros: row.get::<_, u64>(4)?,
        period_secs: row.get::<_, u64>(5)?,
        periods: row.get::<_, u64>(6)?,
        total_micros: row.get::<_, u64>(7)?,
        created_at: row.get(8)?,
        expires_at: row.get(9)?,
        funded_at: row.get(10)?,
    })
}

pub(super) const SESSION_COLUMNS: &str = "id, deployment_id, quote_id, ordinal, price_micros, period_ms, state, \
     period_index, started_at, ends_at, unserved_ms, unserved_micros, refunded_micros, reward_micros, \
     service_micros, settled_at";

pub(super) fn session_row(r: &Row<'_>) -> rusqlite::Result<Session> {
    let price = r.get::<_, u64>(4)?;
    let state = spelled(r, 6, SessionState::parse)?;
    let unserved = r.get::<_, u64>(11)?;
    let refunded = r.get::<_, u64>(12)?;
    let (spent_micros, refundable_micros) = money::session_parts(state, price, unserved, refunded);
    Ok(Session {
        id: r.get(0)?,
        deployment_id: r.get(1)?,
        quote_id: r.get(2)?,
        ordinal: r.get::<_, u64>(3)?,
        price_micros: price,
        period_ms: r.get::<_, u64>(5)?,
        state,
        period_index: r.get::<_, Option<u64>>(7)?,
        started_at: r.get(8)?,
        ends_at: r.get(9)?,
        unserved_ms: r.get::<_, Option<u64>>(10)?,
        unserved_micros: unserved,
        refunded_micros: refunded,
        reward_micros: r.get::<_, u64>(13)?,
        service_micros: r.get::<_, u64>(14)?,
        settled_at: r.get(15)?,
        spent_micros,
        refundable_micros,
    })
}

pub(super) const HOSTNAME_COLUMNS: &str = "hostname, token, state, hints_json, checked_at";

pub(super) fn hostname_row(r: &Row<'_>) -> rusqlite::Result<CustomerHostname> {
    Ok(CustomerHostname {
        hostname: r.get(0)?,
        token: r.get(1)?,
        state: spelled(r, 2, HostnameState::parse)?,
        hints: json_column(r, 3)?,
        checked_at: r.get(4)?,
    })
}

pub(super) const SUCCESSOR_COLUMNS: &str =
    "deployment_id, revision, project_digest, route_id, state, reason, created_at, updated_at";

pub(super) fn successor_row(row: &Row<'_>) -> rusqlite::Result<Successor> {
    Ok(Successor {
        deployment_id: row.get(0)?,
        revision: row.get(1)?,
        project_digest: row.get(2)?,
        route_id: row.get(3)?,
        state: spelled(row, 4, SuccessorState::parse)?,
        reason: row.get(5)?,
        created_at: row.get(6)?,
        updated_at: row.get(7)?,
    })
}

pub(super) const OPERATOR_COLUMNS: &str = "id, name, public_key, hostname, admitted_at";

pub(super) fn operator_row(r: &Row<'_>) -> rusqlite::Result<Operator> {
    Ok(Operator { id: r.get(0)?, name: r.get(1)?, public_key: r.get(2)?, hostname: r.get(3)?, admitted_at: r.get(4)? })
}
