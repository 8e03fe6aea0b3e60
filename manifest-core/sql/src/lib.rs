//! The SQL both stores speak (issue 19), on SQLite and on PostgreSQL alike: a statement with
//! numbered parameters (`?1`, `?2`, reused as often as needed; PostgreSQL reads them as `$1`,
//! `$2`), parameters as 64-bit integers, text or bytes, and rows read back as the same. A
//! store writes its row code once, over [`Sql`]; each backend only runs statements:
//!
//! - [`sqlite::SqliteTx`]: a transaction on a SQLite connection (a writer under its lock, a
//!   pooled reader, or one borrowed by a group commit);
//! - [`postgres::PgTx`]: a transaction on a pooled PostgreSQL connection
//!   ([`svc_postgres::Session`]).
//!
//! What differs between the two is kept out of the statements: no `rowid` (the backend
//! names its row key, [`Sql::ROW_KEY`]), no `INSERT OR IGNORE` (`ON CONFLICT DO NOTHING`), no
//! scalar `MIN(a, b)` (`CASE`), keys of new rows by `RETURNING`, every integer column a
//! `BIGINT`, sums cast back to `BIGINT`.

#![forbid(unsafe_code)]

pub mod postgres;
mod row;
pub mod sqlite;

pub use row::{Cell, SqlRow};

/// Where a store lives: chosen once, from `--data-dir` and `--database`.
#[derive(Debug, Clone)]
pub enum StoreAt {
    /// SQLite, a file in this data directory (the default).
    DataDir(std::path::PathBuf),
    /// A PostgreSQL database (`--database postgres://...`).
    Postgres {
        /// The database, its URL checked (boxed: it carries its TLS configuration).
        db: Box<svc_postgres::Database>,
        /// Its connection pool.
        pool: svc_postgres::PoolSettings,
    },
}

impl StoreAt {
    /// The database if one is given, else SQLite in `data_dir`.
    pub fn of(
        data_dir: &std::path::Path,
        database: Option<&(svc_postgres::Database, svc_postgres::PoolSettings)>,
    ) -> StoreAt {
        match database {
            Some((db, pool)) => StoreAt::Postgres { db: Box::new(db.clone()), pool: *pool },
            None => StoreAt::DataDir(data_dir.to_owned()),
        }
    }
}

impl From<&StoreAt> for StoreAt {
    fn from(at: &StoreAt) -> StoreAt {
        at.clone()
    }
}

impl From<&std::path::Path> for StoreAt {
    fn from(dir: &std::path::Path) -> StoreAt {
        StoreAt::DataDir(dir.to_owned())
    }
}

impl From<&std::path::PathBuf> for StoreAt {
    fn from(dir: &std::path::PathBuf) -> StoreAt {
        StoreAt::DataDir(dir.clone())
    }
}

/// The databases a store runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// SQLite, in the data directory.
    Sqlite,
    /// PostgreSQL.
    Postgres,
}

/// Why a statement failed.
#[derive(Debug, thiserror::Error)]
pub enum SqlError {
    /// The database cannot be reached now (PostgreSQL down, restarting, every connection
    /// busy; SQLite's file still locked by another writer when its busy timeout ran out):
    /// the same work may succeed in a moment (a 503, not a 500).
    #[error(transparent)]
    Unavailable(Box<dyn std::error::Error + Send + Sync>),
    /// The database refused or failed the statement.
    #[error("{0}")]
    Database(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// A stored value no version of the code writes (a negative amount, an unknown state,
    /// text where a number belongs): a corrupt row fails loudly instead of passing as some
    /// default.
    #[error("column {column} of a stored row: {what}, not a value this store writes")]
    Corrupt {
        /// The column's index in the query.
        column: usize,
        /// What was found.
        what: String,
    },
    /// A query expected to give a row gave none.
    #[error("no row where one was expected: {0}")]
    NoRow(String),
    /// An earlier statement of the transaction failed, so it was rolled back and runs no
    /// more statements; `transient` if that failure was (the database went away).
    #[error("an earlier statement of the transaction failed; it was rolled back")]
    Aborted {
        /// Whether the failure that aborted it may pass.
        transient: bool,
    },
    /// Text with a NUL character, which PostgreSQL's text cannot hold: refused before it is
    /// sent, so the transaction it would have aborted goes on.
    #[error("text with a NUL character cannot be stored")]
    NulInText,
}

impl SqlError {
    /// Whether trying again later may succeed.
    pub fn is_transient(&self) -> bool {
        matches!(self, SqlError::Unavailable(_) | SqlError::Aborted { transient: true })
    }
}

impl From<svc_postgres::DbError> for SqlError {
    fn from(e: svc_postgres::DbError) -> SqlError {
        if e.is_transient() { SqlError::Unavailable(Box::new(e)) } else { SqlError::Database(Box::new(e)) }
    }
}

impl From<rusqlite::Error> for SqlError {
    fn from(e: rusqlite::Error) -> SqlError {
        if sqlite::is_busy(&e) { SqlError::Unavailable(Box::new(e)) } else { SqlError::Database(Box::new(e)) }
    }
}

/// A statement's parameter: what the schemas store, a 64-bit integer, text or bytes, any of
/// which may be NULL.
#[derive(Debug, Clone, Copy)]
pub enum Param<'a> {
    /// An integer (times, amounts, counts, flags as 0 or 1).
    Int(Option<i64>),
    /// Text.
    Text(Option<&'a str>),
    /// Bytes (a secret's value).
    Bytes(Option<&'a [u8]>),
}

macro_rules! int_param {
    ($($t:ty),*) => {$(
        impl From<$t> for Param<'_> {
            fn from(v: $t) -> Self {
                Param::Int(Some(i64::from(v)))
            }
        }
        impl From<Option<$t>> for Param<'_> {
            fn from(v: Option<$t>) -> Self {
                Param::Int(v.map(i64::from))
            }
        }
    )*};
}
int_param!(i64, u32, u16, u8, bool);

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

impl<'a> From<&'a Option<String>> for Param<'a> {
    fn from(v: &'a Option<String>) -> Self {
        Param::Text(v.as_deref())
    }
}

impl<'a> From<&'a [u8]> for Param<'a> {
    fn from(v: &'a [u8]) -> Self {
        Param::Bytes(Some(v))
    }
}

/// The parameters of a statement, each converted to a [`Param`].
#[macro_export]
macro_rules! params {
    ($($value:expr),* $(,)?) => {
        &[$($crate::Param::from($value)),*]
    };
}

/// Runs statements in one transaction of a backend.
pub trait Sql {
    /// The column that orders a table's rows by insertion where the table has no key of its
    /// own (`rowid` in SQLite; an identity column, `key`, in PostgreSQL).
    const ROW_KEY: &'static str;

    /// Which database runs the statements, for what only one of them has (a function in
    /// PostgreSQL's schema).
    const BACKEND: Backend;

    /// Runs a statement; how many rows it changed.
    fn execute(&mut self, sql: &str, params: &[Param<'_>]) -> Result<u64, SqlError>;

    /// Runs a statement that may break a uniqueness rule: `false` if it did (nothing written,
    /// and the transaction still usable), so the caller says which thing is taken.
    fn execute_unique(&mut self, sql: &str, params: &[Param<'_>]) -> Result<bool, SqlError>;

    /// Runs a query; its rows.
    fn query(&mut self, sql: &str, params: &[Param<'_>]) -> Result<Vec<SqlRow>, SqlError>;

    /// Runs a statement without parameters or rows (`SAVEPOINT unit`, `RELEASE unit`).
    fn run_plain(&mut self, sql: &str) -> Result<(), SqlError>;

    /// Runs statements without parameters or rows, in order; a backend across a network
    /// sends them in one round trip.
    fn run_plains(&mut self, sqls: &[&str]) -> Result<(), SqlError> {
        sqls.iter().try_for_each(|sql| self.run_plain(sql))
    }

    /// Makes every write of the transaction durable; after it, the transaction is over.
    fn commit_tx(&mut self) -> Result<(), SqlError>;

    /// Runs a query expected to give at most one row.
    fn query_opt(&mut self, sql: &str, params: &[Param<'_>]) -> Result<Option<SqlRow>, SqlError> {
        Ok(self.query(sql, params)?.into_iter().next())
    }

    /// Runs a query expected to give exactly one row.
    fn query_one(&mut self, sql: &str, params: &[Param<'_>]) -> Result<SqlRow, SqlError> {
        self.query_opt(sql, params)?.ok_or_else(|| SqlError::NoRow(sql.to_owned()))
    }
}

/// A transaction lent out: statements run on the borrowed one (a unit of a group commit runs
/// on the group's transaction, inside its own savepoint).
impl<S: Sql + ?Sized> Sql for &mut S {
    const ROW_KEY: &'static str = S::ROW_KEY;
    const BACKEND: Backend = S::BACKEND;

    fn execute(&mut self, sql: &str, params: &[Param<'_>]) -> Result<u64, SqlError> {
        (**self).execute(sql, params)
    }

    fn execute_unique(&mut self, sql: &str, params: &[Param<'_>]) -> Result<bool, SqlError> {
        (**self).execute_unique(sql, params)
    }

    fn query(&mut self, sql: &str, params: &[Param<'_>]) -> Result<Vec<SqlRow>, SqlError> {
        (**self).query(sql, params)
    }

    fn run_plain(&mut self, sql: &str) -> Result<(), SqlError> {
        (**self).run_plain(sql)
    }

    fn run_plains(&mut self, sqls: &[&str]) -> Result<(), SqlError> {
        (**self).run_plains(sqls)
    }

    fn commit_tx(&mut self) -> Result<(), SqlError> {
        (**self).commit_tx()
    }
}
