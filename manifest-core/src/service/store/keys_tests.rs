//! Secrets at rest on both backends (issue 40, point 1): a value is stored sealed for its
//! row and reaches the job opened; a value in clear from an older version is sealed at
//! start; a store with keys refuses to start without its key file; instances starting
//! together make one first key; a rotation under load loses nothing and leaves one KEK.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex};

use super::tests::{Backend, on_each_backend};
use super::*;
use svc_test_leaks::canary;

/// A V4 policy whose job gets secret `db.password` as `DB_PASSWORD`.
fn policy() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/golden/v4-full.policy.json");
    std::fs::read_to_string(path).expect("the golden policy")
}

/// Organization `org` with application `web` at version 1 of [`policy`]: its key.
fn application(store: &dyn ServiceStore, org: &str) -> (Organization, i64) {
    let mut tx = store.write().expect("tx");
    let org = tx.ensure_organization(org).expect("org");
    let app = tx.insert_application(org.id, "web", &format!("app_{}", org.name)).expect("app");
    let version = PolicyVersion {
        version: 1,
        schema_version: 4,
        authored_digest: "sha256:a".into(),
        policy_digest: "sha256:p".into(),
        policy: policy(),
        authored: "{}".into(),
        jobs: 1,
        execution: "continuous".into(),
        published_by: "me".into(),
    };
    tx.insert_policy_version(app.key, &version).expect("version");
    tx.commit().expect("commit");
    (org, app.key)
}

fn set(store: &dyn ServiceStore, org: i64, secret: &str, value: &[u8]) {
    let mut tx = store.write().expect("tx");
    tx.set_secret_value(org, "web", secret, value).expect("a value");
    tx.commit().expect("commit");
}

/// The job's `DB_PASSWORD`, as the scheduler gives it (the store must lead the scheduling).
fn delivered(store: &dyn ServiceStore, app: i64) -> Result<Option<String>, String> {
    assert!(store.lead().expect("lead"), "this store schedules");
    let mut tx = store.begin().map_err(|e| e.to_string())?;
    let workload = tx.workload(app, 1).map_err(|e| e.to_string())?;
    Ok(workload.env.iter().find(|(k, _)| k == "DB_PASSWORD").map(|(_, v)| v.clone()))
}

/// Where `value` is found at rest: every file under the store's directory and, on
/// PostgreSQL, every file of the cluster and a `pg_dumpall`.
fn found_in_store(b: &Backend<'_>, value: &str) -> Vec<String> {
    svc_test_leaks::found(b.dir, b.cluster, value).places
}

#[test]
fn a_secret_value_is_stored_sealed_for_its_row_and_reaches_the_job_opened() {
    on_each_backend("keys-sealed", |b| {
        let store = (b.open)();
        let (acme, app) = application(store.as_ref(), "acme");
        let value = canary();
        set(store.as_ref(), acme.id, "db.password", value.as_bytes());
        assert_eq!(delivered(store.as_ref(), app), Ok(Some(value.clone())));
        let found = found_in_store(b, &value);
        assert!(found.is_empty(), "the value is readable in the store: {found:?}");
        // As a control: the same search finds a value stored in clear.
        let control = canary();
        (b.raw)(&format!("INSERT INTO organizations (name) VALUES ('{control}')")).expect("a clear value");
        assert!(!found_in_store(b, &control).is_empty(), "the search finds what is there");
        store.resign();
        drop(store);

        // Another tenant's row given acme's sealed value (a database writer's copy) does not
        // open there; acme's still opens after a restart, from the key file alone.
        let store = (b.open)();
        let (evil, evil_app) = application(store.as_ref(), "evil");
        (b.raw)(&format!(
            "INSERT INTO provisioned_secrets (organization_id, application_id, secret_id, value, data_key_id)
             SELECT {}, application_id, secret_id, value, data_key_id FROM provisioned_secrets
             WHERE organization_id = {}",
            evil.id, acme.id
        ))
        .expect("copied");
        let refused = delivered(store.as_ref(), evil_app).expect_err("refused");
        assert!(refused.contains("did not open"), "{refused}");
        assert!(!refused.contains(&value), "{refused}");
        assert_eq!(delivered(store.as_ref(), app), Ok(Some(value)));
        store.resign();
    });
}

#[test]
fn a_value_an_older_version_stored_in_clear_is_sealed_at_start() {
    on_each_backend("keys-clear", |b| {
        let store = (b.open)();
        let (acme, app) = application(store.as_ref(), "acme");
        set(store.as_ref(), acme.id, "other", b"sealed already");
        drop(store);
        // What an older version wrote: the value itself, no data key.
        let value = canary();
        (b.raw)(&format!(
            "INSERT INTO provisioned_secrets (organization_id, application_id, secret_id, value)
             VALUES ({}, 'web', 'db.password', CAST('{value}' AS {}))",
            acme.id,
            if b.cluster.is_some() { "BYTEA" } else { "BLOB" }
        ))
        .expect("a clear row");
        let store: Arc<dyn ServiceStore> = match b.cluster {
            None => Arc::new(SqliteStore::open(b.dir).expect("a SQLite store")),
            Some(cluster) => {
                let db = svc_postgres::Database::parse(&cluster.svc_url(), None).expect("URL");
                Arc::new(PostgresStore::open(&db, svc_postgres::PoolSettings::default()).expect("a store"))
            }
        };
        let started = keys::start(store.as_ref(), b.key_file).expect("started");
        assert_eq!((started.sealed, started.created_key_file), (1, false));
        assert_eq!(started.notices(), ["sealed 1 secret value an older version had stored in clear"]);
        let by_key = store.read().expect("tx").secrets_by_data_key().expect("counts");
        assert_eq!(by_key, [(Some(1), 2)], "none left in clear");
        assert_eq!(delivered(store.as_ref(), app), Ok(Some(value.clone())));
        store.resign();
        if b.cluster.is_none() {
            // SQLite's pages and log that held it were rewritten.
            let found = found_in_store(b, &value);
            assert!(found.is_empty(), "{found:?}");
        }
    });
}

#[test]
fn a_store_with_keys_refuses_to_start_without_its_key_file() {
    on_each_backend("keys-refused", |b| {
        let store = (b.open)();
        let (acme, _) = application(store.as_ref(), "acme");
        set(store.as_ref(), acme.id, "db.password", b"v");
        drop(store);
        let start = |key_file: &Path| -> String {
            let store: Arc<dyn ServiceStore> = match b.cluster {
                None => Arc::new(SqliteStore::open(b.dir).expect("a SQLite store")),
                Some(cluster) => {
                    let db = svc_postgres::Database::parse(&cluster.svc_url(), None).expect("URL");
                    Arc::new(PostgresStore::open(&db, svc_postgres::PoolSettings::default()).expect("a store"))
                }
            };
            let refused = keys::start(store.as_ref(), key_file).expect_err("refused");
            assert!(matches!(refused, StoreError::Keys(_)), "{refused:?}");
            assert!(store.keys().get().is_none(), "no keys: nothing seals or opens");
            refused.to_string()
        };
        let moved = b.key_file.with_extension("moved");
        std::fs::rename(b.key_file, &moved).expect("moved");
        let missing = start(b.key_file);
        assert!(missing.contains("does not exist") && missing.contains("refusing to start"), "{missing}");
        assert!(!b.key_file.exists(), "no new key file made for a store that has keys");

        let other = b.key_file.with_extension("other");
        svc_keys::KeyFile::create(&other).expect("another store's key file");
        let wrong = start(&other);
        assert!(wrong.contains("does not hold key-encryption key"), "{wrong}");

        std::fs::rename(&moved, b.key_file).expect("back");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(b.key_file, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let open = start(b.key_file);
        assert!(open.contains("mode 0644") && open.contains("chmod 600"), "{open}");
        std::fs::set_permissions(b.key_file, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        drop((b.open)());
    });
}

#[test]
fn instances_starting_together_on_a_new_store_make_one_first_key() {
    on_each_backend("keys-together", |b| {
        // Migrated first: the race is the keys', not the migrations'.
        let bare = || -> Arc<dyn ServiceStore> {
            match b.cluster {
                None => Arc::new(SqliteStore::open(b.dir).expect("a SQLite store")),
                Some(cluster) => {
                    let db = svc_postgres::Database::parse(&cluster.svc_url(), None).expect("URL");
                    Arc::new(PostgresStore::open(&db, svc_postgres::PoolSettings::default()).expect("a store"))
                }
            }
        };
        let stores: Vec<Arc<dyn ServiceStore>> = (0..4).map(|_| bare()).collect();
        let barrier = Barrier::new(stores.len());
        let created = AtomicU64::new(0);
        std::thread::scope(|s| {
            for store in &stores {
                s.spawn(|| {
                    barrier.wait();
                    let started = keys::start(store.as_ref(), b.key_file).expect("each starts");
                    created.fetch_add(u64::from(started.created_key_file), Ordering::Relaxed);
                });
            }
        });
        assert_eq!(created.load(Ordering::Relaxed), 1, "one made the key file, the others read it");
        assert_eq!(stores[0].read().expect("tx").data_keys().expect("keys").len(), 1, "one first key");
        // What one seals, another opens.
        let (acme, app) = application(stores[1].as_ref(), "acme");
        set(stores[1].as_ref(), acme.id, "db.password", b"shared");
        assert_eq!(delivered(stores[2].as_ref(), app), Ok(Some("shared".to_owned())));
        stores[2].resign();
    });
}

#[test]
fn a_rotation_under_load_loses_no_write_and_leaves_one_key() {
    on_each_backend("keys-rotate", |b| {
        // Two serving instances (one schedules), and the administrator's.
        let (serving, other, admin) = ((b.open)(), (b.open)(), (b.open)());
        let (acme, app) = application(serving.as_ref(), "acme");
        let secrets = 250;
        for i in 0..secrets {
            set(serving.as_ref(), acme.id, &format!("s{i}"), format!("initial {i}").as_bytes());
        }
        set(serving.as_ref(), acme.id, "db.password", b"launch me");
        let old_kek = svc_keys::KeyFile::read(b.key_file).expect("read").expect("there").current_id().clone();
        let last: Mutex<Vec<String>> = Mutex::new((0..secrets).map(|i| format!("initial {i}")).collect());
        let done = AtomicBool::new(false);
        let (writes, launches) = (AtomicU64::new(0), AtomicU64::new(0));
        let failures: Mutex<Vec<String>> = Mutex::new(Vec::new());
        let rotation = std::thread::scope(|s| {
            // Writers on both instances, each write remembered once committed.
            for (w, store) in [&serving, &other].into_iter().enumerate() {
                let (last, done, writes, failures) = (&last, &done, &writes, &failures);
                s.spawn(move || {
                    let mut n = 0usize;
                    while !done.load(Ordering::Relaxed) {
                        let i = (n * 7 + w * 3) % secrets;
                        let value = format!("writer {w} write {n}");
                        let mut guard = last.lock().expect("last");
                        let written = store.write().and_then(|mut tx| {
                            tx.set_secret_value(acme.id, "web", &format!("s{i}"), value.as_bytes())?;
                            tx.commit()
                        });
                        match written {
                            Ok(()) => {
                                guard[i] = value;
                                writes.fetch_add(1, Ordering::Relaxed);
                            }
                            Err(e) => failures.lock().expect("failures").push(format!("write: {e}")),
                        }
                        drop(guard);
                        n += 1;
                        // A write a millisecond per writer, as requests come: SQLite's write
                        // lock is not handed out in turn, and writers that never let it go
                        // starve every other process for its whole busy timeout (the
                        // administrator's rotation failed "database is locked" after 10 s
                        // when these loops and the launches below ran without a pause).
                        std::thread::sleep(std::time::Duration::from_millis(1));
                    }
                });
            }
            // Launches: the scheduler's read of a job's secrets.
            let (done_r, launches_r, failures_r, serving_r) = (&done, &launches, &failures, &serving);
            s.spawn(move || {
                while !done_r.load(Ordering::Relaxed) {
                    match delivered(serving_r.as_ref(), app) {
                        Ok(Some(v)) if v == "launch me" => {
                            launches_r.fetch_add(1, Ordering::Relaxed);
                        }
                        other => failures_r.lock().expect("failures").push(format!("launch: {other:?}")),
                    }
                    // The scheduler's transaction holds the write lock too: paced as above.
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
            });
            std::thread::sleep(std::time::Duration::from_millis(200));
            let rotation = keys::rotate(admin.as_ref(), b.key_file);
            std::thread::sleep(std::time::Duration::from_millis(200));
            done.store(true, Ordering::Relaxed);
            rotation
        });
        let rotation = rotation.expect("rotated");
        let failures = failures.into_inner().expect("failures");
        assert!(failures.is_empty(), "{} failed: {:?}", failures.len(), &failures[..failures.len().min(5)]);
        assert!(writes.load(Ordering::Relaxed) > 0 && launches.load(Ordering::Relaxed) > 0, "under load");
        assert_eq!((rotation.old_kek.clone(), rotation.data_key, rotation.rewrapped), (old_kek.clone(), 2, 1));
        assert!(rotation.resealed >= 1, "{rotation:?}");
        assert!(rotation.report().contains(&format!("key-encryption key {} replaces {old_kek}", rotation.new_kek)));

        // No value and no data key under the old ones; the key file holds the new KEK alone.
        let mut tx = admin.read().expect("tx");
        assert_eq!(tx.secrets_by_data_key().expect("counts"), [(Some(2), secrets as u64 + 1)]);
        let keys = tx.data_keys().expect("keys");
        assert_eq!(keys.iter().map(|k| (k.id, k.kek.clone())).collect::<Vec<_>>(), [(2, rotation.new_kek.clone())]);
        drop(tx);
        let file = svc_keys::KeyFile::read(b.key_file).expect("read").expect("there");
        assert_eq!(file.ids().cloned().collect::<Vec<_>>(), std::slice::from_ref(&rotation.new_kek));

        // Every value opens, and is the last one written: on the instances that ran through
        // it, and on one started after it from the new key file alone.
        let restarted = (b.open)();
        serving.resign();
        for store in [&serving, &other, &restarted] {
            assert_eq!(delivered(store.as_ref(), app), Ok(Some("launch me".to_owned())));
            store.resign();
        }
        let expected = last.into_inner().expect("last");
        let mut tx = restarted.write().expect("tx");
        let stored = tx.secrets_to_seal(Some(0), 1000).expect("every value");
        drop(tx);
        let keyring = restarted.keys().get().expect("started");
        for secret in stored.iter().filter(|s| s.secret_id != "db.password") {
            let i: usize = secret.secret_id[1..].parse().expect("index");
            let row = rows::secret_context(secret.organization, &secret.application_id, &secret.secret_id);
            let value = keyring.open(&row, &secret.value, secret.data_key.as_ref()).expect("opens");
            assert_eq!(String::from_utf8_lossy(&value), expected[i], "secret s{i}: no write lost");
        }
    });
}

#[test]
fn after_a_rotation_no_page_of_the_sqlite_files_holds_a_data_key_wrapped_under_the_old_kek() {
    on_each_backend("keys-rotate-pages", |b| {
        // PostgreSQL keeps dead row versions until its vacuum reuses them (docs/security.md
        // says so); this is SQLite's promise: its files are rewritten by the rotation.
        if b.cluster.is_some() {
            return;
        }
        let store = (b.open)();
        let (acme, _) = application(store.as_ref(), "acme");
        set(store.as_ref(), acme.id, "db.password", b"launch me");
        let before = store.read().expect("tx").data_keys().expect("keys");
        assert_eq!(before.len(), 1);
        keys::rotate(store.as_ref(), b.key_file).expect("rotated");
        let mut files = 0;
        for entry in std::fs::read_dir(b.dir).expect("the data directory").flatten() {
            let Ok(bytes) = std::fs::read(entry.path()) else { continue };
            files += 1;
            assert!(
                !bytes.windows(before[0].wrapped.len()).any(|w| w == before[0].wrapped.as_slice()),
                "{} still holds data key 1 wrapped under the old KEK",
                entry.path().display()
            );
        }
        assert!(files >= 2, "the database and its log were read");
    });
}
