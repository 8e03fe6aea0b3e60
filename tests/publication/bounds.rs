//! Bounded answers and numbers in range (issue 14, points 5 and 6), against the real server:
//! a manifest with hundreds of thousands of problems gets a small 422, thirty of them left
//! unread give their memory back, and a fence that does not fit its type is refused.

use std::io::{ErrorKind, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use svc_e2e::service::{Response, http};

use super::{World, v5};

/// `a: 1` lines: the most a 1 MiB JSON body holds as a string (each line is 6 bytes escaped),
/// an 870 KB manifest of 173,999 duplicate keys.
const LINES: usize = 174_000;

/// The server's resident memory, in KiB (`VmRSS` of /proc/PID/status).
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc/PID/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS")
}

fn publication_head(w: &World, app: &str, len: usize) -> String {
    format!(
        "POST /api/applications/{app}/policy-versions HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/json\r\nContent-Length: {len}\r\nConnection: close\r\n\r\n",
        w.server.addr, w.token
    )
}

fn raw_publish(w: &World, app: &str, body: &[u8]) -> Response {
    let auth = format!("Bearer {}", w.token);
    http(
        w.server.addr,
        "POST",
        &format!("/api/applications/{app}/policy-versions"),
        &[("Authorization", &auth)],
        Some(body),
    )
}

/// Whether the server has started answering on `stream` (without reading the answer).
fn answered(stream: &TcpStream) -> bool {
    let mut byte = [0u8; 1];
    matches!(stream.peek(&mut byte), Ok(n) if n > 0)
}

#[test]
fn nine_hundred_kb_of_a_colon_one_lines_get_a_small_422_and_thirty_unread_ones_give_memory_back() {
    let w = World::new("bounded-answers");
    w.create("web");
    let body = serde_json::to_vec(&json!({"manifest": "a: 1\n".repeat(LINES)})).expect("json");
    assert!(body.len() <= manifest_core::service::MAX_BODY_BYTES, "{} bytes", body.len());
    // Before any heavy request: the pre-load value.
    let pid = w.server.pid();
    let before = rss_kib(pid);

    // One, read in full: a small 422 with exactly 1,000 problems and the truncation entry.
    let r = raw_publish(&w, "web", &body);
    assert_eq!(r.status, 422, "{}", String::from_utf8_lossy(&r.body));
    assert!(r.body.len() < 1_000_000, "the 422 is {} bytes", r.body.len());
    let answer = r.json();
    let diagnostics = answer["error"]["diagnostics"].as_array().expect("diagnostics");
    assert_eq!(diagnostics.len(), manifest_core::MAX_DIAGNOSTICS + 1);
    let codes: Vec<&str> = diagnostics.iter().filter_map(|d| d["code"].as_str()).collect();
    assert_eq!(codes[0], "missing_required_field", "document order: the whole document's problem first");
    assert!(codes[1..1000].iter().all(|&c| c == "duplicate_key"));
    let last = &diagnostics[1000];
    assert_eq!((last["code"].as_str(), last["pointer"].as_str()), (Some("diagnostics_truncated"), Some("")));
    let omitted = LINES - 1 + 1 - manifest_core::MAX_DIAGNOSTICS;
    assert!(
        last["message"].as_str().is_some_and(|m| m.starts_with(&format!("{omitted} more problems not shown"))),
        "{last}"
    );

    // Thirty more, sent and never read. Large bodies are read two per tenant at a time (issue
    // 39, point 5): one sent while two are being read is refused with a 503 and its connection
    // closed unread, so its writer may see the pipe break. That one is answered too.
    let head = publication_head(&w, "web", body.len());
    let mut refused_unread = 0;
    let unread: Vec<TcpStream> = (0..30)
        .filter_map(|_| {
            let mut s = TcpStream::connect(w.server.addr).expect("connect");
            let sent = s.write_all(head.as_bytes()).and_then(|()| s.write_all(&body));
            match sent {
                Ok(()) => {}
                Err(e) if matches!(e.kind(), ErrorKind::BrokenPipe | ErrorKind::ConnectionReset) => {
                    refused_unread += 1;
                    return None;
                }
                Err(e) => panic!("sending a publication: {e}"),
            }
            s.set_read_timeout(Some(Duration::from_millis(50))).expect("timeout");
            Some(s)
        })
        .collect();
    eprintln!("{refused_unread} of 30 refused before their body was sent");
    // Validation runs off the async runtime: others are served meanwhile.
    let started = Instant::now();
    let others = w.server.request("GET", "/api/capabilities", Some(&w.token), None);
    assert_eq!(others.status, 200);
    assert!(started.elapsed() < Duration::from_secs(5), "a GET took {:?} during the load", started.elapsed());
    let deadline = Instant::now() + Duration::from_secs(300);
    while !unread.iter().all(answered) {
        assert!(Instant::now() < deadline, "30 publications not all answered within 300 s");
        std::thread::sleep(Duration::from_millis(200));
    }
    drop(unread);

    // The sockets are closed: the memory comes back (the allocator gets to run on a few light
    // requests, as a live server does).
    std::thread::sleep(Duration::from_secs(2));
    for _ in 0..10 {
        assert_eq!(w.server.request("GET", "/api/capabilities", Some(&w.token), None).status, 200);
    }
    let after = rss_kib(pid);
    eprintln!("svc serve RSS: {before} KiB before the load, {after} KiB after it");
    // Measured (docs/performance.md, "Memory after load"), debug build: 22 MB before, 36-47 MB
    // after (the allocator's cache on the blocking threads that validated); in the issue, 160 MB
    // before and 1.1 GB after. Generous: 64 MiB more than before.
    assert!(after <= before + 64 * 1024, "RSS {before} KiB before the load, {after} KiB after it");
}

#[test]
fn pointer_version_of_two_to_the_64_is_refused_not_ignored() {
    let w = World::new("pointer-version-range");
    w.create("web");
    w.accept_source("web");
    let manifest = v5("web").to_string();
    for bad in ["18446744073709551616", "340282366920938463463374607431768211456", "-1", "1.5", "\"0\""] {
        let body = format!(r#"{{"manifest": {manifest}, "expectedActivePointerVersion": {bad}}}"#);
        let r = raw_publish(&w, "web", body.as_bytes());
        assert_eq!(r.status, 400, "{bad}: {}", String::from_utf8_lossy(&r.body));
        let error: Value = r.json()["error"].clone();
        assert_eq!(error["code"], "invalid_request_body", "{bad}");
        assert!(
            error["message"].as_str().is_some_and(|m| m.contains("/expectedActivePointerVersion")),
            "{bad}: {error}"
        );
    }
    // Nothing was committed: the application is as created.
    let app = w.get("/api/applications/web");
    assert_eq!((app["status"].as_str(), app["activePointerVersion"].as_u64()), (Some("disabled"), Some(0)));
    assert_eq!(w.get("/api/applications/web/policy-versions")["policyVersions"], json!([]));
    // The largest fence that fits is read and judged: 409, not ignored.
    let body = format!(r#"{{"manifest": {manifest}, "expectedActivePointerVersion": 18446744073709551615}}"#);
    let r = raw_publish(&w, "web", body.as_bytes());
    assert_eq!(r.status, 409, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["error"]["code"], "active_pointer_version_conflict");
}
