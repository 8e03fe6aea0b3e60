//! Bounded output (issue 39, point 4): a job's output has a byte rate (the excess dropped, one
//! line saying how many bytes) and its deployment's log a byte cap. The finding: "A job
//! writing 16 KiB lines as fast as it can kept the coordinator at 88% of a core and added
//! 160 MiB to the store per deployment."

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use relay_api::coordinator::store::{DATABASE_FILE, LOG_BYTES_KEPT};
use relay_api::runner::{LINE_COST, OUTPUT_BURST, OUTPUT_BYTES_PER_SEC};
use serde_json::json;
use svc_e2e::service::TempDir;

use super::client::get;
use super::deploy::{Relay, admin};

/// How long the coordinator's CPU time is measured.
const WINDOW: Duration = Duration::from_secs(10);

/// The project of `tests/ingress/fixtures/spew/server.js`.
fn spew_project(dir: &Path) -> PathBuf {
    let project = dir.join("spew");
    std::fs::create_dir_all(&project).expect("mkdir");
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("ingress/fixtures/spew/server.js");
    std::fs::copy(fixture, project.join("server.js")).expect("copy the app");
    let file = json!({
        "version": 1,
        "name": "spew",
        "runtime": "node",
        "app": {"dir": ".", "entrypoint": "server.js", "port": 8080, "healthPath": "/health"},
        "spend": {"ceilingMicros": 5_000_000, "fundPeriods": 1},
    });
    let path = project.join("ingress.json");
    std::fs::write(&path, serde_json::to_vec_pretty(&file).expect("json")).expect("write");
    path
}

/// The CPU time `pid` has used (user and system, every thread), from `/proc/PID/stat`.
fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("the coordinator's stat");
    // The fields after the command name (which may hold spaces), from the state (field 3) on.
    let fields: Vec<&str> = stat.rsplit_once(')').expect("a stat line").1.split_whitespace().collect();
    let ticks: u64 = fields[11].parse::<u64>().expect("utime") + fields[12].parse::<u64>().expect("stime");
    Duration::from_secs_f64(ticks as f64 / clock_ticks() as f64)
}

/// The kernel's clock ticks a second (`getconf CLK_TCK`).
fn clock_ticks() -> u64 {
    let out = std::process::Command::new("getconf").arg("CLK_TCK").output().expect("getconf");
    String::from_utf8_lossy(&out.stdout).trim().parse().expect("CLK_TCK")
}

/// What the deployment's log holds in the coordinator's store: (lines, bytes), read from the
/// database file as any reader of it would.
fn stored(data: &Path, deployment: &str) -> (u64, u64) {
    let db =
        rusqlite::Connection::open_with_flags(data.join(DATABASE_FILE), rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .expect("the store");
    db.busy_timeout(Duration::from_secs(10)).expect("busy timeout");
    db.query_row(
        "SELECT COUNT(*), COALESCE(SUM(length(CAST(line AS BLOB))), 0) FROM logs WHERE deployment_id = ?1",
        [deployment],
        |r| Ok((r.get::<_, i64>(0)? as u64, r.get::<_, i64>(1)? as u64)),
    )
    .expect("the log's size")
}

/// The coordinator's share of a core over [`WINDOW`].
async fn cpu_share(pid: u32) -> f64 {
    let (before, at) = (cpu_time(pid), Instant::now());
    tokio::time::sleep(WINDOW).await;
    (cpu_time(pid) - before).as_secs_f64() / at.elapsed().as_secs_f64()
}

/// The finding, as it was measured: a tenant's app writing 16 KiB lines as fast as it can (on
/// its standard output and error both) while its route is live. Over 10 s it costs the
/// coordinator under 5% of a core more than the same app quiet, its deployment's log holds
/// no more than the job's budget (a burst and a rate) and stays under its cap, and the log
/// says how many bytes were dropped.
#[tokio::test(flavor = "multi_thread")]
async fn a_job_spewing_output_costs_the_coordinator_under_five_percent_of_a_core_and_the_store_stays_under_its_cap() {
    let dir = TempDir::new("output-flood");
    let data = dir.path().join("relay");
    // Routes validated at the default interval, as a coordinator runs them.
    let flags = ["--public", "127.0.0.1:0", "--revalidate-secs", "30"].map(String::from);
    let relay = Relay::start(&data, &flags).await;
    admin(&relay.data, "invite", "spew");
    let token = admin(&relay.data, "token", "spew");
    let config = spew_project(dir.path()).to_string_lossy().into_owned();
    let (code, out, err) = relay.svc_as(&token, &["deploy", "--config", &config]).await;
    assert_eq!(code, 0, "the app deploys: {err}\n{out}\n{}", relay.proc.output());
    let status = || async {
        let (_, status, _) = relay.svc_as(&token, &["status", "--config", &config, "--format", "json"]).await;
        serde_json::from_str::<serde_json::Value>(&status).expect("status JSON")
    };
    let live = status().await;
    let deployment = live["deployment"]["id"].as_str().expect("a deployment").to_owned();
    assert_eq!(live["deployment"]["state"], "live", "{live:#}");

    let pid = relay.proc.pid();
    let quiet = cpu_share(pid).await;
    let (_, before) = stored(&data, &deployment);
    let ca = data.join("ca.pem");
    let answer = get(relay.public, "spew-spew.localhost", &ca, "/spew").await.expect("/spew through the gateway");
    assert_eq!(answer.status, 200, "{}", answer.text());
    let started = Instant::now();
    // Its burst goes first; then the flood as it lasts.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let spewing = cpu_share(pid).await;
    let (lines, bytes) = stored(&data, &deployment);
    let elapsed = started.elapsed();
    println!(
        "coordinator: {:.1}% of a core with the app quiet, {:.1}% with it spewing; the log: {lines} lines, {bytes} \
         bytes ({} before) {:.1} s after it began",
        quiet * 100.0,
        spewing * 100.0,
        before,
        elapsed.as_secs_f64()
    );
    assert!(
        spewing - quiet < 0.05,
        "the spewing job cost the coordinator {:.1}% of a core\n{}",
        (spewing - quiet) * 100.0,
        relay.proc.output()
    );
    // The job's budget since it began (each line also costs LINE_COST), with a second's slack.
    let budget = OUTPUT_BURST + OUTPUT_BYTES_PER_SEC * (elapsed.as_secs() + 1);
    let added = bytes - before;
    assert!(added + lines * LINE_COST <= budget + before, "{added} bytes in {lines} lines, the budget {budget}");
    assert!(bytes < LOG_BYTES_KEPT as u64, "{bytes} bytes stored, the cap {LOG_BYTES_KEPT}");
    assert!(added >= OUTPUT_BURST / 2, "the job's lines within its budget are kept: {added} bytes");

    // The log says what was dropped, in the words a tenant reads.
    let (_, logs, _) = relay.svc_as(&token, &["logs", "--config", &config]).await;
    let notice = logs
        .lines()
        .find(|l| l.contains("bytes of output dropped: the job printed faster than 64 KiB/s]"))
        .unwrap_or_else(|| panic!("a notice in the logs:\n{}", &logs[logs.len().saturating_sub(2000)..]));
    println!("{notice}");
    // The route is still served.
    let after = status().await;
    assert_eq!(after["deployment"]["state"], "live", "{after:#}");
}
