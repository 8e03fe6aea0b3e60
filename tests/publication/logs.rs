//! Jobs' output end to end (issue 42, point 2): what a real job of the local pool printed,
//! through `GET /api/applications/{id}/logs` and `svc app logs` (text, JSON, `--execution`,
//! `--follow` as JSON Lines, Ctrl-C, a closed pipe), another organization refused as a
//! missing application, and a job that floods its output kept within bounds with what was not
//! kept said once.

use std::io::BufRead as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use svc_e2e::service::{accept_build_of, admin, svc, svc_binary, token};

use super::{World, v5};

/// The longest any wait of these tests takes.
const WAIT: Duration = Duration::from_secs(30);

/// `examples/hello-job`, stored in the data directory's artifact store: its digest.
fn store_hello(w: &World) -> String {
    let bundle = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/hello-job");
    admin(&["artifact", "store", "--data-dir", w.dir.str(), "--bundle", bundle.to_str().expect("UTF-8 path")])
}

/// A bundle whose `main.js` is `script`: its digest.
fn store_script(w: &World, name: &str, script: &str) -> String {
    let bundle = w.dir.path().join(format!("bundle-{name}"));
    std::fs::create_dir_all(&bundle).expect("bundle dir");
    std::fs::write(bundle.join("main.js"), script).expect("main.js");
    admin(&["artifact", "store", "--data-dir", w.dir.str(), "--bundle", bundle.to_str().expect("UTF-8 path")])
}

/// Creates `app` and publishes a `once` job of `digest` (`main.js`, `GREETING=world`).
fn run_once(w: &World, app: &str, digest: &str) -> String {
    admin(&["spend-authority", "set", "--data-dir", w.dir.str(), "--org", "acme", "--micros", "1000000"]);
    let created = w.create(app);
    accept_build_of(w.dir.str(), "acme", app, digest);
    let mut m = v5(app);
    m["runtime"]["entrypoint"]["file"] = json!("main.js");
    m["configuration"] = json!({"variables": [{"source": "literal", "name": "GREETING", "value": "world"}]});
    let r = w.publish(app, &json!({ "manifest": m }));
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    created["applicationUid"].as_str().expect("uid").to_owned()
}

/// `svc app ARGS...` as the developer: exit code, stdout, stderr.
fn run(w: &World, args: &[&str]) -> (Option<i32>, String, String) {
    let url = w.server.url();
    let env = [("SVC_TOKEN", w.token.as_str()), ("SVC_SERVER", url.as_str()), ("SVC_CONFIG", "/nonexistent")];
    let out = svc(args, &env);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Polls `svc app logs ARGS` until its output holds `wanted`.
fn logs_until(w: &World, args: &[&str], wanted: &str) -> String {
    let deadline = Instant::now() + WAIT;
    loop {
        let (code, out, err) = run(w, args);
        assert_eq!(code, Some(0), "{err}");
        if out.contains(wanted) {
            return out;
        }
        assert!(Instant::now() < deadline, "no {wanted:?} in `svc {}` after {WAIT:?}:\n{out}{err}", args.join(" "));
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `TIME APP/SLOT/GENERATION/ATTEMPT [PART] LINE` with a time to the second.
fn is_tagged(line: &str, tag: &str, part: &str, text: &str) -> bool {
    let Some((time, rest)) = line.split_once(' ') else { return false };
    let time_ok = time.len() == 20
        && time.ends_with('Z')
        && time.as_bytes()[10] == b'T'
        && humantime::parse_rfc3339(time).is_ok();
    time_ok && rest == format!("{tag} [{part}] {text}")
}

#[test]
fn a_hello_jobs_greeting_appears_in_svc_app_logs_tagged_with_its_execution() {
    let w = World::new("logs-hello");
    let digest = store_hello(&w);
    let uid = run_once(&w, "hello", &digest);

    let text = logs_until(&w, &["app", "logs", "hello"], "done");
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines.len() == 2, "{text}");
    assert!(is_tagged(lines[0], "hello/0/1/1", "program", "hello, world"), "{text}");
    assert!(is_tagged(lines[1], "hello/0/1/1", "program", "done"), "{text}");

    // JSON: one object, every line with its execution, slot, generation, attempt and part.
    let (code, json_text, _) = run(&w, &["app", "logs", "hello", "--format", "json"]);
    assert_eq!(code, Some(0));
    let answer: Value = serde_json::from_str(&json_text).expect("one JSON object");
    let first = &answer["lines"][0];
    assert_eq!(
        (
            &first["executionId"],
            &first["slot"],
            &first["generation"],
            &first["attempt"],
            &first["part"],
            &first["line"]
        ),
        (&json!(format!("{uid}/0/1/1")), &json!(0), &json!(1), &json!(1), &json!("program"), &json!("hello, world")),
        "{answer:#}"
    );
    assert_eq!(answer["dropped"], json!([]), "nothing dropped");

    // One execution: by its whole ID or SLOT/GENERATION/ATTEMPT; another one has printed nothing.
    let (_, one, _) = run(&w, &["app", "logs", "hello", "--execution", "0/1/1"]);
    assert_eq!(one, text);
    let (_, whole, _) = run(&w, &["app", "logs", "hello", "--execution", &format!("{uid}/0/1/1")]);
    assert_eq!(whole, text);
    let (code, none, err) = run(&w, &["app", "logs", "hello", "--execution", "0/2/1"]);
    assert_eq!((code, none.as_str()), (Some(0), ""));
    assert!(err.contains("no output from execution 0/2/1 of hello yet"), "{err}");
    let (code, _, err) = run(&w, &["app", "logs", "hello", "--execution", "app_other/0/1/1"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("(404 not_found)"), "{err}");

    // The route: paging after a seq, bounded limits.
    let page = w.get("/api/applications/hello/logs?limit=1");
    assert_eq!((page["lines"].as_array().map(Vec::len), &page["more"]), (Some(1), &json!(true)));
    let next = page["next"].as_i64().expect("next");
    let rest = w.get(&format!("/api/applications/hello/logs?after={next}"));
    assert_eq!(rest["lines"][0]["line"], "done");
    assert_eq!(rest["more"], json!(false));
    let r = w.server.request("GET", "/api/applications/hello/logs?limit=100000", Some(&w.token), None);
    assert_eq!(r.status, 400);

    // Another organization's token: the same 404 as an application that does not exist.
    let theirs = token(w.dir.str(), "globex", "developer");
    let refused = w.server.request("GET", "/api/applications/hello/logs", Some(&theirs), None);
    let missing = w.server.request("GET", "/api/applications/nothing/logs", Some(&theirs), None);
    assert_eq!((refused.status, missing.status), (404, 404));
    assert_eq!(refused.json()["error"]["code"], "application_not_found");
    assert_eq!(
        String::from_utf8_lossy(&refused.body).replace("hello", "X"),
        String::from_utf8_lossy(&missing.body).replace("nothing", "X"),
        "the same answer as for an application that does not exist"
    );

    // --follow --format json: JSON Lines, the lines so far at once, until Ctrl-C (130).
    let url = w.server.url();
    let mut follow = Command::new(svc_binary())
        .args(["app", "logs", "hello", "--follow", "--format", "json"])
        .env("SVC_TOKEN", &w.token)
        .env("SVC_SERVER", &url)
        .env("SVC_CONFIG", "/nonexistent")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("svc app logs --follow");
    let mut reader = std::io::BufReader::new(follow.stdout.take().expect("stdout"));
    let mut line = String::new();
    reader.read_line(&mut line).expect("a first line");
    let first: Value = serde_json::from_str(&line).expect("one object on a line");
    assert_eq!(first["line"], "hello, world");
    let status = Command::new("kill").args(["-INT", &follow.id().to_string()]).status().expect("kill");
    assert!(status.success());
    let code = wait(&mut follow, Duration::from_secs(5));
    assert_eq!(code, Some(130), "Ctrl-C ends --follow with 130");

    // `svc app logs --follow | head -1`: once its reader is gone, it ends quietly (0).
    let mut follow = Command::new(svc_binary())
        .args(["app", "logs", "hello", "--follow"])
        .env("SVC_TOKEN", &w.token)
        .env("SVC_SERVER", &url)
        .env("SVC_CONFIG", "/nonexistent")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("svc app logs --follow");
    let mut reader = std::io::BufReader::new(follow.stdout.take().expect("stdout"));
    let mut line = String::new();
    reader.read_line(&mut line).expect("a first line");
    drop(reader);
    assert_eq!(wait(&mut follow, Duration::from_secs(5)), Some(0), "a follow nobody reads ends quietly");
    let mut err = String::new();
    std::io::Read::read_to_string(&mut follow.stderr.take().expect("stderr"), &mut err).expect("stderr");
    assert_eq!(err, "", "quietly");
    let _ = w.server.stop();
}

/// The exit code of `child` within `limit` (killed and `None` beyond it).
fn wait(child: &mut std::process::Child, limit: Duration) -> Option<i32> {
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
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A job printing far more than is kept, as fast as it can: the lines kept are bounded, the
/// lines not kept are counted and said once, before the execution's lines, and the job's
/// last line is there.
#[test]
fn a_job_flooding_its_output_keeps_its_newest_lines_and_says_once_how_many_it_did_not() {
    let w = World::new("logs-flood");
    let flood = "for (let i = 0; i < 20000; i++) console.log(`line ${i}`);\n\
                 setTimeout(() => { console.log(\"the end\"); process.exit(0); }, 5000);\n";
    let digest = store_script(&w, "flood", flood);
    run_once(&w, "flood", &digest);
    let text = logs_until(&w, &["app", "logs", "flood"], "the end");
    let said: Vec<&str> = text.lines().filter(|l| l.contains(" [svc] ")).collect();
    assert_eq!(said.len(), 1, "said once:\n{}", said.join("\n"));
    assert!(text.lines().next().is_some_and(|l| l.contains(" [svc] ")), "before the execution's lines");
    assert!(said[0].starts_with("flood/0/1/1 [svc] "), "{}", said[0]);
    assert!(said[0].contains("lines of this execution not kept"), "{}", said[0]);
    let kept = text.lines().filter(|l| l.contains(" [program] line ")).count();
    assert!((1..20_000).contains(&kept), "{kept} lines kept");

    let answer: Value = serde_json::from_str(&run(&w, &["app", "logs", "flood", "--format", "json"]).1).expect("JSON");
    let dropped = &answer["dropped"][0];
    let not_kept = dropped["dropped"].as_u64().expect("a count");
    assert_eq!(dropped["kept"].as_u64(), answer["lines"].as_array().map(|l| l.len() as u64));
    assert!(not_kept > 0, "{dropped}");
    assert!(said[0].contains(&format!("] {not_kept} lines")), "{} says {not_kept}", said[0]);
    // What the job printed over its rate is said by the job's own pipe, as a line of it.
    assert!(text.contains("bytes of output dropped"), "the rate's notice is kept too");
    let _ = w.server.stop();
}

/// `svc app logs --follow` while the service is killed (`kill -9`) and started again on the
/// same address: it says once that it lost the service, waits, and follows on from where it
/// was (the job's next attempt's lines) instead of ending with exit 2.
#[test]
fn logs_follow_rides_through_a_restart_of_the_service() {
    let mut w = World::new("logs-restart");
    let digest = store_script(&w, "ticker", "let n = 0;\nsetInterval(() => console.log(`tick ${++n}`), 300);\n");
    run_once(&w, "ticker", &digest);
    let url = w.server.url();
    let mut follow = Command::new(svc_binary())
        .args(["app", "logs", "ticker", "--follow"])
        .env("SVC_TOKEN", &w.token)
        .env("SVC_SERVER", &url)
        .env("SVC_CONFIG", "/nonexistent")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("svc app logs --follow");
    let stdout = follow.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let until = |tag: &str| {
        let deadline = Instant::now() + WAIT;
        let mut seen = Vec::new();
        while let Ok(line) = rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            if line.contains(tag) {
                return;
            }
            seen.push(line);
        }
        panic!("no {tag:?} from `svc app logs --follow` within {WAIT:?}: {seen:?}");
    };
    until("ticker/0/1/1 [program] tick 1");

    w.server.signal("KILL");
    assert!(w.server.wait(Duration::from_secs(5)).is_some(), "svc serve is gone");
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(follow.try_wait().expect("wait"), None, "--follow waits for the service to be back");

    let mut again = Command::new(svc_binary());
    if let Some(database) = svc_e2e::service::database_of(w.dir.path()) {
        again.env("SVC_DATABASE", database);
    }
    let mut again = again
        .args(["serve", "--listen", &url.replace("http://", ""), "--data-dir", w.dir.str()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("svc serve again");
    // The job stopped with the service; its next attempt prints from its own first tick.
    until("ticker/0/1/2 [program] tick 1");
    let status = Command::new("kill").args(["-INT", &follow.id().to_string()]).status().expect("kill");
    assert!(status.success());
    assert_eq!(wait(&mut follow, Duration::from_secs(5)), Some(130), "Ctrl-C still ends it");
    let _ = again.kill();
    let _ = again.wait();
    let mut err = String::new();
    std::io::Read::read_to_string(&mut follow.stderr.take().expect("stderr"), &mut err).expect("stderr");
    let lost = format!("svc: cannot reach {url}: ");
    assert_eq!(err.matches(&lost).count(), 1, "said once:\n{err}");
    assert!(err.contains("; following on when it answers again (Ctrl-C stops)\n"), "{err}");
    assert!(err.contains(&format!("svc: {url} answers again; following on\n")), "{err}");
}
