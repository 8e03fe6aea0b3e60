//! The relay store's schema on PostgreSQL is the one SQLite reaches through its migrations:
//! the same tables, the same columns with the same nullability, the same named indexes. A
//! SQLite migration without its PostgreSQL twin (or the other way round) fails here. Only
//! `relay_leases` (the engine lease of several coordinators) is PostgreSQL's alone.

use relay_api::coordinator::store::{RelayStore, postgres};

#[test]
fn the_postgres_schema_is_the_one_sqlite_migrates_to() {
    let Some(cluster) = svc_pg_cluster::for_test("the_postgres_schema_is_the_one_sqlite_migrates_to") else { return };
    let db = svc_postgres::Database::parse(&cluster.svc_url(), None).expect("the cluster's URL");
    // Opened twice: migrated once.
    let keys = tempfile::tempdir().expect("a scratch directory");
    for _ in 0..2 {
        let backend = postgres::PostgresBackend::open(&db, postgres::PoolSettings::default()).expect("opens");
        RelayStore::on(Box::new(backend), &keys.path().join("secrets.key")).expect("its keys");
    }
    let applied = cluster.sql("svc", "SELECT count(*) FROM svc_migrations WHERE store = 'relay'").expect("a query");
    assert_eq!(applied, postgres::MIGRATIONS.len().to_string(), "each migration applied once");

    let dir = tempfile::tempdir().expect("a scratch directory");
    RelayStore::open(dir.path()).expect("a SQLite store");
    let sqlite = svc_pg_cluster::schema::sqlite(&dir.path().join(relay_api::coordinator::store::DATABASE_FILE));
    // `key`: PostgreSQL's stand-in for SQLite's implicit rowid. `relay_leases`: the engine
    // lease of several coordinators, PostgreSQL's alone (SQLite's store is one coordinator's).
    let pg = cluster.schema("svc", &["svc_migrations", "relay_leases"], &["key"]);
    assert!(sqlite.columns.len() > 100, "the whole schema was read: {}", sqlite.columns.len());
    assert_eq!(sqlite.differences(&pg), "");
}
