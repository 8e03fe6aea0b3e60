//! A bad day for `svc app deploy` and jobs' output (issue 42's features, broken on purpose
//! over the real binaries): `svc serve` killed (`kill -9`) between an upload and its
//! publication and in the middle of an upload; the PostgreSQL database stopped while the
//! output thread writes; the same deploy run twice at once; an attacker's Ctrl-C, closed pipe
//! and pause under `svc app deploy` and `svc app logs --follow`.

use std::io::BufRead as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::json;
use svc_e2e::service::{Server, TempDir, admin, svc, svc_binary, token};

use super::{World, v5};

/// The longest any wait of these tests takes.
const WAIT: Duration = Duration::from_secs(30);

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn authorize(dir: &str) {
    admin(&["spend-authority", "set", "--data-dir", dir, "--org", "acme", "--micros", "10000000"]);
}

/// A job that prints `line 0` .. `line {n-1}`, one every `every_ms`, then exits 0.
fn ticker(n: u32, every_ms: u32) -> String {
    format!(
        "let n = 0;\nconst t = setInterval(() => {{ console.log(`line ${{n}}`); if (++n === {n}) clearInterval(t); }}, {every_ms});\n"
    )
}

/// A V5 manifest's YAML for `app`: a once job running `main.js`.
fn manifest(app: &str) -> String {
    format!(
        "schema: svc.application-manifest\nschemaVersion: 5\napplicationId: {app}\nrelease:\n  mode: source\n\
         runtime:\n  kind: javascript\n  entrypoint:\n    file: main.js\nexecution:\n  mode: once\n\
         deployment:\n  schedule:\n    duration: 10m\n  spend:\n    unit: service_credit_micros\n    perJob: \"100000\"\n\
         state:\n  mode: \"off\"\n"
    )
}

/// An application directory for `app` running `script`, with `extra` files.
fn folder(root: &Path, app: &str, script: &str, extra: &[(String, Vec<u8>)]) -> PathBuf {
    let dir = root.join(format!("src-{app}"));
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(dir.join("main.js"), script).expect("main.js");
    std::fs::write(dir.join("manifest.yaml"), manifest(app)).expect("manifest.yaml");
    for (path, bytes) in extra {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
        std::fs::write(path, bytes).expect("write");
    }
    dir
}

/// `files` files of `size` bytes each that do not compress (a few MB of an upload).
fn assets(files: usize, size: usize) -> Vec<(String, Vec<u8>)> {
    let mut rng = fastrand::Rng::with_seed(42);
    (0..files)
        .map(|i| {
            let mut bytes = vec![0u8; size];
            rng.fill(&mut bytes);
            (format!("assets/a{i:04}.bin"), bytes)
        })
        .collect()
}

/// `svc ARGS` against `server` with `token`.
fn svc_at(server: &Server, token: &str, args: &[&str]) -> Output {
    let url = server.url();
    svc(args, &[("SVC_SERVER", &url), ("SVC_TOKEN", token), ("SVC_CONFIG", "/nonexistent")])
}

/// `svc ARGS` against `server` with `token`, started (stdout and stderr piped).
fn spawn_svc(server: &Server, token: &str, args: &[&str]) -> Child {
    Command::new(svc_binary())
        .args(args)
        .env("SVC_SERVER", server.url())
        .env("SVC_TOKEN", token)
        .env("SVC_CONFIG", "/nonexistent")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("svc")
}

/// The exit code of `child` within `limit` (killed and `None` beyond it).
fn wait(child: &mut Child, limit: Duration) -> Option<i32> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return status.code();
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A child's whole standard output and error, once it exited.
fn outputs(child: &mut Child) -> (String, String) {
    let (mut out, mut err) = (String::new(), String::new());
    if let Some(mut o) = child.stdout.take() {
        let _ = std::io::Read::read_to_string(&mut o, &mut out);
    }
    if let Some(mut e) = child.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut e, &mut err);
    }
    (out, err)
}

/// Polls `svc app logs APP` until its output holds `wanted`.
fn logs_until(server: &Server, token: &str, app: &str, wanted: &str) -> String {
    let deadline = Instant::now() + WAIT;
    loop {
        let out = svc_at(server, token, &["app", "logs", app]);
        let stdout = text(&out.stdout);
        if out.status.success() && stdout.contains(wanted) {
            return stdout;
        }
        assert!(
            Instant::now() < deadline,
            "no {wanted:?} in `svc app logs {app}` after {WAIT:?}:\n{stdout}{}\nsvc serve:\n{}",
            text(&out.stderr),
            server.stderr()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The `line N` texts of the program's lines of one execution tag (`APP/0/1/1`), in order.
fn program_lines(logs: &str, tag: &str) -> Vec<String> {
    let marker = format!(" {tag} [program] ");
    logs.lines().filter_map(|l| l.split_once(&marker).map(|(_, rest)| rest.to_owned())).collect()
}

fn numbered(n: u32) -> Vec<String> {
    (0..n).map(|i| format!("line {i}")).collect()
}

/// The artifact store of a data directory holds only whole artifacts: every `sha256-*`
/// entry's files have its digest (copied into a scratch store that checks it). Returns the
/// names of the other entries (temporary ones).
fn assert_only_whole_artifacts(dir: &Path) -> Vec<String> {
    let scratch = TempDir::new("bad-day-verify");
    let mut others = Vec::new();
    for entry in std::fs::read_dir(dir.join("artifacts")).expect("artifacts").flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        match name.strip_prefix("sha256-") {
            Some(hex) => {
                let digest = format!("sha256:{hex}");
                manifest_core::service::admin::artifact_store(scratch.path(), &entry.path(), Some(&digest))
                    .unwrap_or_else(|e| panic!("{name} is served but not whole: {e}"));
            }
            None => others.push(name),
        }
    }
    others
}

/// Kills `svc serve` (`kill -9`) and starts it again on the same data directory.
fn kill_and_restart(w: &mut World) {
    w.server.signal("KILL");
    assert!(w.server.wait(Duration::from_secs(5)).is_some(), "svc serve is gone");
    w.server = Server::start(w.dir.path(), &[]);
}

/// Point 1: an upload through the API, `kill -9`, a restart, then the publication: the
/// source release resolves to the upload, its job runs, its output is read.
#[test]
fn an_upload_then_kill_9_then_a_publication_runs_the_uploaded_files() {
    let mut w = World::new("bad-day-upload-kill");
    authorize(w.dir.str());
    w.create("after-kill");
    let script = ticker(10, 50);
    let files = json!({"files": {"main.js": base64::engine::general_purpose::STANDARD.encode(&script)}});
    let r = w.server.request("POST", "/api/applications/after-kill/artifacts", Some(&w.token), Some(&files));
    assert_eq!(r.status, 201, "{}", text(&r.body));
    let digest = r.json()["digest"].as_str().expect("a digest").to_owned();

    kill_and_restart(&mut w);
    assert_eq!(assert_only_whole_artifacts(w.dir.path()), Vec::<String>::new(), "nothing half-written");
    let mut m = v5("after-kill");
    m["runtime"]["entrypoint"]["file"] = json!("main.js");
    let r = w.publish("after-kill", &json!({ "manifest": m }));
    assert_eq!(r.status, 201, "{}", text(&r.body));
    let logs = logs_until(&w.server, &w.token, "after-kill", "line 9");
    assert_eq!(program_lines(&logs, "after-kill/0/1/1"), numbered(10), "{logs}");
    // What ran is what was uploaded.
    let activity = w.get("/api/applications/after-kill/activity");
    let uploaded =
        activity["activity"].as_array().into_iter().flatten().any(|a| {
            a["action"] == "artifact_uploaded" && a["reason"].as_str().is_some_and(|r| r.starts_with(&digest))
        });
    assert!(uploaded, "{activity:#}");
}

/// Point 1: `kill -9` of `svc serve` while `svc app deploy` uploads a few MB (caught while
/// the service writes the files): the deploy says it lost the service; after a restart no
/// partial artifact is served (nor left behind), and the same deploy succeeds, its job runs
/// and `svc app logs` reads what it printed.
#[test]
fn kill_9_while_svc_app_deploy_uploads_leaves_nothing_half_written_and_the_deploy_again_runs() {
    let mut w = World::new("bad-day-deploy-kill");
    authorize(w.dir.str());
    // 240 files of 24 KiB (5.6 MiB): the service writes and syncs each in turn.
    let dir = folder(w.dir.path(), "mid-upload", &ticker(5, 50), &assets(240, 24 * 1024));
    let path = dir.to_str().expect("UTF-8");
    let artifacts = w.dir.path().join("artifacts");
    let mut deploy = spawn_svc(&w.server, &w.token, &["app", "deploy", path, "--timeout", "60"]);
    // Caught in the middle: a temporary directory holding some of the files.
    let deadline = Instant::now() + WAIT;
    let caught = loop {
        let writing = std::fs::read_dir(&artifacts).into_iter().flatten().flatten().find_map(|e| {
            let incoming = e.file_name().to_string_lossy().starts_with(".incoming-");
            let files = std::fs::read_dir(e.path().join("assets")).map_or(0, |d| d.count());
            (incoming && files > 0).then_some(files)
        });
        if let Some(files) = writing {
            w.server.signal("KILL");
            break files;
        }
        assert!(Instant::now() < deadline, "the upload was never caught being written");
        assert_eq!(deploy.try_wait().expect("wait"), None, "the deploy ended before its upload was written");
        std::thread::sleep(Duration::from_millis(1));
    };
    assert!(w.server.wait(Duration::from_secs(5)).is_some(), "svc serve is gone");
    assert!(caught < 240, "caught mid-write ({caught} files)");
    let code = wait(&mut deploy, Duration::from_secs(10));
    let (stdout, stderr) = outputs(&mut deploy);
    assert_eq!(code, Some(2), "the service was lost: exit 2\n{stdout}\n{stderr}");
    assert!(stderr.contains(&format!("svc: cannot reach {}", w.server.url())), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");

    // What it was writing is beside the artifacts, never one of them; once abandoned (as if
    // the kill were two hours ago), the restart removes it.
    let left = assert_only_whole_artifacts(w.dir.path());
    assert!(left.iter().any(|n| n.starts_with(".incoming-")), "caught half-written: {left:?}");
    for name in &left {
        let aged = Command::new("touch").args(["-d", "2 hours ago"]).arg(artifacts.join(name)).status();
        assert!(aged.expect("touch").success());
    }
    w.server = Server::start(w.dir.path(), &[]);
    assert_eq!(assert_only_whole_artifacts(w.dir.path()), Vec::<String>::new(), "nothing half-written is left");
    let out = svc_at(&w.server, &w.token, &["app", "deploy", path, "--timeout", "60"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{}\nsvc serve:\n{}", text(&out.stderr), w.server.stderr());
    assert!(stdout.contains("mid-upload settled: its once job ran and exited"), "{stdout}");
    let uploaded = stdout.lines().find_map(|l| l.strip_prefix("uploaded ")).and_then(|l| l.split(':').nth(1));
    let digest = format!("sha256:{}", uploaded.expect("the digest"));
    let stored = admin(&["artifact", "store", "--data-dir", w.dir.str(), "--bundle", path]);
    assert_eq!(stored, digest, "the digest of the whole folder, not of what was half written");
    assert_eq!(assert_only_whole_artifacts(w.dir.path()), Vec::<String>::new());
    let logs = logs_until(&w.server, &w.token, "mid-upload", "line 4");
    assert_eq!(program_lines(&logs, "mid-upload/0/1/1"), numbered(5), "{logs}");
}

/// The resident memory of a process, in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc/PID/status");
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).expect("VmRSS");
    line.split_whitespace().nth(1).and_then(|n| n.parse().ok()).expect("a size")
}

/// Point 2: PostgreSQL stopped for 5 s while a job prints a line every 100 ms and the output
/// thread records them: the service answers 503 without detail meanwhile, never crashes,
/// keeps the job running (one attempt) and its memory bounded; once the database is back,
/// `svc app logs` has every line the job printed, in order, and `svc app logs --follow`
/// started before the outage rode through it and printed them all too.
#[test]
fn postgres_stopped_while_the_output_thread_writes_loses_no_line() {
    let Some(cluster) = svc_pg_cluster::for_test("bad-day-pg-output") else { return };
    let dir = TempDir::new("bad-day-pg-output");
    svc_e2e::service::attach_database(dir.path(), &cluster.svc_url());
    let token = token(dir.str(), "acme", "developer");
    let server = Server::start(dir.path(), &[]);
    authorize(dir.str());
    // 150 lines, one every 100 ms: 15 s, the outage in the middle.
    let src = folder(dir.path(), "printer", &ticker(150, 100), &[]);
    let out = svc_at(&server, &token, &["app", "deploy", src.to_str().expect("UTF-8"), "--no-wait"]);
    assert_eq!(out.status.code(), Some(0), "{}{}", text(&out.stdout), text(&out.stderr));
    let mut follow = spawn_svc(&server, &token, &["app", "logs", "printer", "--follow"]);
    let followed = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let reader = {
        let (stdout, followed) = (follow.stdout.take().expect("stdout"), followed.clone());
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
                followed.lock().expect("lock").push(line);
            }
        })
    };
    logs_until(&server, &token, "printer", "line 20");
    let before = rss_kib(server.pid());

    cluster.stop().expect("pg_ctl stop");
    let stopped = Instant::now();
    std::thread::sleep(Duration::from_secs(1));
    // Meanwhile: 503 from the logs and the upload routes, saying nothing of the database; a
    // deploy is refused saying so (and stores nothing).
    let upload = json!({"files": {"main.js": "Y29uc29sZS5sb2coMSk="}});
    for (method, path, body) in [
        ("GET", "/api/applications/printer/logs", None),
        ("POST", "/api/applications/printer/artifacts", Some(&upload)),
    ] {
        let r = server.request(method, path, Some(&token), body);
        let body = text(&r.body);
        assert_eq!(r.status, 503, "{path}: {body}");
        assert!(body.contains("store_unavailable"), "{body}");
        // A client's retry is told to wait a moment rather than fail or hammer.
        assert_eq!(r.header("retry-after"), Some("1"), "{path}: {:?}", r.headers);
        for detail in ["127.0.0.1", "postgres", &cluster.port().to_string(), "connection"] {
            assert!(!body.contains(detail), "{path}: {detail:?} leaked: {body}");
        }
    }
    let other = folder(dir.path(), "meanwhile", &ticker(1, 10), &[]);
    let out = svc_at(&server, &token, &["app", "deploy", other.to_str().expect("UTF-8"), "--no-wait"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{}{err}", text(&out.stdout));
    assert!(err.contains("(503 store_unavailable)"), "{err}");
    assert!(!err.contains(&cluster.port().to_string()), "{err}");
    std::thread::sleep(Duration::from_secs(5).saturating_sub(stopped.elapsed()));
    cluster.restart().expect("pg_ctl start");

    let logs = logs_until(&server, &token, "printer", "line 149");
    assert_eq!(program_lines(&logs, "printer/0/1/1"), numbered(150), "every line, once, in order:\n{logs}");
    assert!(!logs.contains(" [svc] "), "nothing dropped:\n{logs}");
    assert!(!logs.contains("printer/0/1/2"), "the job ran on through the outage, one attempt:\n{logs}");
    let grown = rss_kib(server.pid()).saturating_sub(before);
    assert!(grown < 64 * 1024, "svc serve grew by {grown} KiB over the outage");
    assert!(server.request("GET", "/api/health", None, None).status == 200, "svc serve is up");

    // The follower printed the same lines (it waited through the 503s).
    let deadline = Instant::now() + WAIT;
    while !followed.lock().expect("lock").iter().any(|l| l.ends_with("[program] line 149")) {
        assert!(
            Instant::now() < deadline && follow.try_wait().expect("wait").is_none(),
            "--follow ended or stalled: {:?}\n{}",
            followed.lock().expect("lock"),
            outputs(&mut follow).1
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let seen = followed.lock().expect("lock").join("\n");
    assert_eq!(program_lines(&seen, "printer/0/1/1"), numbered(150), "{seen}");
    let status = Command::new("kill").args(["-INT", &follow.id().to_string()]).status().expect("kill");
    assert!(status.success());
    assert_eq!(wait(&mut follow, Duration::from_secs(5)), Some(130));
    let _ = reader.join();
    let (_, err) = outputs(&mut follow);
    assert!(!err.contains("panicked"), "{err}");
    drop(server);
    drop(cluster);
}

/// A query's rows on the data directory's store (`|` between columns).
fn rows(dir: &Path, sql: &str) -> Vec<String> {
    let text = svc_e2e::service::postgres_sql(dir, sql)
        .unwrap_or_else(|| svc_e2e::service::sqlite_rows(&dir.join(manifest_core::service::store::DATABASE_FILE), sql));
    text.lines().filter(|l| !l.is_empty()).map(str::to_owned).collect()
}

/// Point 3: the same `svc app deploy DIR` twice at once (same application, same token): each
/// ends with a clear outcome (published, or told that the other deploy won and what to do),
/// no refusal of the race itself leaks (`application_exists`, a bare fence conflict); one
/// live attempt per slot generation afterwards and each generation charged once at most.
#[test]
fn the_same_deploy_twice_at_once_ends_clearly_and_runs_one_job() {
    let w = World::new("bad-day-twice");
    authorize(w.dir.str());
    let src = folder(w.dir.path(), "twice", &ticker(20, 100), &assets(4, 256 * 1024));
    let path = src.to_str().expect("UTF-8");
    for round in 0..3 {
        let app = format!("twice-{round}");
        std::fs::write(src.join("manifest.yaml"), manifest(&app)).expect("manifest");
        let args = ["app", "deploy", path, "--timeout", "60"];
        let mut both = [spawn_svc(&w.server, &w.token, &args), spawn_svc(&w.server, &w.token, &args)];
        let mut ends = Vec::new();
        for child in &mut both {
            let code = wait(child, Duration::from_secs(90));
            let (out, err) = outputs(child);
            ends.push((code, out, err));
        }
        let published = ends.iter().filter(|(code, ..)| *code == Some(0)).count();
        assert!(published >= 1, "round {round}: one deploy publishes and its job runs: {ends:#?}");
        for (code, out, err) in &ends {
            assert!(!err.contains("application_exists"), "round {round}: the race leaked: {out}\n{err}");
            assert!(!err.contains("panicked"), "{err}");
            match code {
                Some(0) => assert!(out.contains(&format!("{app} settled: its once job ran and exited")), "{out}"),
                Some(1) => {
                    // Lost the race: said so, with what to do.
                    let said = format!(
                        "svc: another deploy of {app} published policy version 1 meanwhile, so this one published \
                         nothing (it was fenced on version 0): that version's job is the one that runs (`svc app \
                         executions {app}`); to publish these files over it, run `svc app deploy {path}` again\n"
                    );
                    assert!(err.ends_with(&said), "round {round}: a clear outcome, {said:?} in:\n{out}\n{err}");
                    assert!(!out.contains("published policy version"), "{out}");
                }
                _ => panic!("round {round}: exit {code:?}:\n{out}\n{err}"),
            }
        }
        // One live attempt per slot generation.
        let app_key = format!("(SELECT id FROM applications WHERE application_id = '{app}')");
        let live = rows(
            w.dir.path(),
            &format!(
                "SELECT slot, generation, COUNT(*) FROM executions WHERE application_id = {app_key} AND state IN \
                 ('launching', 'running', 'ready', 'restarting', 'stopping') GROUP BY slot, generation HAVING COUNT(*) > 1"
            ),
        );
        assert_eq!(live, Vec::<String>::new(), "round {round}: two live attempts of one generation");
        // One charge per slot generation (on the attempt that launched it), as the chaos test holds.
        let charged = rows(
            w.dir.path(),
            &format!(
                "SELECT slot, generation, COUNT(*) FROM spend_ledger WHERE application_id = {app_key} AND refund = 0 \
                 GROUP BY slot, generation HAVING COUNT(*) > 1"
            ),
        );
        assert_eq!(charged, Vec::<String>::new(), "round {round}: a generation charged twice");
        // The job's output, once per execution that ran.
        let logs = logs_until(&w.server, &w.token, &app, "line 19");
        assert_eq!(program_lines(&logs, &format!("{app}/0/1/1")), numbered(20), "{logs}");
    }
}

/// Point 4: Ctrl-C of `svc app deploy` while it sends a few MB: it ends (130) at once, the
/// service keeps nothing half-written, and the same deploy again runs the job.
#[test]
fn ctrl_c_of_svc_app_deploy_during_its_upload_then_the_deploy_again_runs() {
    let w = World::new("bad-day-ctrl-c");
    authorize(w.dir.str());
    let dir = folder(w.dir.path(), "interrupted", &ticker(5, 50), &assets(200, 32 * 1024));
    let path = dir.to_str().expect("UTF-8");
    let mut deploy = spawn_svc(&w.server, &w.token, &["app", "deploy", path, "--timeout", "60"]);
    // The listing's last line comes just before the upload.
    let mut lines = std::io::BufReader::new(deploy.stdout.take().expect("stdout")).lines();
    let listed = lines.by_ref().map_while(Result::ok).find(|l| l.starts_with("201 files, "));
    assert!(listed.is_some(), "the listing");
    let status = Command::new("kill").args(["-INT", &deploy.id().to_string()]).status().expect("kill");
    assert!(status.success());
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let code = wait(&mut deploy, Duration::from_secs(5));
    let (_, stderr) = outputs(&mut deploy);
    assert_eq!(code, Some(130), "Ctrl-C ends it at once: {rest:?}\n{stderr}");
    assert!(!rest.iter().any(|l| l.starts_with("published")), "interrupted before publishing: {rest:?}");
    assert!(!stderr.contains("panicked"), "{stderr}");

    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(assert_only_whole_artifacts(w.dir.path()), Vec::<String>::new(), "nothing half-written");
    let out = svc_at(&w.server, &w.token, &["app", "deploy", path, "--timeout", "60"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{}", text(&out.stderr));
    let logs = logs_until(&w.server, &w.token, "interrupted", "line 4");
    assert_eq!(program_lines(&logs, "interrupted/0/1/1"), numbered(5), "{logs}");
}

/// Point 4: `svc app logs APP --follow | head -1` ends promptly, exit 0 and no panic, both
/// for a job printing all the time (its next write meets the closed pipe) and for one that
/// printed one line and then nothing (nothing to write: the closed pipe is seen anyway).
#[test]
fn svc_app_logs_follow_into_head_ends_promptly() {
    let w = World::new("bad-day-head");
    authorize(w.dir.str());
    let chatty = folder(w.dir.path(), "chatty", &ticker(600, 20), &[]);
    let quiet = folder(w.dir.path(), "quiet", "console.log('only line');\nsetInterval(() => {}, 1000);\n", &[]);
    for dir in [&chatty, &quiet] {
        let out = svc_at(&w.server, &w.token, &["app", "deploy", dir.to_str().expect("UTF-8"), "--no-wait"]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    }
    logs_until(&w.server, &w.token, "chatty", "line 50");
    logs_until(&w.server, &w.token, "quiet", "only line");
    for app in ["chatty", "quiet"] {
        let started = Instant::now();
        let mut pipeline = Command::new("bash")
            .arg("-c")
            .arg(format!("set -o pipefail; '{}' app logs {app} --follow | head -1", svc_binary().display()))
            .env("SVC_SERVER", w.server.url())
            .env("SVC_TOKEN", &w.token)
            .env("SVC_CONFIG", "/nonexistent")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("bash");
        let code = wait(&mut pipeline, Duration::from_secs(10));
        let (out, err) = outputs(&mut pipeline);
        assert_eq!(code, Some(0), "{app}: `svc app logs --follow | head -1` ended 0 within 10 s:\n{out}\n{err}");
        assert!(started.elapsed() < Duration::from_secs(5), "{app}: promptly: {:?}", started.elapsed());
        assert_eq!(out.lines().count(), 1, "{out}");
        assert_eq!(err, "", "{app}: quietly");
    }
}

/// Point 4: `svc app logs --follow` while its application is stopped (a paused publication:
/// no new launch, the running job runs on to its end, here its own exit): it follows on,
/// quietly, with every line the job printed, until Ctrl-C (130). (The publication service has
/// no deletion of an application.)
#[test]
fn svc_app_logs_follow_while_the_application_is_stopped_follows_on() {
    let w = World::new("bad-day-paused");
    authorize(w.dir.str());
    let dir = folder(w.dir.path(), "paused", &ticker(50, 100), &[]);
    let out = svc_at(&w.server, &w.token, &["app", "deploy", dir.to_str().expect("UTF-8"), "--no-wait"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let mut follow = spawn_svc(&w.server, &w.token, &["app", "logs", "paused", "--follow"]);
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let stdout = follow.stdout.take().expect("stdout");
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut seen = Vec::new();
    let mut until = |wanted: &str| {
        let deadline = Instant::now() + WAIT;
        while let Ok(line) = rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            seen.push(line);
            if seen.last().is_some_and(|l| l.contains(wanted)) {
                return;
            }
        }
        panic!("no {wanted:?} from --follow: {seen:?}");
    };
    until("paused/0/1/1 [program] line 10");
    let body = json!({"manifest": manifest("paused"), "postPublishStatus": "paused", "reason": "a bad day"});
    let r = w.publish("paused", &body);
    assert_eq!(r.status, 201, "{}", text(&r.body));
    until("paused/0/1/1 [program] line 49");
    let deadline = Instant::now() + WAIT;
    loop {
        let view = w.get("/api/applications/paused/executions");
        let live = view["slots"].as_array().into_iter().flatten().any(|s| s["state"] == "ready");
        if !live && view["status"] == "paused" {
            break;
        }
        assert!(Instant::now() < deadline, "the job did not end: {view:#}");
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_secs(2));
    let seen = [seen, rx.try_iter().collect()].concat().join("\n");
    assert_eq!(program_lines(&seen, "paused/0/1/1"), numbered(50), "{seen}");
    assert_eq!(follow.try_wait().expect("wait"), None, "--follow follows on");
    let status = Command::new("kill").args(["-INT", &follow.id().to_string()]).status().expect("kill");
    assert!(status.success());
    assert_eq!(wait(&mut follow, Duration::from_secs(5)), Some(130));
    let (_, err) = outputs(&mut follow);
    assert_eq!(err, "", "quietly");
}

/// Point 2, past the bounds: PostgreSQL stopped 5 s while a job floods its output (more than
/// the 20,000 lines the service holds across a store failure): the service's memory stays
/// bounded, and once the database is back `svc app logs` has the job's newest lines, its
/// last line, and says once how many it did not keep.
#[test]
fn a_flood_while_postgres_is_stopped_stays_bounded_and_says_what_was_not_kept() {
    let Some(cluster) = svc_pg_cluster::for_test("bad-day-pg-flood") else { return };
    let dir = TempDir::new("bad-day-pg-flood");
    svc_e2e::service::attach_database(dir.path(), &cluster.svc_url());
    let token = token(dir.str(), "acme", "developer");
    let server = Server::start(dir.path(), &[]);
    authorize(dir.str());
    // 2,000 short lines every 100 ms for 9 s (the pipe's rate keeps what it can), then quiet,
    // then a last line.
    let flood = "let i = 0;\n\
                 const t = setInterval(() => { for (let k = 0; k < 2000; k++) console.log(`f ${i++}`); }, 100);\n\
                 setTimeout(() => { clearInterval(t); setTimeout(() => { console.log('the end'); process.exit(0); }, 2000); }, 9000);\n";
    let src = folder(dir.path(), "flooder", flood, &[]);
    let out = svc_at(&server, &token, &["app", "deploy", src.to_str().expect("UTF-8"), "--no-wait"]);
    assert_eq!(out.status.code(), Some(0), "{}{}", text(&out.stdout), text(&out.stderr));
    logs_until(&server, &token, "flooder", "[program] f ");
    let before = rss_kib(server.pid());
    cluster.stop().expect("pg_ctl stop");
    std::thread::sleep(Duration::from_secs(5));
    let during = rss_kib(server.pid());
    cluster.restart().expect("pg_ctl start");

    let logs = logs_until(&server, &token, "flooder", "[program] the end");
    let said: Vec<&str> = logs.lines().filter(|l| l.contains(" [svc] ")).collect();
    assert_eq!(said.len(), 1, "said once: {said:?}");
    assert!(said[0].starts_with("flooder/0/1/1 [svc] ") && said[0].contains("lines of this execution not kept"));
    assert!(!logs.contains("flooder/0/1/2"), "one attempt");
    let after = rss_kib(server.pid());
    let grown = during.max(after).saturating_sub(before);
    assert!(grown < 64 * 1024, "svc serve grew by {grown} KiB ({before} KiB before)");
    assert_eq!(server.request("GET", "/api/health", None, None).status, 200);
    drop(server);
    drop(cluster);
}

/// Point 3, the other order: the same deploy again while the first one's `once` job runs
/// publishes the next version, which does not run (the application runs once): it says
/// so rather than that its job ran, and only the first job ran and was charged.
#[test]
fn the_same_deploy_again_while_its_once_job_runs_says_which_version_ran() {
    let w = World::new("bad-day-again");
    authorize(w.dir.str());
    let src = folder(w.dir.path(), "again", &ticker(30, 100), &[]);
    let path = src.to_str().expect("UTF-8");
    let out = svc_at(&w.server, &w.token, &["app", "deploy", path, "--no-wait"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    logs_until(&w.server, &w.token, "again", "line 1");
    let out = svc_at(&w.server, &w.token, &["app", "deploy", path, "--timeout", "60"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("published policy version 2 of again\n"), "{stdout}");
    assert!(
        stdout.contains(
            "again settled: its once job ran and exited, with policy version 1, published just before this one; a \
             `once` application runs once, so version 2 does not run\n"
        ),
        "{stdout}"
    );
    let app_key = "(SELECT id FROM applications WHERE application_id = 'again')";
    let count = |sql: &str| rows(w.dir.path(), &format!("{sql} WHERE application_id = {app_key}"));
    assert_eq!(count("SELECT COUNT(*) FROM executions"), ["1"], "one job");
    assert_eq!(count("SELECT COUNT(*) FROM spend_ledger"), ["1"], "charged once");
}
