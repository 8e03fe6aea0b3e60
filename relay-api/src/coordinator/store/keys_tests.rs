//! Secrets at rest (issue 40, point 1), over a real SQLite file and a real PostgreSQL
//! database: a revision's secrets are stored sealed to their row and open after a restart; a
//! value an older version stored in clear is sealed at the next start; a store refuses to start
//! without its key file; a rotation under load loses no write and leaves one key; instances
//! starting together on an empty database share one first key.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use super::tests::{bundle, new_deployment, successor, temp_dir};
use super::*;
use svc_test_leaks::canary;

/// A store to open again and again (as a restart, or another instance, would), with a way
/// to run SQL outside it (a person at a SQL prompt, or an older version): the rows as text.
struct Backend<'a> {
    open: &'a dyn Fn() -> RelayStore,
    sql: &'a dyn Fn(&str) -> Vec<String>,
    key_file: &'a Path,
    /// The files the store's data is in (SQLite's), to read.
    files: Vec<PathBuf>,
}

/// Runs `test` on SQLite in a scratch directory, then on PostgreSQL in a throwaway cluster
/// (skipped, saying so, where PostgreSQL is not installed and not required).
fn on_each_backend(name: &str, test: impl Fn(&Backend<'_>)) {
    let scratch = temp_dir(name);
    let dir = scratch.path().to_owned();
    let file = dir.join(DATABASE_FILE);
    let key_file = dir.join(KEY_FILE);
    test(&Backend {
        open: &|| RelayStore::open(&dir).expect("a SQLite store"),
        sql: &|sql| {
            let conn = rusqlite::Connection::open(&file).expect("the database");
            let mut statement = conn.prepare(sql).expect("the SQL");
            statement
                .query_map([], |r| r.get::<_, rusqlite::types::Value>(0))
                .expect("runs")
                .map(|r| match r.expect("a row") {
                    rusqlite::types::Value::Integer(n) => n.to_string(),
                    rusqlite::types::Value::Text(text) => text,
                    other => format!("{other:?}"),
                })
                .collect()
        },
        key_file: &key_file,
        files: ["", "-wal", "-shm"].iter().map(|s| dir.join(format!("{DATABASE_FILE}{s}"))).collect(),
    });
    let Some(cluster) = svc_pg_cluster::for_test(name) else { return };
    let db = svc_postgres::Database::parse(&cluster.svc_url(), None).expect("the cluster's URL");
    let key_file = scratch.path().join("postgres.key");
    test(&Backend {
        open: &|| {
            let backend = postgres::PostgresBackend::open(&db, postgres::PoolSettings::default()).expect("opens");
            RelayStore::on(Box::new(backend), &key_file).expect("its keys")
        },
        sql: &|sql| {
            let out = cluster.sql("svc", sql).expect("the SQL");
            out.lines().map(str::to_owned).collect()
        },
        key_file: &key_file,
        files: Vec::new(),
    });
}

fn secrets_of(value: &str) -> BTreeMap<String, String> {
    BTreeMap::from([("API_KEY".to_owned(), value.to_owned())])
}

fn deployment_with(store: &RelayStore, id: &str, value: &str) {
    new_deployment(store, id, 1_000_000);
    // The first revision's bundle is the helpers'; a redeploy carries the canary.
    let mut next = successor(id, 2, "sha256:p2");
    next.bundle.secrets = secrets_of(value);
    store.put_successor(&next).expect("a successor");
}

fn kek_lines(key_file: &Path) -> usize {
    std::fs::read_to_string(key_file).expect("the key file").lines().filter(|l| l.starts_with("kek-v1 ")).count()
}

#[test]
fn a_revisions_secrets_are_stored_sealed_to_their_row_and_open_after_a_restart() {
    on_each_backend("sealed", |b| {
        let value = canary();
        let store = (b.open)();
        deployment_with(&store, "dep_a", &value);
        let stored = (b.sql)("SELECT secrets FROM revision_secrets WHERE deployment_id = 'dep_a' AND revision = 2");
        assert_eq!(stored.len(), 1);
        assert!(
            stored[0].starts_with("sealed-v1.") && svc_test_leaks::leaks(stored[0].as_bytes(), &value).is_empty(),
            "{stored:?}"
        );
        assert_eq!((b.sql)("SELECT COUNT(*) FROM revision_secrets WHERE data_key_id IS NULL"), ["0"]);
        assert_eq!(store.revision_secrets("dep_a", 2).expect("opens"), Some(secrets_of(&value)));
        assert_eq!(store.revision_bundle("dep_a", 2).expect("opens").map(|b| b.secrets), Some(secrets_of(&value)));
        assert_eq!(store.revision_secrets("dep_a", 1).expect("opens"), Some(bundle(1).secrets));
        drop(store);
        for file in &b.files {
            let bytes = std::fs::read(file).unwrap_or_default();
            assert!(svc_test_leaks::leaks(&bytes, &value).is_empty(), "{} holds the value", file.display());
        }

        // A restart opens them; a sealed value copied into another deployment's row (or
        // another revision's) does not open there: it is bound to its row.
        let store = (b.open)();
        assert_eq!(store.revision_secrets("dep_a", 2).expect("opens after a restart"), Some(secrets_of(&value)));
        new_deployment(&store, "dep_b", 1_000_000);
        (b.sql)(
            "UPDATE revision_secrets SET (secrets, data_key_id) = (SELECT secrets, data_key_id FROM revision_secrets \
             WHERE deployment_id = 'dep_a' AND revision = 2) WHERE deployment_id = 'dep_b'",
        );
        let moved = store.revision_secrets("dep_b", 1).expect_err("does not open in another row");
        assert!(matches!(moved, StoreError::Keys(svc_keys::KeyError::Corrupt { .. })), "{moved}");
        assert!(!moved.to_string().contains(&value), "{moved}");
    });
}

/// A store an older version wrote: a revision's secrets in clear (the column as 0.13.0 left
/// it). They are read as they are until the next start, which seals them.
#[test]
fn a_value_an_older_version_stored_in_clear_is_sealed_at_the_next_start() {
    on_each_backend("clear", |b| {
        let value = canary();
        let store = (b.open)();
        new_deployment(&store, "dep_old", 1_000_000);
        let clear = serde_json::to_string(&secrets_of(&value)).expect("json");
        (b.sql)(&format!(
            "UPDATE revision_secrets SET secrets = '{clear}', data_key_id = NULL WHERE deployment_id = 'dep_old'"
        ));
        assert_eq!(store.revision_secrets("dep_old", 1).expect("read as it is"), Some(secrets_of(&value)));
        drop(store);

        let store = (b.open)();
        let stored = (b.sql)("SELECT secrets FROM revision_secrets WHERE deployment_id = 'dep_old'");
        assert!(stored[0].starts_with("sealed-v1.") && !stored[0].contains(&value), "sealed at start: {stored:?}");
        assert_eq!((b.sql)("SELECT COUNT(*) FROM revision_secrets WHERE data_key_id IS NULL"), ["0"]);
        assert_eq!(store.revision_secrets("dep_old", 1).expect("opens"), Some(secrets_of(&value)));
        drop(store);
        // SQLite: nothing of the clear value is left in the files (the log emptied, the
        // database's freed cells overwritten).
        for file in &b.files {
            let bytes = std::fs::read(file).unwrap_or_default();
            assert!(svc_test_leaks::leaks(&bytes, &value).is_empty(), "{} still holds the clear value", file.display());
        }
    });
}

#[test]
fn a_store_refuses_to_start_without_its_key_file_with_another_stores_or_a_readable_one() {
    use std::os::unix::fs::PermissionsExt;
    let scratch = temp_dir("refused");
    let dir = scratch.path().join("relay");
    let store = RelayStore::open(&dir).expect("a store");
    deployment_with(&store, "dep_k", &canary());
    drop(store);
    let key_file = dir.join(KEY_FILE);
    let kek = std::fs::read_to_string(&key_file).expect("created with the store");
    let kek = kek.lines().find_map(|l| l.strip_prefix("kek-v1 ")).and_then(|l| l.split(' ').next()).expect("a KEK");

    // Removed (restored from a backup of the database alone): refused, and no new key file.
    let moved = scratch.path().join("moved.key");
    std::fs::rename(&key_file, &moved).expect("move");
    let missing = RelayStore::open(&dir).expect_err("refused").to_string();
    assert!(missing.contains("does not exist") && missing.contains("refusing to start"), "{missing}");
    assert!(missing.contains(kek) && missing.contains("--key-file"), "{missing}");
    assert!(!key_file.exists(), "no new key file for a store that has keys");

    // Another store's key file.
    let other = temp_dir("refused-other");
    RelayStore::open(other.path()).expect("another store");
    let wrong = RelayStore::open_at(&OpenAt::new(StoreAt::DataDir(dir.clone()), other.path().join(KEY_FILE)))
        .expect_err("refused")
        .to_string();
    assert!(wrong.contains(&format!("does not hold key-encryption key {kek}")), "{wrong}");

    // Its own, readable by others.
    std::fs::rename(&moved, &key_file).expect("back");
    std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let readable = RelayStore::open(&dir).expect_err("refused").to_string();
    assert!(readable.contains("mode 0644") && readable.contains("chmod 600"), "{readable}");
    std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    RelayStore::open(&dir).expect("starts with its own key file");
}

/// A rotation (as `svc relay admin keys rotate` runs it, a store of its own) while one
/// instance records redeploys with new secrets and another reads them back: no operation
/// fails, every value opens with what was written, no value is left under the old data key,
/// one data key and one KEK remain, and a restart opens everything with the rotated file.
#[test]
fn rotating_under_load_loses_no_write_and_leaves_one_key_and_one_kek() {
    on_each_backend("rotation", |b| {
        let (writer, reader) = ((b.open)(), (b.open)());
        let ids: Vec<String> = (0..3).map(|i| format!("dep_r{i}")).collect();
        for id in &ids {
            new_deployment(&writer, id, 1_000_000);
        }
        let old_keys = writer.key_census().expect("census").data_keys;
        let stop = AtomicBool::new(false);
        let (writes, reads) = (AtomicUsize::new(0), AtomicUsize::new(0));
        let written: std::sync::Mutex<Vec<(String, u32, String)>> = std::sync::Mutex::default();
        let rotations = std::thread::scope(|scope| {
            for id in &ids {
                let (writer, stop, writes, written) = (&writer, &stop, &writes, &written);
                scope.spawn(move || {
                    let mut revision = 2;
                    while !stop.load(Ordering::Relaxed) || revision < 6 {
                        let value = format!("{id}-r{revision}-{}", random_hex(4).expect("random"));
                        let mut next = successor(id, revision, &format!("sha256:{revision}"));
                        next.bundle.secrets = secrets_of(&value);
                        writer.put_successor(&next).expect("a redeploy during the rotation");
                        written.lock().expect("a list").push((id.clone(), revision, value));
                        writes.fetch_add(1, Ordering::Relaxed);
                        revision += 1;
                        // Paced as requests come: SQLite's write lock is not handed out in
                        // turn, and writers that never let it go starve the administrator's
                        // process for its whole busy timeout ("database is locked").
                        std::thread::sleep(std::time::Duration::from_millis(1));
                    }
                });
            }
            {
                let (reader, stop, reads, ids) = (&reader, &stop, &reads, &ids);
                scope.spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        for id in ids {
                            let next = reader.next_revision(id).expect("a read");
                            // The newest revision recorded (next - 1) opens whatever key it is under.
                            let secrets = reader.revision_secrets(id, next - 1).expect("opens during the rotation");
                            assert!(secrets.is_some(), "{id} r{}", next - 1);
                            reads.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                });
            }
            // The administrator's rotations, from a store of their own, twice.
            let admin = (b.open)();
            while writes.load(Ordering::Relaxed) < 6 {
                std::thread::yield_now();
            }
            let rotations: Vec<Rotation> = (0..2).map(|_| admin.rotate_keys().expect("rotated")).collect();
            stop.store(true, Ordering::Relaxed);
            rotations
        });
        assert!(reads.load(Ordering::Relaxed) > 0 && writes.load(Ordering::Relaxed) >= 15, "under load");
        assert!(rotations[0].resealed > 0, "{rotations:?}");
        assert_eq!(rotations[1].previous_keks, [rotations[0].kek.clone()], "{rotations:?}");

        // Every value written opens as written, in the writer, the reader and a new instance.
        let fresh = (b.open)();
        for (id, revision, value) in written.lock().expect("a list").iter() {
            for store in [&writer, &reader, &fresh] {
                assert_eq!(store.revision_secrets(id, *revision).expect("opens"), Some(secrets_of(value)));
            }
        }
        let census = fresh.key_census().expect("census");
        let (keys, census) = (census.data_keys, census.sealed_by);
        assert_eq!(keys.len(), 1, "one data key left: {keys:?}");
        assert!(old_keys.iter().all(|old| old.id != keys[0].id && old.kek != keys[0].kek), "{keys:?}");
        assert_eq!(census.iter().map(|(id, _)| *id).collect::<Vec<_>>(), [Some(keys[0].id)], "{census:?}");
        assert_eq!(kek_lines(b.key_file), 1, "one KEK in the key file");
        assert_eq!(keys[0].kek.as_str(), rotations[1].kek);
    });
}

/// Several coordinators starting at once on an empty database with one key file: one first
/// data key, which every one of them seals and opens with.
#[test]
fn instances_starting_together_on_an_empty_database_share_one_first_key() {
    let Some(cluster) = svc_pg_cluster::for_test("first-key-race") else { return };
    let db = svc_postgres::Database::parse(&cluster.svc_url(), None).expect("the cluster's URL");
    let keys = temp_dir("first-key-race");
    let key_file = keys.path().join("shared").join(KEY_FILE);
    let start = std::sync::Barrier::new(4);
    let stores: Vec<RelayStore> = std::thread::scope(|scope| {
        let runs: Vec<_> = (0..4)
            .map(|_| {
                let (start, db, key_file) = (&start, &db, &key_file);
                scope.spawn(move || {
                    let backend = postgres::PostgresBackend::open(db, postgres::PoolSettings::default());
                    start.wait();
                    RelayStore::on(Box::new(backend.expect("opens")), key_file).expect("starts")
                })
            })
            .collect();
        runs.into_iter().map(|r| r.join().expect("a start")).collect()
    });
    assert_eq!(cluster.sql("svc", "SELECT COUNT(*) FROM data_keys").expect("a query"), "1");
    for (i, store) in stores.iter().enumerate() {
        deployment_with(store, &format!("dep_s{i}"), &format!("value-{i}"));
    }
    for store in &stores {
        for i in 0..stores.len() {
            let opened = store.revision_secrets(&format!("dep_s{i}"), 2).expect("opens");
            assert_eq!(opened, Some(secrets_of(&format!("value-{i}"))));
        }
    }
}
