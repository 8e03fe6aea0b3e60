//! The relay store's schema on PostgreSQL is the one SQLite reaches through its migrations:
//! the same tables, the same columns with the same nullability, the same named indexes. A
//! SQLite migration without its PostgreSQL twin (or the other way round) fails here.

use std::collections::BTreeSet;

use relay_api::coordinator::store::{RelayStore, postgres};

/// (table, column, nullable) of every column of the store's tables.
type Columns = BTreeSet<(String, String, bool)>;

fn sqlite_schema(dir: &std::path::Path) -> (Columns, BTreeSet<String>) {
    RelayStore::open(dir).expect("a SQLite store");
    let conn = rusqlite::Connection::open(dir.join(relay_api::coordinator::store::DATABASE_FILE)).expect("open");
    let tables: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
        .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
        .expect("tables");
    let mut columns = Columns::new();
    for table in &tables {
        let mut info =
            conn.prepare(&format!("SELECT name, \"notnull\", pk FROM pragma_table_info('{table}')")).expect("info");
        let rows = info
            .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)? == 0 && r.get::<_, i64>(2)? == 0)))
            .expect("columns");
        for row in rows {
            let (name, nullable) = row.expect("a column");
            columns.insert((table.clone(), name, nullable));
        }
    }
    let indexes = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL")
        .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
        .expect("indexes");
    (columns, indexes)
}

fn postgres_schema(cluster: &svc_pg_cluster::Cluster) -> (Columns, BTreeSet<String>) {
    let columns = cluster
        .sql(
            "svc",
            // `key`: PostgreSQL's stand-in for SQLite's implicit rowid.
            "SELECT table_name || '|' || column_name || '|' || is_nullable FROM information_schema.columns \
             WHERE table_schema = 'public' AND table_name <> 'svc_migrations' AND column_name <> 'key' ORDER BY 1",
        )
        .expect("columns");
    let columns = columns
        .lines()
        .map(|l| {
            let mut parts = l.split('|');
            let (table, column, nullable) = (parts.next(), parts.next(), parts.next());
            (table.unwrap_or_default().to_owned(), column.unwrap_or_default().to_owned(), nullable == Some("YES"))
        })
        .collect();
    // Indexes made by CREATE INDEX (not those behind a primary key or a UNIQUE constraint).
    let indexes = cluster
        .sql(
            "svc",
            "SELECT indexname FROM pg_indexes WHERE schemaname = 'public' AND indexname NOT IN \
             (SELECT conname FROM pg_constraint) ORDER BY 1",
        )
        .expect("indexes");
    (columns, indexes.lines().map(str::to_owned).collect())
}

#[test]
fn the_postgres_schema_is_the_one_sqlite_migrates_to() {
    let Some(cluster) = svc_pg_cluster::for_test("the_postgres_schema_is_the_one_sqlite_migrates_to") else { return };
    let db = svc_postgres::Database::parse(&cluster.svc_url(), None).expect("the cluster's URL");
    // Opened twice: migrated once.
    for _ in 0..2 {
        RelayStore::on(Box::new(
            postgres::PostgresBackend::open(&db, postgres::PoolSettings::default()).expect("opens"),
        ));
    }
    let applied = cluster.sql("svc", "SELECT count(*) FROM svc_migrations WHERE store = 'relay'").expect("a query");
    assert_eq!(applied, postgres::MIGRATIONS.len().to_string(), "each migration applied once");

    let dir = tempfile::tempdir().expect("a scratch directory");
    let (sqlite_columns, sqlite_indexes) = sqlite_schema(dir.path());
    let (pg_columns, pg_indexes) = postgres_schema(&cluster);
    assert!(sqlite_columns.len() > 100, "the whole schema was read: {}", sqlite_columns.len());
    let only_sqlite: Vec<_> = sqlite_columns.difference(&pg_columns).collect();
    let only_pg: Vec<_> = pg_columns.difference(&sqlite_columns).collect();
    assert!(
        only_sqlite.is_empty() && only_pg.is_empty(),
        "columns (table, column, nullable) only on SQLite: {only_sqlite:?}; only on PostgreSQL: {only_pg:?}"
    );
    assert_eq!(sqlite_indexes, pg_indexes, "the same named indexes");
}
