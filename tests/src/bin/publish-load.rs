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
//!
//! With `--database postgres [--instances N] [--organizations N]` the store is a throwaway
//! PostgreSQL cluster with PostgreSQL's default durability, shared by `N` instances (the
//! connections spread over them), and there are three floors, each `pgbench` on the same
//! cluster with the same clients, in the same rounds:
//! - **versions numbered per application, bare** (the goal's floor, `docs/decisions.md`):
//!   a transaction bumps its application's counter and inserts a policy-sized version under
//!   that number, so versions of one application are numbered in turn and each is durable
//!   before the next is numbered, as a publication's are;
//! - one policy-sized INSERT per transaction, which orders nothing (for reference);
//! - the same write a publication commits, bare: `pgbench` calling `svc_publish_decided`
//!   (the checked write under the writers' lock) for another application, with a real
//!   version's texts and no service in front; it says what the service costs on top of the
//!   database's own work for the same rows.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use serde_json::json;
use svc_e2e::service::{Server, TempDir, accept_build, admin, attach_database, token};

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
    let mut instances = 1usize;
    let mut organizations = 1usize;
    let mut postgres = false;
    let args: Vec<String> = std::env::args().skip(1).collect();
    for pair in args.chunks(2) {
        match (pair[0].as_str(), pair.get(1).map(String::as_str)) {
            // Zero requests or connections would measure nothing and divide by zero.
            ("--requests", Some(n)) if positive(n).is_some() => requests = positive(n).unwrap_or(requests),
            ("--connections", Some(n)) if positive(n).is_some() => connections = positive(n).unwrap_or(connections),
            ("--instances", Some(n)) if positive(n).is_some() => instances = positive(n).unwrap_or(instances),
            ("--organizations", Some(n)) if positive(n).is_some() => {
                organizations = positive(n).unwrap_or(organizations);
            }
            ("--database", Some("postgres")) => postgres = true,
            ("--database", Some("sqlite")) => postgres = false,
            _ => {
                eprintln!(
                    "usage: publish-load [--requests N] [--connections C] [--database sqlite|postgres] [--instances N] \
                     [--organizations N]"
                );
                std::process::exit(2);
            }
        }
    }
    if instances > 1 && !postgres {
        eprintln!("publish-load: several instances share a PostgreSQL database: add --database postgres");
        std::process::exit(2);
    }
    let cluster = postgres.then(|| svc_pg_cluster::Cluster::start_durable().expect("a PostgreSQL cluster"));
    let dir = TempDir::new("load");
    let dirs: Vec<std::path::PathBuf> = (0..instances).map(|i| dir.path().join(format!("instance-{i}"))).collect();
    for d in &dirs {
        std::fs::create_dir_all(d).expect("a data directory");
        if let Some(c) = &cluster {
            attach_database(d, &c.svc_url());
        }
    }
    let first = dirs[0].to_str().expect("utf-8");
    // Connection `i` publishes application `load` of organization `i mod n`.
    let names: Vec<String> =
        if organizations == 1 { vec!["acme".into()] } else { (0..organizations).map(|i| format!("acme{i}")).collect() };
    let tokens: Vec<String> = names
        .iter()
        .map(|org| {
            let t = token(first, org, "developer");
            admin(&["entitlement", "set", "--data-dir", first, "--org", org, "enterprise"]);
            admin(&["spend-authority", "set", "--data-dir", first, "--org", org, "--micros", "1000000"]);
            accept_build(first, org, "load");
            t
        })
        .collect();
    if postgres {
        // The same-write floor's application (`SameWrite`).
        accept_build(first, &names[0], "floor");
    }
    let servers: Vec<Server> = dirs.iter().map(|d| Server::start(d, &[])).collect();
    let addrs: Vec<SocketAddr> = servers.iter().map(|s| s.addr).collect();
    for t in &tokens {
        let created = servers[0].request("POST", "/api/applications", Some(t), Some(&json!({"applicationId": "load"})));
        assert_eq!(created.status, 201);
    }

    let manifest = std::fs::read_to_string(svc_e2e::workspace().join("examples/node-demo/manifest.yaml"))
        .expect("the demo manifest")
        .replace("applicationId: node-demo", "applicationId: load");
    let body = |dry: bool| serde_json::to_vec(&json!({"manifest": manifest, "dryRun": dry})).expect("json");

    let _warm = run(&addrs, &tokens, &body(true), 200, connections, "warm-up");
    // Interleaved rounds: this machine's speed (a VM) drifts by tens of percent over a minute,
    // so each round measures the three phases back to back and the ratio is taken per round.
    let per_round = requests.div_ceil(ROUNDS);
    let policy_size = 3000;
    let floor_dir = TempDir::new("floor");
    let floor_db = if cluster.is_none() { Some(sqlite_floor_open(floor_dir.path())) } else { None };
    let same_write = cluster.as_ref().map(|c| {
        c.sql("svc", "CREATE TABLE floor (id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, body TEXT NOT NULL)")
            .expect("the floor's table");
        SameWrite::prepare(c, &servers[0], &tokens[0], &manifest, floor_dir.path())
    });
    let numbered = cluster.as_ref().map(|c| Numbered::create(c, floor_dir.path(), organizations, policy_size));
    let (mut dry, mut commit) = (Vec::new(), Vec::new());
    let (mut insert_floor, mut same_floor, mut numbered_floor) =
        (Against::default(), Against::default(), Against::default());
    for _ in 0..ROUNDS {
        dry.push(run(&addrs, &tokens, &body(true), per_round, connections, "dry-run publish"));
        let c = run(&addrs, &tokens, &body(false), per_round, connections, "committed publish");
        let f = match (&floor_db, &cluster) {
            (Some(db), _) => sqlite_floor(db, per_round, policy_size),
            (None, Some(cluster)) => pgbench_floor(cluster, floor_dir.path(), per_round, connections, policy_size),
            (None, None) => unreachable!("a floor for each store"),
        };
        insert_floor.add(c.per_second, f);
        if let (Some(same), Some(cluster)) = (&same_write, &cluster) {
            same_floor.add(c.per_second, same.run(cluster, per_round, connections));
        }
        if let (Some(numbered), Some(cluster)) = (&numbered, &cluster) {
            numbered_floor.add(c.per_second, numbered.run(cluster, per_round, connections));
        }
        commit.push(c);
    }
    let (dry, commit) = (merge(dry), merge(commit));

    println!(
        "publish-load: {} requests per phase over {connections} keep-alive connections to {instances} instance(s) \
         and {organizations} organization(s) on {}, in {ROUNDS} interleaved rounds",
        per_round * ROUNDS,
        if cluster.is_some() { "PostgreSQL" } else { "SQLite" }
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
    let floor_name = if cluster.is_some() {
        format!(
            "pgbench on the same cluster ({connections} clients, fsync on, one {policy_size}-byte INSERT per transaction)"
        )
    } else {
        format!("bare SQLite transactions (WAL, synchronous=FULL, one {policy_size}-byte INSERT each)")
    };
    println!("| floor: {floor_name}, median round | {:.0} | | | |", insert_floor.median_floor());
    println!(
        "committed / floor: {} ({})",
        insert_floor.ratios(),
        if cluster.is_some() { "for reference; the goal's floor is the numbered one" } else { "goal: at least 50%" }
    );
    if !same_floor.is_empty() {
        println!(
            "same write, bare (pgbench calling svc_publish_decided, {connections} clients), median round: {:.0}/s; \
             committed / it: {}",
            same_floor.median_floor(),
            same_floor.ratios()
        );
    }
    if !numbered_floor.is_empty() {
        println!(
            "versions numbered per application, bare (pgbench: an application's counter UPDATE and one \
             {policy_size}-byte INSERT per transaction, {connections} clients over {organizations} application(s)), \
             median round: {:.0}/s; committed / it: {} (goal: at least 50%)",
            numbered_floor.median_floor(),
            numbered_floor.ratios()
        );
    }
    println!("committed p99: {:.2} ms (goal: under 20 ms)", ms(commit.p99));
    for server in servers {
        let _ = server.stop();
    }
}

/// A count of at least one.
fn positive(n: &str) -> Option<usize> {
    n.parse().ok().filter(|&n| n >= 1)
}

#[cfg(test)]
mod tests {
    #[test]
    fn zero_requests_or_connections_are_refused_not_divided_by() {
        assert_eq!(super::positive("0"), None);
        assert_eq!(super::positive("-1"), None);
        assert_eq!(super::positive("x"), None);
        assert_eq!(super::positive("3"), Some(3));
    }
}

/// Rounds of the interleaved measurement.
const ROUNDS: usize = 5;

/// One floor's rate in each round, and the commits' rate over it in the same round (the
/// machine's speed drifts between rounds, so ratios are taken per round).
#[derive(Default)]
struct Against {
    floors: Vec<f64>,
    ratios: Vec<f64>,
}

impl Against {
    fn add(&mut self, commits: f64, floor: f64) {
        self.floors.push(floor);
        self.ratios.push(commits / floor);
    }

    fn is_empty(&self) -> bool {
        self.floors.is_empty()
    }

    fn median_floor(&self) -> f64 {
        median(&self.floors)
    }

    /// "61% median of rounds (53%, 54%, 61%, 64%, 75%)".
    fn ratios(&self) -> String {
        let mut sorted = self.ratios.clone();
        sorted.sort_by(f64::total_cmp);
        let shown: Vec<String> = sorted.iter().map(|r| format!("{:.0}%", 100.0 * r)).collect();
        format!("{:.0}% median of rounds ({})", 100.0 * median(&sorted), shown.join(", "))
    }
}

fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted.get(sorted.len() / 2).copied().unwrap_or(f64::NAN)
}

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

/// `requests` publications over `connections` keep-alive connections, spread over the
/// instances at `addrs` (connection `i` to instance `i mod n`) and the organizations whose
/// `tokens` are given (connection `i` as organization `i mod n`).
fn run(
    addrs: &[SocketAddr],
    tokens: &[String],
    body: &[u8],
    requests: usize,
    connections: usize,
    name: &'static str,
) -> Phase {
    let per = requests.div_ceil(connections);
    let start = Instant::now();
    let results: Vec<(Duration, u16)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..connections)
            .map(|i| {
                let token = tokens[i % tokens.len()].as_str();
                s.spawn(move || client(addrs[i % addrs.len()], token, body, per))
            })
            .collect();
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

/// The same write a publication commits, bare: `pgbench` calls `svc_publish_decided` for an
/// application of its own (`floor`, published once through the service so that it is
/// active), with the texts of that real version and what a publication of it would have read
/// just before. Each call must write a version: a check that failed would write nothing and
/// pass for a fast floor, so the versions are counted.
struct SameWrite {
    script: std::path::PathBuf,
    /// The call's text parameters after the checked ones (`?8`-`?15` and the actor).
    texts: String,
}

/// What a publication of the floor's application reads before it writes (`?1`-`?7` but the
/// pause and the fence, which stay NULL), in the call's order.
const FLOOR_STATE: &str = "SELECT a.id || ', ' || o.inputs_rev || ', ' || a.settled || ', ' || quote_literal(a.status) \
     || ', NULL, NULL, ' || (SELECT CAST(COALESCE(SUM(v.jobs), 0) AS BIGINT) FROM applications b \
     JOIN policy_versions v ON v.application_id = b.id AND v.version = b.active_pointer_version \
     WHERE b.organization_id = a.organization_id AND b.id <> a.id AND b.status <> 'disabled' AND b.settled = 0) \
     FROM applications a JOIN organizations o ON o.id = a.organization_id WHERE a.application_id = 'floor'";

impl SameWrite {
    fn prepare(
        cluster: &svc_pg_cluster::Cluster,
        server: &Server,
        token: &str,
        manifest: &str,
        scratch: &std::path::Path,
    ) -> SameWrite {
        let created =
            server.request("POST", "/api/applications", Some(token), Some(&json!({"applicationId": "floor"})));
        assert_eq!(created.status, 201, "{}", String::from_utf8_lossy(&created.body));
        let manifest = manifest.replace("applicationId: load", "applicationId: floor");
        let published = server.request(
            "POST",
            "/api/applications/floor/policy-versions",
            Some(token),
            Some(&json!({"manifest": manifest})),
        );
        assert_eq!(published.status, 201, "{}", String::from_utf8_lossy(&published.body));
        // Texts travel as hex (any character survives psql), and go into the script as escape
        // literals with every colon escaped: pgbench reads `:name` as a variable.
        let hex = |column: &str| format!("encode(convert_to({column}, 'UTF8'), 'hex')");
        let columns = [
            "schema_version".to_owned(),
            hex("authored_digest"),
            hex("policy_digest"),
            hex("policy"),
            hex("authored"),
            "jobs".to_owned(),
            hex("execution"),
            hex("published_by"),
        ];
        let row = cluster
            .sql(
                "svc",
                &format!(
                    "SELECT {} FROM policy_versions p JOIN applications a ON p.application_id = a.id \
                     AND p.version = a.active_pointer_version WHERE a.application_id = 'floor'",
                    columns.map(|c| format!("{c}::text")).join(" || ',' || ")
                ),
            )
            .expect("the floor application's version");
        let v: Vec<&str> = row.split(',').collect();
        assert_eq!(v.len(), 8, "the floor application's version: {row}");
        let literal = |hex: &str| {
            let bytes: Vec<u8> = (0..hex.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex from the database"))
                .collect();
            let text = String::from_utf8(bytes).expect("utf-8 from the database");
            format!("E'{}'", text.replace('\\', "\\\\").replace('\'', "\\'").replace(':', "\\x3a"))
        };
        // The parameters a publication of it sends (`store/rows/decided.rs`), as literals.
        let texts = format!(
            "{}, {}, {}, {}, {}, {}, {}, {}, 'active', NULL, 0, 0, E'2026-11-27T00\\x3a00\\x3a00Z', {}, \
             'policy_published', NULL",
            v[0],
            literal(v[1]),
            literal(v[2]),
            literal(v[3]),
            literal(v[4]),
            v[5],
            literal(v[6]),
            literal(v[7]),
            literal(v[7])
        );
        SameWrite { script: scratch.join("same-write.sql"), texts }
    }

    /// Calls per second, `n` in all over `clients` clients (prepared, as the service sends
    /// them), each as a publication would make it now.
    fn run(&self, cluster: &svc_pg_cluster::Cluster, n: usize, clients: usize) -> f64 {
        let state = cluster.sql("svc", FLOOR_STATE).expect("the floor application's state");
        let call = format!("SELECT svc_publish_decided({state}, {});\n", self.texts);
        std::fs::write(&self.script, &call).expect("the script");
        let count = || {
            let sql = "SELECT count(*) FROM policy_versions p JOIN applications a ON a.id = p.application_id \
                       WHERE a.application_id = 'floor'";
            cluster.sql("svc", sql).expect("count").parse::<usize>().expect("a count")
        };
        let before = count();
        let per_client = n.div_ceil(clients);
        let tps = pgbench(cluster, &self.script, per_client, clients, &["-M", "prepared"]);
        let written = count() - before;
        assert_eq!(written, per_client * clients, "every call of the floor wrote its version: {call:.600}");
        tps
    }
}

/// The INSERT floor with what a publication cannot drop: versions of one application are
/// numbered in turn, and a version is durable before the next one is numbered (the lock on the
/// application's counter is held through the commit's flush). Each transaction bumps its
/// application's counter and inserts the version under that number, `pgbench`'s client `i`
/// writing application `i mod applications` as the service's connection `i` publishes the
/// application of organization `i mod n`.
struct Numbered {
    script: std::path::PathBuf,
}

impl Numbered {
    fn create(
        cluster: &svc_pg_cluster::Cluster,
        scratch: &std::path::Path,
        applications: usize,
        size: usize,
    ) -> Numbered {
        cluster
            .sql("svc", "CREATE TABLE floor_application (id BIGINT PRIMARY KEY, version BIGINT NOT NULL)")
            .expect("the numbered floor's applications");
        cluster
            .sql(
                "svc",
                "CREATE TABLE floor_version (application BIGINT NOT NULL, version BIGINT NOT NULL, \
                 body TEXT NOT NULL, PRIMARY KEY (application, version))",
            )
            .expect("the numbered floor's versions");
        cluster
            .sql("svc", &format!("INSERT INTO floor_application SELECT i, 0 FROM generate_series(1, {applications}) i"))
            .expect("the numbered floor's applications");
        let script = scratch.join("numbered.sql");
        let text = format!(
            "\\set application :client_id % {applications} + 1\n\
             BEGIN;\n\
             UPDATE floor_application SET version = version + 1 WHERE id = :application RETURNING version \\gset\n\
             INSERT INTO floor_version VALUES (:application, :version, repeat('x', {size}));\n\
             END;\n"
        );
        std::fs::write(&script, text).expect("the script");
        Numbered { script }
    }

    /// Transactions per second, `n` in all over `clients` clients, counting that each wrote
    /// its version.
    fn run(&self, cluster: &svc_pg_cluster::Cluster, n: usize, clients: usize) -> f64 {
        let count = || {
            let sql = "SELECT count(*) FROM floor_version";
            cluster.sql("svc", sql).expect("count").parse::<usize>().expect("a count")
        };
        let before = count();
        let per_client = n.div_ceil(clients);
        let tps = pgbench(cluster, &self.script, per_client, clients, &[]);
        assert_eq!(count() - before, per_client * clients, "every transaction of the numbered floor wrote its version");
        tps
    }
}

/// `pgbench` transactions per second on the cluster: `clients` clients, `n` transactions in
/// all, each one INSERT of a `size`-byte row (what a publication's version row weighs).
fn pgbench_floor(
    cluster: &svc_pg_cluster::Cluster,
    scratch: &std::path::Path,
    n: usize,
    clients: usize,
    size: usize,
) -> f64 {
    let script = scratch.join("floor.sql");
    std::fs::write(&script, format!("INSERT INTO floor (body) VALUES (repeat('x', {size}));\n")).expect("the script");
    pgbench(cluster, &script, n.div_ceil(clients), clients, &[])
}

/// `pgbench` running `script` `per_client` times from each of `clients` clients: transactions
/// per second.
fn pgbench(
    cluster: &svc_pg_cluster::Cluster,
    script: &std::path::Path,
    per_client: usize,
    clients: usize,
    options: &[&str],
) -> f64 {
    let out = std::process::Command::new(cluster.program("pgbench"))
        .args(["-n", "-h", "127.0.0.1", "-U", "postgres", "-p", &cluster.port().to_string()])
        .args(["-c", &clients.to_string(), "-j", &clients.to_string()])
        .args(options)
        .args(["-t", &per_client.to_string(), "-f"])
        .arg(script)
        .arg("svc")
        .output()
        .expect("pgbench runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "pgbench: {}{text}", String::from_utf8_lossy(&out.stderr));
    text.lines()
        .find_map(|l| l.strip_prefix("tps = ")?.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no tps in pgbench's output: {text}"))
}
