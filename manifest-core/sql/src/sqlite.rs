//! Transactions on SQLite connections.

use std::sync::{Mutex, MutexGuard};

use rusqlite::Connection;
use rusqlite::types::{ToSqlOutput, Value, ValueRef};

use crate::{Cell, Param, Sql, SqlError, SqlRow};

/// The connection a transaction runs on.
pub enum Held<'s> {
    /// A connection under its lock (a store's writer, or its one reader).
    Locked(MutexGuard<'s, Connection>),
    /// A reader taken from a pool, put back when the transaction ends.
    Pooled(Option<Connection>, &'s Mutex<Vec<Connection>>),
    /// A connection whose transaction someone else manages (a group commit's savepoint).
    Borrowed(&'s Connection),
}

/// A transaction on a SQLite connection; rolled back when dropped uncommitted.
pub struct SqliteTx<'s> {
    conn: Held<'s>,
    open: bool,
}

/// Runs a statement without parameters through the connection's statement cache (every
/// request begins and ends a transaction: parsing `BEGIN` each time showed in profiles).
pub fn run_cached(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([]).map(|_| ())
}

impl<'s> SqliteTx<'s> {
    /// Begins a transaction on `conn` with `begin` (`BEGIN IMMEDIATE` for a writer, `BEGIN
    /// DEFERRED` for a reader).
    pub fn begin(conn: Held<'s>, begin: &str) -> Result<SqliteTx<'s>, SqlError> {
        let mut tx = SqliteTx { conn, open: false };
        run_cached(tx.conn(), begin)?;
        tx.open = true;
        Ok(tx)
    }

    /// Statements inside a transaction the caller manages (begun, and ended, by it).
    pub fn within(conn: &'s Connection) -> SqliteTx<'s> {
        SqliteTx { conn: Held::Borrowed(conn), open: false }
    }

    /// The connection, for what only SQLite has (a savepoint of a group commit, a test).
    pub fn conn(&self) -> &Connection {
        match &self.conn {
            Held::Locked(guard) => guard,
            Held::Borrowed(conn) => conn,
            // Only `Drop` takes the reader out.
            Held::Pooled(conn, _) => conn.as_ref().unwrap_or_else(|| unreachable!("reader taken before drop")),
        }
    }
}

impl Drop for SqliteTx<'_> {
    fn drop(&mut self) {
        if self.open {
            let _ = run_cached(self.conn(), "ROLLBACK");
        }
        if let Held::Pooled(conn, pool) = &mut self.conn
            && let (Some(conn), Ok(mut pool)) = (conn.take(), pool.lock())
        {
            pool.push(conn);
        }
    }
}

impl rusqlite::ToSql for Param<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match *self {
            Param::Int(Some(v)) => ToSqlOutput::Owned(Value::Integer(v)),
            Param::Text(Some(t)) => ToSqlOutput::Borrowed(ValueRef::Text(t.as_bytes())),
            Param::Bytes(Some(b)) => ToSqlOutput::Borrowed(ValueRef::Blob(b)),
            Param::Int(None) | Param::Text(None) | Param::Bytes(None) => ToSqlOutput::Owned(Value::Null),
        })
    }
}

/// Whether SQLite gave up waiting for a lock another connection holds (`SQLITE_BUSY` once the
/// busy timeout ran out, or `SQLITE_LOCKED`): the database is there and the statement sound,
/// so the same work may succeed in a moment, as with a PostgreSQL that cannot be reached.
pub(crate) fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(
        e,
        rusqlite::Error::SqliteFailure(e, _)
            if matches!(e.code, rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}

/// Whether a write failed on a uniqueness rule.
fn unique_violation<T>(result: &rusqlite::Result<T>) -> bool {
    matches!(result, Err(rusqlite::Error::SqliteFailure(e, _)) if e.code == rusqlite::ErrorCode::ConstraintViolation)
}

impl Sql for SqliteTx<'_> {
    const ROW_KEY: &'static str = "rowid";
    const BACKEND: crate::Backend = crate::Backend::Sqlite;

    fn execute(&mut self, sql: &str, params: &[Param<'_>]) -> Result<u64, SqlError> {
        let changed = self.conn().prepare_cached(sql)?.execute(rusqlite::params_from_iter(params))?;
        Ok(changed as u64)
    }

    fn execute_unique(&mut self, sql: &str, params: &[Param<'_>]) -> Result<bool, SqlError> {
        let done = self.conn().prepare_cached(sql).and_then(|mut s| s.execute(rusqlite::params_from_iter(params)));
        if unique_violation(&done) {
            return Ok(false);
        }
        done?;
        Ok(true)
    }

    fn query(&mut self, sql: &str, params: &[Param<'_>]) -> Result<Vec<SqlRow>, SqlError> {
        let mut stmt = self.conn().prepare_cached(sql)?;
        let width = stmt.column_count();
        let mut rows = stmt.query(rusqlite::params_from_iter(params))?;
        let mut out = Vec::new();
        while let Some(row) = rows.next()? {
            let mut cells = Vec::with_capacity(width);
            for i in 0..width {
                cells.push(match row.get_ref(i)? {
                    ValueRef::Null => Cell::Null,
                    ValueRef::Integer(v) => Cell::Int(v),
                    ValueRef::Text(t) => {
                        Cell::Text(String::from_utf8(t.to_vec()).map_err(|e| SqlError::Corrupt {
                            column: i,
                            what: format!("text that is not UTF-8 ({e})"),
                        })?)
                    }
                    ValueRef::Blob(b) => Cell::Bytes(b.to_vec()),
                    ValueRef::Real(v) => return Err(SqlError::Corrupt { column: i, what: format!("the real {v}") }),
                });
            }
            out.push(SqlRow(cells));
        }
        Ok(out)
    }

    fn run_plain(&mut self, sql: &str) -> Result<(), SqlError> {
        Ok(run_cached(self.conn(), sql)?)
    }

    fn commit_tx(&mut self) -> Result<(), SqlError> {
        run_cached(self.conn(), "COMMIT")?;
        self.open = false;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::time::Duration;

    use rusqlite::Connection;

    use super::{Held, SqliteTx};
    use crate::{Sql, SqlError, params};

    /// Two connections to one database file, the second waiting 50 ms at most for a lock.
    fn two_connections(dir: &std::path::Path) -> (Mutex<Connection>, Mutex<Connection>) {
        let path = dir.join("store.sqlite");
        let first = Connection::open(&path).expect("open the first connection");
        first.execute_batch("PRAGMA journal_mode = WAL; CREATE TABLE t (v BIGINT)").expect("create the table");
        let second = Connection::open(&path).expect("open the second connection");
        second.busy_timeout(Duration::from_millis(50)).expect("set the busy timeout");
        (Mutex::new(first), Mutex::new(second))
    }

    #[test]
    fn a_write_kept_waiting_past_the_busy_timeout_is_unavailable_not_a_failure() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let (first, second) = two_connections(dir.path());
        let mut holder = SqliteTx::begin(Held::Locked(first.lock().expect("first")), "BEGIN IMMEDIATE")
            .expect("the first connection takes the write lock");
        holder.execute("INSERT INTO t (v) VALUES (?1)", params![1_i64]).expect("the holder writes");

        let second = second.lock().expect("second");
        // A transaction that would write, and a write standing alone, both wait for the lock.
        let begun = SqliteTx::begin(Held::Borrowed(&second), "BEGIN IMMEDIATE").err().expect("the lock is held");
        let alone = SqliteTx::within(&second)
            .execute("INSERT INTO t (v) VALUES (?1)", params![2_i64])
            .expect_err("the lock is held");
        for refused in [begun, alone] {
            assert!(matches!(refused, SqlError::Unavailable(_)), "a 503, not a 500: {refused:?}");
            assert!(refused.is_transient(), "{refused}");
            assert!(refused.to_string().contains("database is locked"), "SQLite's words kept: {refused}");
        }

        // Once the lock is let go, the same write goes through.
        holder.commit_tx().expect("the holder commits");
        drop(holder);
        let mut after = SqliteTx::begin(Held::Borrowed(&second), "BEGIN IMMEDIATE").expect("the lock is free");
        after.execute("INSERT INTO t (v) VALUES (?1)", params![2_i64]).expect("the write goes through");
        after.commit_tx().expect("it commits");
    }

    #[test]
    fn a_refused_statement_stays_a_database_failure() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let (first, _) = two_connections(dir.path());
        let first = first.lock().expect("first");
        let refused = SqliteTx::within(&first)
            .execute("INSERT INTO missing (v) VALUES (?1)", params![1_i64])
            .expect_err("no such table");
        assert!(matches!(refused, SqlError::Database(_)), "a 500: {refused:?}");
        assert!(!refused.is_transient(), "{refused}");
    }
}
