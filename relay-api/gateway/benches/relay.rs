//! The gateway's relay copying through user space vs splicing, on loopback.
//!
//! Client threads talk through the relay (the gateway's own code, on a 2-worker tokio runtime
//! as the gateway runs) to server threads, under three loads: bulk on 1 connection and on 8
//! (the clients send, the servers read and discard), and requests on 16 connections (200-byte
//! request, 2 KiB response, one at a time on each: the cost of a short burst). The modes are
//! interleaved, their order rotated each round. Prints the rate (over wall time until every
//! server has seen its end) and on-CPU time per GiB or per exchange of the relay (the runtime's
//! worker threads), the clients and the servers, from `/proc/self/task/*/schedstat` and
//! `/proc/thread-self/schedstat`. Clients and servers share the cores with the relay, as the
//! agent and the public client do in production, so less relay CPU leaves more for them,
//! unless it makes their own work dearer: their columns tell.
//!
//! ```sh
//! cargo bench -p relay-gateway --bench relay   # env: RELAY_BENCH_MIB=2048 RELAY_BENCH_EXCHANGES=40000 RELAY_BENCH_ROUNDS=3
//! ```

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener as StdListener, TcpStream as StdStream};
use std::path::Path;
use std::thread;
use std::time::Instant;

use tokio::net::TcpListener;
use tokio::runtime::Runtime;

// The relay is private to the gateway; the benchmark compiles the very same files. `cargo
// bench` sets `cfg(test)`, which brings in the relay's unit-test helpers without the tests.
#[path = "../src/relay/mod.rs"]
#[allow(dead_code, unused_imports)]
mod relay;

use relay::Mode;
use relay_wire::idle::{Activity, Timeouts};

/// The runtime's worker threads' name, to find their CPU time.
const WORKER: &str = "relay-bench-rt";
const REQUEST: usize = 200;
const RESPONSE: usize = 2048;

/// What the clients do.
#[derive(Clone, Copy)]
enum Load {
    /// Each of `streams` connections sends its share of `bytes`.
    Bulk { streams: usize, bytes: usize },
    /// Each of `conns` connections does its share of `exchanges`, one at a time.
    Requests { conns: usize, exchanges: usize },
}

impl Load {
    fn conns(self) -> usize {
        match self {
            Load::Bulk { streams, .. } => streams,
            Load::Requests { conns, .. } => conns,
        }
    }

    fn label(self) -> String {
        match self {
            Load::Bulk { streams, .. } => format!("bulk x{streams}: MiB/s, CPU ms/GiB"),
            Load::Requests { conns, .. } => format!("requests x{conns}: exchanges/s, CPU µs each"),
        }
    }

    /// The amounts the rate and the CPU times are counted per (MiB and GiB, or exchanges),
    /// and the nanoseconds in the CPU time's unit (ms or µs).
    fn units(self) -> (f64, f64, f64) {
        match self {
            Load::Bulk { bytes, .. } => (bytes as f64 / (1 << 20) as f64, bytes as f64 / (1u64 << 30) as f64, 1e6),
            Load::Requests { exchanges, .. } => (exchanges as f64, exchanges as f64, 1e3),
        }
    }

    /// The client's side of one connection.
    fn client(self, mut conn: StdStream) {
        match self {
            Load::Bulk { streams, bytes } => {
                let chunk = vec![0x5a; 1 << 20];
                let mut left = bytes / streams;
                while left > 0 {
                    let n = left.min(chunk.len());
                    conn.write_all(&chunk[..n]).expect("send");
                    left -= n;
                }
            }
            Load::Requests { conns, exchanges } => {
                let mut response = [0; RESPONSE];
                for _ in 0..exchanges / conns {
                    conn.write_all(&[1; REQUEST]).expect("request");
                    conn.read_exact(&mut response).expect("response");
                }
            }
        }
        conn.shutdown(Shutdown::Write).expect("shutdown");
        // The relay closes this side once the server has closed its own.
        let _ = conn.read_to_end(&mut Vec::new());
    }

    /// The server's side of one connection; returns the bytes it read.
    fn server(self, mut conn: StdStream) -> usize {
        let mut got = 0;
        match self {
            Load::Bulk { .. } => {
                let mut buf = vec![0; 256 * 1024];
                loop {
                    match conn.read(&mut buf).expect("server read") {
                        0 => break,
                        n => got += n,
                    }
                }
            }
            Load::Requests { .. } => {
                let mut request = [0; REQUEST];
                while conn.read_exact(&mut request).is_ok() {
                    conn.write_all(&[2; RESPONSE]).expect("respond");
                    got += REQUEST;
                }
            }
        }
        got
    }

    /// The bytes each way (client to server, back) when the load is done.
    fn expected(self) -> (u64, u64) {
        match self {
            Load::Bulk { streams, bytes } => ((bytes / streams * streams) as u64, 0),
            Load::Requests { conns, exchanges } => {
                let n = (exchanges / conns * conns) as u64;
                (n * REQUEST as u64, n * RESPONSE as u64)
            }
        }
    }
}

/// One run's rate and CPU times (relay, clients, servers), in the load's units.
type Sample = [f64; 4];

fn main() {
    let mib: usize = env_or("RELAY_BENCH_MIB", 2048);
    let exchanges: usize = env_or("RELAY_BENCH_EXCHANGES", 40_000);
    let rounds: usize = env_or("RELAY_BENCH_ROUNDS", 3);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name(WORKER)
        .enable_all()
        .build()
        .expect("runtime");
    let modes = [Mode::Copy, Mode::FASTEST];
    let loads = [
        Load::Bulk { streams: 1, bytes: mib << 20 },
        Load::Bulk { streams: 8, bytes: mib << 20 },
        Load::Requests { conns: 16, exchanges },
    ];
    let mut results = vec![vec![Vec::<Sample>::new(); modes.len()]; loads.len()];
    println!("{mib} MiB per bulk run, {exchanges} exchanges per requests run, {rounds} rounds");
    println!("| Round | Load | Mode | rate | CPU: relay | clients | servers |\n|---|---|---|---|---|---|---|");
    for round in 0..rounds {
        for (l, &load) in loads.iter().enumerate() {
            let mut order: Vec<usize> = (0..modes.len()).collect();
            order.rotate_left(round % modes.len());
            for m in order {
                let s = run(&rt, modes[m], load);
                println!(
                    "| {round} | {} | {:?} | {:.0} | {:.1} | {:.1} | {:.1} |",
                    load.label(),
                    modes[m],
                    s[0],
                    s[1],
                    s[2],
                    s[3]
                );
                results[l][m].push(s);
            }
        }
    }
    println!("\nMedians:\n| Load | Mode | rate | CPU: relay | clients | servers |\n|---|---|---|---|---|---|");
    for (l, load) in loads.iter().enumerate() {
        for (m, mode) in modes.iter().enumerate() {
            let med = |i: usize| median(results[l][m].iter().map(|s| s[i]).collect());
            println!("| {} | {mode:?} | {:.0} | {:.1} | {:.1} | {:.1} |", load.label(), med(0), med(1), med(2), med(3));
        }
    }
}

/// Runs `load` through the relay in `mode`.
fn run(rt: &Runtime, mode: Mode, load: Load) -> Sample {
    let conns = load.conns();
    let server = StdListener::bind("127.0.0.1:0").expect("bind server");
    let server_addr = server.local_addr().expect("server addr");
    let public = rt.block_on(TcpListener::bind("127.0.0.1:0")).expect("bind relay");
    let public_addr = public.local_addr().expect("relay addr");
    let relays = rt.spawn(relay_all(public, server_addr, conns, mode));
    let servers = thread::spawn(move || {
        let threads: Vec<_> = (0..conns)
            .map(|_| {
                let (conn, _) = server.accept().expect("accept server");
                thread::spawn(move || (load.server(conn), own_cpu_ns()))
            })
            .collect();
        threads.into_iter().map(|t| t.join().expect("server")).fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1))
    });
    let relay_before = worker_cpu_ns();
    let start = Instant::now();
    let clients: Vec<_> = (0..conns)
        .map(|_| {
            thread::spawn(move || {
                load.client(StdStream::connect(public_addr).expect("connect relay"));
                own_cpu_ns()
            })
        })
        .collect();
    let (received, server_ns) = servers.join().expect("servers");
    let elapsed = start.elapsed().as_secs_f64();
    let client_ns: u64 = clients.into_iter().map(|c| c.join().expect("client")).sum();
    let relayed = rt.block_on(relays).expect("relays");
    let relay_ns = worker_cpu_ns() - relay_before;
    assert_eq!((received as u64, relayed), (load.expected().0, load.expected()), "every byte crossed");
    let (rate_per, cpu_per, ns_per_unit) = load.units();
    let cpu = |ns: u64| ns as f64 / ns_per_unit / cpu_per;
    [rate_per / elapsed, cpu(relay_ns), cpu(client_ns), cpu(server_ns)]
}

/// Relays the next `conns` connections to `server`; returns the bytes moved each way.
async fn relay_all(public: TcpListener, server: SocketAddr, conns: usize, mode: Mode) -> (u64, u64) {
    let mut relays = Vec::new();
    for _ in 0..conns {
        let (client, _) = public.accept().await.expect("accept");
        let agent = tokio::net::TcpStream::connect(server).await.expect("connect server");
        relays.push(tokio::spawn(async move {
            // The fastest mode through the gateway's own entry point.
            if mode == Mode::Copy {
                relay::both_ways_with(client, agent, mode, Timeouts::DEFAULT).await
            } else {
                relay::both_ways(client, agent, Timeouts::DEFAULT, &Activity::new()).await
            }
        }));
    }
    let mut total = (0, 0);
    for relay in relays {
        let (ab, ba) = relay.await.expect("relay");
        total = (total.0 + ab, total.1 + ba);
    }
    total
}

/// On-CPU nanoseconds of the runtime's worker threads so far.
fn worker_cpu_ns() -> u64 {
    let mut total = 0;
    for task in std::fs::read_dir("/proc/self/task").expect("/proc/self/task").flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if comm.trim_end() == WORKER {
            total += schedstat_ns(&task.path().join("schedstat"));
        }
    }
    total
}

/// On-CPU nanoseconds of the calling thread so far.
fn own_cpu_ns() -> u64 {
    schedstat_ns(Path::new("/proc/thread-self/schedstat"))
}

/// The first field of a `schedstat` file: nanoseconds on the CPU.
fn schedstat_ns(path: &Path) -> u64 {
    let stat = std::fs::read_to_string(path).unwrap_or_default();
    stat.split_whitespace().next().and_then(|ns| ns.parse().ok()).unwrap_or(0)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}
