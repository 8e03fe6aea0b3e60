//! The publication's hot path on the async runtime ([`OnRuntime`]), on a real PostgreSQL
//! database: the same answers as the blocking calls, the pool's bound, and what a review of
//! it found (a write abandoned by its client that still committed, reads queued behind a
//! write waiting for the lock, connections never made while the database was slow).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::tests::{decided_setup, on_each_backend};
use super::*;
use crate::service::auth::Role;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("a runtime")
}

#[test]
fn the_hot_path_on_the_runtime_reads_and_writes_as_the_blocking_calls_do() {
    on_each_backend("on-runtime", |b| {
        let store = (b.open)();
        let Some(statements) = store.on_runtime() else {
            assert!(store.is_local(), "a store across a network runs its hot path on the runtime");
            return;
        };
        let (org, on, write) = decided_setup(store.as_ref(), "acme");
        let mut tx = store.write().expect("tx");
        tx.insert_token(
            org.id,
            &NewToken { id: "t1".into(), name: "ci".into(), role: Role::Developer, hash: "h1".into() },
        )
        .expect("token");
        tx.set_grant(org.id, "vpn", true).expect("grant");
        tx.commit().expect("commit");
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("rt");
        runtime.block_on(async {
            let caller = statements.caller("h1").await.expect("read");
            assert_eq!(format!("{caller:?}"), format!("{:?}", store.caller("h1").expect("read")));
            assert_eq!(caller.expect("the token's caller").organization, org);
            assert!(statements.caller("nobody").await.expect("read").is_none());

            let inputs = statements.publication_inputs(org.id, "web").await.expect("read").expect("the organization");
            let blocking = store.read().expect("tx").publication_inputs(org.id, "web").expect("read");
            assert_eq!(format!("{:?}", Some(&inputs)), format!("{:?}", blocking.as_ref()));
            assert!(inputs.grants.contains("vpn"));
            assert!(statements.publication_inputs(i64::MAX, "web").await.expect("read").is_none());

            // The grant counted the inputs revision up: decided on what was read now.
            assert!(inputs.inputs_revision > on.inputs_revision);
            let on = DecidedOn { inputs_revision: inputs.inputs_revision, ..on.clone() };

            assert_eq!(statements.publish_decided(&on, &write).await.expect("write"), Some(2));
            // What it was decided on changed (the pointer moved): nothing is written.
            let stale = DecidedOn { expected: Some(1), ..on.clone() };
            assert_eq!(statements.publish_decided(&stale, &write).await.expect("write"), None);
            assert_eq!(statements.publish_decided(&on, &write).await.expect("write"), Some(3));

            // Connections the database dropped are made again; a read runs once more.
            (b.raw)("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = 'svc' AND pid <> pg_backend_pid()")
                .expect("every connection terminated");
            assert!(statements.caller("h1").await.expect("read again on a new connection").is_some());
        });
        let versions = store.read().expect("tx").policy_versions(on.application).expect("read");
        assert_eq!(versions.iter().map(|v| v.version).collect::<Vec<_>>(), [1, 2, 3]);
    });
}

#[test]
fn the_pool_size_bounds_every_connection_the_store_opens() {
    let Some(cluster) = svc_pg_cluster::for_test("bound") else { return };
    let db = svc_postgres::Database::parse(&cluster.svc_url(), None).expect("the cluster's URL");
    let settings = svc_postgres::PoolSettings { size: 4, wait: std::time::Duration::from_secs(5) };
    let store: Arc<dyn ServiceStore> = Arc::new(PostgresStore::open(&db, settings).expect("a PostgreSQL store"));
    let (org, _, _) = decided_setup(store.as_ref(), "acme");
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("rt");
    // Both paths at once, far more work than connections: transactions from threads, and
    // statements from many tasks on the runtime.
    std::thread::scope(|s| {
        for _ in 0..8 {
            s.spawn(|| {
                for _ in 0..20 {
                    let mut tx = store.read().expect("a transaction");
                    tx.organization("acme").expect("read");
                }
            });
        }
        runtime.block_on(async {
            let tasks: Vec<_> = (0..64)
                .map(|_| {
                    let store = store.clone();
                    tokio::spawn(async move {
                        let statements = store.on_runtime().expect("statements on the runtime");
                        for _ in 0..20 {
                            statements.publication_inputs(org.id, "web").await.expect("read");
                        }
                    })
                })
                .collect();
            for task in tasks {
                task.await.expect("a task");
            }
        });
    });
    let open = cluster
        .sql("svc", "SELECT count(*) FROM pg_stat_activity WHERE datname = 'svc' AND pid <> pg_backend_pid()")
        .expect("count");
    let open: u32 = open.parse().expect("a count");
    assert!((2..=4).contains(&open), "{open} connections for a pool of 4");

    // A pool of three: no connections of their own for the runtime, whose calls go to the
    // blocking path.
    let three = svc_postgres::PoolSettings { size: 3, ..settings };
    assert!(PostgresStore::open(&db, three).expect("a store").on_runtime().is_none());
}

/// A store on `url` whose statements wait at most `wait`, with two connections on the runtime.
fn store_on(url: &str, wait: Duration) -> Arc<dyn ServiceStore> {
    let db = svc_postgres::Database::parse(url, None).expect("the cluster's URL");
    Arc::new(PostgresStore::open(&db, svc_postgres::PoolSettings { size: 4, wait }).expect("a PostgreSQL store"))
}

/// The writers' lock (`WRITE_BEGIN`'s key), held by another session for `held`.
fn hold_the_writers_lock(cluster: &svc_pg_cluster::Cluster, held: Duration) -> std::thread::JoinHandle<()> {
    let sql = format!("SELECT pg_advisory_lock(8319396543593100652); SELECT pg_sleep({})", held.as_secs_f64());
    let url = cluster.svc_url();
    let holder = svc_postgres::Database::parse(&url, None).expect("the cluster's URL");
    std::thread::spawn(move || {
        let mut client = holder.connect().expect("a session");
        client.batch_execute(&sql).expect("held");
    })
}

#[test]
fn a_decided_write_that_cannot_have_the_lock_in_time_writes_nothing_and_reads_go_on() {
    let Some(cluster) = svc_pg_cluster::for_test("lock-wait") else { return };
    let store = store_on(&cluster.svc_url(), Duration::from_secs(1));
    let (_, on, write) = decided_setup(store.as_ref(), "acme");
    let mut tx = store.write().expect("tx");
    let org = tx.organization("acme").expect("read").expect("org");
    tx.insert_token(org.id, &NewToken { id: "t1".into(), name: "ci".into(), role: Role::Developer, hash: "h1".into() })
        .expect("token");
    tx.commit().expect("commit");
    let statements = store.on_runtime().expect("statements on the runtime");
    runtime().block_on(async {
        // Connections made before the lock is taken.
        statements.caller("h1").await.expect("read");
        let holder = hold_the_writers_lock(&cluster, Duration::from_secs(3));
        // Held once the database says so (a fixed sleep was a guess on a loaded machine).
        let granted = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted";
        let deadline = Instant::now() + Duration::from_secs(10);
        while cluster.sql("svc", granted).expect("the locks") != "1" {
            assert!(Instant::now() < deadline, "the writers' lock was never taken");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let started = Instant::now();
        let (written, read) = tokio::join!(statements.publish_decided(&on, &write), async {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let started = Instant::now();
            (statements.caller("h1").await, started.elapsed())
        });
        let refused = written.expect_err("the lock stayed held");
        assert!(matches!(refused, StoreError::Unavailable(_)), "a 503, not a 500: {refused}");
        assert!(started.elapsed() < Duration::from_millis(2500), "failed at the wait: {:?}", started.elapsed());
        // The read did not queue behind the write on its connection.
        let (caller, took) = read;
        assert!(caller.expect("read").is_some());
        assert!(took < Duration::from_millis(800), "the read waited {took:?} (the write waits 1 s)");
        tokio::task::spawn_blocking(move || holder.join().expect("the holder")).await.expect("joined");
    });
    // Told it failed, it wrote nothing: the server gave up, not only the client.
    std::thread::sleep(Duration::from_millis(500));
    let versions = store.read().expect("tx").policy_versions(on.application).expect("read");
    assert_eq!(versions.iter().map(|v| v.version).collect::<Vec<_>>(), [1]);
}

/// A TCP proxy to `upstream` that waits `delay` before it connects each accepted connection:
/// a database slow to accept connections.
async fn slow_proxy(upstream: std::net::SocketAddr, delay: Arc<AtomicU64>) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a port");
    let addr = listener.local_addr().expect("its address");
    tokio::spawn(async move {
        while let Ok((mut client, _)) = listener.accept().await {
            let delay = Duration::from_millis(delay.load(Ordering::Relaxed));
            tokio::spawn(async move {
                tokio::time::sleep(delay).await;
                if let Ok(mut server) = tokio::net::TcpStream::connect(upstream).await {
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                }
            });
        }
    });
    addr
}

#[test]
fn a_connection_slower_than_each_requests_wait_is_still_made_under_load() {
    let Some(cluster) = svc_pg_cluster::for_test("slow-connect") else { return };
    let runtime = runtime();
    let delay = Arc::new(AtomicU64::new(0));
    let upstream: std::net::SocketAddr = format!("127.0.0.1:{}", cluster.port()).parse().expect("an address");
    let proxy = runtime.block_on(slow_proxy(upstream, delay.clone()));
    let url = format!("postgres://postgres@127.0.0.1:{}/svc", proxy.port());
    let store = store_on(&url, Duration::from_millis(500));
    decided_setup(store.as_ref(), "acme");
    // Each new connection now takes three times a request's wait, and a request comes every
    // 10 ms: the connection must be made all the same (it was given up with each request).
    delay.store(1500, Ordering::Relaxed);
    assert!(store.on_runtime().is_some(), "statements on the runtime");
    let answered = runtime.block_on(async {
        let started = Instant::now();
        let mut requests = tokio::task::JoinSet::new();
        while started.elapsed() < Duration::from_secs(4) {
            let store = store.clone();
            requests.spawn(async move {
                let statements = store.on_runtime().expect("statements");
                statements.publication_inputs(1, "web").await.is_ok().then(Instant::now)
            });
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let mut first: Option<Instant> = None;
        while let Some(done) = requests.join_next().await {
            if let Ok(Some(at)) = done {
                first = Some(first.map_or(at, |f| f.min(at)));
            }
        }
        first.map(|at| at.duration_since(started))
    });
    let first = answered.expect("a request answered while the load went on");
    assert!(first < Duration::from_secs(3), "the first answer came after {first:?}");
}

/// Issue 46: crash tests inject their fault inside the decided write that production
/// publications make, from either of its callers (the runtime's statements and the blocking
/// pool's): under the session setting `svc serve --inject-fault` sets, the call ends its own
/// session after its writes, and none of them is committed. Without it, the same call writes.
#[test]
fn the_injected_fault_ends_the_decided_write_after_its_writes_and_commits_nothing() {
    let Some(cluster) = svc_pg_cluster::for_test("decided-fault") else { return };
    let mut db = svc_postgres::Database::parse(&cluster.svc_url(), None).expect("the cluster's URL");
    let settings = svc_postgres::PoolSettings::default();
    let store = PostgresStore::open(&db, settings).expect("a PostgreSQL store");
    let (org, on, write) = decided_setup(&store, "acme");
    let (name, value) = crate::service::FaultPoint::AfterVersionInsert.session_setting();
    db.add_session_setting(name, value);
    let faulty = PostgresStore::open(&db, settings).expect("a PostgreSQL store with the fault");
    let nothing_written = |by: &str| {
        let mut tx = store.read().expect("tx");
        let app = tx.application(org.id, "web").expect("read").expect("app");
        assert_eq!(app.active_pointer_version, 1, "the pointer did not move: {by}");
        assert!(tx.policy_version(app.key, 2).expect("read").is_none(), "no version 2: {by}");
        assert!(tx.recent_activity(app.key, 10).expect("read").is_empty(), "no activity: {by}");
        assert_eq!(tx.wakeups(app.key).expect("read"), 0, "no wakeup: {by}");
    };
    let alone = faulty.publish_decided_alone(&on, &write).expect("PostgreSQL writes a decided publication alone");
    assert!(alone.is_err(), "the call's session ended: {alone:?}");
    nothing_written("the blocking pool's call");
    let on_runtime = runtime()
        .block_on(async { faulty.on_runtime().expect("statements on the runtime").publish_decided(&on, &write).await });
    assert!(on_runtime.is_err(), "the call's session ended: {on_runtime:?}");
    nothing_written("the runtime's call");
    // Each call reached the fault point, inside the function, after its writes.
    let log = cluster.log();
    let reached = log.matches("svc_publish_decided: injected fault after the version insert").count();
    assert_eq!(reached, 2, "{log}");
    assert_eq!(store.publish_decided_alone(&on, &write).expect("alone").expect("the call"), Some(2), "no fault");
}
