//! The store over a real SQLite file and a real PostgreSQL database: each test runs on both
//! (PostgreSQL in a throwaway cluster; skipped, saying so, where it is not installed and
//! `SVC_REQUIRE_ALL` is not set).

use std::sync::Arc;

use svc_execution::{ExecState, Execution, Quote};

use super::*;

/// One backend under test: opens the store (again, on the same data, as a restart would)
/// with its keys started from `key_file`, and runs SQL on its database outside the store
/// (what a person with a SQL prompt could do). `dir` holds the SQLite store's files; on
/// PostgreSQL, `cluster` is the database's.
pub(super) struct Backend<'a> {
    pub(super) open: &'a dyn Fn() -> Arc<dyn ServiceStore>,
    pub(super) raw: &'a dyn Fn(&str) -> Result<(), String>,
    pub(super) key_file: &'a std::path::Path,
    pub(super) dir: &'a std::path::Path,
    pub(super) cluster: Option<&'a svc_pg_cluster::Cluster>,
}

/// `store` with its keys started from `key_file`, as every command opens it.
pub(super) fn keyed(store: Arc<dyn ServiceStore>, key_file: &std::path::Path) -> Arc<dyn ServiceStore> {
    keys::start(store.as_ref(), key_file).expect("the store's keys start");
    store
}

pub(super) fn on_each_backend(name: &str, test: impl Fn(&Backend<'_>)) {
    let scratch = tempfile::Builder::new().prefix(&format!("svc-store-{name}-")).tempdir().expect("a scratch dir");
    let dir = scratch.path().join("sqlite");
    let key_file = scratch.path().join("sqlite.key");
    test(&Backend {
        open: &|| keyed(Arc::new(SqliteStore::open(&dir).expect("a SQLite store")), &key_file),
        raw: &|sql| {
            let conn = rusqlite::Connection::open(dir.join(DATABASE_FILE)).map_err(|e| e.to_string())?;
            conn.execute_batch(sql).map_err(|e| e.to_string())
        },
        key_file: &key_file,
        dir: &dir,
        cluster: None,
    });
    let Some(cluster) = svc_pg_cluster::for_test(name) else { return };
    let db = svc_postgres::Database::parse(&cluster.svc_url(), None).expect("the cluster's URL");
    let key_file = scratch.path().join("postgres.key");
    let dir = scratch.path().join("postgres");
    test(&Backend {
        open: &|| {
            let store = PostgresStore::open(&db, svc_postgres::PoolSettings::default()).expect("a PostgreSQL store");
            keyed(Arc::new(store), &key_file)
        },
        raw: &|sql| cluster.sql("svc", sql).map(drop).map_err(|e| e.to_string()),
        key_file: &key_file,
        dir: &dir,
        cluster: Some(&cluster),
    });
}

fn version(n: u64, jobs: u64) -> PolicyVersion {
    PolicyVersion {
        version: n,
        schema_version: 5,
        authored_digest: "sha256:a".into(),
        policy_digest: format!("sha256:p{n}"),
        policy: "{}".into(),
        authored: "{}".into(),
        jobs,
        execution: "once".into(),
        published_by: "me".into(),
    }
}

#[test]
fn migrations_apply_once_and_reopen_finds_the_data() {
    on_each_backend("reopen", |b| {
        {
            let store = (b.open)();
            let mut tx = store.write().expect("tx");
            let org = tx.ensure_organization("acme").expect("org");
            tx.insert_application(org.id, "web", "app_1").expect("app");
            tx.commit().expect("commit");
        }
        let store = (b.open)();
        let mut tx = store.read().expect("tx");
        let org = tx.organization("acme").expect("read").expect("org");
        assert_eq!(tx.application(org.id, "web").expect("read").expect("app").application_uid, "app_1");
    });
}

#[test]
fn an_uncommitted_transaction_leaves_nothing() {
    on_each_backend("rollback", |b| {
        let store = (b.open)();
        {
            let mut tx = store.write().expect("tx");
            tx.ensure_organization("acme").expect("org");
        }
        assert!(store.read().expect("tx").organization("acme").expect("read").is_none());
        // The connection is usable again after the rollback.
        let mut tx = store.write().expect("tx");
        tx.ensure_organization("acme").expect("org");
        tx.commit().expect("commit");
        assert!(store.read().expect("tx").organization("acme").expect("read").is_some());
    });
}

#[test]
fn policy_versions_are_immutable_and_a_taken_version_is_a_conflict() {
    on_each_backend("immutable", |b| {
        let store = (b.open)();
        let mut tx = store.write().expect("tx");
        let org = tx.ensure_organization("acme").expect("org");
        let app = tx.insert_application(org.id, "web", "app_1").expect("app");
        assert!(matches!(tx.insert_application(org.id, "web", "app_2"), Err(StoreError::Conflict(_))));
        tx.insert_policy_version(app.key, &version(1, 1)).expect("insert");
        assert!(matches!(tx.insert_policy_version(app.key, &version(1, 1)), Err(StoreError::Conflict(_))));
        // The transaction goes on after the refusals (PostgreSQL aborts it without a savepoint).
        tx.insert_policy_version(app.key, &version(2, 1)).expect("the next version");
        tx.commit().expect("commit");
        let update = (b.raw)("UPDATE policy_versions SET policy = 'x'");
        assert!(update.as_ref().is_err_and(|e| e.contains("immutable")), "{update:?}");
        assert!((b.raw)("DELETE FROM policy_versions").is_err());
        let versions = store.read().expect("tx").policy_versions(app.key).expect("read");
        assert_eq!(versions.iter().map(|v| (v.version, v.policy.as_str())).collect::<Vec<_>>(), [(1, "{}"), (2, "{}")]);
    });
}

#[test]
fn jobs_in_use_counts_active_unsettled_applications_other_than_the_one_asked_for() {
    on_each_backend("jobs", |b| {
        let store = (b.open)();
        let mut tx = store.write().expect("tx");
        let org = tx.ensure_organization("acme").expect("org");
        for (id, jobs, status, settled) in
            [("a", 2, Status::Active, false), ("b", 3, Status::Paused, false), ("c", 5, Status::Active, true)]
        {
            let mut app = tx.insert_application(org.id, id, &format!("app_{id}")).expect("app");
            tx.insert_policy_version(app.key, &version(1, jobs)).expect("version");
            app.status = status;
            app.active_pointer_version = 1;
            app.settled = settled;
            tx.update_application(&app).expect("update");
        }
        let d = tx.insert_application(org.id, "d", "app_d").expect("a disabled one");
        tx.insert_policy_version(d.key, &version(1, 7)).expect("version");
        tx.commit().expect("commit");
        let mut tx = store.read().expect("tx");
        let a = tx.application(org.id, "a").expect("read").expect("a");
        assert_eq!(tx.jobs_in_use(org.id, 0).expect("sum"), 5, "a and b; c settled, d disabled");
        assert_eq!(tx.jobs_in_use(org.id, a.key).expect("sum"), 3);
    });
}

#[test]
fn secrets_artifacts_images_and_keys_round_trip() {
    on_each_backend("round-trip", |b| {
        let store = (b.open)();
        let mut tx = store.write().expect("tx");
        let org = tx.ensure_organization("acme").expect("org");
        tx.provision_secret(org.id, "web", "old").expect("provision");
        tx.set_secret_value(org.id, "web", "db", &[0, 159, 255]).expect("value");
        tx.set_secret_value(org.id, "web", "db", b"v2").expect("a new value replaces it");
        let evidence = ArtifactEvidence {
            cid: "ipfs://x".into(),
            digest: "sha256:d".into(),
            kind: "ipfs_bundle".into(),
            encryption: "none".into(),
            image_digest: None,
        };
        tx.curate(&evidence).expect("curate");
        tx.curate(&ArtifactEvidence { encryption: "aes256_gcm".into(), ..evidence.clone() }).expect("again");
        let image =
            RuntimeImage { catalog: "c".into(), name: "node".into(), version: "1.2.3".into(), digest: "d".into() };
        tx.add_runtime_image(&image).expect("image");
        tx.add_runtime_image(&RuntimeImage { digest: "d2".into(), ..image.clone() }).expect("replaced");
        tx.add_ssh_key(org.id, "ssh-ed25519 B").expect("key");
        tx.add_ssh_key(org.id, "ssh-ed25519 A").expect("key");
        tx.add_ssh_key(org.id, "ssh-ed25519 A").expect("the same key again is no error");
        tx.set_grant(org.id, "gpu", true).expect("grant");
        tx.set_grant(org.id, "gpu", true).expect("twice");
        tx.set_spend_authority(org.id, Some(u64::from(u32::MAX) * 4)).expect("authority");
        tx.commit().expect("commit");

        let mut tx = store.read().expect("tx");
        let secrets = tx.provisioned_secrets(org.id, "web").expect("read");
        assert_eq!(secrets.into_iter().collect::<Vec<_>>(), ["db", "old"]);
        let curated = tx.curated("sha256:d").expect("read");
        assert_eq!(curated.iter().map(|e| e.encryption.as_str()).collect::<Vec<_>>(), ["aes256_gcm"]);
        assert_eq!(tx.runtime_images("c", "node").expect("read")[0].digest, "d2");
        assert_eq!(tx.ssh_keys(org.id).expect("read"), ["ssh-ed25519 A", "ssh-ed25519 B"]);
        assert_eq!(tx.grants(org.id).expect("read").len(), 1);
        let org = tx.organization("acme").expect("read").expect("org");
        assert_eq!(org.spend_authority_micros, Some(u64::from(u32::MAX) * 4), "beyond 32 bits");
    });
}

fn launching(uid: &str, slot: u16) -> Execution {
    Execution {
        key: 0,
        execution_id: Execution::id_for(uid, slot, 1, 1),
        slot,
        generation: 1,
        attempt: 1,
        policy_version: 1,
        state: ExecState::Launching,
        processor_id: None,
        window_start: 1_000,
        window_end: 3_601_000,
        restarts: 0,
        charged: Quote { service_credit_micros: 7, reward_planck: u128::from(u64::MAX) * 3, ..Quote::default() },
        created_at: 1_000,
        changed_at: 1_000,
        silent_since: None,
        reason: None,
    }
}

#[test]
fn a_refunded_charge_is_not_among_the_charges_the_scheduler_reads() {
    on_each_backend("refund", |b| {
        let store = (b.open)();
        let mut tx = store.write().expect("tx");
        let org = tx.ensure_organization("acme").expect("org");
        let app = tx.insert_application(org.id, "web", "app_1").expect("app").key;
        let other = tx.insert_application(org.id, "api", "app_2").expect("app").key;
        tx.commit().expect("commit");

        assert!(store.lead().expect("the scheduling lease"), "alone, it leads");
        let mut tx = store.begin().expect("tx");
        let refused = launching("app_1", 0);
        let refused = Execution { key: tx.insert(app, &refused).expect("insert"), ..refused };
        tx.insert(app, &launching("app_1", 1)).expect("insert");
        tx.insert(other, &launching("app_2", 0)).expect("insert");
        tx.refund(app, &refused, 2_000).expect("refund");
        let view = tx.app(app).expect("read").expect("the application");
        assert_eq!(view.charges.iter().map(|c| c.slot).collect::<Vec<_>>(), [1]);
        let view = tx.app(other).expect("read").expect("the application");
        assert_eq!(
            view.charges
                .iter()
                .map(|c| (c.slot, c.quote.service_credit_micros, c.quote.reward_planck))
                .collect::<Vec<_>>(),
            [(0, 7, u128::from(u64::MAX) * 3)],
            "amounts beyond 64 bits survive"
        );
        tx.commit().expect("commit");
        assert!((b.raw)("DELETE FROM spend_ledger").is_err(), "the ledger is append-only");
    });
}

/// Issue 41: the service's crash refunds the time a paid window went unserved, once per
/// stretch however often asked, and the charge the scheduler reads is net of it; a relaunch
/// charged nothing makes no entry; the heartbeat keeps the newest time.
#[test]
fn a_refund_of_unserved_time_is_recorded_once_and_the_charge_is_read_net_of_it() {
    on_each_backend("unserved", |b| {
        let store = (b.open)();
        let mut tx = store.write().expect("tx");
        let org = tx.ensure_organization("acme").expect("org");
        let app = tx.insert_application(org.id, "web", "app_1").expect("app").key;
        tx.commit().expect("commit");

        assert!(store.lead().expect("the scheduling lease"), "alone, it leads");
        let mut tx = store.begin().expect("tx");
        assert_eq!(tx.last_alive().expect("read"), None);
        let paid = launching("app_1", 0);
        let paid = Execution { key: tx.insert(app, &paid).expect("insert"), ..paid };
        let free = Execution {
            execution_id: Execution::id_for("app_1", 0, 1, 2),
            attempt: 2,
            charged: Quote::default(),
            ..launching("app_1", 0)
        };
        tx.insert(app, &free).expect("insert");
        let part = Quote { service_credit_micros: 2, reward_planck: u128::from(u64::MAX), ..Quote::default() };
        for _ in 0..2 {
            tx.refund_unserved(app, &paid, 600_000, 1_200_000, &part, 1_300_000).expect("refund");
        }
        tx.heartbeat(1_250_000).expect("heartbeat");
        tx.heartbeat(1_260_000).expect("heartbeat");
        let view = tx.app(app).expect("read").expect("the application");
        assert_eq!(
            view.charges.iter().map(|c| (c.quote.service_credit_micros, c.quote.reward_planck)).collect::<Vec<_>>(),
            [(5, u128::from(u64::MAX) * 2)],
            "7 less one refund of 2, and no entry for the free relaunch"
        );
        tx.commit().expect("commit");
        let mut tx = store.begin().expect("tx");
        assert_eq!(tx.last_alive().expect("read"), Some(1_260_000));
        // The launch refused after all (sent again at a recovery): what remains of its charge
        // is refunded, not all of it again (svc-sim `over-refund`); then nothing remains.
        tx.refund(app, &paid, 1_400_000).expect("refund");
        tx.refund(app, &paid, 1_500_000).expect("refund");
        let view = tx.app(app).expect("read").expect("the application");
        assert!(view.charges.is_empty(), "refunded once in all: {:?}", view.charges);
        tx.commit().expect("commit");
        // Two refund entries in all: the stretch and the remainder (a CHECK fails otherwise).
        (b.raw)(
            "CREATE TABLE refunds_seen (n BIGINT CHECK (n = 2)); \
             INSERT INTO refunds_seen SELECT COUNT(*) FROM spend_ledger WHERE refund = 1",
        )
        .expect("two refund entries");
        assert!((b.raw)("UPDATE spend_ledger SET unserved_to = 0").is_err(), "the ledger is append-only");
    });
}

#[test]
fn an_execution_moves_through_its_states_and_is_found_by_id_and_among_the_live() {
    on_each_backend("transitions", |b| {
        let store = (b.open)();
        let mut tx = store.write().expect("tx");
        let org = tx.ensure_organization("acme").expect("org");
        let app = tx.insert_application(org.id, "web", "app_1").expect("app").key;
        tx.commit().expect("commit");

        assert!(store.lead().expect("the scheduling lease"), "alone, it leads");
        let mut tx = store.begin().expect("tx");
        let first = launching("app_1", 0);
        let first = Execution { key: tx.insert(app, &first).expect("insert"), ..first };
        let running =
            Execution { state: ExecState::Running, processor_id: Some("p1".into()), changed_at: 2_000, ..first };
        tx.transition(app, &running, ExecState::Launching).expect("running");
        tx.schedule(app, Some(5_000), None).expect("schedule");
        tx.commit().expect("commit");

        let mut tx = store.begin().expect("tx");
        assert_eq!(tx.due(5_000, 10).expect("due"), [app]);
        assert!(tx.due(4_999, 10).expect("due").is_empty());
        assert_eq!(tx.next_due().expect("next"), Some(5_000));
        let (owner, found) = tx.find(&running.execution_id).expect("find").expect("found");
        assert_eq!((owner, found.state, found.processor_id.as_deref()), (app, ExecState::Running, Some("p1")));
        assert_eq!(tx.live().expect("live").len(), 1);
        drop(tx);

        let mut read = store.read().expect("tx");
        let summary = read.execution_summary(app).expect("summary");
        assert_eq!((summary.next_at, summary.current.len()), (Some(5_000), 1));
        let page = read.executions_page(app, None, 10).expect("page");
        assert_eq!(page.iter().map(|e| e.state).collect::<Vec<_>>(), [ExecState::Running]);
        assert!(read.executions_page(app, Some(page[0].key), 10).expect("page").is_empty());
    });
}

#[test]
fn grouped_work_commits_together_and_a_unit_that_writes_and_does_not_keep_is_rolled_back() {
    on_each_backend("grouped", |b| {
        let store = (b.open)();
        let (sent, received) = std::sync::mpsc::channel();
        let units = [("kept", 0), ("refused", 1), ("panics", 2), ("after", 0)];
        for (name, outcome) in units {
            let sent = sent.clone();
            store.write_grouped(
                Box::new(move |tx| {
                    tx.ensure_organization(name).expect("org");
                    match outcome {
                        0 => true,
                        1 => false,
                        _ => panic!("a unit that panics"),
                    }
                }),
                Box::new(move |result| sent.send(result.is_ok()).expect("told")),
            );
        }
        let told: Vec<bool> = (0..units.len()).map(|_| received.recv().expect("an outcome")).collect();
        let mut tx = store.read().expect("tx");
        let kept: Vec<bool> = units.iter().map(|(n, _)| tx.organization(n).expect("read").is_some()).collect();
        if store.is_local() {
            // SQLite: each unit in its own savepoint, rolled back alone.
            assert_eq!(told, [true; 4], "every commit succeeded");
            assert_eq!(kept, [true, false, false, true]);
        } else {
            // PostgreSQL: no savepoints (a round trip each); the units grouped with one
            // that wrote and did not keep are told their group failed, and nothing of it
            // is kept. The four were queued before the group thread ran, so some shared a
            // group with a unit that did not keep; whatever was told a success is kept.
            assert!(told.iter().any(|ok| !ok), "a group was rolled back: {told:?}");
            assert_eq!(kept, told, "what was told kept is kept, and only that");
            assert!(!kept[1] && !kept[2], "{kept:?}");
        }
    });
}

/// An organization with an application whose version 1 is active, and another application
/// of the same organization, and what a publication of the first would be decided on.
pub(super) fn decided_setup(store: &dyn ServiceStore, org: &str) -> (Organization, DecidedOn, DecidedWrite) {
    let mut tx = store.write().expect("tx");
    let org = tx.ensure_organization(org).expect("org");
    let app = tx.insert_application(org.id, "web", &format!("{}_1", org.name)).expect("app");
    tx.insert_policy_version(app.key, &version(1, 1)).expect("v1");
    tx.update_application(&Application { status: Status::Active, active_pointer_version: 1, ..app.clone() })
        .expect("pointer");
    tx.insert_application(org.id, "other", &format!("{}_2", org.name)).expect("other");
    tx.commit().expect("commit");
    let mut tx = store.read().expect("tx");
    let (org, inputs_revision) = tx.organization_inputs(org.id).expect("read").expect("org");
    let on = DecidedOn {
        application: app.key,
        inputs_revision,
        settled: false,
        status: Status::Active,
        pause_reason: None,
        jobs_in_use: tx.jobs_in_use(org.id, app.key).expect("jobs"),
        expected: None,
    };
    let activity = Activity {
        at: "2026-11-27T00:00:00Z".into(),
        actor: "me".into(),
        action: "policy_published".into(),
        policy_version: None,
        status: Some("active".into()),
        reason: None,
    };
    let write = DecidedWrite {
        version: version(0, 1),
        status: Status::Active,
        pause_reason: None,
        rearm: false,
        activity,
        due_at_ms: 7,
    };
    (org, on, write)
}

fn publish_decided(store: &dyn ServiceStore, on: &DecidedOn, write: &DecidedWrite) -> Option<u64> {
    let mut tx = store.write().expect("tx");
    let written = tx.publish_decided(on, write).expect("the checked write");
    tx.commit().expect("commit");
    written
}

#[test]
fn a_decided_publication_is_written_numbered_after_the_active_version() {
    on_each_backend("decided", |b| {
        let store = (b.open)();
        let (org, on, write) = decided_setup(store.as_ref(), "acme");
        assert_eq!(publish_decided(store.as_ref(), &on, &write), Some(2));
        // Decided on the same reads, unfenced: numbered after the one just written.
        assert_eq!(publish_decided(store.as_ref(), &on, &write), Some(3));
        let mut tx = store.read().expect("tx");
        let app = tx.application(org.id, "web").expect("read").expect("app");
        assert_eq!((app.active_pointer_version, app.status, app.settled), (3, Status::Active, false));
        let v3 = tx.policy_version(app.key, 3).expect("read").expect("v3");
        assert_eq!(v3, PolicyVersion { version: 3, ..write.version.clone() });
        let last = tx.recent_activity(app.key, 1).expect("read").remove(0);
        assert_eq!((last.policy_version, last.action.as_str()), (Some(3), "policy_published"));
        assert_eq!(tx.wakeups(app.key).expect("read"), 2);
        drop(tx);
        match store.publish_decided_alone(&on, &write) {
            // PostgreSQL: one call, its own transaction, the same checks.
            Some(alone) => {
                assert_eq!(alone.expect("the call"), Some(4));
                let fenced = DecidedOn { expected: Some(3), ..on };
                assert_eq!(store.publish_decided_alone(&fenced, &write).expect("a call").expect("the call"), None);
            }
            None => assert!(store.is_local(), "SQLite writes decided publications in grouped work"),
        }
    });
}

#[test]
fn a_decided_publication_writes_nothing_once_what_it_was_decided_on_changed() {
    type Change = fn(&mut dyn Transaction, &Organization);
    let changes: [(&str, Change); 12] = [
        ("a grant", |tx, o| tx.set_grant(o.id, "once_rearm", true).expect("grant")),
        ("the tier", |tx, o| tx.set_tier(o.id, Tier::Business).expect("tier")),
        ("the spend authority", |tx, o| tx.set_spend_authority(o.id, Some(5)).expect("authority")),
        ("an SSH key", |tx, o| tx.add_ssh_key(o.id, "ssh-ed25519 AAAA").expect("key")),
        ("a secret's value", |tx, o| tx.set_secret_value(o.id, "web", "db", b"x").expect("secret")),
        ("a provisioned secret", |tx, o| tx.provision_secret(o.id, "web", "db").expect("secret")),
        ("an accepted artifact", |tx, o| {
            let evidence = ArtifactEvidence {
                cid: "ipfs://c".into(),
                digest: "sha256:d".into(),
                kind: "ipfs_bundle".into(),
                encryption: "none".into(),
                image_digest: None,
            };
            let a = AcceptedArtifact {
                repository: "o/r".into(),
                git_ref: "refs/heads/main".into(),
                workflow_ref: "w".into(),
                manifest_path: "m".into(),
                evidence,
            };
            tx.accept(o.id, "web", &a).expect("accept")
        }),
        ("a curated artifact", |tx, _| {
            let a = ArtifactEvidence {
                cid: "ipfs://c".into(),
                digest: "sha256:d".into(),
                kind: "ipfs_bundle".into(),
                encryption: "none".into(),
                image_digest: None,
            };
            tx.curate(&a).expect("curate")
        }),
        ("a runtime image", |tx, _| {
            let i =
                RuntimeImage { catalog: "c".into(), name: "n".into(), version: "1".into(), digest: "sha256:i".into() };
            tx.add_runtime_image(&i).expect("image")
        }),
        ("the application's pause", |tx, o| {
            let app = tx.application(o.id, "web").expect("read").expect("app");
            let paused = Application { status: Status::Paused, pause_reason: Some("why".into()), ..app };
            tx.update_application(&paused).expect("pause")
        }),
        ("the application's settlement", |tx, o| {
            let app = tx.application(o.id, "web").expect("read").expect("app");
            tx.update_application(&Application { settled: true, ..app }).expect("settle")
        }),
        ("another application's job slots", |tx, o| {
            let other = tx.application(o.id, "other").expect("read").expect("app");
            tx.insert_policy_version(other.key, &version(1, 2)).expect("v1");
            let active = Application { status: Status::Active, active_pointer_version: 1, ..other };
            tx.update_application(&active).expect("pointer")
        }),
    ];
    on_each_backend("decided-changed", |b| {
        let store = (b.open)();
        for (i, (what, change)) in changes.into_iter().enumerate() {
            let (org, on, write) = decided_setup(store.as_ref(), &format!("org{i}"));
            let mut tx = store.write().expect("tx");
            change(tx.as_mut(), &org);
            tx.commit().expect("commit");
            assert_eq!(publish_decided(store.as_ref(), &on, &write), None, "after a change to {what}");
            let mut tx = store.read().expect("tx");
            let app = tx.application(org.id, "web").expect("read").expect("app");
            assert_eq!(app.active_pointer_version, 1, "nothing written after a change to {what}");
            assert!(tx.policy_version(app.key, 2).expect("read").is_none(), "{what}");
            assert_eq!(tx.wakeups(app.key).expect("read"), 0, "{what}");
        }
        // The fence, too: decided on version 1 as the active one, it writes nothing once 2 is.
        let (_, on, write) = decided_setup(store.as_ref(), "fenced");
        let fenced = DecidedOn { expected: Some(1), ..on };
        assert_eq!(publish_decided(store.as_ref(), &fenced, &write), Some(2));
        assert_eq!(publish_decided(store.as_ref(), &fenced, &write), None, "the fence moved");
    });
}

#[test]
fn only_the_store_that_leads_the_scheduling_may_begin_a_scheduler_transaction() {
    on_each_backend("leases", |b| {
        let (first, second) = ((b.open)(), (b.open)());
        assert!(first.lead().expect("lead"), "the first takes the lease");
        assert!(!second.lead().expect("lead"), "the second stands by");
        let refused = second.begin().err().expect("refused");
        assert!(refused.is_not_leader(), "{refused}");
        assert!(first.begin().is_ok());
        first.resign();
        assert!(second.lead().expect("lead"), "the lease given up, the second takes it");
        assert!(second.begin().is_ok());
        assert!(first.begin().err().expect("refused").is_not_leader(), "the first no longer leads");
    });
}

/// The scheduler's sleep reads when the next application is due; it took the writers' lock
/// for it after every step (found measuring publications on PostgreSQL).
#[test]
fn the_next_due_time_is_read_while_a_writer_holds_the_lock() {
    on_each_backend("next-due", |b| {
        let store = (b.open)();
        {
            let mut tx = store.write().expect("tx");
            let org = tx.ensure_organization("acme").expect("org");
            let app = tx.insert_application(org.id, "web", "app_1").expect("app");
            tx.update_application(&app).expect("set due");
            tx.commit().expect("commit");
        }
        let writer = store.write().expect("a writer holds the lock");
        let reader = store.clone();
        let (sent, got) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = sent
                .send(svc_execution::executor::ExecutionStore::next_due(reader.as_ref()).map_err(|e| e.to_string()));
        });
        let due = got.recv_timeout(std::time::Duration::from_secs(10));
        drop(writer);
        assert!(matches!(due, Ok(Ok(Some(_)))), "read beside the writer: {due:?}");
    });
}

#[test]
fn publication_inputs_read_in_one_statement_are_what_each_read_gives() {
    on_each_backend("inputs", |b| {
        let store = (b.open)();
        let (org, on, _) = decided_setup(store.as_ref(), "acme");
        let mut tx = store.write().expect("tx");
        tx.set_grant(org.id, "once_rearm", true).expect("grant");
        tx.set_grant(org.id, "vpn", true).expect("grant");
        tx.set_spend_authority(org.id, Some(9)).expect("authority");
        tx.add_ssh_key(org.id, "ssh-ed25519 B").expect("key");
        tx.add_ssh_key(org.id, "ssh-ed25519 A").expect("key");
        tx.provision_secret(org.id, "web", "db").expect("secret");
        tx.provision_secret(org.id, "other", "not-web's").expect("secret");
        for n in ["1", "2"] {
            let evidence = ArtifactEvidence {
                cid: format!("ipfs://c{n}"),
                digest: format!("sha256:{n}"),
                kind: "ipfs_bundle".into(),
                encryption: "none".into(),
                image_digest: (n == "2").then(|| "sha256:i".into()),
            };
            let a = AcceptedArtifact {
                repository: "o/r".into(),
                git_ref: format!("refs/tags/v{n}"),
                workflow_ref: "w".into(),
                manifest_path: "m".into(),
                evidence,
            };
            tx.accept(org.id, "web", &a).expect("accept");
        }
        let other = tx.application(org.id, "other").expect("read").expect("app");
        tx.insert_policy_version(other.key, &version(1, 3)).expect("v1");
        tx.update_application(&Application { status: Status::Active, active_pointer_version: 1, ..other })
            .expect("pointer");
        tx.commit().expect("commit");

        let mut tx = store.read().expect("tx");
        let inputs = tx.publication_inputs(org.id, "web").expect("read").expect("the organization");
        let (organization, revision) = tx.organization_inputs(org.id).expect("read").expect("org");
        assert_eq!(inputs.organization, organization);
        assert_eq!(inputs.inputs_revision, revision);
        assert!(revision > on.inputs_revision, "each change counted the revision up");
        let app = tx.application(org.id, "web").expect("read").expect("app");
        assert_eq!(inputs.application.as_ref(), Some(&app));
        assert_eq!(inputs.grants, tx.grants(org.id).expect("read"));
        assert_eq!(inputs.jobs_in_use, tx.jobs_in_use(org.id, app.key).expect("read"));
        assert_eq!(inputs.jobs_in_use, 3);
        assert_eq!(inputs.provisioned, tx.provisioned_secrets(org.id, "web").expect("read"));
        assert_eq!(inputs.accepted, tx.accepted(org.id, "web").expect("read"));
        assert_eq!(inputs.accepted[0].git_ref, "refs/tags/v2", "newest first");
        assert_eq!(inputs.ssh_keys, tx.ssh_keys(org.id).expect("read"));
        assert_eq!(inputs.ssh_keys, ["ssh-ed25519 A", "ssh-ed25519 B"]);

        let missing = tx.publication_inputs(org.id, "nope").expect("read").expect("the organization");
        assert!(missing.application.is_none() && missing.accepted.is_empty() && missing.provisioned.is_empty());
        assert!(tx.publication_inputs(i64::MAX, "web").expect("read").is_none());
    });
}

#[test]
fn a_transaction_whose_connection_was_lost_sends_nothing_more_and_cannot_commit() {
    on_each_backend("lost", |b| {
        let store = (b.open)();
        if store.is_local() {
            return; // A SQLite connection is a file: nothing to lose.
        }
        let mut tx = store.write().expect("tx");
        tx.ensure_organization("before").expect("org");
        (b.raw)(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
             WHERE datname = 'svc' AND state LIKE 'idle in transaction%' AND pid <> pg_backend_pid()",
        )
        .expect("the transaction's connection terminated");
        let lost = tx.ensure_organization("lost").expect_err("the connection is gone");
        assert!(matches!(lost, StoreError::Unavailable(_)), "{lost}");
        // Sent now, it would run on a new connection, outside the transaction and its lock.
        let after = tx.ensure_organization("after").expect_err("nothing more is sent");
        assert!(matches!(after, StoreError::Unavailable(_)), "{after}");
        let refused = tx.commit().expect_err("no commit");
        assert!(matches!(refused, StoreError::Unavailable(_)), "{refused}");
        let mut read = store.read().expect("tx");
        for name in ["before", "lost", "after"] {
            assert!(read.organization(name).expect("read").is_none(), "{name} was not written");
        }
    });
}

#[test]
fn a_unit_with_text_the_database_cannot_hold_fails_alone() {
    on_each_backend("nul", |b| {
        let store = (b.open)();
        let (sent, received) = std::sync::mpsc::channel();
        for name in ["first", "nul\0here", "last"] {
            let sent = sent.clone();
            store.write_grouped(
                Box::new(move |tx| tx.ensure_organization(name).is_ok()),
                Box::new(move |result| sent.send(result.is_ok()).expect("told")),
            );
        }
        for _ in 0..3 {
            assert!(received.recv().expect("an outcome"), "the group committed");
        }
        let mut tx = store.read().expect("tx");
        assert!(tx.organization("first").expect("read").is_some());
        assert!(tx.organization("last").expect("read").is_some());
    });
}

fn printed(
    execution_id: &str,
    part: svc_execution::market::Part,
    lines: impl IntoIterator<Item = String>,
) -> Vec<svc_execution::output::OutputLine> {
    lines
        .into_iter()
        .map(|line| svc_execution::output::OutputLine { execution_id: execution_id.to_owned(), part, at: 7_000, line })
        .collect()
}

/// Issue 42: jobs' output is kept in order, tagged with its execution, read after a `seq`,
/// per execution, each execution's newest within the bounds (lines, bytes, and the newest
/// executions of a slot), what is not kept counted as dropped.
#[test]
fn output_is_kept_in_order_tagged_and_bounded_per_execution() {
    use svc_execution::market::Part;
    use svc_execution::output::OutputBatch;
    on_each_backend("output", |b| {
        let store = (b.open)();
        let mut tx = store.write().expect("tx");
        let org = tx.ensure_organization("acme").expect("org");
        let app = tx.insert_application(org.id, "web", "app_1").expect("app").key;
        let other = tx.insert_application(org.id, "api", "app_2").expect("app").key;
        tx.commit().expect("commit");

        assert!(store.lead().expect("the scheduling lease"), "alone, it leads");
        let mut tx = store.begin().expect("tx");
        let first = launching("app_1", 0);
        let first = Execution { key: tx.insert(app, &first).expect("insert"), ..first };
        let second = launching("app_1", 1);
        let second = Execution { key: tx.insert(app, &second).expect("insert"), ..second };
        let theirs = launching("app_2", 0);
        tx.insert(other, &theirs).expect("insert");
        let mut lines = printed(&first.execution_id, Part::App, ["hello, world".to_owned(), "nul\0byte".to_owned()]);
        lines.extend(printed(&second.execution_id, Part::Agent, ["ready".to_owned()]));
        lines.extend(printed(&theirs.execution_id, Part::App, ["not yours".to_owned()]));
        lines.extend(printed("app_9/0/1/1", Part::App, ["nobody's".to_owned()]));
        let lost = [(first.execution_id.clone(), 2)].into();
        tx.record_output(&OutputBatch { lines, lost }).expect("recorded");
        tx.commit().expect("commit");

        let mut read = store.read().expect("tx");
        let all = read.output_after(app, None, 0, 100).expect("read");
        let seen: Vec<_> = all.iter().map(|l| (l.slot, l.generation, l.part.as_str(), l.line.as_str(), l.at)).collect();
        assert_eq!(
            seen,
            [
                (0, 1, "program", "hello, world", 7_000),
                (0, 1, "program", "nul\u{fffd}byte", 7_000),
                (1, 1, "sidecar", "ready", 7_000)
            ],
            "the application's own lines, in order"
        );
        assert!(all.windows(2).all(|w| w[0].seq < w[1].seq));
        let after = read.output_after(app, None, all[0].seq, 100).expect("read");
        assert_eq!(after.len(), 2, "after a seq");
        assert_eq!(read.output_after(app, None, 0, 1).expect("read").len(), 1, "at most the limit");
        let one = read.output_after(app, Some(&second.execution_id), 0, 100).expect("read");
        assert_eq!(one.iter().map(|l| l.line.as_str()).collect::<Vec<_>>(), ["ready"]);
        assert!(
            read.output_after(app, Some(&theirs.execution_id), 0, 100).expect("read").is_empty(),
            "not another app's"
        );
        let drops = read.output_drops(app, &[&first.execution_id, &second.execution_id]).expect("read");
        assert_eq!(drops.iter().map(|d| (d.slot, d.kept, d.dropped)).collect::<Vec<_>>(), [(0, 2, 2), (1, 1, 0)]);
        drop(read);

        // A flood: the newest OUTPUT_LINES_KEPT stay, the others count as dropped.
        let flood = usize::try_from(OUTPUT_LINES_KEPT).expect("small") + 1_100;
        for chunk in (0..flood).collect::<Vec<_>>().chunks(2_000) {
            let mut tx = store.begin().expect("tx");
            let lines = printed(&first.execution_id, Part::App, chunk.iter().map(|n| format!("line {n}")));
            tx.record_output(&OutputBatch { lines, lost: Default::default() }).expect("recorded");
            tx.commit().expect("commit");
        }
        // Long lines: at most OUTPUT_BYTES_KEPT of them.
        let mut tx = store.begin().expect("tx");
        let long =
            printed(&second.execution_id, Part::App, (0..300).map(|n| format!("{n:04}{}", "x".repeat(16 * 1024 - 4))));
        tx.record_output(&OutputBatch { lines: long, lost: Default::default() }).expect("recorded");
        tx.commit().expect("commit");
        let mut read = store.read().expect("tx");
        let drops = read.output_drops(app, &[&first.execution_id, &second.execution_id]).expect("read");
        let kept = u64::try_from(OUTPUT_LINES_KEPT).expect("small");
        assert_eq!((drops[0].kept, drops[0].dropped), (kept, 2 + 2 + flood as u64 - kept), "{drops:?}");
        let tail = read.output_tail(app, &first.execution_id, 20).expect("read");
        assert_eq!(tail.len(), 20);
        assert_eq!(tail.last().map(|l| l.line.clone()), Some(format!("line {}", flood - 1)), "the newest kept");
        let bytes = drops[1].kept * 16 * 1024;
        assert!(bytes <= u64::try_from(OUTPUT_BYTES_KEPT).expect("small"), "{} lines of 16 KiB kept", drops[1].kept);
        assert_eq!(drops[1].kept + drops[1].dropped, 301);
        let newest = read.output_tail(app, &second.execution_id, 1).expect("read");
        assert!(newest[0].line.starts_with("0299"), "the newest long line kept");
        drop(read);

        // Only the newest executions of a slot keep their output.
        let mut tx = store.begin().expect("tx");
        let mut slot2 = Vec::new();
        for generation in 1..=u64::try_from(OUTPUT_EXECUTIONS_KEPT).expect("small") + 1 {
            let e = Execution {
                execution_id: Execution::id_for("app_1", 2, generation, 1),
                generation,
                ..launching("app_1", 2)
            };
            let e = Execution { key: tx.insert(app, &e).expect("insert"), ..e };
            let lines = printed(&e.execution_id, Part::App, [format!("generation {generation}")]);
            tx.record_output(&OutputBatch { lines, lost: Default::default() }).expect("recorded");
            slot2.push(e);
        }
        tx.commit().expect("commit");
        let mut read = store.read().expect("tx");
        let ids: Vec<&str> = slot2.iter().map(|e| e.execution_id.as_str()).collect();
        let drops = read.output_drops(app, &ids).expect("read");
        assert_eq!(drops.iter().map(|d| (d.kept, d.dropped)).collect::<Vec<_>>()[..2], [(0, 1), (1, 0)], "{drops:?}");
        assert!(read.output_tail(app, &slot2[0].execution_id, 20).expect("read").is_empty());
    });
}
