//! The relay store on PostgreSQL from where the coordinator calls it: its runtime's threads.

use relay_api::coordinator::store::postgres::{PoolSettings, PostgresBackend};
use relay_api::coordinator::store::{RelayStore, StoreError};

/// Found before `--database` reached the servers: the synchronous client panicked when a
/// store was opened, used or dropped on a thread running async tasks (its connection runs
/// a runtime of its own). Connections now live on threads of their own.
#[tokio::test]
async fn a_postgres_store_opens_works_and_drops_inside_async_code() {
    let Some(cluster) = svc_pg_cluster::for_test("a_postgres_store_in_async_code") else { return };
    let db = svc_postgres::Database::parse(&cluster.svc_url(), None).expect("the cluster's URL");
    let keys = tempfile::tempdir().expect("a scratch directory");
    let key_file = keys.path().join("secrets.key");
    let store =
        RelayStore::on(Box::new(PostgresBackend::open(&db, PoolSettings::default()).expect("opens")), &key_file)
            .expect("its keys");
    let org = store.invite("acme").expect("a write");
    assert_eq!(store.invite("acme").expect("again"), org, "the same organization");
    tokio::task::yield_now().await;
    drop(store);
    // And again on the same database, migrated already.
    let again =
        RelayStore::on(Box::new(PostgresBackend::open(&db, PoolSettings::default()).expect("reopens")), &key_file)
            .expect("its keys");
    assert_eq!(again.invite("acme").expect("read back"), org);
}

/// A database restart: operations fail fast, as unavailable, while it is down, and work
/// again once it is back, without reopening the store.
#[test]
fn a_postgres_store_survives_a_database_restart() {
    let Some(cluster) = svc_pg_cluster::for_test("a_postgres_store_survives_a_database_restart") else { return };
    let db = svc_postgres::Database::parse(&format!("{}?connect_timeout=2", cluster.svc_url()), None).expect("url");
    let settings = PoolSettings { size: 2, wait: std::time::Duration::from_secs(2) };
    let keys = tempfile::tempdir().expect("a scratch directory");
    let store = RelayStore::on(
        Box::new(PostgresBackend::open(&db, settings).expect("opens")),
        &keys.path().join("secrets.key"),
    )
    .expect("its keys");
    let org = store.invite("acme").expect("a write");
    cluster.stop().expect("stop");
    let started = std::time::Instant::now();
    let down = store.invite("acme").expect_err("refused while the database is down");
    assert!(matches!(down, StoreError::Unavailable(_)), "unavailable (503 at the API), not a failure: {down}");
    assert!(started.elapsed() < std::time::Duration::from_secs(10), "fast: {:?}", started.elapsed());
    cluster.restart().expect("restart");
    // A connection the restart closed is made again when next used: the first operation
    // after the restart works, without reopening the store.
    assert_eq!(store.invite("acme").expect("works again at once"), org);
    assert_eq!(store.invite("acme").expect("and on"), org);
}
