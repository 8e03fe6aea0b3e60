//! What survives: restarts on the same data directory, a crash between the version insert and
//! the commit (on the path each backend's publications take), graceful shutdown with a
//! request in flight, and tokens kept only as hashes.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::json;
use svc_e2e::service::{Server, TempDir, parse_response, token};

use super::{World, v5};

#[test]
fn a_restart_on_the_same_data_dir_finds_everything() {
    let w = World::new("restart");
    w.create("web");
    w.accept_source("web");
    assert_eq!(w.publish("web", &json!({"manifest": v5("web")})).status, 201);
    let paused = json!({"manifest": v5("web"), "postPublishStatus": "paused", "reason": "quiet hours"});
    assert_eq!(w.publish("web", &paused).status, 201);
    let before: Vec<_> = [
        "/api/applications/web",
        "/api/applications/web/policy-versions",
        "/api/applications/web/policy-versions/2",
        "/api/applications/web/activity",
    ]
    .iter()
    .map(|p| (p.to_string(), w.get(p)))
    .collect();

    let World { server, dir, token } = w;
    assert!(server.stop().success(), "SIGTERM exits 0");
    let w = World { server: Server::start(dir.path(), &[]), dir, token };
    for (path, body) in before {
        assert_eq!(w.get(&path), body, "{path} after restart");
    }
}

/// The fault is injected on the path a publication takes in production: grouped work on
/// SQLite, where the process aborts; on PostgreSQL the decided write (one call of
/// `svc_publish_decided`), whose database session ends inside the call, after its writes.
/// Either way the test first sees that the fault was reached there, then that nothing of the
/// publication was committed.
#[test]
fn a_crash_between_the_version_insert_and_the_commit_commits_nothing() {
    let w = World::new("fault");
    w.create("web");
    w.accept_source("web");
    assert_eq!(w.publish("web", &json!({"manifest": v5("web")})).status, 201);
    let wakeups = w.wakeups("web");
    let token = w.token.clone();
    let dir = w.dir.path().to_path_buf();
    drop(w.server);

    let mut faulty = Server::start(&dir, &["--inject-fault", "after-version-insert"]);
    let body = serde_json::to_vec(&json!({"manifest": v5("web")})).expect("json");
    let mut stream = TcpStream::connect(faulty.addr).expect("connect");
    let head = format!(
        "POST /api/applications/web/policy-versions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).expect("write");
    stream.write_all(&body).expect("write");
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    if svc_e2e::service::on_postgres() {
        // The service answers as it does when its database dies during a write, and runs on.
        assert!(!answer.is_empty(), "no answer: the process died, not the decided write\n{}", faulty.stderr());
        let response = parse_response(&answer);
        assert_eq!(response.status, 503, "{}\n{}", String::from_utf8_lossy(&response.body), faulty.stderr());
        let log = svc_e2e::service::postgres_log(&dir).expect("the cluster's log");
        assert!(log.contains("svc_publish_decided: injected fault after the version insert"), "{log}");
        assert!(!faulty.stderr().contains("injected fault"), "not in grouped work: {}", faulty.stderr());
        assert!(faulty.stop().success(), "SIGTERM exits 0");
    } else {
        assert!(answer.is_empty(), "the server died before answering: {}", String::from_utf8_lossy(&answer));
        let status = faulty.wait(Duration::from_secs(10)).expect("the server aborted");
        assert!(!status.success());
        // Its standard error is read by a thread of its own: the last line may come a moment later.
        let deadline = Instant::now() + Duration::from_secs(5);
        while !faulty.stderr().contains("injected fault after the version insert, in grouped work") {
            assert!(Instant::now() < deadline, "the fault reached in grouped work: {}", faulty.stderr());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    let restarted = Server::start(&dir, &[]);
    let app = restarted.request("GET", "/api/applications/web", Some(&token), None).json();
    assert_eq!(app["activePointerVersion"], 1, "the pointer did not move");
    let list = restarted.request("GET", "/api/applications/web/policy-versions", Some(&token), None).json();
    assert_eq!(list["policyVersions"].as_array().map(Vec::len), Some(1), "no new version");
    let store = svc_e2e::service::open_store(&dir);
    let mut tx = store.read().expect("tx");
    let org = tx.organization("acme").expect("read").expect("org");
    let key = tx.application(org.id, "web").expect("read").expect("app").key;
    assert_eq!(tx.wakeups(key).expect("wakeups"), wakeups, "no wakeup");
    // And the service still publishes.
    let again = restarted.request(
        "POST",
        "/api/applications/web/policy-versions",
        Some(&token),
        Some(&json!({"manifest": v5("web")})),
    );
    assert_eq!(again.json()["policyVersion"], 2);
}

#[test]
fn sigterm_and_ctrl_c_drain_a_request_in_flight_and_exit_0_and_130_within_ten_seconds() {
    // SIGTERM is a stop asked for (exit 0); Ctrl-C exits 130 as shells expect, after draining too.
    for (signal, code) in [("TERM", 0), ("INT", 130)] {
        let mut w = World::new("drain");
        w.create("web");
        w.accept_source("web");
        let body = serde_json::to_vec(&json!({"manifest": v5("web")})).expect("json");
        let mut stream = TcpStream::connect(w.server.addr).expect("connect");
        let head = format!(
            "POST /api/applications/web/policy-versions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            w.token,
            body.len()
        );
        stream.write_all(head.as_bytes()).expect("write");
        stream.write_all(&body[..10]).expect("write");
        std::thread::sleep(Duration::from_millis(200));
        let started = Instant::now();
        w.server.signal(signal);
        std::thread::sleep(Duration::from_millis(200));
        stream.write_all(&body[10..]).expect("the in-flight request is still being read");
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).expect("read");
        assert_eq!(parse_response(&answer).status, 201, "SIG{signal}: the in-flight publication completed");
        let status = w.server.wait(Duration::from_secs(10)).expect("exits within 10 s");
        assert_eq!(status.code(), Some(code), "SIG{signal}: exit {code}, got {status:?}");
        assert!(started.elapsed() < Duration::from_secs(10));
    }
}

#[test]
fn tokens_are_stored_only_as_hashes_and_admin_changes_count_at_once() {
    let w = World::new("hashed");
    // A token created while the server runs works at once.
    let fresh = token(w.dir.str(), "acme", "owner");
    assert_eq!(w.server.request("GET", "/api/capabilities", Some(&fresh), None).status, 200);
    w.create("web");
    // Every file of the data directory, its artifact store and job scratch space included.
    let mut files = Vec::new();
    let mut dirs = vec![w.dir.path().to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() { dirs.push(path) } else { files.push(path) }
        }
    }
    // On PostgreSQL, the database's tokens table stands in for the database file.
    let mut stored = Vec::new();
    match svc_e2e::service::postgres_sql(w.dir.path(), "SELECT * FROM tokens") {
        Some(rows) => {
            assert_eq!(rows.lines().count(), 2, "two tokens: {rows}");
            stored.push(("the tokens table".to_owned(), rows.into_bytes()));
        }
        None => assert!(files.len() >= 2, "{files:?}"),
    }
    for path in files {
        stored.push((path.display().to_string(), std::fs::read(&path).expect("read")));
    }
    for (path, bytes) in stored {
        for t in [&w.token, &fresh] {
            let secret = t.trim_start_matches("svc_").as_bytes();
            assert!(!bytes.windows(secret.len()).any(|win| win == secret), "{path} holds a token in plaintext");
        }
    }
}

/// An idle server stopped by Ctrl-C used to exit 0 now and then: the service's own SIGINT
/// listener could finish before `svc` had recorded the Ctrl-C.
#[test]
fn ctrl_c_on_an_idle_server_exits_130_every_time() {
    for round in 0..3 {
        let dir = TempDir::new("idle-int");
        let mut server = Server::start(dir.path(), &[]);
        server.signal("INT");
        let status = server.wait(Duration::from_secs(10)).expect("exits within 10 s");
        assert_eq!(status.code(), Some(130), "round {round}: {status:?}\n{}", server.stderr());
        assert!(!server.stderr().contains("panicked"), "{}", server.stderr());
    }
}
