//! Issue 44, point 5's fairness side: the jobs' egress brokers run on the coordinator's
//! runtime, beside its gateway, so one tenant's job that floods its broker must not starve
//! another tenant's route. Two organizations deploy the node demo on one `svc relay serve`;
//! the test then acts as the first one's agent gone rogue: through its broker's socket it
//! churns connections to the gateway's tunnel port carrying garbage as fast as it can, and
//! holds more silent ones than the tunnel's per-source cap (every agent shares the broker's
//! address). The other route's requests, measured before the flood and during it in this test,
//! must all be answered, and not many times slower than before.
//!
//! It failed (the other route's handshake unanswered for 10 s) while every broker reached the
//! gateway from 127.0.0.1: the flood's newcomers closed the other agent's pending connections
//! as the source's oldest. Each broker now connects from a loopback address of its own
//! (`svc_runner`'s egress module). The flood runs on a runtime of its own, so that it cannot
//! starve this test's client instead of the product.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use svc_e2e::service::TempDir;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;
use tokio::time::Instant;

use super::client::get;
use super::deploy::{Relay, admin, admin_token, node_demo_project, state};

/// Requests to the victim's route in each phase, one after another on fresh connections.
const REQUESTS: usize = 40;

/// Flood tasks that churn connections with garbage, and that hold silent ones.
const CHURNERS: usize = 16;
const HOLDERS: usize = 300;

/// How many times slower than before the flood the victim's median request may get. A starved
/// gateway would not answer within the client's 10 s step at all.
const SLOWDOWN: u32 = 8;

/// The egress broker sockets of the coordinator `pid` (its runner's directory).
fn broker_sockets(pid: u32) -> BTreeSet<PathBuf> {
    let dir = std::env::temp_dir().join(format!("svc-egress-{pid}"));
    std::fs::read_dir(&dir)
        .map(|entries| {
            entries.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "sock")).collect()
        })
        .unwrap_or_default()
}

/// The gateway's tunnel address in the coordinator's output (`... tunnel ADDR ...`).
fn tunnel_address(output: &str) -> String {
    output
        .lines()
        .filter(|l| l.contains("gateway public"))
        .find_map(|l| l.split_whitespace().skip_while(|w| *w != "tunnel").nth(1))
        .unwrap_or_else(|| panic!("a tunnel address in {output}"))
        .to_owned()
}

/// Opens a relayed connection through `socket` to `to`: the stream once the broker said `OK`.
async fn through_broker(socket: &Path, to: &str) -> Option<UnixStream> {
    let mut stream = UnixStream::connect(socket).await.ok()?;
    stream.write_all(format!("CONNECT {to}\n").as_bytes()).await.ok()?;
    let mut answer = [0u8; 3];
    stream.read_exact(&mut answer).await.ok()?;
    (&answer == b"OK\n").then_some(stream)
}

/// What the rogue agent did: relayed connections opened, garbage bytes sent.
#[derive(Default)]
struct Flood {
    connections: AtomicU64,
    bytes: AtomicU64,
}

/// Starts the flood on `runtime` through `socket` to `tunnel` until `stop`.
fn flood(
    runtime: &tokio::runtime::Handle,
    socket: PathBuf,
    tunnel: String,
    stop: Arc<AtomicBool>,
    counts: Arc<Flood>,
) -> Vec<tokio::task::JoinHandle<()>> {
    let mut tasks = Vec::new();
    for _ in 0..CHURNERS {
        let (socket, tunnel, stop, counts) = (socket.clone(), tunnel.clone(), stop.clone(), counts.clone());
        tasks.push(runtime.spawn(async move {
            // Neither a data connection's tag nor TLS: refused at its first bytes, at once.
            let garbage = vec![0x5a_u8; 64 * 1024];
            while !stop.load(Ordering::Relaxed) {
                let Some(mut stream) = through_broker(&socket, &tunnel).await else {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    continue;
                };
                counts.connections.fetch_add(1, Ordering::Relaxed);
                while !stop.load(Ordering::Relaxed) {
                    match stream.write(&garbage).await {
                        Ok(n) if n > 0 => counts.bytes.fetch_add(n as u64, Ordering::Relaxed),
                        _ => break,
                    };
                }
            }
        }));
    }
    for _ in 0..HOLDERS {
        let (socket, tunnel, stop, counts) = (socket.clone(), tunnel.clone(), stop.clone(), counts.clone());
        tasks.push(runtime.spawn(async move {
            let mut buf = [0u8; 64];
            while !stop.load(Ordering::Relaxed) {
                let Some(mut stream) = through_broker(&socket, &tunnel).await else {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    continue;
                };
                counts.connections.fetch_add(1, Ordering::Relaxed);
                // Silent until the gateway closes it (its first-bytes step, or evicted for a
                // newer one of the same source), then again.
                let _ = tokio::time::timeout(Duration::from_secs(1), stream.read(&mut buf)).await;
            }
        }));
    }
    tasks
}

/// `REQUESTS` GETs of `/` on the route, each on a fresh connection: the time each took, or
/// the first failure (with its time), once one fails.
async fn requests(relay: &Relay, host: &str) -> Result<Vec<Duration>, String> {
    let ca = relay.data.join("ca.pem");
    let mut times = Vec::new();
    for i in 0..REQUESTS {
        let at = Instant::now();
        match get(relay.public, host, &ca, "/").await {
            Ok(r) if r.status == 200 => times.push(at.elapsed()),
            answer => return Err(format!("request {i} to {host} after {:?}: {answer:?}", at.elapsed())),
        }
    }
    Ok(times)
}

fn median(times: &[Duration]) -> Duration {
    let mut sorted = times.to_vec();
    sorted.sort();
    sorted[sorted.len() / 2]
}

#[tokio::test(flavor = "multi_thread")]
async fn a_job_flooding_its_egress_broker_does_not_starve_another_tenants_route() {
    let dir = TempDir::new("egress-flood");
    let relay = Relay::start(&dir.path().join("relay"), &["--public".into(), "127.0.0.1:0".into()]).await;
    let victim = node_demo_project(&dir.path().join("victim")).to_string_lossy().into_owned();
    let (code, out, err) = relay.svc(&["deploy", "--config", &victim]).await;
    assert_eq!(code, 0, "deploy: {err}\n{out}\n{}", relay.proc.output());
    let status = relay.json(&["status", "--config", &victim]).await;
    assert_eq!(state(&status), "live", "{status:#}");
    let host = status["deployment"]["canonicalHostname"].as_str().expect("a hostname").to_owned();

    // The rogue tenant's deployment: its broker is the socket that comes with it.
    let before = broker_sockets(relay.proc.pid());
    admin(&relay.data, "invite", "rogue");
    let rogue_token = admin_token(&relay.data, "rogue", false);
    let rogue = node_demo_project(&dir.path().join("rogue")).to_string_lossy().into_owned();
    let (code, out, err) = relay.svc_as(&rogue_token, &["deploy", "--config", &rogue]).await;
    assert_eq!(code, 0, "deploy: {err}\n{out}\n{}", relay.proc.output());
    let added: Vec<PathBuf> = broker_sockets(relay.proc.pid()).difference(&before).cloned().collect();
    assert_eq!(added.len(), 1, "one broker for the rogue job: {added:?} (had {before:?})");
    let tunnel = tunnel_address(&relay.proc.output());

    let baseline = requests(&relay, &host).await.unwrap_or_else(|e| panic!("before the flood: {e}"));

    let (stop, counts) = (Arc::new(AtomicBool::new(false)), Arc::new(Flood::default()));
    let flood_runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("the flood's runtime");
    let tasks = flood(flood_runtime.handle(), added[0].clone(), tunnel, stop.clone(), counts.clone());
    // Under way: as many connections as the tunnel's per-source cap holds, or 2 s of trying.
    let warming = Instant::now();
    while counts.connections.load(Ordering::Relaxed) < HOLDERS as u64 && warming.elapsed() < Duration::from_secs(2) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    eprintln!(
        "flood: {} relayed connections after {:?}",
        counts.connections.load(Ordering::Relaxed),
        warming.elapsed()
    );
    let (connections, bytes) = (counts.connections.load(Ordering::Relaxed), counts.bytes.load(Ordering::Relaxed));
    let flooded = requests(&relay, &host).await;
    let during =
        (counts.connections.load(Ordering::Relaxed) - connections, counts.bytes.load(Ordering::Relaxed) - bytes);
    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        task.abort();
    }
    flood_runtime.shutdown_background();

    let flooded = flooded.unwrap_or_else(|e| panic!("during the flood ({during:?} so far): {e}"));
    let (base, under) = (median(&baseline), median(&flooded));
    eprintln!(
        "victim's median request: {base:?} before, {under:?} during the flood \
         ({} relayed connections, {} MiB of garbage meanwhile)",
        during.0,
        during.1 >> 20
    );
    assert!(during.0 >= REQUESTS as u64 && during.1 > 0, "the flood went on throughout: {during:?}");
    assert!(
        under <= base * SLOWDOWN,
        "the victim's median request took {under:?} during the flood, {base:?} before (at most {SLOWDOWN}x)"
    );
    // The rogue's deployment itself was left alone: still live.
    let status = relay.json(&["status", "--config", &rogue]).await;
    assert_eq!(state(&status), "live", "{status:#}");
}
