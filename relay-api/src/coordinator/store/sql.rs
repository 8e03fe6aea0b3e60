//! The SQL both backends speak (issue 19): a statement with numbered parameters (`?1`,
//! `?2`, reused as often as needed; PostgreSQL reads them as `$1`, `$2`), parameters as
//! 64-bit integers or text, and rows read back as the same. The row traits are implemented
//! once, over [`Sql`], in [`super::rows`]; each backend only runs statements. What differs
//! between SQLite and PostgreSQL is kept out of the statements: no `rowid` (the backend names
//! its row key, [`Sql::ROW_KEY`]), no `INSERT OR IGNORE` (`ON CONFLICT DO NOTHING`), no
//! scalar `MIN(a, b)` (`CASE`), keys of new rows by `RETURNING`.

use super::StoreError;

/// A statement's parameter: what the schema stores, a 64-bit integer or text, either of
/// which may be NULL.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Param<'a> {
    /// An integer (times, amounts, counts, flags as 0 or 1).
    Int(Option<i64>),
    /// Text.
    Text(Option<&'a str>),
}

impl From<i64> for Param<'_> {
    fn from(v: i64) -> Self {
        Param::Int(Some(v))
    }
}

impl From<Option<i64>> for Param<'_> {
    fn from(v: Option<i64>) -> Self {
        Param::Int(v)
    }
}

impl From<u32> for Param<'_> {
    fn from(v: u32) -> Self {
        Param::Int(Some(i64::from(v)))
    }
}

impl From<bool> for Param<'_> {
    fn from(v: bool) -> Self {
        Param::Int(Some(i64::from(v)))
    }
}

impl<'a> From<&'a str> for Param<'a> {
    fn from(v: &'a str) -> Self {
        Param::Text(Some(v))
    }
}

impl<'a> From<&'a String> for Param<'a> {
    fn from(v: &'a String) -> Self {
        Param::Text(Some(v))
    }
}

impl<'a> From<Option<&'a str>> for Param<'a> {
    fn from(v: Option<&'a str>) -> Self {
        Param::Text(v)
    }
}

impl<'a> From<Option<&'a String>> for Param<'a> {
    fn from(v: Option<&'a String>) -> Self {
        Param::Text(v.map(String::as_str))
    }
}

/// The parameters of a statement, each converted to a [`Param`].
macro_rules! params {
    ($($value:expr),* $(,)?) => {
        &[$($crate::coordinator::store::sql::Param::from($value)),*]
    };
}
pub(crate) use params;

/// One value of a row read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Cell {
    /// NULL.
    Null,
    /// An integer (a PostgreSQL boolean reads as 0 or 1).
    Int(i64),
    /// Text.
    Text(String),
}

/// A row read back. A value no version of this code writes (a negative amount, an unknown
/// state, text where a number belongs) is a corrupt row: it fails loudly (the API answers
/// `internal_error`) instead of passing as some default.
#[derive(Debug, Clone)]
pub(crate) struct SqlRow(pub(crate) Vec<Cell>);

fn corrupt(index: usize, what: impl std::fmt::Display) -> StoreError {
    StoreError::Backend(format!("column {index} of a stored row: {what}, not a value this store writes").into())
}

impl SqlRow {
    fn cell(&self, i: usize) -> Result<&Cell, StoreError> {
        self.0.get(i).ok_or_else(|| corrupt(i, "missing"))
    }

    /// An integer that may be NULL.
    pub(crate) fn opt_i64(&self, i: usize) -> Result<Option<i64>, StoreError> {
        match self.cell(i)? {
            Cell::Null => Ok(None),
            Cell::Int(v) => Ok(Some(*v)),
            Cell::Text(t) => Err(corrupt(i, format!("text {t:?}"))),
        }
    }

    /// An integer.
    pub(crate) fn i64(&self, i: usize) -> Result<i64, StoreError> {
        self.opt_i64(i)?.ok_or_else(|| corrupt(i, "NULL"))
    }

    /// A non-negative integer that may be NULL.
    pub(crate) fn opt_u64(&self, i: usize) -> Result<Option<u64>, StoreError> {
        self.opt_i64(i)?.map(|v| u64::try_from(v).map_err(|_| corrupt(i, v))).transpose()
    }

    /// A non-negative integer (an amount, a count).
    pub(crate) fn u64(&self, i: usize) -> Result<u64, StoreError> {
        self.opt_u64(i)?.ok_or_else(|| corrupt(i, "NULL"))
    }

    /// A non-negative integer within `u32` (a revision, a restart count).
    pub(crate) fn u32(&self, i: usize) -> Result<u32, StoreError> {
        let v = self.i64(i)?;
        u32::try_from(v).map_err(|_| corrupt(i, v))
    }

    /// A flag (0 or 1; a boolean).
    pub(crate) fn bool(&self, i: usize) -> Result<bool, StoreError> {
        match self.i64(i)? {
            0 => Ok(false),
            1 => Ok(true),
            v => Err(corrupt(i, v)),
        }
    }

    /// Text that may be NULL.
    pub(crate) fn opt_text(&self, i: usize) -> Result<Option<String>, StoreError> {
        match self.cell(i)? {
            Cell::Null => Ok(None),
            Cell::Text(t) => Ok(Some(t.clone())),
            Cell::Int(v) => Err(corrupt(i, v)),
        }
    }

    /// Text.
    pub(crate) fn text(&self, i: usize) -> Result<String, StoreError> {
        self.opt_text(i)?.ok_or_else(|| corrupt(i, "NULL"))
    }

    /// A stored spelling (a state, a kind) read back.
    pub(crate) fn spelled<T>(&self, i: usize, parse: impl FnOnce(&str) -> Option<T>) -> Result<T, StoreError> {
        let text = self.text(i)?;
        parse(&text).ok_or_else(|| corrupt(i, format!("{text:?}")))
    }

    /// A JSON column read back; unreadable JSON is a corrupt row.
    pub(crate) fn json<T: serde::de::DeserializeOwned>(&self, i: usize) -> Result<T, StoreError> {
        let text = self.text(i)?;
        serde_json::from_str(&text).map_err(|e| corrupt(i, format!("JSON that does not read ({e})")))
    }
}

/// Runs statements in one transaction of a backend.
pub(crate) trait Sql {
    /// The column that orders a table's rows by insertion (`rowid` in SQLite; an identity
    /// column, `key`, in PostgreSQL).
    const ROW_KEY: &'static str;

    /// Runs a statement; how many rows it changed.
    fn execute(&mut self, sql: &str, params: &[Param<'_>]) -> Result<u64, StoreError>;

    /// Runs a statement that may break a uniqueness rule: `false` if it did (nothing written),
    /// so the caller says which thing is taken.
    fn execute_unique(&mut self, sql: &str, params: &[Param<'_>]) -> Result<bool, StoreError>;

    /// Runs a query; its rows.
    fn query(&mut self, sql: &str, params: &[Param<'_>]) -> Result<Vec<SqlRow>, StoreError>;

    /// Runs a query expected to give at most one row.
    fn query_opt(&mut self, sql: &str, params: &[Param<'_>]) -> Result<Option<SqlRow>, StoreError> {
        Ok(self.query(sql, params)?.into_iter().next())
    }

    /// Runs a query expected to give exactly one row.
    fn query_one(&mut self, sql: &str, params: &[Param<'_>]) -> Result<SqlRow, StoreError> {
        self.query_opt(sql, params)?
            .ok_or_else(|| StoreError::Backend(format!("no row where one was expected: {sql}").into()))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_corrupt_row_fails_loudly_and_names_its_column() {
        let row =
            SqlRow(vec![Cell::Int(-5), Cell::Text("flying".into()), Cell::Null, Cell::Int(2), Cell::Text("{".into())]);
        assert_eq!(row.i64(0).expect("an integer"), -5);
        assert!(row.u64(0).expect_err("negative").to_string().contains("column 0"));
        assert!(row.spelled(1, |_| None::<()>).expect_err("unknown").to_string().contains("\"flying\""));
        assert_eq!(row.opt_text(2).expect("NULL"), None);
        assert!(row.text(2).is_err(), "NULL where text belongs");
        assert!(row.bool(3).is_err(), "2 is no flag");
        assert!(row.json::<serde_json::Value>(4).is_err());
        assert!(row.i64(9).is_err(), "a missing column");
    }
}
