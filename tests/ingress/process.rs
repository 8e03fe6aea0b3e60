//! Child processes of a test: their output collected line by line, waited on without
//! blocking the runtime, and killed (with every process they reported) when dropped, even
//! when the test panics.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

/// A running child process, SIGKILLed (with `also_kill` pids) when dropped.
#[derive(Debug)]
pub(crate) struct Proc {
    name: String,
    child: Child,
    lines: Arc<Mutex<Vec<(Instant, String)>>>,
    also_kill: Vec<u32>,
}

fn collect(stream: impl Read + Send + 'static, lines: Arc<Mutex<Vec<(Instant, String)>>>) {
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines() {
            let Ok(line) = line else { break };
            if let Ok(mut l) = lines.lock() {
                l.push((Instant::now(), line));
            }
        }
    });
}

impl Proc {
    /// Spawns `command` with stdout and stderr collected (in arrival order, into one list).
    pub(crate) fn spawn(name: &str, mut command: Command) -> Proc {
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{name} starts: {e}"));
        let lines = Arc::new(Mutex::new(Vec::new()));
        collect(child.stdout.take().expect("stdout"), lines.clone());
        collect(child.stderr.take().expect("stderr"), lines.clone());
        Proc { name: name.to_owned(), child, lines, also_kill: Vec::new() }
    }

    /// Its process ID.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Also SIGKILL `pid` when dropped (a grandchild the process reported).
    pub(crate) fn also_kill(&mut self, pid: u32) {
        self.also_kill.push(pid);
    }

    /// Every line so far.
    pub(crate) fn lines(&self) -> Vec<String> {
        self.lines.lock().map(|l| l.iter().map(|(_, line)| line.clone()).collect()).unwrap_or_default()
    }

    /// When the last line satisfying `pred` arrived.
    pub(crate) fn last_line_time(&self, pred: impl Fn(&str) -> bool) -> Option<Instant> {
        self.lines.lock().ok()?.iter().rev().find(|(_, line)| pred(line)).map(|(at, _)| *at)
    }

    /// How many lines so far (to wait for a line after this point).
    pub(crate) fn line_count(&self) -> usize {
        self.lines.lock().map_or(0, |l| l.len())
    }

    /// The output so far, for failure messages.
    pub(crate) fn output(&self) -> String {
        format!("--- {} output ---\n{}", self.name, self.lines().join("\n"))
    }

    /// The first line from index `from` on that satisfies `pred`, waiting at most `limit`.
    pub(crate) async fn wait_line(
        &mut self,
        from: usize,
        limit: Duration,
        pred: impl Fn(&str) -> bool,
    ) -> Option<String> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(line) = self.lines().into_iter().skip(from).find(|l| pred(l)) {
                return Some(line);
            }
            if Instant::now() >= deadline || matches!(self.child.try_wait(), Ok(Some(_))) {
                // One last look: the line may have arrived with the exit.
                tokio::time::sleep(Duration::from_millis(100)).await;
                return self.lines().into_iter().skip(from).find(|l| pred(l));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The same, panicking with the output when the line does not come.
    pub(crate) async fn expect_line(&mut self, limit: Duration, what: &str, pred: impl Fn(&str) -> bool) -> String {
        match self.wait_line(0, limit, pred).await {
            Some(line) => line,
            None => panic!("{} did not print {what} within {limit:?}\n{}", self.name, self.output()),
        }
    }

    /// Sends a signal (`TERM`, `STOP`, `CONT`, `KILL`).
    pub(crate) fn signal(&self, name: &str) {
        signal(self.pid(), name);
    }

    /// Waits for the process to exit, at most `limit`.
    pub(crate) async fn wait_exit(&mut self, limit: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        None
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        for pid in &self.also_kill {
            if alive(*pid) {
                signal_quietly(*pid, "KILL");
            }
        }
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Sends a signal with kill(1); panics unless it is delivered.
pub(crate) fn signal(pid: u32, name: &str) {
    let status = Command::new("kill").arg(format!("-{name}")).arg(pid.to_string()).status().expect("kill runs");
    assert!(status.success(), "kill -{name} {pid} failed");
}

/// Sends a signal to each process of one job (its app, then its agent): the first must be
/// delivered; the others may be gone already, since the local pool ends a job's other
/// processes as soon as it sees one die (it sees that at once, by the process's exit).
pub(crate) fn signal_job(pids: &[u32], name: &str) {
    let Some((first, rest)) = pids.split_first() else { return };
    signal(*first, name);
    for pid in rest {
        signal_quietly(*pid, name);
    }
}

pub(crate) fn signal_quietly(pid: u32, name: &str) {
    let _ = Command::new("kill")
        .arg(format!("-{name}"))
        .arg(pid.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// Whether a process exists and is not a zombie (Linux `/proc`; elsewhere `kill -0`). A
/// process whose state cannot be read for another reason than its end fails the test: "not
/// alive" would be a guess.
pub(crate) fn alive(pid: u32) -> bool {
    if std::path::Path::new("/proc/self/stat").exists() {
        let stat = match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Ok(stat) => stat,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return false,
            Err(e) if e.raw_os_error() == Some(rustix::io::Errno::SRCH.raw_os_error()) => return false,
            Err(e) => panic!("/proc/{pid}/stat cannot be read: {e}"),
        };
        // `pid (comm) S ...`: the state follows the last `)`.
        let state = stat.rsplit_once(") ").and_then(|(_, rest)| rest.chars().next());
        return !matches!(state, Some('Z' | 'X') | None);
    }
    Command::new("kill").args(["-0", &pid.to_string()]).stderr(Stdio::null()).status().is_ok_and(|s| s.success())
}

/// Asserts that every one of `pids` runs now, before a test checks that they end: a probe that
/// could not see them would find them gone.
pub(crate) fn assert_alive(pids: &[u32], what: &str) {
    let stopped: Vec<u32> = pids.iter().copied().filter(|&p| !alive(p)).collect();
    assert!(!pids.is_empty() && stopped.is_empty(), "{what} {pids:?} should run now; these do not: {stopped:?}");
}

/// The Node.js program: `SVC_NODE`, or `node` on the PATH (as the demo does).
pub(crate) fn node() -> std::ffi::OsString {
    std::env::var_os("SVC_NODE").unwrap_or_else(|| "node".into())
}

/// A loopback port free right now.
///
/// Below the kernel's ephemeral range (32768 and up on Linux), and never the same port twice
/// in this process: a port from `bind(0)`, closed and then bound by a process started later,
/// was taken meanwhile by another test's `bind(0)` or outgoing connection ("svc gateway:
/// cannot listen on 127.0.0.1:36669: Address already in use").
pub(crate) fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU16, Ordering};
    // Each test process starts at a random place in 20000-32000 and counts up from there.
    // cargo-nextest runs each test in a process of its own, several at once, with pids close
    // together: a start from the pid put neighbours a few ports apart, and one could bind a
    // port the other had picked but not yet bound.
    static NEXT: AtomicU16 = AtomicU16::new(0);
    let _ = NEXT.compare_exchange(0, 20_000 + fastrand::u16(0..12_000), Ordering::Relaxed, Ordering::Relaxed);
    for _ in 0..12_000 {
        let port = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = 20_000 + port.wrapping_sub(20_000) % 12_000;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port in 20000-32000")
}

/// Starts the bundled Node demo on a free port and waits until it listens; (process, port).
pub(crate) async fn node_demo() -> (Proc, u16) {
    let port = free_port();
    let mut command = Command::new(node());
    command.arg(svc_e2e::workspace().join("examples/node-demo/server.js")).env("PORT", port.to_string());
    let mut app = Proc::spawn("node server.js", command);
    app.expect_line(Duration::from_secs(20), "that it listens", |l| l.contains("node-demo listening")).await;
    (app, port)
}
