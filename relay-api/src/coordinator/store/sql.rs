//! The SQL both backends speak: the shared layer ([`svc_sql`]), which the publication store
//! speaks too. The row traits are implemented once, over [`Sql`], in [`super::rows`].

pub(crate) use svc_sql::{Param, Sql, SqlRow, params};

use super::StoreError;

impl From<svc_sql::SqlError> for StoreError {
    fn from(e: svc_sql::SqlError) -> StoreError {
        if e.is_transient() { StoreError::Unavailable(Box::new(e)) } else { StoreError::Backend(Box::new(e)) }
    }
}

/// An amount as the stores keep it (signed 64 bits); beyond its range is refused, never
/// wrapped.
pub(crate) fn i64_of(v: u64) -> Result<i64, StoreError> {
    i64::try_from(v).map_err(|_| StoreError::Refused {
        code: "amount_too_large",
        message: format!("{v} is beyond the ledger's range"),
    })
}
