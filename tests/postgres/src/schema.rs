//! A store's schema as SQLite and PostgreSQL hold it, to compare: each store's PostgreSQL
//! migrations must reach the schema its SQLite migrations reach (the same tables, the same
//! columns with the same nullability, the same named indexes), so a migration without its
//! twin fails a test.

use std::collections::BTreeSet;
use std::path::Path;

use crate::Cluster;

/// A schema: (table, column, nullable) of every column, and the named indexes (those made by
/// `CREATE INDEX`, not those behind a key or a UNIQUE constraint).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Schema {
    /// (table, column, nullable).
    pub columns: BTreeSet<(String, String, bool)>,
    /// Index names.
    pub indexes: BTreeSet<String>,
}

impl Schema {
    /// What one schema has that the other has not, as a message (empty when they agree).
    pub fn differences(&self, postgres: &Schema) -> String {
        let only_sqlite: Vec<_> = self.columns.difference(&postgres.columns).collect();
        let only_pg: Vec<_> = postgres.columns.difference(&self.columns).collect();
        let indexes_sqlite: Vec<_> = self.indexes.difference(&postgres.indexes).collect();
        let indexes_pg: Vec<_> = postgres.indexes.difference(&self.indexes).collect();
        if only_sqlite.is_empty() && only_pg.is_empty() && indexes_sqlite.is_empty() && indexes_pg.is_empty() {
            return String::new();
        }
        format!(
            "columns (table, column, nullable) only on SQLite: {only_sqlite:?}; only on PostgreSQL: {only_pg:?}; \
             indexes only on SQLite: {indexes_sqlite:?}; only on PostgreSQL: {indexes_pg:?}"
        )
    }
}

/// The schema of the SQLite database `file`.
pub fn sqlite(file: &Path) -> Schema {
    let conn = rusqlite::Connection::open(file).expect("the SQLite database");
    let tables: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
        .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
        .expect("tables");
    let mut schema = Schema::default();
    for table in &tables {
        let mut info =
            conn.prepare(&format!("SELECT name, \"notnull\", pk FROM pragma_table_info('{table}')")).expect("info");
        let rows = info
            .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)? == 0 && r.get::<_, i64>(2)? == 0)))
            .expect("columns");
        for row in rows {
            let (name, nullable) = row.expect("a column");
            schema.columns.insert((table.clone(), name, nullable));
        }
    }
    schema.indexes = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL")
        .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
        .expect("indexes");
    schema
}

impl Cluster {
    /// The schema of database `db`, leaving out `tables` (what only PostgreSQL has by design,
    /// such as `svc_migrations`) and `columns` (a column name standing for SQLite's implicit
    /// rowid, such as `key`).
    pub fn schema(&self, db: &str, tables: &[&str], columns: &[&str]) -> Schema {
        let list = |names: &[&str]| names.iter().map(|n| format!("'{n}'")).collect::<Vec<_>>().join(", ");
        let (tables, columns) = (list(tables), list(columns));
        let tables = if tables.is_empty() { "''".to_owned() } else { tables };
        let columns = if columns.is_empty() { "''".to_owned() } else { columns };
        let rows = self
            .sql(
                db,
                &format!(
                    "SELECT table_name || '|' || column_name || '|' || is_nullable FROM information_schema.columns \
                     WHERE table_schema = 'public' AND table_name NOT IN ({tables}) AND column_name NOT IN ({columns}) \
                     ORDER BY 1"
                ),
            )
            .expect("columns");
        let columns = rows
            .lines()
            .map(|l| {
                let mut parts = l.split('|');
                let (table, column, nullable) = (parts.next(), parts.next(), parts.next());
                (table.unwrap_or_default().to_owned(), column.unwrap_or_default().to_owned(), nullable == Some("YES"))
            })
            .collect();
        let indexes = self
            .sql(
                db,
                &format!(
                    "SELECT indexname FROM pg_indexes WHERE schemaname = 'public' AND tablename NOT IN ({tables}) \
                     AND indexname NOT IN (SELECT conname FROM pg_constraint) ORDER BY 1"
                ),
            )
            .expect("indexes");
        Schema { columns, indexes: indexes.lines().map(str::to_owned).collect() }
    }
}
