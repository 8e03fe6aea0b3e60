//! Floods of large requests and what they cost a server (issue 39, point 5): raw requests whose
//! answer may come before their body is read, and a process's resident memory from
//! /proc/PID/status, sampled while the flood runs.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::service::{Response, parse_response};

/// A field of /proc/PID/status in KiB (`VmRSS`: resident now, `VmHWM`: the peak so far).
pub fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc/PID/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("{field} in /proc/{pid}/status"))
}

/// One request with a bearer token and `Connection: close` on a fresh connection: the head,
/// then the body from a thread of its own while the answer is read (a refusal may come before
/// the body is read, and the server then closes without reading it: a failed write is no
/// error). The answer, and how long it took from connecting.
pub fn send(addr: SocketAddr, token: &str, method: &str, path: &str, body: Arc<Vec<u8>>) -> (Response, Duration) {
    let started = Instant::now();
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream.set_read_timeout(Some(Duration::from_secs(120))).expect("timeout");
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let mut writer = stream.try_clone().expect("a second handle");
    let sending = std::thread::spawn(move || {
        if writer.write_all(head.as_bytes()).is_ok() {
            let _ = writer.write_all(&body);
        }
    });
    let mut raw = Vec::new();
    let read = stream.read_to_end(&mut raw);
    let took = started.elapsed();
    // A refused body's writer ends with the connection.
    let _ = stream.shutdown(std::net::Shutdown::Both);
    let _ = sending.join();
    assert!(read.is_ok() || !raw.is_empty(), "{method} {path}: no answer ({read:?} after {took:?})");
    (parse_response(&raw), took)
}

/// The highest `VmRSS` of a process while it runs, sampled every 20 ms.
pub struct PeakRss {
    peak_kib: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

impl PeakRss {
    /// Samples `pid` until [`PeakRss::finish`].
    pub fn start(pid: u32) -> PeakRss {
        let (peak_kib, stop) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicBool::new(false)));
        let (peak, stopped) = (peak_kib.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            while !stopped.load(Ordering::Relaxed) {
                peak.fetch_max(status_kib(pid, "VmRSS"), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        PeakRss { peak_kib, stop, thread }
    }

    /// The highest `VmRSS` seen, in KiB.
    pub fn finish(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.thread.join();
        self.peak_kib.load(Ordering::Relaxed)
    }
}

/// The statuses of `answers`, counted.
pub fn statuses<'a>(answers: impl IntoIterator<Item = &'a Response>) -> std::collections::BTreeMap<u16, usize> {
    let mut counted = std::collections::BTreeMap::new();
    for r in answers {
        *counted.entry(r.status).or_default() += 1;
    }
    counted
}

/// Checks a refusal for now: 503, `Retry-After` in seconds, the usual envelope with the code
/// `too_many_large_bodies`, a request id.
pub fn assert_busy(r: &Response) {
    assert_eq!(r.status, 503, "{}", String::from_utf8_lossy(&r.body));
    let retry: Option<u64> = r.header("retry-after").and_then(|v| v.parse().ok());
    assert!(retry.is_some_and(|s| (1..=60).contains(&s)), "Retry-After in seconds: {:?}", r.headers);
    let envelope = r.json();
    assert_eq!(envelope["error"]["code"], "too_many_large_bodies", "{envelope:#}");
    assert!(envelope["error"]["message"].as_str().is_some_and(|m| m.contains("large request bodies")), "{envelope:#}");
    assert!(r.header("svc-request-id").is_some_and(|id| id.starts_with("req_")), "{:?}", r.headers);
}
