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
use svc_postgres::{Database, DbError, Pool, Session};

use super::StoreError;
use super::backend::{Backend, Transaction};
use super::sql::{Cell, Param, Sql, SqlRow};

/// The migrations, in order; `svc_migrations` records those applied.
pub const MIGRATIONS: &[&str] = &[include_str!("../../../migrations/postgres/0001_relay.sql")];

/// The relay store's name in `svc_migrations`.
pub const STORE: &str = "relay";

/// How a write transaction begins: the advisory lock every write transaction holds (the
/// relay store's writers, on every instance, one at a time; the key spells `svc_rela`).
const WRITE_BEGIN: &str = "BEGIN ISOLATION LEVEL READ COMMITTED; SELECT pg_advisory_xact_lock(8319396543592965217)";

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

/// The session-level advisory lock a coordinator holds on its database while it runs (the
/// key spells `svc_coor`).
const COORDINATOR_LOCK: i64 = 8319396543559528306;

/// Holds the database's coordinator lock until the returned session is dropped (or the
/// process ends: the database releases a session's locks with it, `kill -9` included).
pub fn hold_coordinator_lock(db: &Database) -> Result<Session, StoreError> {
    let pool = db.pool(1, Duration::from_secs(10));
    let session = pool.session().map_err(backend)?;
    let taken = session
        .run(|c| {
            c.client().query_one("SELECT pg_try_advisory_lock($1)", &[&COORDINATOR_LOCK]).map(|r| r.get::<_, bool>(0))
        })
        .map_err(backend)?;
    if !taken {
        return Err(StoreError::Refused {
            code: "database_in_use",
            message: format!(
                "database {}: another coordinator runs on it (one at a time, until coordinators share the work): stop \
                 it first, or choose another --database",
                db.location()
            ),
        });
    }
    Ok(session)
}

/// The relay store on a PostgreSQL database.
#[derive(Debug)]
pub struct PostgresBackend {
    pool: Pool,
}

impl PostgresBackend {
    /// Opens a pool of connections to `db` and migrates it.
    pub fn open(db: &Database, pool: PoolSettings) -> Result<PostgresBackend, StoreError> {
        let pool = db.pool(pool.size, pool.wait);
        let session = pool.session().map_err(backend)?;
        session.with(|conn, db| svc_postgres::migrate(db, conn.client(), STORE, MIGRATIONS)).map_err(backend)?;
        Ok(PostgresBackend { pool })
    }

    fn begin(&self, statements: &'static str) -> Result<Box<dyn Transaction + '_>, StoreError> {
        let session = self.pool.session().map_err(backend)?;
        let begun = session.run(move |c| c.client().batch_execute(statements));
        // A connection the database dropped (a restart) is noticed when used: nothing of
        // the transaction has run yet, so it begins once more, on a fresh connection.
        if let Err(e) = begun {
            if !e.is_transient() {
                return Err(backend(e));
            }
            session.run(move |c| c.client().batch_execute(statements)).map_err(backend)?;
        }
        Ok(Box::new(PgTransaction { session, open: true }))
    }
}

/// A database failure as the store says it: one that may pass (the database down, restarting,
/// busy) is `Unavailable` (503 at the API), any other a failure of the store.
fn backend(e: DbError) -> StoreError {
    if e.is_transient() { StoreError::Unavailable(Box::new(e)) } else { StoreError::Backend(Box::new(e)) }
}

impl Backend for PostgresBackend {
    fn read(&self) -> Result<Box<dyn Transaction + '_>, StoreError> {
        self.begin("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
    }

    fn write(&self) -> Result<Box<dyn Transaction + '_>, StoreError> {
        self.begin(WRITE_BEGIN)
    }

    fn location(&self) -> String {
        format!("postgres {}", self.pool.location())
    }
}

/// A transaction on a session's connection; rolled back when dropped uncommitted.
struct PgTransaction {
    session: Session,
    open: bool,
}

impl Drop for PgTransaction {
    fn drop(&mut self) {
        if self.open {
            // Runs on the connection's thread before the session's next work; a connection
            // whose rollback failed is closed, and the next session connects again.
            self.session.send(|c| {
                let _ = c.client().batch_execute("ROLLBACK");
            });
        }
    }
}

impl Transaction for PgTransaction {
    fn commit(mut self: Box<Self>) -> Result<(), StoreError> {
        self.session.run(|c| c.client().batch_execute("COMMIT")).map_err(backend)?;
        self.open = false;
        Ok(())
    }
}

/// A parameter owned, to travel to the connection's thread.
#[derive(Debug)]
enum Owned {
    Int(Option<i64>),
    Text(Option<String>),
}

fn owned(params: &[Param<'_>]) -> Vec<Owned> {
    params
        .iter()
        .map(|p| match *p {
            Param::Int(v) => Owned::Int(v),
            Param::Text(v) => Owned::Text(v.map(str::to_owned)),
        })
        .collect()
}

impl ToSql for Owned {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut postgres::types::private::BytesMut,
    ) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        match self {
            Owned::Int(v) => v.to_sql(ty, out),
            Owned::Text(v) => v.as_deref().to_sql(ty, out),
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

fn bound(params: &[Owned]) -> Vec<&(dyn ToSql + Sync)> {
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

impl Sql for PgTransaction {
    const ROW_KEY: &'static str = "key";

    fn execute(&mut self, sql: &str, params: &[Param<'_>]) -> Result<u64, StoreError> {
        let (sql, params) = (dollars(sql), owned(params));
        self.session
            .run(move |c| {
                let statement = c.prepared(&sql)?;
                c.client().execute(&statement, &bound(&params))
            })
            .map_err(backend)
    }

    fn execute_unique(&mut self, sql: &str, params: &[Param<'_>]) -> Result<bool, StoreError> {
        let (sql, params) = (dollars(sql), owned(params));
        // A failed statement aborts a PostgreSQL transaction: the savepoint keeps the rest
        // of it usable after a uniqueness refusal, as SQLite's is.
        self.session
            .run(move |c| {
                let statement = c.prepared(&sql)?;
                let client = c.client();
                client.batch_execute("SAVEPOINT unique_check")?;
                match client.execute(&statement, &bound(&params)) {
                    Ok(_) => client.batch_execute("RELEASE SAVEPOINT unique_check").map(|()| true),
                    Err(e) if e.code() == Some(&postgres::error::SqlState::UNIQUE_VIOLATION) => {
                        client.batch_execute("ROLLBACK TO SAVEPOINT unique_check").map(|()| false)
                    }
                    Err(e) => Err(e),
                }
            })
            .map_err(backend)
    }

    fn query(&mut self, sql: &str, params: &[Param<'_>]) -> Result<Vec<SqlRow>, StoreError> {
        let (sql, params) = (dollars(sql), owned(params));
        self.session
            .run(move |c| {
                let statement = c.prepared(&sql)?;
                let rows = c.client().query(&statement, &bound(&params))?;
                rows.iter()
                    .map(|row| (0..row.len()).map(|i| cell(row, i)).collect::<Result<Vec<_>, _>>().map(SqlRow))
                    .collect()
            })
            .map_err(backend)
    }
}
