//! Issue 14: "Accept loops retry at once on EMFILE". A gateway runs in a child process (this
//! test binary again, running the ignored `gateway_out_of_descriptors` below) under
//! `ulimit -n 64`; the parent fills its descriptors with idle connections to the public and
//! tunnel ports, so every further accept fails with EMFILE while more connections wait in the
//! queue. The child reports its accept-error count every 50 ms, the parent reads its CPU time: with the
//! backoff (10 ms doubling to 1 s) a few errors a second and almost no CPU; a busy loop would
//! make hundreds of thousands of errors and keep a core busy.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::{HOST, client_hello, route, start};

/// The child's entry point, by its full test name.
const CHILD: &str = "gateway::accept::gateway_out_of_descriptors";
/// Set in the child's environment.
const CHILD_ENV: &str = "SVC_GATEWAY_ACCEPT_CHILD";
/// The child's open-files limit.
const NOFILE: u32 = 64;
/// How long the accept loops are watched while out of descriptors.
const WATCH: Duration = Duration::from_secs(3);

/// The child: a gateway whose ClientHello limit is long (each accepted connection keeps its
/// descriptor), printing `bound PUBLIC TUNNEL`, then `errors N` (accept errors on both ports)
/// every 50 ms, for ever.
#[test]
#[ignore = "the child process of accept_errors_back_off_instead_of_spinning_when_out_of_descriptors"]
fn gateway_out_of_descriptors() {
    if std::env::var_os(CHILD_ENV).is_none() {
        eprintln!("{CHILD} runs only as the child process of its parent test");
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    runtime.block_on(async {
        let w = start("accept-child", route(1024), |c| c.client_hello_timeout = Duration::from_secs(120)).await;
        println!("bound {} {}", w.bound.public, w.bound.tunnel);
        loop {
            let metrics = w.gateway.render_metrics();
            let errors: u64 = metrics
                .lines()
                .filter_map(|l| l.strip_prefix("svc_gateway_accept_errors_total{"))
                .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
                .sum();
            println!("errors {errors}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
}

/// The child process, killed on drop.
struct Gateway {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Gateway {
    fn spawn() -> Gateway {
        let exe = std::env::current_exe().expect("this test binary");
        // `ulimit -n` through the shell: no unsafe code to lower a limit in this process.
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(format!("ulimit -n {NOFILE} && exec \"$0\" \"$@\""))
            .arg(exe)
            .args(["--ignored", "--exact", CHILD, "--nocapture", "--test-threads=1"])
            .env(CHILD_ENV, "1")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("the child gateway starts");
        let stdout = child.stdout.take().expect("its stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Gateway { child, lines }
    }

    /// What follows `prefix` on the next line that has it (the harness may print its own
    /// `test NAME ... ` before the child's first line).
    fn next(&self, prefix: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self.lines.recv_timeout(left).unwrap_or_else(|_| panic!("the child printed no `{prefix}` line"));
            if let Some((_, rest)) = line.split_once(prefix) {
                return rest.to_owned();
            }
        }
    }

    /// The latest accept-error count the child printed.
    fn errors(&self) -> u64 {
        let mut latest = self.next("errors ");
        while let Ok(line) = self.lines.try_recv() {
            if let Some(rest) = line.strip_prefix("errors ") {
                latest = rest.to_owned();
            }
        }
        latest.parse().expect("a count")
    }

    /// The child's CPU time so far (user and system), from `/proc/PID/stat` in clock ticks
    /// of 10 ms (Linux's USER_HZ).
    fn cpu(&self) -> Duration {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).expect("the child's stat");
        // Fields after the command name, which is in parentheses: utime is the 12th, stime the 13th.
        let fields: Vec<&str> = stat.rsplit_once(')').expect("a stat line").1.split_whitespace().collect();
        let ticks: u64 = fields[11].parse::<u64>().expect("utime") + fields[12].parse::<u64>().expect("stime");
        Duration::from_millis(ticks * 10)
    }
}

#[test]
fn accept_errors_back_off_instead_of_spinning_when_out_of_descriptors() {
    if !cfg!(target_os = "linux") {
        eprintln!("SKIPPED: reads the child's CPU time from /proc");
        return;
    }
    let gateway = Gateway::spawn();
    let bound = gateway.next("bound ");
    let addrs: Vec<SocketAddr> = bound.split(' ').map(|a| a.parse().expect("an address")).collect();
    let [public, tunnel] = addrs[..] else { panic!("two addresses in {bound:?}") };
    // More connections than the child has descriptors, on both ports; the rest wait in the
    // listeners' queues, so both listeners stay readable.
    let mut held: Vec<TcpStream> = Vec::new();
    for addr in std::iter::repeat_n(public, 100).chain(std::iter::repeat_n(tunnel, 20)) {
        held.push(TcpStream::connect(addr).expect("the kernel queues the connection"));
    }
    // Until the child is out of descriptors and its accept errors mount.
    let deadline = Instant::now() + Duration::from_secs(10);
    while gateway.errors() < 3 {
        assert!(Instant::now() < deadline, "the child's accepts never failed (is the limit applied?)");
    }
    let (errors_before, cpu_before, start) = (gateway.errors(), gateway.cpu(), Instant::now());
    std::thread::sleep(WATCH);
    let (errors, cpu, watched) = (gateway.errors() - errors_before, gateway.cpu() - cpu_before, start.elapsed());
    eprintln!("out of descriptors for {watched:?}: {errors} accept errors, {cpu:?} of CPU");
    // The backoff allows about ten errors per listener in 3 s (10 ms doubling to 1 s, reset
    // by each accepted connection); a loop retrying at once makes tens of thousands a second
    // and keeps a core busy.
    assert!(errors <= 60, "{errors} accept errors in {watched:?}: the accept loops spin");
    assert!(cpu < watched / 4, "{cpu:?} of CPU in {watched:?}: the accept loops spin");

    // Once descriptors are free again, accepting resumes within the longest wait (1 s): a new
    // connection is read and refused for its unknown name, so the child closes it.
    drop(held);
    std::thread::sleep(Duration::from_millis(200));
    let mut client = TcpStream::connect(public).expect("connect");
    client.write_all(&client_hello_for_unknown_name()).expect("a ClientHello");
    client.set_read_timeout(Some(Duration::from_secs(5))).expect("a read timeout");
    let start = Instant::now();
    let mut rest = Vec::new();
    let read = client.read_to_end(&mut rest);
    assert!(matches!(read, Ok(0)), "the child closed the connection: {read:?}");
    assert!(start.elapsed() < Duration::from_secs(3), "accepting resumed after {:?}", start.elapsed());
}

/// A real ClientHello for a name no route has (any CA will do: the child never answers it).
fn client_hello_for_unknown_name() -> Vec<u8> {
    let ca = relay_api::ca::DevCa::open(&std::env::temp_dir().join(format!("svc-accept-ca-{}", std::process::id())))
        .expect("a CA");
    let hello = client_hello(ca.cert_pem(), &format!("unknown.{HOST}"));
    let _ = std::fs::remove_dir_all(ca.cert_path.parent().expect("the CA's directory"));
    hello
}
