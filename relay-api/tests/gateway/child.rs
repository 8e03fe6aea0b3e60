//! A gateway in a child process under a lowered open-files limit: this test binary again,
//! running one ignored test by its full name, through `sh -c 'ulimit -n N && exec …'` (no
//! unsafe code to lower a limit in this process). The child prints lines on its standard
//! output; the parent reads them, and the child's CPU time and open descriptors from `/proc`.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Set in the child's environment: the ignored entry points run only when it is.
pub(super) const CHILD_ENV: &str = "SVC_GATEWAY_CHILD";

/// Whether this process is a child started by [`ChildGateway::spawn`]; otherwise an entry
/// point says so and returns.
pub(super) fn is_child(entry: &str) -> bool {
    let child = std::env::var_os(CHILD_ENV).is_some();
    if !child {
        eprintln!("{entry} runs only as the child process of its parent test");
    }
    child
}

/// The child process, killed on drop.
pub(super) struct ChildGateway {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Drop for ChildGateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl ChildGateway {
    /// Runs the ignored test `entry` (its full name) in a child with at most `nofile` open
    /// files.
    pub(super) fn spawn(entry: &str, nofile: u32) -> ChildGateway {
        let exe = std::env::current_exe().expect("this test binary");
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(format!("ulimit -n {nofile} && exec \"$0\" \"$@\""))
            .arg(exe)
            .args(["--ignored", "--exact", entry, "--nocapture", "--test-threads=1"])
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
        ChildGateway { child, lines }
    }

    /// What follows `prefix` on the next line that has it (the harness may print its own
    /// `test NAME ... ` before the child's first line).
    pub(super) fn next(&self, prefix: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self.lines.recv_timeout(left).unwrap_or_else(|_| panic!("the child printed no `{prefix}` line"));
            if let Some((_, rest)) = line.split_once(prefix) {
                return rest.to_owned();
            }
        }
    }

    /// What follows `prefix` on the latest line that has it: waits for one, then takes any
    /// newer ones already printed.
    pub(super) fn latest(&self, prefix: &str) -> String {
        let mut latest = self.next(prefix);
        while let Ok(line) = self.lines.try_recv() {
            if let Some(rest) = line.strip_prefix(prefix) {
                latest = rest.to_owned();
            }
        }
        latest
    }

    /// The child's CPU time so far (user and system), from `/proc/PID/stat` in clock ticks
    /// of 10 ms (Linux's USER_HZ).
    pub(super) fn cpu(&self) -> Duration {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).expect("the child's stat");
        // Fields after the command name, which is in parentheses: utime is the 12th, stime the 13th.
        let fields: Vec<&str> = stat.rsplit_once(')').expect("a stat line").1.split_whitespace().collect();
        let ticks: u64 = fields[11].parse::<u64>().expect("utime") + fields[12].parse::<u64>().expect("stime");
        Duration::from_millis(ticks * 10)
    }

    /// The child's process ID.
    pub(super) fn pid(&self) -> u32 {
        self.child.id()
    }
}

/// The value of `name=VALUE` in a line of such fields.
pub(super) fn field(line: &str, name: &str) -> u64 {
    line.split_whitespace()
        .find_map(|f| f.strip_prefix(name)?.strip_prefix('='))
        .unwrap_or_else(|| panic!("no `{name}` in {line:?}"))
        .parse()
        .unwrap_or_else(|_| panic!("`{name}` is not a number in {line:?}"))
}
