//! Transactions on pooled PostgreSQL connections ([`svc_postgres::Pool`]). Each statement
//! travels to its connection's thread as a closure, with its parameters owned; statements
//! are prepared once per connection.

use postgres::types::{IsNull, ToSql, Type, to_sql_checked};
use svc_postgres::{Pool, Session};

use crate::{Cell, Param, Sql, SqlError, SqlRow};

/// A transaction on one pooled connection; rolled back when dropped uncommitted.
pub struct PgTx {
    session: Session,
    open: bool,
    /// Whether a standalone read whose connection was lost runs once more ([`PgTx::single`]).
    retry_reads: bool,
    /// A statement failed (`Some(transient)`): PostgreSQL has aborted the transaction, and a
    /// `COMMIT` would answer as a rollback does, without an error; if the connection was
    /// lost, the next statement would even run on a new connection, outside the
    /// transaction and its lock. So nothing more is sent, and [`Sql::commit_tx`] fails.
    failed: Option<bool>,
}

impl PgTx {
    /// Checks a connection out of `pool` and runs `begin` on it (`BEGIN ...`, and whatever
    /// the store takes first, such as an advisory lock). A connection the database dropped
    /// (a restart) is noticed when used: nothing of the transaction has run yet, so it begins
    /// once more, on a fresh connection.
    pub fn begin(pool: &Pool, begin: &'static str) -> Result<PgTx, SqlError> {
        let session = pool.session()?;
        if let Err(e) = session.run(move |c| c.client().batch_execute(begin)) {
            if !e.is_transient() {
                return Err(e.into());
            }
            session.run(move |c| c.client().batch_execute(begin))?;
        }
        Ok(PgTx { session, open: true, retry_reads: false, failed: None })
    }

    /// Checks a connection out of `pool` for statements that each stand alone (each its own
    /// transaction, one round trip): a single read needs no `BEGIN`, its statement is one
    /// snapshot. A read whose connection the database dropped runs once more, on a fresh
    /// connection (a write is not: it may have committed).
    pub fn single(pool: &Pool) -> Result<PgTx, SqlError> {
        Ok(PgTx { session: pool.session()?, open: false, retry_reads: true, failed: None })
    }

    /// As [`PgTx::single`], for statements that write (each commits alone): none is run
    /// twice, since one whose answer was lost may have committed.
    pub fn alone(pool: &Pool) -> Result<PgTx, SqlError> {
        Ok(PgTx { session: pool.session()?, open: false, retry_reads: false, failed: None })
    }

    /// Runs `work` on the connection's thread; a failed statement marks an open transaction
    /// (see `failed`), which then runs nothing more.
    fn run<T: Send + 'static>(
        &mut self,
        work: impl FnOnce(&mut svc_postgres::Connection) -> Result<T, postgres::Error> + Send + 'static,
    ) -> Result<T, SqlError> {
        if let Some(transient) = self.failed {
            return Err(SqlError::Aborted { transient });
        }
        let out = self.session.run(work);
        if let Err(e) = &out
            && self.open
        {
            self.failed = Some(e.is_transient());
        }
        Ok(out?)
    }

    /// The session, for what only PostgreSQL has.
    pub fn session(&self) -> &Session {
        &self.session
    }
}

impl Drop for PgTx {
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

/// A parameter owned, to travel to the connection's thread.
#[derive(Debug, Clone)]
enum Owned {
    Int(Option<i64>),
    Text(Option<String>),
    Bytes(Option<Vec<u8>>),
}

fn owned(params: &[Param<'_>]) -> Result<Vec<Owned>, SqlError> {
    params
        .iter()
        .map(|p| match *p {
            Param::Int(v) => Ok(Owned::Int(v)),
            Param::Text(Some(v)) if v.contains('\0') => Err(SqlError::NulInText),
            Param::Text(v) => Ok(Owned::Text(v.map(str::to_owned))),
            Param::Bytes(v) => Ok(Owned::Bytes(v.map(<[u8]>::to_vec))),
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
            Owned::Bytes(v) => v.as_deref().to_sql(ty, out),
        }
    }

    fn accepts(ty: &Type) -> bool {
        <i64 as ToSql>::accepts(ty) || <&str as ToSql>::accepts(ty) || <&[u8] as ToSql>::accepts(ty)
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
    } else if *ty == Type::BYTEA {
        row.try_get::<_, Option<Vec<u8>>>(i)?.map_or(Cell::Null, Cell::Bytes)
    } else {
        // TEXT; any other type fails here, naming it, rather than reading as text.
        row.try_get::<_, Option<String>>(i)?.map_or(Cell::Null, Cell::Text)
    })
}

/// Rows as the shared statements read them.
fn sql_rows(rows: &[postgres::Row]) -> Result<Vec<SqlRow>, postgres::Error> {
    rows.iter().map(|row| (0..row.len()).map(|i| cell(row, i)).collect::<Result<Vec<_>, _>>().map(SqlRow)).collect()
}

/// Runs a shared statement alone (its own transaction) on connections driven on the async
/// runtime ([`svc_postgres::RuntimePool`]), for the hot path of a service on its runtime, on
/// the lane its kind asks ([`svc_postgres::Lane`]).
pub async fn query_on_runtime(
    pool: &svc_postgres::RuntimePool,
    lane: svc_postgres::Lane,
    sql: &str,
    params: &[Param<'_>],
) -> Result<Vec<SqlRow>, SqlError> {
    let (sql, params) = (dollars(sql), owned(params)?);
    let rows = pool.query(lane, &sql, &bound(&params)).await?;
    sql_rows(&rows).map_err(|source| {
        SqlError::from(svc_postgres::DbError::Postgres { location: pool.location().to_owned(), source })
    })
}

/// Makes the runtime pool's connections and prepares the shared statements `reads` and
/// `writes` on them ([`svc_postgres::RuntimePool::warm`]), as [`query_on_runtime`] will send
/// them.
pub async fn warm_on_runtime(pool: &svc_postgres::RuntimePool, reads: &[&str], writes: &[&str]) {
    let reads: Vec<String> = reads.iter().map(|s| dollars(s)).collect();
    let writes: Vec<String> = writes.iter().map(|s| dollars(s)).collect();
    let reads: Vec<&str> = reads.iter().map(String::as_str).collect();
    let writes: Vec<&str> = writes.iter().map(String::as_str).collect();
    pool.warm(&reads, &writes).await;
}

impl Sql for PgTx {
    const ROW_KEY: &'static str = "key";
    const BACKEND: crate::Backend = crate::Backend::Postgres;

    fn execute(&mut self, sql: &str, params: &[Param<'_>]) -> Result<u64, SqlError> {
        let (sql, params) = (dollars(sql), owned(params)?);
        self.run(move |c| {
            let statement = c.prepared(&sql)?;
            c.client().execute(&statement, &bound(&params))
        })
    }

    fn execute_unique(&mut self, sql: &str, params: &[Param<'_>]) -> Result<bool, SqlError> {
        let (sql, params) = (dollars(sql), owned(params)?);
        // A failed statement aborts a PostgreSQL transaction: the savepoint keeps the rest
        // of it usable after a uniqueness refusal, as SQLite's is.
        self.run(move |c| {
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
    }

    fn query(&mut self, sql: &str, params: &[Param<'_>]) -> Result<Vec<SqlRow>, SqlError> {
        let alone_read = self.retry_reads && !self.open && sql.trim_start().starts_with("SELECT");
        let (sql, params) = (dollars(sql), owned(params)?);
        let query = move |c: &mut svc_postgres::Connection| {
            let statement = c.prepared(&sql)?;
            sql_rows(&c.client().query(&statement, &bound(&params))?)
        };
        if alone_read {
            // A statement alone is its own transaction: a read whose connection the database
            // dropped (a restart) runs once more, on a fresh connection, as `begin` does.
            match self.session.run(query.clone()) {
                Err(e) if e.is_transient() => {}
                done => return Ok(done?),
            }
        }
        self.run(query)
    }

    fn run_plain(&mut self, sql: &str) -> Result<(), SqlError> {
        let sql = sql.to_owned();
        self.run(move |c| c.client().batch_execute(&sql))
    }

    fn run_plains(&mut self, sqls: &[&str]) -> Result<(), SqlError> {
        // The simple query protocol takes several statements at once.
        self.run_plain(&sqls.join("; "))
    }

    fn commit_tx(&mut self) -> Result<(), SqlError> {
        if let Some(transient) = self.failed {
            // Dropped open, it rolls back.
            return Err(SqlError::Aborted { transient });
        }
        if self.open {
            self.run(|c| c.client().batch_execute("COMMIT"))?;
            self.open = false;
        }
        Ok(())
    }
}
