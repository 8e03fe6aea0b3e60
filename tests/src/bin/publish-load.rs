//! Load benchmark of the publication service, beside its floor measured in the same run.
//!
//! Starts the real `svc serve` (release build) on loopback over a fresh data directory, then
//! drives `POST /api/applications/{id}/policy-versions` from several keep-alive connections:
//! first dry runs, then committed publishes. The floor is bare SQLite on the same machine with
//! the service's durability settings (WAL, `synchronous = FULL`): one INSERT of a policy-sized
//! row per transaction, back to back. Bounded in count: `--requests` per phase (default 2000).
//!
//! ```sh
//! cargo build --release -p svc-cli && cargo run --release -p svc-e2e --bin publish-load
//! ```

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use serde_json::json;
use svc_e2e::service::{Server, TempDir, accept_build, admin, token};

struct Phase {
    name: &'static str,
    per_second: f64,
    p50: Duration,
    p99: Duration,
    statuses: Vec<u16>,
    latencies: Vec<Duration>,
}

fn main() {
    let mut requests = 2000usize;
    let mut connections = 4usize;
    let args: Vec<String> = std::env::args().skip(1).collect();
    for pair in args.chunks(2) {
        match (pair[0].as_str(), pair.get(1).and_then(|v| v.parse().ok())) {
            ("--requests", Some(n)) => requests = n,
            ("--connections", Some(n)) => connections = n,
            _ => {
                eprintln!("usage: publish-load [--requests N] [--connections C]");
                std::process::exit(2);
            }
        }
    }
    let dir = TempDir::new("load");
    let t = token(dir.str(), "acme", "developer");
    admin(&["entitlement", "set", "--data-dir", dir.str(), "--org", "acme", "enterprise"]);
    admin(&["spend-authority", "set", "--data-dir", dir.str(), "--org", "acme", "--micros", "1000000"]);
    accept_build(dir.str(), "acme", "load");
    let server = Server::start(dir.path(), &[]);
    let created = server.request("POST", "/api/applications", Some(&t), Some(&json!({"applicationId": "load"})));
    assert_eq!(created.status, 201);

    let manifest = std::fs::read_to_string(svc_e2e::workspace().join("examples/node-demo/manifest.yaml"))
        .expect("the demo manifest")
        .replace("applicationId: node-demo", "applicationId: load");
    let body = |dry: bool| serde_json::to_vec(&json!({"manifest": manifest, "dryRun": dry})).expect("json");

    let _warm = run(server.addr, &t, &body(true), 200, connections, "warm-up");
    // Interleaved rounds: this machine's speed (a VM) drifts by tens of percent over a minute,
    // so each round measures the three phases back to back and the ratio is taken per round.
    let per_round = requests.div_ceil(ROUNDS);
    let policy_size = 3000;
    let floor_dir = TempDir::new("floor");
    let floor_db = sqlite_floor_open(floor_dir.path());
    let (mut dry, mut commit, mut floors, mut ratios) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        dry.push(run(server.addr, &t, &body(true), per_round, connections, "dry-run publish"));
        let c = run(server.addr, &t, &body(false), per_round, connections, "committed publish");
        let f = sqlite_floor(&floor_db, per_round, policy_size);
        ratios.push(c.per_second / f);
        floors.push(f);
        commit.push(c);
    }
    let (dry, commit) = (merge(dry), merge(commit));
    ratios.sort_by(f64::total_cmp);
    floors.sort_by(f64::total_cmp);
    let floor = floors[floors.len() / 2];

    println!(
        "publish-load: {} requests per phase over {connections} keep-alive connections, in {ROUNDS} interleaved rounds",
        per_round * ROUNDS
    );
    println!("| Phase | Per second | p50 | p99 | Statuses |");
    println!("|---|---|---|---|---|");
    for p in [&dry, &commit] {
        let ok = p.statuses.iter().filter(|s| **s == 200 || **s == 201).count();
        println!(
            "| {} | {:.0} | {:.2} ms | {:.2} ms | {ok}/{} 2xx |",
            p.name,
            p.per_second,
            ms(p.p50),
            ms(p.p99),
            p.statuses.len()
        );
    }
    println!(
        "| floor: bare SQLite transactions (WAL, synchronous=FULL, one {policy_size}-byte INSERT each), median round | {floor:.0} | | | |"
    );
    let shown: Vec<String> = ratios.iter().map(|r| format!("{:.0}%", 100.0 * r)).collect();
    println!(
        "committed / floor: {:.0}% median of rounds ({}) (goal: at least 50%)",
        100.0 * ratios[ratios.len() / 2],
        shown.join(", ")
    );
    println!("committed p99: {:.2} ms (goal: under 20 ms)", ms(commit.p99));
    let _ = server.stop();
}

/// Rounds of the interleaved measurement.
const ROUNDS: usize = 5;

/// One phase's rounds as one: total rate, latencies over every request.
fn merge(rounds: Vec<Phase>) -> Phase {
    let name = rounds.first().map_or("", |p| p.name);
    let seconds: f64 = rounds.iter().map(|p| p.latencies.len() as f64 / p.per_second).sum();
    let mut latencies: Vec<Duration> = rounds.iter().flat_map(|p| p.latencies.iter().copied()).collect();
    latencies.sort();
    let statuses: Vec<u16> = rounds.iter().flat_map(|p| p.statuses.iter().copied()).collect();
    let at = |q: f64| latencies[((latencies.len() as f64 * q) as usize).min(latencies.len() - 1)];
    Phase {
        name,
        per_second: latencies.len() as f64 / seconds,
        p50: at(0.5),
        p99: at(0.99),
        statuses,
        latencies: Vec::new(),
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn run(addr: SocketAddr, token: &str, body: &[u8], requests: usize, connections: usize, name: &'static str) -> Phase {
    let per = requests.div_ceil(connections);
    let start = Instant::now();
    let results: Vec<(Duration, u16)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..connections).map(|_| s.spawn(move || client(addr, token, body, per))).collect();
        handles.into_iter().flat_map(|h| h.join().expect("client")).collect()
    });
    let elapsed = start.elapsed();
    let mut latencies: Vec<Duration> = results.iter().map(|r| r.0).collect();
    latencies.sort();
    let at = |q: f64| latencies[((latencies.len() as f64 * q) as usize).min(latencies.len() - 1)];
    Phase {
        name,
        per_second: results.len() as f64 / elapsed.as_secs_f64(),
        p50: at(0.50),
        p99: at(0.99),
        statuses: results.iter().map(|r| r.1).collect(),
        latencies,
    }
}

/// One keep-alive connection sending `n` publications one after another.
fn client(addr: SocketAddr, token: &str, body: &[u8], n: usize) -> Vec<(Duration, u16)> {
    let stream = TcpStream::connect(addr).expect("connect");
    stream.set_nodelay(true).expect("nodelay");
    let mut writer = stream.try_clone().expect("clone");
    let mut reader = BufReader::new(stream);
    let head = format!(
        "POST /api/applications/load/policy-versions HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let sent = Instant::now();
        writer.write_all(head.as_bytes()).expect("write");
        writer.write_all(body).expect("write");
        let mut status = 0u16;
        let mut length = 0usize;
        let mut line = String::new();
        loop {
            line.clear();
            reader.read_line(&mut line).expect("read");
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some(code) = l.strip_prefix("HTTP/1.1 ") {
                status = code.get(..3).and_then(|c| c.parse().ok()).unwrap_or(0);
            } else if let Some((name, value)) = l.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse().unwrap_or(0);
            }
        }
        let mut response = vec![0u8; length];
        reader.read_exact(&mut response).expect("body");
        out.push((sent.elapsed(), status));
    }
    out
}

/// A database with the service's durability settings, for the floor.
fn sqlite_floor_open(dir: &std::path::Path) -> rusqlite::Connection {
    let conn = rusqlite::Connection::open(dir.join("floor.sqlite3")).expect("open");
    conn.pragma_update(None, "journal_mode", "WAL").expect("wal");
    conn.pragma_update(None, "synchronous", "FULL").expect("full");
    conn.execute_batch("CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT NOT NULL)").expect("table");
    conn
}

/// Bare SQLite transactions per second: one INSERT each, back to back.
fn sqlite_floor(conn: &rusqlite::Connection, n: usize, size: usize) -> f64 {
    let row = "x".repeat(size);
    let start = Instant::now();
    for _ in 0..n {
        conn.execute_batch("BEGIN IMMEDIATE").expect("begin");
        conn.execute("INSERT INTO t (body) VALUES (?1)", [&row]).expect("insert");
        conn.execute_batch("COMMIT").expect("commit");
    }
    n as f64 / start.elapsed().as_secs_f64()
}
