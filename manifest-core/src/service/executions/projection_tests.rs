//! `svc.execution-convergence.v1` of published applications, pinned byte for byte: each
//! convergence state and reason, each slot's current execution among its generations and
//! attempts, slots pending below and between the recorded ones, and pages. Every time is
//! fixed (1970 for what has passed, 2100 for what has not), so the answers are exact.

use std::sync::Arc;

use svc_execution::executor::ExecutionStore as _;
use svc_execution::{ExecState, Execution, Quote, Reason};

use super::{Page, build};
use crate::service::store::{Application, PolicyVersion, SqliteStore, Status, Store};
use crate::{EncryptionMode, Manifest, PolicyV5, ResolvedArtifact, V5Facts};

/// 2100-01-01: a time that has not come.
const LATER: u64 = 4_102_444_800_000;

/// Version `version` of an application of `jobs` continuous slots, as publication writes it.
fn policy_version(uid: &str, version: u64, jobs: u64) -> PolicyVersion {
    let digest = format!("sha256:{}", "a".repeat(64));
    let text = serde_json::json!({
        "schema": "svc.application-manifest", "schemaVersion": 5, "applicationId": "web",
        "release": {"mode": "pinned", "artifact": {"digest": digest}},
        "runtime": {"kind": "javascript", "entrypoint": {"file": "server.js"}},
        "execution": {"mode": "continuous"},
        "configuration": {"variables": [{"source": "literal", "name": "V", "value": version.to_string()}]},
        "deployment": {
            "jobs": jobs,
            "schedule": {"duration": "1h"},
            "spend": {
                "unit": "service_credit_micros", "perJob": "1000000", "rate": {"amount": "1000000000", "window": "30d"}
            }
        },
        "state": {"mode": "off"}
    })
    .to_string();
    let report = crate::validate(text.as_bytes());
    let Ok(Manifest::V5(manifest)) = report.manifest() else { panic!("a valid V5 manifest: {:?}", report.diagnostics) };
    let facts = V5Facts {
        application_uid: uid.to_owned(),
        artifact: ResolvedArtifact {
            kind: "ipfs_bundle".into(),
            cid: "ipfs://bafybeigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi".into(),
            digest,
            encryption: EncryptionMode { mode: "none".into() },
        },
        image: None,
        ssh_keys: Vec::new(),
    };
    let policy = serde_json_canonicalizer::to_string(&PolicyV5::materialize(&manifest, &facts).expect("materialized"))
        .expect("canonical");
    PolicyVersion {
        version,
        schema_version: 5,
        authored_digest: "sha256:authored".into(),
        policy_digest: crate::sha256(policy.as_bytes()),
        policy,
        authored: "{}".into(),
        jobs,
        execution: "continuous".into(),
        published_by: "me".into(),
    }
}

/// An execution of `slot` (generation, attempt) in `state`, its window from 1970 to `end`.
fn execution(
    uid: &str,
    slot: u16,
    generation: u64,
    attempt: u32,
    version: u64,
    state: ExecState,
    end: u64,
) -> Execution {
    Execution {
        key: 0,
        execution_id: Execution::id_for(uid, slot, generation, attempt),
        slot,
        generation,
        attempt,
        policy_version: version,
        state,
        processor_id: (state != ExecState::Refused).then(|| format!("local-{}", slot + 1)),
        window_start: 1_000 * generation,
        window_end: end,
        restarts: u32::from(slot),
        charged: Quote { service_credit_micros: 10_000 + u128::from(attempt), ..Quote::default() },
        created_at: 1_000 * generation,
        changed_at: 2_000 * generation + u64::from(attempt),
        silent_since: None,
        reason: matches!(state, ExecState::Failed | ExecState::Stopping)
            .then(|| Reason::new("exited", format!("it exited with status {slot}"))),
    }
}

struct Scenario {
    name: &'static str,
    /// Versions published (the last active); none: never published.
    versions: &'static [(u64, u64)],
    status: Status,
    pause_reason: Option<&'static str>,
    settled: bool,
    executions: Vec<(u16, u64, u32, u64, ExecState, u64)>,
    next_at: Option<u64>,
    blocked: Option<(&'static str, &'static str)>,
    /// The limit of each page asked for, each from the previous answer's `nextCursor`.
    pages: &'static [Option<&'static str>],
}

fn scenario(name: &'static str) -> Scenario {
    Scenario {
        name,
        versions: &[(1, 2)],
        status: Status::Active,
        pause_reason: None,
        settled: false,
        executions: Vec::new(),
        next_at: Some(LATER),
        blocked: None,
        pages: &[None],
    }
}

fn answers(store: &Arc<SqliteStore>, org: i64, n: usize, s: &Scenario) -> Vec<String> {
    let uid = format!("app_{n:032x}");
    let mut tx = store.write().expect("tx");
    let mut app: Application = tx.insert_application(org, &format!("web-{n}"), &uid).expect("app");
    for &(version, jobs) in s.versions {
        tx.insert_policy_version(app.key, &policy_version(&uid, version, jobs)).expect("version");
        app.active_pointer_version = version;
    }
    app.status = s.status;
    app.pause_reason = s.pause_reason.map(str::to_owned);
    app.settled = s.settled;
    tx.update_application(&app).expect("update");
    tx.commit().expect("commit");
    let mut tx = store.begin().expect("tx");
    for &(slot, generation, attempt, version, state, end) in &s.executions {
        tx.insert(app.key, &execution(&uid, slot, generation, attempt, version, state, end)).expect("insert");
    }
    let blocked = s.blocked.map(|(code, message)| Reason { code: code.into(), message: message.into() });
    tx.schedule(app.key, s.next_at, blocked.as_ref()).expect("schedule");
    tx.commit().expect("commit");
    let mut read = store.read().expect("tx");
    let mut cursor = None;
    let mut seen = Vec::new();
    for limit in s.pages {
        let page = Page { cursor: cursor.take(), limit: limit.map(str::to_owned) };
        let answer = build(read.as_mut(), &app, &page).expect("built");
        let text = serde_json::to_string(&answer).expect("serializes").replace(&uid, "<uid>");
        seen.push(format!("{} {limit:?}: {text}", s.name));
        cursor = answer.next_cursor;
    }
    seen
}

#[test]
fn the_projection_of_each_convergence_state_is_pinned() {
    use ExecState::*;
    let dir = tempfile::tempdir().expect("a scratch dir");
    let store = Arc::new(SqliteStore::open(&dir.path().join("store")).expect("a SQLite store"));
    crate::service::store::keys::start(store.as_ref(), &dir.path().join("store.key")).expect("keys");
    assert!(store.lead().expect("the scheduling lease"), "alone, it leads");
    let mut tx = store.write().expect("tx");
    let org = tx.ensure_organization("acme").expect("org").id;
    tx.commit().expect("commit");

    let scenarios = [
        Scenario { versions: &[], status: Status::Disabled, next_at: None, ..scenario("never published") },
        Scenario { executions: vec![(0, 1, 1, 1, Ready, LATER), (1, 1, 1, 1, Ready, LATER)], ..scenario("converged") },
        // Slot 0's current execution: its newest live generation (not the one stopping, not
        // the older one that failed); slot 1 has none yet.
        Scenario {
            executions: vec![
                (0, 1, 1, 1, Failed, 3_601_000),
                (0, 2, 1, 1, Ready, LATER),
                (0, 3, 1, 1, Stopping, LATER),
            ],
            ..scenario("starting")
        },
        Scenario { executions: vec![(0, 1, 1, 1, Ready, LATER)], next_at: Some(5_000), ..scenario("due") },
        Scenario {
            versions: &[(1, 2), (2, 2)],
            executions: vec![(0, 1, 1, 1, Ready, LATER), (1, 1, 1, 1, Ready, LATER)],
            ..scenario("rolling out")
        },
        Scenario {
            executions: vec![(1, 1, 1, 1, Failed, 3_601_000), (1, 1, 2, 1, Failed, LATER)],
            ..scenario("waiting after a failure")
        },
        // A slot beyond the policy's (recorded before it shrank): the slots between are pending.
        Scenario {
            versions: &[(1, 1)],
            executions: vec![(3, 1, 1, 1, Completed, 3_601_000), (0, 1, 1, 1, Refused, 3_601_000)],
            ..scenario("waiting")
        },
        Scenario {
            status: Status::Paused,
            pause_reason: Some("maintenance"),
            executions: vec![(0, 1, 1, 1, Ready, LATER)],
            ..scenario("paused")
        },
        Scenario { status: Status::Paused, ..scenario("paused without a reason") },
        Scenario { status: Status::Disabled, ..scenario("unpublished") },
        Scenario { blocked: Some(("spend_authority_missing", "no spend authority")), ..scenario("blocked") },
        Scenario { settled: true, executions: vec![(0, 1, 1, 1, Completed, 3_601_000)], ..scenario("settled") },
        Scenario {
            executions: vec![
                (0, 1, 1, 1, Completed, 3_601_000),
                (0, 2, 1, 1, Completed, 7_201_000),
                (0, 3, 1, 1, Ready, LATER),
            ],
            pages: &[Some("2"), Some("2"), None, Some("1"), Some("100")],
            ..scenario("pages")
        },
    ];
    let seen: Vec<String> = scenarios.iter().enumerate().flat_map(|(n, s)| answers(&store, org, n, s)).collect();
    let expected: Vec<&str> = EXPECTED.trim().lines().collect();
    assert_eq!(seen, expected, "the answers changed:\n{}", seen.join("\n"));
}

const EXPECTED: &str = r#"
never published None: {"schema":"svc.execution-convergence.v1","applicationId":"web-0","status":"disabled","convergence":{"state":"idle","reason":{"code":"unpublished","message":"no policy version is published"}},"slots":[],"recent":[]}
converged None: {"schema":"svc.execution-convergence.v1","applicationId":"web-1","status":"active","desired":{"policyVersion":1,"policyDigest":"sha256:631ecfa5440d63fa51a5d187554471af1e4f355b3ffaa9624cd2e10405df20a9","slots":2,"execution":"continuous"},"convergence":{"state":"converged"},"slots":[{"slot":0,"generation":1,"policyVersion":1,"state":"ready","processorId":"local-1","windowStart":"1970-01-01T00:00:01.000Z","windowEnd":"2100-01-01T00:00:00.000Z","restarts":0},{"slot":1,"generation":1,"policyVersion":1,"state":"ready","processorId":"local-2","windowStart":"1970-01-01T00:00:01.000Z","windowEnd":"2100-01-01T00:00:00.000Z","restarts":1}],"recent":[{"executionId":"<uid>/1/1/1","slot":1,"generation":1,"attempt":1,"policyVersion":1,"state":"ready","processorId":"local-2","windowStart":"1970-01-01T00:00:01.000Z","windowEnd":"2100-01-01T00:00:00.000Z","changedAt":"1970-01-01T00:00:02.001Z","restarts":1,"chargedMicros":"10001"},{"executionId":"<uid>/0/1/1","slot":0,"generation":1,"attempt":1,"policyVersion":1,"state":"ready","processorId":"local-1","windowStart":"1970-01-01T00:00:01.000Z","windowEnd":"2100-01-01T00:00:00.000Z","changedAt":"1970-01-01T00:00:02.001Z","restarts":0,"chargedMicros":"10001"}],"next":{"at":"2100-01-01T00:00:00.000Z"}}
starting None: {"schema":"svc.execution-convergence.v1","applicationId":"web-2","status":"active","desired":{"policyVersion":1,"policyDigest":"sha256:fc31e7f97b7ef4658c494eb1313b8e9d820d0b4ff0d352e068d7f0b0de06f5cc","slots":2,"execution":"continuous"},"convergence":{"state":"converging","reason":{"code":"starting","message":"jobs are launching, starting or stopping"}},"slots":[{"slot":0,"generation":2,"policyVersion":1,"state":"ready","processorId":"local-1","windowStart":"1970-01-01T00:00:02.000Z","windowEnd":"2100-01-01T00:00:00.000Z","restarts":0},{"slot":1,"generation":0,"policyVersion":1,"state":"pending","restarts":0}],"recent":[{"executionId":"<uid>/0/3/1","slot":0,"generation":3,"attempt":1,"policyVersion":1,"state":"stopping","processorId":"local-1","windowStart":"1970-01-01T00:00:03.000Z","windowEnd":"2100-01-01T00:00:00.000Z","changedAt":"1970-01-01T00:00:06.001Z","restarts":0,"chargedMicros":"10001","reason":{"code":"exited","message":"it exited with status 0"}},{"executionId":"<uid>/0/2/1","slot":0,"generation":2,"attempt":1,"policyVersion":1,"state":"ready","processorId":"local-1","windowStart":"1970-01-01T00:00:02.000Z","windowEnd":"2100-01-01T00:00:00.000Z","changedAt":"1970-01-01T00:00:04.001Z","restarts":0,"chargedMicros":"10001"},{"executionId":"<uid>/0/1/1","slot":0,"generation":1,"attempt":1,"policyVersion":1,"state":"failed","processorId":"local-1","windowStart":"1970-01-01T00:00:01.000Z","windowEnd":"1970-01-01T01:00:01.000Z","changedAt":"1970-01-01T00:00:02.001Z","restarts":0,"chargedMicros":"10001","reason":{"code":"exited","message":"it exited with status 0"}}],"next":{"at":"2100-01-01T00:00:00.000Z"}}
due None: {"schema":"svc.execution-convergence.v1","applicationId":"web-3","status":"active","desired":{"policyVersion":1,"policyDigest":"sha256:caf49d15bbaff3a7231ebf9730797e5badde3e69b9d654806a870f1818fe66d4","slots":2,"execution":"continuous"},"convergence":{"state":"converging","reason":{"code":"starting","message":"jobs are launching, starting or stopping"}},"slots":[{"slot":0,"generation":1,"policyVersion":1,"state":"ready","processorId":"local-1","windowStart":"1970-01-01T00:00:01.000Z","windowEnd":"2100-01-01T00:00:00.000Z","restarts":0},{"slot":1,"generation":0,"policyVersion":1,"state":"pending","restarts":0}],"recent":[{"executionId":"<uid>/0/1/1","slot":0,"generation":1,"attempt":1,"policyVersion":1,"state":"ready","processorId":"local-1","windowStart":"1970-01-01T00:00:01.000Z","windowEnd":"2100-01-01T00:00:00.000Z","changedAt":"1970-01-01T00:00:02.001Z","restarts":0,"chargedMicros":"10001"}],"next":{"at":"1970-01-01T00:00:05.000Z"}}
rolling out None: {"schema":"svc.execution-convergence.v1","applicationId":"web-4","status":"active","desired":{"policyVersion":2,"policyDigest":"sha256:6b44ba70b0b46dc3fb470ee7f905ee801845decaade52286c6fd24f851e80f31","slots":2,"execution":"continuous"},"convergence":{"state":"converging","reason":{"code":"rolling_out","message":"jobs of an older version run; policy version 2 replaces them"}},"slots":[{"slot":0,"generation":1,"policyVersion":1,"state":"ready","processorId":"local-1","windowStart":"1970-01-01T00:00:01.000Z","windowEnd":"2100-01-01T00:00:00.000Z","restarts":0},{"slot":1,"generation":1,"policyVersion":1,"state":"ready","processorId":"local-2","windowStart":"1970-01-01T00:00:01.000Z","windowEnd":"2100-01-01T00:00:00.000Z","restarts":1}],"recent":[{"executionId":"<uid>/1/1/1","slot":1,"generation":1,"attempt":1,"policyVersion":1,"state":"ready","processorId":"local-2","windowStart":"1970-01-01T00:00:01.000Z","windowEnd":"2100-01-01T00:00:00.000Z","changedAt":"1970-01-01T00:00:02.001Z","restarts":1,"chargedMicros":"10001"},{"executionId":"<uid>/0/1/1","slot":0,"generation":1,"attempt":1,"policyVersion":1,"state":"ready","processorId":"local-1","windowStart":"1970-01-01T00:00:01.000Z","windowEnd":"2100-01-01T00:00:00.000Z","changedAt":"1970-01-01T00:00:02.001Z","restarts":0,"chargedMicros":"10001"}],"next":{"at":"2100-01-01T00:00:00.000Z"}}
waiting after a failure None: {"schema":"svc.execution-convergence.v1","applicationId":"web-5","status":"active","desired":{"policyVersion":1,"policyDigest":"sha256:bd92a4241279e859acac4a76d6da7881c80116ded953ca70d039ff1cbaa150ed","slots":2,"execution":"continuous"},"convergence":{"state":"idle","reason":{"code":"waiting_after_failure","message":"slot 1's job failed (it exited with status 1); the slot waits for its window's end at 2100-01-01T00:00:00.000Z"}},"slots":[{"slot":0,"generation":0,"policyVersion":1,"state":"pending","restarts":0},{"slot":1,"generation":1,"policyVersion":1,"state":"failed","processorId":"local-2","windowStart":"1970-01-01T00:00:01.000Z","windowEnd":"2100-01-01T00:00:00.000Z","restarts":1}],"recent":[{"executionId":"<uid>/1/1/2","slot":1,"generation":1,"attempt":2,"policyVersion":1,"state":"failed","processorId":"local-2","windowStart":"1970-01-01T00:00:01.000Z","windowEnd":"2100-01-01T00:00:00.000Z","changedAt":"1970-01-01T00:00:02.002Z","restarts":1,"chargedMicros":"10002","reason":{"code":"exited","message":"it exited with status 1"}},{"executionId":"<uid>/1/1/1","slot":1,"generation":1,"attempt":1,"policyVersion":1,"state":"failed","processorId":"local-2","windowStart":"1970-01-01T00:00:01.000Z","windowEnd":"1970-01-01T01:00:01.000Z","changedAt":"1970-01-01T00:00:02.001Z","restarts":1,"chargedMicros":"10001","reason":{"code":"exited","message":"it exited with status 1"}}],"next":{"at":"2100-01-01T00:00:00.000Z"}}
waiting None: {"schema":"svc.execution-convergence.v1","applicationId":"web-6","status":"active","desired":{"policyVersion":1,"policyDigest":"sha256:68c14596ca99155a14e68b13e3f6f92d3ff5187ff05deddb5af40e379ffdf67c","slots":1,"execution":"continuous"},"convergence":{"state":"idle","reason":{"code":"waiting","message":"no job runs now; the next window or occurrence has not begun"}},"slots":[{"slot":0,"generation":1,"policyVersion":1,"state":"refused","windowStart":"1970-01-01T00:00:01.000Z","windowEnd":"1970-01-01T01:00:01.000Z","restarts":0},{"slot":1,"generation":0,"policyVersion":1,"state":"pending","restarts":0},{"slot":2,"generation":0,"policyVersion":1,"state":"pending","restarts":0},{"slot":3,"generation":1,"policyVersion":1,"state":"completed","processorId":"local-4","windowStart":"1970-01-01T00:00:01.000Z","windowEnd":"1970-01-01T01:00:01.000Z","restarts":3}],"recent":[{"executionId":"<uid>/0/1/1","slot":0,"generation":1,"attempt":1,"policyVersion":1,"state":"refused","windowStart":"1970-01-01T00:00:01.000Z","windowEnd":"1970-01-01T01:00:01.000Z","changedAt":"1970-01-01T00:00:02.001Z","restarts":0,"chargedMicros":"10001"},{"executionId":"<uid>/3/1/1","slot":3,"generation":1,"attempt":1,"policyVersion":1,"state":"completed","processorId":"local-4","windowStart":"1970-01-01T00:00:01.000Z","windowEnd":"1970-01-01T01:00:01.000Z","changedAt":"1970-01-01T00:00:02.001Z","restarts":3,"chargedMicros":"10001"}],"next":{"at":"2100-01-01T00:00:00.000Z"}}
paused None: {"schema":"svc.execution-convergence.v1","applicationId":"web-7","status":"paused","desired":{"policyVersion":1,"policyDigest":"sha256:22aa89b630a4e56a733efaff59058b8e0f78b31e8951bb5aa69350f9cac1a10c","slots":2,"execution":"continuous"},"convergence":{"state":"converging","reason":{"code":"paused","message":"paused: maintenance; no new launches, running jobs run to their scheduled end"}},"slots":[{"slot":0,"generation":1,"policyVersion":1,"state":"ready","processorId":"local-1","windowStart":"1970-01-01T00:00:01.000Z","windowEnd":"2100-01-01T00:00:00.000Z","restarts":0},{"slot":1,"generation":0,"policyVersion":1,"state":"pending","restarts":0}],"recent":[{"executionId":"<uid>/0/1/1","slot":0,"generation":1,"attempt":1,"policyVersion":1,"state":"ready","processorId":"local-1","windowStart":"1970-01-01T00:00:01.000Z","windowEnd":"2100-01-01T00:00:00.000Z","changedAt":"1970-01-01T00:00:02.001Z","restarts":0,"chargedMicros":"10001"}],"next":{"at":"2100-01-01T00:00:00.000Z"}}
paused without a reason None: {"schema":"svc.execution-convergence.v1","applicationId":"web-8","status":"paused","desired":{"policyVersion":1,"policyDigest":"sha256:ed75a2c2e1e948aa77a4c7b038be69bcd4b6b31079c3c719d49ae19ac8053f3d","slots":2,"execution":"continuous"},"convergence":{"state":"idle","reason":{"code":"paused","message":"paused: no reason given; no new launches, running jobs run to their scheduled end"}},"slots":[{"slot":0,"generation":0,"policyVersion":1,"state":"pending","restarts":0},{"slot":1,"generation":0,"policyVersion":1,"state":"pending","restarts":0}],"recent":[],"next":{"at":"2100-01-01T00:00:00.000Z"}}
unpublished None: {"schema":"svc.execution-convergence.v1","applicationId":"web-9","status":"disabled","desired":{"policyVersion":1,"policyDigest":"sha256:c5177bca5aaf1273de5d3482a0d5af640b19fa05ac5de28f514db04b1c339bd8","slots":2,"execution":"continuous"},"convergence":{"state":"idle","reason":{"code":"unpublished","message":"no policy version is published"}},"slots":[{"slot":0,"generation":0,"policyVersion":1,"state":"pending","restarts":0},{"slot":1,"generation":0,"policyVersion":1,"state":"pending","restarts":0}],"recent":[],"next":{"at":"2100-01-01T00:00:00.000Z"}}
blocked None: {"schema":"svc.execution-convergence.v1","applicationId":"web-10","status":"active","desired":{"policyVersion":1,"policyDigest":"sha256:1edcccf6d6b3af67ee5fdd7298afe4398852384a6df8fb7ee247eb66bd71aacf","slots":2,"execution":"continuous"},"convergence":{"state":"blocked","reason":{"code":"spend_authority_missing","message":"no spend authority"}},"slots":[{"slot":0,"generation":0,"policyVersion":1,"state":"pending","restarts":0},{"slot":1,"generation":0,"policyVersion":1,"state":"pending","restarts":0}],"recent":[],"next":{"at":"2100-01-01T00:00:00.000Z"}}
settled None: {"schema":"svc.execution-convergence.v1","applicationId":"web-11","status":"active","desired":{"policyVersion":1,"policyDigest":"sha256:12d04abdee44759b7709e0693a0682ede814f7befb94cdbbf4b254418df8ec0c","slots":2,"execution":"continuous"},"convergence":{"state":"settled","reason":{"code":"settled","message":"the `once` application ran its occurrence; it does not run again"}},"slots":[{"slot":0,"generation":1,"policyVersion":1,"state":"completed","processorId":"local-1","windowStart":"1970-01-01T00:00:01.000Z","windowEnd":"1970-01-01T01:00:01.000Z","restarts":0},{"slot":1,"generation":0,"policyVersion":1,"state":"pending","restarts":0}],"recent":[{"executionId":"<uid>/0/1/1","slot":0,"generation":1,"attempt":1,"policyVersion":1,"state":"completed","processorId":"local-1","windowStart":"1970-01-01T00:00:01.000Z","windowEnd":"1970-01-01T01:00:01.000Z","changedAt":"1970-01-01T00:00:02.001Z","restarts":0,"chargedMicros":"10001"}]}
pages Some("2"): {"schema":"svc.execution-convergence.v1","applicationId":"web-12","status":"active","desired":{"policyVersion":1,"policyDigest":"sha256:47127129629be38614e72f7b1bcbcb68aed5c829e2547d792c64233777cb70fa","slots":2,"execution":"continuous"},"convergence":{"state":"converged"},"slots":[{"slot":0,"generation":3,"policyVersion":1,"state":"ready","processorId":"local-1","windowStart":"1970-01-01T00:00:03.000Z","windowEnd":"2100-01-01T00:00:00.000Z","restarts":0},{"slot":1,"generation":0,"policyVersion":1,"state":"pending","restarts":0}],"recent":[{"executionId":"<uid>/0/3/1","slot":0,"generation":3,"attempt":1,"policyVersion":1,"state":"ready","processorId":"local-1","windowStart":"1970-01-01T00:00:03.000Z","windowEnd":"2100-01-01T00:00:00.000Z","changedAt":"1970-01-01T00:00:06.001Z","restarts":0,"chargedMicros":"10001"},{"executionId":"<uid>/0/2/1","slot":0,"generation":2,"attempt":1,"policyVersion":1,"state":"completed","processorId":"local-1","windowStart":"1970-01-01T00:00:02.000Z","windowEnd":"1970-01-01T02:00:01.000Z","changedAt":"1970-01-01T00:00:04.001Z","restarts":0,"chargedMicros":"10001"}],"nextCursor":"16","next":{"at":"2100-01-01T00:00:00.000Z"}}
pages Some("2"): {"schema":"svc.execution-convergence.v1","applicationId":"web-12","status":"active","desired":{"policyVersion":1,"policyDigest":"sha256:47127129629be38614e72f7b1bcbcb68aed5c829e2547d792c64233777cb70fa","slots":2,"execution":"continuous"},"convergence":{"state":"converged"},"slots":[{"slot":0,"generation":3,"policyVersion":1,"state":"ready","processorId":"local-1","windowStart":"1970-01-01T00:00:03.000Z","windowEnd":"2100-01-01T00:00:00.000Z","restarts":0},{"slot":1,"generation":0,"policyVersion":1,"state":"pending","restarts":0}],"recent":[{"executionId":"<uid>/0/1/1","slot":0,"generation":1,"attempt":1,"policyVersion":1,"state":"completed","processorId":"local-1","windowStart":"1970-01-01T00:00:01.000Z","windowEnd":"1970-01-01T01:00:01.000Z","changedAt":"1970-01-01T00:00:02.001Z","restarts":0,"chargedMicros":"10001"}],"next":{"at":"2100-01-01T00:00:00.000Z"}}
pages None: {"schema":"svc.execution-convergence.v1","applicationId":"web-12","status":"active","desired":{"policyVersion":1,"policyDigest":"sha256:47127129629be38614e72f7b1bcbcb68aed5c829e2547d792c64233777cb70fa","slots":2,"execution":"continuous"},"convergence":{"state":"converged"},"slots":[{"slot":0,"generation":3,"policyVersion":1,"state":"ready","processorId":"local-1","windowStart":"1970-01-01T00:00:03.000Z","windowEnd":"2100-01-01T00:00:00.000Z","restarts":0},{"slot":1,"generation":0,"policyVersion":1,"state":"pending","restarts":0}],"recent":[{"executionId":"<uid>/0/3/1","slot":0,"generation":3,"attempt":1,"policyVersion":1,"state":"ready","processorId":"local-1","windowStart":"1970-01-01T00:00:03.000Z","windowEnd":"2100-01-01T00:00:00.000Z","changedAt":"1970-01-01T00:00:06.001Z","restarts":0,"chargedMicros":"10001"},{"executionId":"<uid>/0/2/1","slot":0,"generation":2,"attempt":1,"policyVersion":1,"state":"completed","processorId":"local-1","windowStart":"1970-01-01T00:00:02.000Z","windowEnd":"1970-01-01T02:00:01.000Z","changedAt":"1970-01-01T00:00:04.001Z","restarts":0,"chargedMicros":"10001"},{"executionId":"<uid>/0/1/1","slot":0,"generation":1,"attempt":1,"policyVersion":1,"state":"completed","processorId":"local-1","windowStart":"1970-01-01T00:00:01.000Z","windowEnd":"1970-01-01T01:00:01.000Z","changedAt":"1970-01-01T00:00:02.001Z","restarts":0,"chargedMicros":"10001"}],"next":{"at":"2100-01-01T00:00:00.000Z"}}
pages Some("1"): {"schema":"svc.execution-convergence.v1","applicationId":"web-12","status":"active","desired":{"policyVersion":1,"policyDigest":"sha256:47127129629be38614e72f7b1bcbcb68aed5c829e2547d792c64233777cb70fa","slots":2,"execution":"continuous"},"convergence":{"state":"converged"},"slots":[{"slot":0,"generation":3,"policyVersion":1,"state":"ready","processorId":"local-1","windowStart":"1970-01-01T00:00:03.000Z","windowEnd":"2100-01-01T00:00:00.000Z","restarts":0},{"slot":1,"generation":0,"policyVersion":1,"state":"pending","restarts":0}],"recent":[{"executionId":"<uid>/0/3/1","slot":0,"generation":3,"attempt":1,"policyVersion":1,"state":"ready","processorId":"local-1","windowStart":"1970-01-01T00:00:03.000Z","windowEnd":"2100-01-01T00:00:00.000Z","changedAt":"1970-01-01T00:00:06.001Z","restarts":0,"chargedMicros":"10001"}],"nextCursor":"17","next":{"at":"2100-01-01T00:00:00.000Z"}}
pages Some("100"): {"schema":"svc.execution-convergence.v1","applicationId":"web-12","status":"active","desired":{"policyVersion":1,"policyDigest":"sha256:47127129629be38614e72f7b1bcbcb68aed5c829e2547d792c64233777cb70fa","slots":2,"execution":"continuous"},"convergence":{"state":"converged"},"slots":[{"slot":0,"generation":3,"policyVersion":1,"state":"ready","processorId":"local-1","windowStart":"1970-01-01T00:00:03.000Z","windowEnd":"2100-01-01T00:00:00.000Z","restarts":0},{"slot":1,"generation":0,"policyVersion":1,"state":"pending","restarts":0}],"recent":[{"executionId":"<uid>/0/2/1","slot":0,"generation":2,"attempt":1,"policyVersion":1,"state":"completed","processorId":"local-1","windowStart":"1970-01-01T00:00:02.000Z","windowEnd":"1970-01-01T02:00:01.000Z","changedAt":"1970-01-01T00:00:04.001Z","restarts":0,"chargedMicros":"10001"},{"executionId":"<uid>/0/1/1","slot":0,"generation":1,"attempt":1,"policyVersion":1,"state":"completed","processorId":"local-1","windowStart":"1970-01-01T00:00:01.000Z","windowEnd":"1970-01-01T01:00:01.000Z","changedAt":"1970-01-01T00:00:02.001Z","restarts":0,"chargedMicros":"10001"}],"next":{"at":"2100-01-01T00:00:00.000Z"}}
"#;
