//! The publication store's schema on PostgreSQL is the one SQLite reaches through its
//! migrations: the same tables, the same columns with the same nullability, the same named
//! indexes. Only `svc_leases` (the scheduling lease of several instances) is PostgreSQL's alone.

#![cfg(feature = "service")]

use manifest_core::service::store::{DATABASE_FILE, PostgresStore, SqliteStore, postgres};

#[test]
fn the_postgres_schema_is_the_one_sqlite_migrates_to() {
    let Some(cluster) = svc_pg_cluster::for_test("publication_postgres_schema") else { return };
    let db = svc_postgres::Database::parse(&cluster.svc_url(), None).expect("the cluster's URL");
    // Opened twice: migrated once.
    for _ in 0..2 {
        PostgresStore::open(&db, svc_postgres::PoolSettings::default()).expect("opens");
    }
    let applied =
        cluster.sql("svc", "SELECT count(*) FROM svc_migrations WHERE store = 'publication'").expect("a query");
    assert_eq!(applied, postgres::MIGRATIONS.len().to_string(), "each migration applied once");

    let dir = tempfile::tempdir().expect("a scratch directory");
    SqliteStore::open(dir.path()).expect("a SQLite store");
    let sqlite = svc_pg_cluster::schema::sqlite(&dir.path().join(DATABASE_FILE));
    let pg = cluster.schema("svc", &["svc_migrations", "svc_leases"], &[]);
    assert!(sqlite.columns.len() > 80, "the whole schema was read: {}", sqlite.columns.len());
    assert_eq!(sqlite.differences(&pg), "");
}
