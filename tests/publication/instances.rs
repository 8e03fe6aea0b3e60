//! Several `svc serve` instances on one store, as an operator runs them: on one PostgreSQL
//! database (issue 19), each with its own data directory and `--database` (here
//! `SVC_DATABASE`, which the harness sets for a data directory attached to the database),
//! `svc admin` on the same database, requests spread over the instances; or on one SQLite
//! data directory.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use svc_e2e::service::{Server, TempDir, accept_build_of, admin, attach_database, token};

use super::v5;

/// `n` instances on one store: a database (each instance with its own data directory), or
/// one SQLite data directory they all use.
struct Fleet {
    servers: Vec<Server>,
    dirs: Vec<PathBuf>,
    token: String,
    cluster: Option<svc_pg_cluster::Cluster>,
    _scratch: TempDir,
}

impl Fleet {
    fn start(name: &str, n: usize) -> Option<Fleet> {
        let cluster = svc_pg_cluster::for_test(name)?;
        let scratch = TempDir::new(name);
        let dirs: Vec<PathBuf> = (0..n).map(|i| scratch.path().join(format!("instance-{i}"))).collect();
        for dir in &dirs {
            std::fs::create_dir_all(dir).expect("a data directory");
            attach_database(dir, &cluster.svc_url());
        }
        Some(Fleet::started(dirs, Some(cluster), scratch))
    }

    /// `n` instances on one SQLite data directory.
    fn on_one_directory(name: &str, n: usize) -> Fleet {
        let scratch = TempDir::new(name);
        let dir = scratch.path().join("data");
        std::fs::create_dir_all(&dir).expect("a data directory");
        Fleet::started(vec![dir; n], None, scratch)
    }

    fn started(dirs: Vec<PathBuf>, cluster: Option<svc_pg_cluster::Cluster>, scratch: TempDir) -> Fleet {
        let token = token(dirs[0].to_str().expect("utf-8"), "acme", "developer");
        // Started one after the other: the first takes the scheduling lease (or lock).
        let servers = dirs.iter().map(|d| Server::start(d, &[])).collect();
        Fleet { servers, dirs, token, cluster, _scratch: scratch }
    }

    fn dir(&self, i: usize) -> &str {
        self.dirs[i].to_str().expect("utf-8")
    }

    fn request(&self, i: usize, method: &str, path: &str, body: Option<&Value>) -> svc_e2e::service::Response {
        self.servers[i % self.servers.len()].request(method, path, Some(&self.token), body)
    }

    /// Creates `app` through instance 0 and accepts its build (of `digest`).
    fn create(&self, app: &str, digest: &str) {
        let r = self.request(0, "POST", "/api/applications", Some(&json!({"applicationId": app})));
        assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
        accept_build_of(self.dir(0), "acme", app, digest);
    }

    /// A query's rows, `|` between columns, one row a line (as `psql -A` prints them).
    fn sql(&self, sql: &str) -> String {
        if let Some(cluster) = &self.cluster {
            return cluster.sql("svc", sql).expect("a query");
        }
        svc_e2e::service::sqlite_rows(&self.dirs[0].join(manifest_core::service::store::DATABASE_FILE), sql)
    }
}

#[test]
fn fifty_publishes_fenced_on_one_version_over_three_instances_commit_exactly_once() {
    let Some(fleet) = Fleet::start("pg-fenced", 3) else { return };
    fleet.create("web", &svc_e2e::service::fixtures::digest('a'));
    let first =
        fleet.request(1, "POST", "/api/applications/web/policy-versions", Some(&json!({"manifest": v5("web")})));
    assert_eq!(first.status, 201, "{}", String::from_utf8_lossy(&first.body));

    let statuses: Vec<(u16, Value)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..50)
            .map(|i| {
                let fleet = &fleet;
                s.spawn(move || {
                    let body = json!({"manifest": v5("web"), "expectedActivePointerVersion": 1});
                    let r = fleet.request(i, "POST", "/api/applications/web/policy-versions", Some(&body));
                    (r.status, r.json())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("a publisher")).collect()
    });
    let committed: Vec<_> = statuses.iter().filter(|(status, _)| *status == 201).collect();
    assert_eq!(committed.len(), 1, "exactly one commits: {statuses:?}");
    assert_eq!(committed[0].1["policyVersion"], 2);
    for (status, body) in statuses.iter().filter(|(status, _)| *status != 201) {
        assert_eq!((*status, body["error"]["code"].as_str()), (409, Some("active_pointer_version_conflict")), "{body}");
    }
    // Every instance sees the same: two versions, the pointer on the second.
    for i in 0..3 {
        let app = fleet.request(i, "GET", "/api/applications/web", None).json();
        assert_eq!(app["activePointerVersion"], 2, "instance {i}: {app}");
    }
    assert_eq!(fleet.sql("SELECT COUNT(*) FROM policy_versions"), "2");
}

#[test]
fn racing_instances_cannot_overdraw_the_job_slots() {
    let Some(fleet) = Fleet::start("pg-slots", 3) else { return };
    // The basic tier has 4 job slots; eight applications of one job each race for them.
    let apps: Vec<String> = (0..8).map(|i| format!("app{i}")).collect();
    for app in &apps {
        fleet.create(app, &svc_e2e::service::fixtures::digest('a'));
    }
    let statuses: Vec<(u16, Value)> = std::thread::scope(|s| {
        let handles: Vec<_> = apps
            .iter()
            .enumerate()
            .map(|(i, app)| {
                let fleet = &fleet;
                s.spawn(move || {
                    let path = format!("/api/applications/{app}/policy-versions");
                    let r = fleet.request(i, "POST", &path, Some(&json!({"manifest": v5(app)})));
                    (r.status, r.json())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("a publisher")).collect()
    });
    let committed = statuses.iter().filter(|(status, _)| *status == 201).count();
    assert_eq!(committed, 4, "{statuses:?}");
    for (_, body) in statuses.iter().filter(|(status, _)| *status != 201) {
        let codes: Vec<&str> =
            body["error"]["diagnostics"].as_array().into_iter().flatten().filter_map(|d| d["code"].as_str()).collect();
        assert_eq!(codes, ["job_slots_exceeded"], "{body}");
    }
    let held = fleet.sql(
        "SELECT SUM(v.jobs) FROM applications a JOIN policy_versions v \
         ON v.application_id = a.id AND v.version = a.active_pointer_version WHERE a.status <> 'disabled'",
    );
    assert_eq!(held, "4");
}

/// A bundle whose `server.js` runs until stopped, stored in the artifact store of every data
/// directory (each instance's local pool launches from its own). Its digest.
fn store_everywhere(fleet: &Fleet) -> String {
    let bundle = fleet.dirs[0].join("bundle");
    std::fs::create_dir_all(&bundle).expect("bundle dir");
    std::fs::write(bundle.join("server.js"), "setInterval(() => {}, 1000);\n").expect("server.js");
    let bundle = bundle.to_str().expect("utf-8");
    let digests: Vec<String> = (0..fleet.dirs.len())
        .map(|i| admin(&["artifact", "store", "--data-dir", fleet.dir(i), "--bundle", bundle]))
        .collect();
    assert!(digests.windows(2).all(|w| w[0] == w[1]), "{digests:?}");
    digests[0].clone()
}

/// The executions recorded, as `slot|generation|attempt|state|reason` (`up` for running or
/// ready), by key.
fn executions(fleet: &Fleet) -> Vec<String> {
    let rows = fleet.sql(
        "SELECT slot, generation, attempt, CASE WHEN state IN ('running', 'ready') THEN 'up' ELSE state END, \
         COALESCE(reason_code, '') FROM executions ORDER BY id",
    );
    rows.lines().map(str::to_owned).collect()
}

fn wait_for(fleet: &Fleet, what: &str, limit: Duration, done: impl Fn(&[String]) -> bool) -> Duration {
    let started = Instant::now();
    loop {
        let rows = executions(fleet);
        if done(&rows) {
            return started.elapsed();
        }
        assert!(started.elapsed() < limit, "{what}: not within {limit:?}: {rows:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn three_schedulers_launch_each_slot_generation_once_and_a_killed_leader_is_taken_over_within_ten_seconds() {
    let Some(fleet) = Fleet::start("pg-schedulers", 3) else { return };
    one_scheduler_and_a_takeover(fleet);
}

/// Two `svc serve` on one data directory used to schedule each on its own: every job ran
/// twice, each instance's pool running its own copy.
#[test]
fn two_servers_on_one_data_directory_schedule_once_and_the_second_takes_over_after_kill_9() {
    one_scheduler_and_a_takeover(Fleet::on_one_directory("sqlite-schedulers", 2));
}

fn one_scheduler_and_a_takeover(mut fleet: Fleet) {
    let last = fleet.servers.len() - 1;
    let digest = store_everywhere(&fleet);
    admin(&["spend-authority", "set", "--data-dir", fleet.dir(0), "--org", "acme", "--micros", "1000000"]);
    fleet.create("web", &digest);
    let mut manifest = v5("web");
    manifest["deployment"]["jobs"] = json!(2);
    // Published through an instance that does not schedule: the leader takes it up.
    let r = fleet.request(last, "POST", "/api/applications/web/policy-versions", Some(&json!({"manifest": manifest})));
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let running = |rows: &[String]| rows.iter().filter(|r| r.contains("|up|")).count() == 2;
    wait_for(&fleet, "two jobs running", Duration::from_secs(30), running);
    // A while later, still one execution per slot generation: the other schedulers
    // launched nothing.
    std::thread::sleep(Duration::from_secs(2));
    let rows = executions(&fleet);
    assert_eq!(rows, ["0|1|1|up|", "1|1|1|up|"], "one launch per slot generation");

    // The leader (the first started) is killed; its jobs die with its pool. Another instance
    // takes the lease, finds the two executions gone from its own pool, and gives each slot
    // a new attempt.
    fleet.servers[0].signal("KILL");
    let _ = fleet.servers[0].wait(Duration::from_secs(5));
    let took = wait_for(&fleet, "the takeover", Duration::from_secs(10), |rows| {
        rows.iter().filter(|r| r.ends_with("|up|") && r.contains("|1|2|")).count() == 2
    });
    let rows = executions(&fleet);
    assert_eq!(
        rows,
        ["0|1|1|failed|processor_restarted", "1|1|1|failed|processor_restarted", "0|1|2|up|", "1|1|2|up|"],
        "taken over in {took:?}"
    );
}

#[test]
fn a_database_restart_answers_503_and_recovers_without_restarting_the_service() {
    let Some(fleet) = Fleet::start("pg-restart", 1) else { return };
    let health = fleet.request(0, "GET", "/api/health", None);
    assert_eq!(health.status, 200);
    assert_eq!(
        health.json()["store"],
        json!({"backend": "postgres", "reachable": true, "checkedInMs": health.json()["store"]["checkedInMs"]})
    );
    fleet.create("web", &svc_e2e::service::fixtures::digest('a'));

    let cluster = fleet.cluster.as_ref().expect("a cluster");
    cluster.stop().expect("pg_ctl stop");
    // A successful check answers probes for a second (`STORE_CHECK_FRESH`): the first probe
    // after that sees the database gone.
    std::thread::sleep(Duration::from_secs(1));
    let started = Instant::now();
    let health = fleet.request(0, "GET", "/api/health", None);
    assert_eq!((health.status, health.json()["status"].as_str()), (503, Some("unavailable")), "{}", health.json());
    let publish =
        fleet.request(0, "POST", "/api/applications/web/policy-versions", Some(&json!({"manifest": v5("web")})));
    assert_eq!(publish.status, 503, "{}", String::from_utf8_lossy(&publish.body));
    let text = String::from_utf8_lossy(&publish.body);
    assert!(text.contains("store_unavailable") && !text.contains("127.0.0.1") && !text.contains("postgres"), "{text}");
    assert!(started.elapsed() < Duration::from_secs(10), "failed fast: {:?}", started.elapsed());

    cluster.restart().expect("pg_ctl start");
    let publish =
        fleet.request(0, "POST", "/api/applications/web/policy-versions", Some(&json!({"manifest": v5("web")})));
    assert_eq!(publish.status, 201, "{}", String::from_utf8_lossy(&publish.body));
    assert_eq!(fleet.request(0, "GET", "/api/health", None).status, 200);
}
