//! The gateway's relay copying through user space vs splicing, on loopback.
//!
//! A sender thread per stream writes through the relay (the gateway's own code, on a 2-worker
//! tokio runtime as the gateway runs) to a sink thread that reads and discards; 1 stream, then
//! 8 streams sharing the bytes, the two modes interleaved and their order alternated each
//! round. Prints throughput (bytes over wall time until every sink has read its end) and the
//! relay's CPU time per GiB: the runtime's worker threads' on-CPU time from
//! `/proc/self/task/*/schedstat`; and the same for the sender threads and for the sink
//! threads. Sender and sink share the machine's cores with the relay, as the agent and the
//! client do in production, so less relay CPU leaves more for them, unless it makes their
//! work dearer: their columns tell.
//!
//! ```sh
//! cargo bench -p relay-api --bench relay    # env: RELAY_BENCH_MIB=2048 RELAY_BENCH_ROUNDS=3
//! ```

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener as StdListener, TcpStream as StdStream};
use std::thread;
use std::time::Instant;

use tokio::net::TcpListener;

// The relay is private to the gateway; the benchmark compiles the very same files. `cargo
// bench` sets `cfg(test)`, which brings in the relay's unit-test helpers without the tests.
#[path = "../src/gateway/relay/mod.rs"]
#[allow(dead_code, unused_imports)]
mod relay;

use relay::Mode;

/// The runtime's worker threads' name, to find their CPU time.
const WORKER: &str = "relay-bench-rt";

fn main() {
    let mib: usize = env_or("RELAY_BENCH_MIB", 2048);
    let rounds: usize = env_or("RELAY_BENCH_ROUNDS", 3);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name(WORKER)
        .enable_all()
        .build()
        .expect("runtime");
    let modes = [Mode::Copy, Mode::FASTEST];
    let stream_counts = [1usize, 8];
    // results[streams][mode] = (MiB/s, relay, sender and sink CPU ms per GiB) per round.
    let mut results = vec![vec![Vec::new(); modes.len()]; stream_counts.len()];
    println!("{mib} MiB per run, {rounds} rounds");
    println!("| Round | Streams | Mode | MiB/s | CPU ms/GiB: relay | sender | sink |");
    println!("|---|---|---|---|---|---|---|");
    for round in 0..rounds {
        for (s, &streams) in stream_counts.iter().enumerate() {
            let mut order: Vec<usize> = (0..modes.len()).collect();
            if round % 2 == 1 {
                order.reverse();
            }
            for m in order {
                let r = run(&rt, modes[m], streams, mib);
                println!(
                    "| {round} | {streams} | {:?} | {:.0} | {:.0} | {:.0} | {:.0} |",
                    modes[m], r.0, r.1, r.2, r.3
                );
                results[s][m].push(r);
            }
        }
    }
    println!("\nMedians:\n| Streams | Mode | MiB/s | CPU ms/GiB: relay | sender | sink |\n|---|---|---|---|---|---|");
    for (s, &streams) in stream_counts.iter().enumerate() {
        for (m, mode) in modes.iter().enumerate() {
            let rate = median(results[s][m].iter().map(|r| r.0).collect());
            let cpu = median(results[s][m].iter().map(|r| r.1).collect());
            let sender = median(results[s][m].iter().map(|r| r.2).collect());
            let sink = median(results[s][m].iter().map(|r| r.3).collect());
            println!("| {streams} | {mode:?} | {rate:.0} | {cpu:.0} | {sender:.0} | {sink:.0} |");
        }
    }
}

/// Moves `mib` MiB through the relay over `streams` connections; returns MiB/s, and the
/// relay's, the senders' and the sinks' CPU milliseconds per GiB.
fn run(rt: &tokio::runtime::Runtime, mode: Mode, streams: usize, mib: usize) -> (f64, f64, f64, f64) {
    let per_stream = (mib << 20) / streams;
    let sink = StdListener::bind("127.0.0.1:0").expect("bind sink");
    let sink_addr = sink.local_addr().expect("sink addr");
    let public = rt.block_on(TcpListener::bind("127.0.0.1:0")).expect("bind relay");
    let public_addr = public.local_addr().expect("relay addr");
    let relays = rt.spawn(async move {
        let mut moved = Vec::new();
        for _ in 0..streams {
            let (client, _) = public.accept().await.expect("accept");
            let agent = tokio::net::TcpStream::connect(sink_addr).await.expect("connect sink");
            moved.push(tokio::spawn(async move {
                // The fastest mode through the gateway's own entry point.
                if mode == Mode::Copy {
                    relay::both_ways_with(client, agent, mode).await
                } else {
                    relay::both_ways(client, agent).await
                }
            }));
        }
        let mut total = 0;
        for relay in moved {
            total += relay.await.expect("relay").0;
        }
        total
    });
    let sinks = thread::spawn(move || {
        let readers: Vec<_> = (0..streams)
            .map(|_| {
                let (mut conn, _) = sink.accept().expect("accept sink");
                thread::spawn(move || {
                    let mut buf = vec![0u8; 256 * 1024];
                    let mut got = 0;
                    loop {
                        match conn.read(&mut buf).expect("sink read") {
                            0 => return (got, own_cpu_ns()),
                            n => got += n,
                        }
                    }
                })
            })
            .collect();
        readers.into_iter().map(|r| r.join().expect("sink")).fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1))
    });
    let cpu_before = worker_cpu_ns();
    let start = Instant::now();
    let senders: Vec<_> = (0..streams)
        .map(|_| {
            thread::spawn(move || {
                let chunk = vec![0x5au8; 1 << 20];
                let mut conn = StdStream::connect(public_addr).expect("connect relay");
                let mut left = per_stream;
                while left > 0 {
                    let n = left.min(chunk.len());
                    conn.write_all(&chunk[..n]).expect("send");
                    left -= n;
                }
                conn.shutdown(Shutdown::Write).expect("shutdown");
                // The relay closes this side once the sink has closed its own.
                let _ = conn.read_to_end(&mut Vec::new());
                own_cpu_ns()
            })
        })
        .collect();
    let (received, sink_ns) = sinks.join().expect("sinks");
    let elapsed = start.elapsed().as_secs_f64();
    let sender_ns: u64 = senders.into_iter().map(|s| s.join().expect("sender")).sum();
    let relayed = rt.block_on(relays).expect("relays");
    let cpu_ns = worker_cpu_ns() - cpu_before;
    let bytes = per_stream * streams;
    assert_eq!((received, relayed), (bytes, bytes as u64), "every byte crossed");
    let gib = bytes as f64 / (1u64 << 30) as f64;
    let per_gib = |ns: u64| ns as f64 / 1e6 / gib;
    (bytes as f64 / (1 << 20) as f64 / elapsed, per_gib(cpu_ns), per_gib(sender_ns), per_gib(sink_ns))
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
    schedstat_ns(std::path::Path::new("/proc/thread-self/schedstat"))
}

/// The first field of a `schedstat` file: nanoseconds on the CPU.
fn schedstat_ns(path: &std::path::Path) -> u64 {
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
