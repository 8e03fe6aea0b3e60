//! The relay's deployments decided by the publication service's scheduler: the relay store as
//! an `ExecutionStore` (`coordinator::scheduling`), run by `svc_execution`'s executor over the
//! simulated pool and a manual clock. A real store (SQLite in a scratch directory) and real
//! policies (published from a project as a deploy publishes them); no process.

use std::sync::Arc;

use relay_api::coordinator::RelayStore;
use relay_api::coordinator::model::Deployment;
use relay_api::coordinator::scheduling::{MAX_RESTARTS, Scheduling};
use relay_api::coordinator::state::DeploymentState;
use relay_api::coordinator::store::{NewDeployment, NewSuccessor, PublishedPolicy, RevisionBundle, now_ms};
use svc_execution::executor::Executor;
use svc_execution::scheduler::retry_backoff;
use svc_execution::{ExecState, ManualClock, SimulatedPool};

const PROJECT: &str = r#"{"version": 1, "name": "shop", "runtime": "node", "app": {"entrypoint": "server.js",
    "env": {"GREETING": "hello"}}, "spend": {"ceilingMicros": 5000000}}"#;

/// The policy revision `revision` of deployment `id` publishes for [`PROJECT`], as a deploy
/// publishes it.
fn published(id: &str, revision: u32) -> PublishedPolicy {
    published_project(PROJECT, id, revision)
}

/// The app files every revision sends.
fn app_digest() -> String {
    svc_execution::artifacts::bundle_digest([("server.js", b"// the app".as_slice())])
}

fn published_project(project: &str, id: &str, revision: u32) -> PublishedPolicy {
    let project = relay_api::project::read(project).expect("a valid project");
    let manifest = project.manifest_v5(None).expect("a derived manifest");
    let digest = app_digest();
    relay_api::coordinator::policy::publish(&manifest, &project, id, revision, &digest, |f| f == "server.js")
        .expect("published")
}

/// Revision 2 of deployment `id`, publishing `policy`.
fn successor(id: &str, policy: PublishedPolicy) -> NewSuccessor {
    NewSuccessor {
        deployment_id: id.to_owned(),
        revision: 2,
        project_json: PROJECT.into(),
        project_digest: "sha256:two".into(),
        manifest_digest: "sha256:m".into(),
        ceiling_micros: 5_000_000,
        route_id: "rt_shop_2".into(),
        policy,
        bundle: RevisionBundle::default(),
    }
}

struct World {
    store: Arc<RelayStore>,
    pool: Arc<SimulatedPool>,
    clock: ManualClock,
    executor: Executor,
    _dir: tempfile::TempDir,
}

impl World {
    fn new() -> World {
        let dir = tempfile::tempdir().expect("a scratch directory");
        let store = Arc::new(RelayStore::open(dir.path()).expect("a store"));
        let pool = Arc::new(SimulatedPool::new(1, 4, 0));
        let clock = ManualClock::at(u64::try_from(now_ms()).expect("after 1970"));
        let scheduling = Scheduling::new(store.clone(), dir.path().join("deployments"), MAX_RESTARTS, "test".into());
        let executor = Executor::new(Arc::new(scheduling), pool.clone(), Arc::new(clock.clone()), 16);
        World { store, pool, clock, executor, _dir: dir }
    }

    fn deploy(&self, id: &str) -> Deployment {
        let org = self.store.invite("acme").expect("an organization");
        self.store
            .create_deployment(&NewDeployment {
                id: id.into(),
                org_id: org,
                project: "shop".into(),
                project_json: PROJECT.into(),
                project_digest: "sha256:one".into(),
                manifest_digest: "sha256:m".into(),
                canonical_hostname: "shop-acme.localhost".into(),
                route_id: "rt_shop".into(),
                ceiling_micros: 5_000_000,
                gateway_operator: "local".into(),
                hostnames: Vec::new(),
                quote: None,
                policy: published(id, 1),
                bundle: RevisionBundle::default(),
            })
            .expect("created")
    }

    /// Steps until nothing more is due now.
    fn settle(&self) {
        // The store's rules wake a deployment at the real time of a change: the manual clock
        // never lags it.
        let real = u64::try_from(now_ms()).expect("after 1970");
        if svc_execution::Clock::now(&self.clock) < real {
            self.clock.set(real);
        }
        for _ in 0..20 {
            let report = self.executor.step().expect("a step");
            if report.decided == 0 && report.recorded == 0 {
                return;
            }
        }
        panic!("the executor did not settle");
    }

    fn advance(&self, ms: u64) {
        self.clock.advance(ms);
        self.settle();
    }

    fn move_to(&self, id: &str, to: DeploymentState) {
        self.store.transition(id, to, "the test moves it").expect("a transition");
        self.settle();
    }

    /// The pool's running jobs' execution IDs.
    fn running(&self) -> Vec<String> {
        let mut ids: Vec<String> = self.pool.running().into_iter().map(|(id, _, _)| id).collect();
        ids.sort();
        ids
    }

    fn executions(&self, id: &str) -> Vec<relay_api::coordinator::store::ExecutionRecord> {
        let mut page: Vec<_> =
            self.store.executions(id, None, 100).expect("executions").into_iter().map(|(_, e)| e).collect();
        page.reverse();
        page
    }
}

#[test]
fn an_unfunded_deployment_launches_nothing_and_says_why() {
    let w = World::new();
    let d = w.deploy("dep_0000000000000001");
    w.settle();
    assert!(w.running().is_empty());
    let blocked = w.store.scheduler_blocked(&d.id).expect("read").expect("blocked");
    assert_eq!(blocked.code, "unfunded");
}

#[test]
fn a_funded_deployment_runs_its_revisions_policy_and_restarts_its_job_with_backoff() {
    let w = World::new();
    let d = w.deploy("dep_0000000000000002");
    w.move_to(&d.id, DeploymentState::Provisioning);
    let job = format!("{}/0/1/1", d.id);
    assert_eq!(w.running(), std::slice::from_ref(&job));
    let order = w.pool.order(&job).expect("its order");
    assert_eq!(order.workload.artifact_digest, app_digest());
    assert!(order.workload.env.contains(&("GREETING".into(), "hello".into())), "{:?}", order.workload.env);
    assert_eq!(w.store.scheduler_blocked(&d.id).expect("read"), None);

    // The app ends: it is restarted on its processor after 1 s, 2 s, ... up to the limit.
    for n in 1..=u32::from(MAX_RESTARTS) {
        w.pool.exit(&job, 1);
        w.settle();
        assert!(w.running().is_empty(), "restart {n} waits its backoff");
        w.advance(retry_backoff(n));
        assert_eq!(w.running(), std::slice::from_ref(&job), "restart {n}");
    }
    // Past the limit the slot waits for its next window, and says so.
    w.pool.exit(&job, 1);
    w.settle();
    w.advance(retry_backoff(u32::from(MAX_RESTARTS) + 1));
    assert!(w.running().is_empty());
    let last = w.executions(&d.id).pop().expect("recorded");
    assert_eq!((last.state, last.reason.map(|r| r.code)), (ExecState::Failed, Some("exited".into())));
}

#[test]
fn a_redeploy_rolls_out_as_stop_when_successor_ready_and_unfunding_stops_the_job_now() {
    let w = World::new();
    let d = w.deploy("dep_0000000000000003");
    w.move_to(&d.id, DeploymentState::Provisioning);
    let first = format!("{}/0/1/1", d.id);
    w.pool.make_ready(&first);
    w.settle();

    // A changed project deployed: revision 2, a newer policy version.
    w.store
        .put_successor(&successor(&d.id, published_project(&PROJECT.replace("hello", "bonjour"), &d.id, 2)))
        .expect("a successor");
    w.settle();
    let second = format!("{}/0/2/1", d.id);
    assert_eq!(w.running(), [first.clone(), second.clone()], "the successor starts beside the serving job");
    let env = w.pool.order(&second).expect("its order").workload.env;
    assert!(env.contains(&("GREETING".into(), "bonjour".into())), "generation 2 runs revision 2's policy: {env:?}");
    // Not ready yet: the serving job stays. Ready: the serving job stops.
    w.advance(10_000);
    assert_eq!(w.running().len(), 2);
    w.pool.make_ready(&second);
    w.settle();
    assert_eq!(w.running(), std::slice::from_ref(&second));
    let superseded = w.executions(&d.id).into_iter().find(|e| e.execution_id == first).expect("recorded");
    assert_eq!(superseded.reason.map(|r| r.code), Some("superseded".into()));

    // The funds run out: the job stops now, not at its window's end.
    w.move_to(&d.id, DeploymentState::Validating);
    w.move_to(&d.id, DeploymentState::PendingFunding);
    assert!(w.running().is_empty());
    let stopped = w.executions(&d.id).into_iter().find(|e| e.execution_id == second).expect("recorded");
    assert_eq!((stopped.state, stopped.reason.map(|r| r.code)), (ExecState::Stopped, Some("unfunded".into())));
    // Funded again: a new generation of the active version.
    w.move_to(&d.id, DeploymentState::Provisioning);
    assert_eq!(w.running(), [format!("{}/0/3/1", d.id)]);
}

#[test]
fn a_failed_successors_job_is_withdrawn_and_the_serving_job_runs_on() {
    let w = World::new();
    let d = w.deploy("dep_0000000000000004");
    w.move_to(&d.id, DeploymentState::Provisioning);
    let first = format!("{}/0/1/1", d.id);
    w.pool.make_ready(&first);
    w.settle();
    w.store.put_successor(&successor(&d.id, published(&d.id, 2))).expect("a successor");
    w.settle();
    let second = format!("{}/0/2/1", d.id);
    assert_eq!(w.running(), [first.clone(), second.clone()]);
    w.store
        .set_successor_state(&d.id, 2, relay_api::coordinator::model::SuccessorState::Failed, "it never validated")
        .expect("failed");
    w.settle();
    assert_eq!(w.running(), std::slice::from_ref(&first), "revision 1 serves on");
    let withdrawn = w.executions(&d.id).into_iter().find(|e| e.execution_id == second).expect("recorded");
    assert_eq!(withdrawn.reason.map(|r| r.code), Some("withdrawn".into()));
}

/// Equips orders with nothing but a count, and reports no open connection.
#[derive(Default)]
struct CountingEquip(std::sync::atomic::AtomicUsize);

impl relay_api::coordinator::ingress_market::Equip for CountingEquip {
    fn equip(&self, order: &mut svc_execution::JobOrder) -> Result<(), svc_execution::Refusal> {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        order.workload.sidecar = Some(svc_execution::Sidecar { argv: vec!["agent".into()], ..Default::default() });
        Ok(())
    }
    fn open_connections(&self, _: &str) -> usize {
        0
    }
}

/// The pieces of point 8 together: the scheduler over the relay's store, its jobs on the
/// ingress market over the pool. A redeploy's successor is not ready until its route
/// validates, whatever its processes say; once it is, the serving job is stopped through a
/// drain, not at once.
#[test]
fn on_the_ingress_market_a_successor_is_ready_when_validated_and_its_predecessor_drains() {
    use relay_api::coordinator::ingress_market::{DRAIN_MIN, IngressMarket};
    let dir = tempfile::tempdir().expect("a scratch directory");
    let store = Arc::new(RelayStore::open(dir.path()).expect("a store"));
    let pool = Arc::new(SimulatedPool::new(1, 4, 0));
    let equip = Arc::new(CountingEquip::default());
    let market = Arc::new(IngressMarket::new(pool.clone(), equip.clone()));
    let clock = ManualClock::at(u64::try_from(now_ms()).expect("after 1970") + 1_000);
    let scheduling = Scheduling::new(store.clone(), dir.path().join("deployments"), MAX_RESTARTS, "test".into());
    let executor = Executor::new(Arc::new(scheduling), market.clone(), Arc::new(clock.clone()), 16);
    let w = World { store, pool: pool.clone(), clock, executor, _dir: dir };
    let d = w.deploy("dep_0000000000000005");
    w.move_to(&d.id, DeploymentState::Provisioning);
    let first = format!("{}/0/1/1", d.id);
    assert!(pool.order(&first).and_then(|o| o.workload.sidecar).is_some(), "launched with its agent");
    market.validated(&first);
    w.settle();
    w.store.put_successor(&successor(&d.id, published(&d.id, 2))).expect("a successor");
    w.settle();
    let second = format!("{}/0/2/1", d.id);
    // Its processes are up, its route not validated: the serving job stays.
    pool.make_ready(&second);
    w.settle();
    assert_eq!(w.running(), [first.clone(), second.clone()]);
    market.validated(&second);
    w.settle();
    assert!(market.is_draining(&first), "the predecessor drains");
    assert_eq!(w.running(), [first.clone(), second.clone()], "still running for its connections");
    std::thread::sleep(DRAIN_MIN);
    assert_eq!(market.drain().len(), 1);
    w.settle();
    assert_eq!(w.running(), std::slice::from_ref(&second));
    let stopped = w.executions(&d.id).into_iter().find(|e| e.execution_id == first).expect("recorded");
    assert_eq!((stopped.state, stopped.reason.map(|r| r.code)), (ExecState::Stopped, Some("superseded".into())));
    assert_eq!(equip.0.load(std::sync::atomic::Ordering::SeqCst), 2);
}

/// Review finding: a failure met inside one deployment's decision (its secrets unreadable)
/// aborted the step of every deployment. The deployment that cannot be launched is halted
/// instead, saying why, and the others go on.
#[test]
fn one_deployment_with_unreadable_secrets_does_not_stall_the_others() {
    let w = World::new();
    let broken = w.deploy("dep_0000000000000006");
    // Its stored secrets damaged (by hand, at a SQL prompt).
    let db = rusqlite::Connection::open(w._dir.path().join(relay_api::coordinator::store::DATABASE_FILE))
        .expect("the database");
    let damaged = db
        .execute("UPDATE revision_secrets SET secrets = 'not json' WHERE deployment_id = ?1", [&broken.id])
        .expect("damaged");
    assert_eq!(damaged, 1);
    let fine = {
        let org = w.store.invite("acme").expect("an organization");
        w.store
            .create_deployment(&NewDeployment {
                id: "dep_0000000000000007".into(),
                org_id: org,
                project: "other".into(),
                project_json: PROJECT.replace("shop", "other"),
                project_digest: "sha256:one".into(),
                manifest_digest: "sha256:m".into(),
                canonical_hostname: "other-acme.localhost".into(),
                route_id: "rt_other".into(),
                ceiling_micros: 5_000_000,
                gateway_operator: "local".into(),
                hostnames: Vec::new(),
                quote: None,
                policy: published("dep_0000000000000007", 1),
                bundle: RevisionBundle::default(),
            })
            .expect("created")
    };
    w.move_to(&broken.id, DeploymentState::Provisioning);
    w.move_to(&fine.id, DeploymentState::Provisioning);
    assert_eq!(w.running(), [format!("{}/0/1/1", fine.id)], "the other deployment launched");
    let blocked = w.store.scheduler_blocked(&broken.id).expect("read").expect("blocked");
    assert_eq!(blocked.code, "secrets_unreadable");
    assert!(!blocked.message.contains('/'), "no host path: {}", blocked.message);
}
