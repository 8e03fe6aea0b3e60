//! The PostgreSQL backend (issue 19): the relay store on a database several coordinators
//! may share. Its statements are the backends' shared ones ([`super::rows`]); here are its
//! connections and transactions, and its migrations (`migrations/postgres/`, versioned apart
//! from SQLite's, applied through `svc-postgres` under the store name `relay`; a test holds
//! the two schemas to the same tables, columns and indexes).
//!
//! **The contract of [`Backend`] across instances.** A write transaction takes a
//! transaction-scoped advisory lock on one relay-wide key before anything else, so writers
//! are serialized across every coordinator on the database, as SQLite's `BEGIN IMMEDIATE`
//! serializes them on one machine: what a write transaction read still holds when it
//! commits, with no retry loop (it runs at `READ COMMITTED`, and under the lock nothing else
//! commits). A read transaction is one `REPEATABLE READ` snapshot and takes no lock.

use std::time::Duration;

use postgres::types::{IsNull, ToSql, Type, to_sql_checked};
use svc_postgres::{Database, DbError, Pool, PooledClient};

use super::StoreError;
use super::backend::{Backend, Transaction};
use super::sql::{Cell, Param, Sql, SqlRow};

/// The migrations, in order; `svc_migrations` records those applied.
pub const MIGRATIONS: &[&str] = &[include_str!("../../../migrations/postgres/0001_relay.sql")];

/// The relay store's name in `svc_migrations`.
pub const STORE: &str = "relay";

/// The advisory lock every write transaction holds (the relay store's writers, on every
/// instance, one at a time).
const WRITE_LOCK: i64 = 0x7376_635f_7265_6c61; // "svc_rela"

/// Connects to `db` and applies the relay store's migrations it does not have yet (once,
/// however many coordinators start together); how many were applied.
pub fn migrate(db: &Database) -> Result<usize, DbError> {
    let mut client = db.connect()?;
    svc_postgres::migrate(db, &mut client, STORE, MIGRATIONS)
}

/// How a PostgreSQL store's connections are pooled.
#[derive(Debug, Clone, Copy)]
pub struct PoolSettings {
    /// Connections at most (each instance's own).
    pub size: u32,
    /// How long an operation waits for a connection before it fails (503 at the API).
    pub wait: Duration,
}

impl Default for PoolSettings {
    fn default() -> Self {
        PoolSettings { size: 8, wait: Duration::from_secs(5) }
    }
}

/// The relay store on a PostgreSQL database.
#[derive(Debug)]
pub struct PostgresBackend {
    pool: Pool,
}

impl PostgresBackend {
    /// Migrates `db` and opens a pool of connections to it.
    pub fn open(db: &Database, pool: PoolSettings) -> Result<PostgresBackend, StoreError> {
        migrate(db).map_err(|e| StoreError::Backend(Box::new(e)))?;
        Ok(PostgresBackend { pool: db.pool(pool.size, pool.wait) })
    }

    fn begin(&self, statements: &str) -> Result<Box<dyn Transaction + '_>, StoreError> {
        let mut conn = self.pool.get().map_err(|e| StoreError::Backend(Box::new(e)))?;
        conn.batch_execute(statements).map_err(|e| self.failed(e))?;
        Ok(Box::new(PgTransaction { conn, open: true, location: self.pool.location() }))
    }

    fn failed(&self, e: postgres::Error) -> StoreError {
        failed(self.pool.location(), e)
    }
}

fn failed(location: &str, e: postgres::Error) -> StoreError {
    StoreError::Backend(format!("database {location}: {e}").into())
}

impl Backend for PostgresBackend {
    fn read(&self) -> Result<Box<dyn Transaction + '_>, StoreError> {
        self.begin("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
    }

    fn write(&self) -> Result<Box<dyn Transaction + '_>, StoreError> {
        self.begin(&format!("BEGIN ISOLATION LEVEL READ COMMITTED; SELECT pg_advisory_xact_lock({WRITE_LOCK})"))
    }

    fn location(&self) -> String {
        format!("postgres {}", self.pool.location())
    }
}

/// A transaction on a pooled connection; rolled back when dropped uncommitted.
struct PgTransaction<'p> {
    conn: PooledClient,
    open: bool,
    location: &'p str,
}

impl Drop for PgTransaction<'_> {
    fn drop(&mut self) {
        if self.open {
            // A connection whose rollback failed is broken: the pool's check on checkout
            // finds it so and replaces it.
            let _ = self.conn.batch_execute("ROLLBACK");
        }
    }
}

impl Transaction for PgTransaction<'_> {
    fn commit(mut self: Box<Self>) -> Result<(), StoreError> {
        self.conn.batch_execute("COMMIT").map_err(|e| failed(self.location, e))?;
        self.open = false;
        Ok(())
    }
}

impl ToSql for Param<'_> {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut postgres::types::private::BytesMut,
    ) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        match *self {
            Param::Int(v) => v.to_sql(ty, out),
            Param::Text(v) => v.to_sql(ty, out),
        }
    }

    fn accepts(ty: &Type) -> bool {
        <i64 as ToSql>::accepts(ty) || <&str as ToSql>::accepts(ty)
    }

    to_sql_checked!();
}

/// `?N` placeholders as PostgreSQL writes them (`$N`): the shared statements carry no `?`
/// in their string literals.
fn dollars(sql: &str) -> String {
    sql.replace('?', "$")
}

fn bound<'a>(params: &'a [Param<'a>]) -> Vec<&'a (dyn ToSql + Sync)> {
    params.iter().map(|p| p as &(dyn ToSql + Sync)).collect()
}

fn cell(row: &postgres::Row, i: usize) -> Result<Cell, postgres::Error> {
    let ty = row.columns()[i].type_();
    Ok(if *ty == Type::INT8 {
        row.try_get::<_, Option<i64>>(i)?.map_or(Cell::Null, Cell::Int)
    } else if *ty == Type::INT4 {
        row.try_get::<_, Option<i32>>(i)?.map_or(Cell::Null, |v| Cell::Int(i64::from(v)))
    } else if *ty == Type::BOOL {
        row.try_get::<_, Option<bool>>(i)?.map_or(Cell::Null, |v| Cell::Int(i64::from(v)))
    } else {
        // TEXT; any other type fails here, naming it, rather than reading as text.
        row.try_get::<_, Option<String>>(i)?.map_or(Cell::Null, Cell::Text)
    })
}

impl Sql for PgTransaction<'_> {
    const ROW_KEY: &'static str = "key";

    fn execute(&mut self, sql: &str, params: &[Param<'_>]) -> Result<u64, StoreError> {
        self.conn.execute(dollars(sql).as_str(), &bound(params)).map_err(|e| failed(self.location, e))
    }

    fn execute_unique(&mut self, sql: &str, params: &[Param<'_>]) -> Result<bool, StoreError> {
        // A failed statement aborts a PostgreSQL transaction: the savepoint keeps the rest
        // of it usable after a uniqueness refusal, as SQLite's is.
        self.conn.batch_execute("SAVEPOINT unique_check").map_err(|e| failed(self.location, e))?;
        match self.conn.execute(dollars(sql).as_str(), &bound(params)) {
            Ok(_) => {
                self.conn.batch_execute("RELEASE SAVEPOINT unique_check").map_err(|e| failed(self.location, e))?;
                Ok(true)
            }
            Err(e) if e.code() == Some(&postgres::error::SqlState::UNIQUE_VIOLATION) => {
                self.conn.batch_execute("ROLLBACK TO SAVEPOINT unique_check").map_err(|e| failed(self.location, e))?;
                Ok(false)
            }
            Err(e) => Err(failed(self.location, e)),
        }
    }

    fn query(&mut self, sql: &str, params: &[Param<'_>]) -> Result<Vec<SqlRow>, StoreError> {
        let rows = self.conn.query(dollars(sql).as_str(), &bound(params)).map_err(|e| failed(self.location, e))?;
        rows.iter()
            .map(|row| (0..row.len()).map(|i| cell(row, i)).collect::<Result<Vec<_>, _>>().map(SqlRow))
            .collect::<Result<_, _>>()
            .map_err(|e| failed(self.location, e))
    }
}
