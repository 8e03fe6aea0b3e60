//! A shell session a document's commands run in, as a user would type them: one `bash`
//! whose working directory, exported variables and background servers carry from one
//! command to the next, in a fresh directory holding a copy of the repository's examples.

use std::collections::BTreeSet;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, kill_process_group};

use crate::markdown::{Interrupt, without_comment};
use crate::procs;

/// How long one command may run (a deploy waits up to 120 s for its route).
const COMMAND_LIMIT: Duration = Duration::from_secs(240);
/// How long a server started with `&` has to bind its listeners.
const SERVER_START_LIMIT: Duration = Duration::from_secs(60);
/// How long an interrupted command has to exit.
const INTERRUPT_LIMIT: Duration = Duration::from_secs(20);

/// What one command did.
#[derive(Debug)]
pub(crate) struct Outcome {
    /// The exit code; `None` when a signal ended it.
    pub(crate) code: Option<i32>,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
    /// Whether the harness pressed Ctrl-C (SIGINT) for it.
    pub(crate) interrupted: bool,
}

pub(crate) struct Session {
    dir: tempfile::TempDir,
    shell: Child,
    stdin: ChildStdin,
    count: usize,
    /// Servers started with `&`, and the command that started each.
    background: Vec<(u32, usize)>,
}

impl Session {
    /// A session in a new directory with `examples/` copied from `root` and `bin` first on
    /// `PATH`.
    pub(crate) fn start(root: &Path, bin: &Path) -> Result<Self, String> {
        let dir = tempfile::Builder::new()
            .prefix("svc-docs-")
            .tempdir()
            .map_err(|e| format!("a temporary directory: {e}"))?;
        let work = dir.path().join("work");
        let home = dir.path().join("home");
        for d in [&work, &home, &dir.path().join("control")] {
            std::fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
        }
        copy_tree(&root.join("examples"), &work.join("examples"))?;
        let path = std::env::var("PATH").unwrap_or_default();
        let mut shell = Command::new("bash")
            .args(["--noprofile", "--norc"])
            .current_dir(&work)
            .env_clear()
            .env("PATH", format!("{}:{path}", bin.display()))
            .env("HOME", &home)
            .env("LANG", "C.UTF-8")
            .env("TERM", "dumb")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            // Its own process group, so everything a document starts is stopped with it.
            .process_group(0)
            .spawn()
            .map_err(|e| format!("starting bash: {e}"))?;
        let stdin = shell.stdin.take().ok_or("bash has no stdin")?;
        Ok(Self { dir, shell, stdin, count: 0, background: Vec::new() })
    }

    fn control(&self, name: &str) -> PathBuf {
        self.dir.path().join("control").join(name)
    }

    /// The shell's working directory after the last command.
    pub(crate) fn cwd(&self) -> PathBuf {
        std::fs::read_to_string(self.control("cwd"))
            .map(|s| PathBuf::from(s.trim_end()))
            .unwrap_or_else(|_| self.dir.path().join("work"))
    }

    /// Writes `contents` to `name` in the shell's working directory.
    pub(crate) fn write_file(&self, name: &str, contents: &str) -> Result<(), String> {
        let path = self.cwd().join(name);
        std::fs::write(&path, contents).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Runs one command and waits for it; a command ending in `&` returns once its server
    /// listens, as a user would wait for it.
    pub(crate) fn run(&mut self, command: &str, interrupt: Option<&Interrupt>) -> Result<Outcome, String> {
        let n = self.count;
        self.count += 1;
        let shell = self.shell.id();
        let before = procs::children(shell);
        let c = self.dir.path().join("control");
        let c = c.display();
        // Only builtins after the command: a process of the harness's own (an `mv` once)
        // would be a new child of the shell when the status appears, and would be taken for
        // a server the command started in the background. `echo` writes the status and its
        // newline in one write; the status counts once the newline is there.
        let script = format!(
            "{{ {command}\n}} </dev/null >{c}/{n}.out 2>{c}/{n}.err; __svc_docs_rc=$?; pwd >{c}/cwd; echo $__svc_docs_rc >{c}/{n}.rc\n"
        );
        self.stdin
            .write_all(script.as_bytes())
            .and_then(|()| self.stdin.flush())
            .map_err(|e| format!("the shell is gone: {e}"))?;

        let started = Instant::now();
        let mut interrupted: Option<Instant> = None;
        let rc = loop {
            if let Ok(rc) = std::fs::read_to_string(self.control(&format!("{n}.rc")))
                && rc.ends_with('\n')
            {
                break rc;
            }
            if self.shell.try_wait().ok().flatten().is_some() {
                return Err(format!("the shell exited during `{command}`"));
            }
            let elapsed = started.elapsed();
            if interrupted.is_none() && self.due(n, interrupt, elapsed) {
                let foreground: Vec<u32> = procs::children(shell).difference(&before).copied().collect();
                for pid in foreground {
                    procs::signal(pid, Signal::INT);
                }
                interrupted = Some(Instant::now());
            }
            if interrupted.is_some_and(|at| at.elapsed() > INTERRUPT_LIMIT) {
                return Err(format!(
                    "`{command}` still runs {} s after Ctrl-C\n{}",
                    INTERRUPT_LIMIT.as_secs(),
                    self.outputs(n)
                ));
            }
            if elapsed > COMMAND_LIMIT {
                return Err(format!("`{command}` still runs after {} s\n{}", COMMAND_LIMIT.as_secs(), self.outputs(n)));
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let status: i32 = rc.trim().parse().map_err(|_| format!("an exit status {rc:?}"))?;
        if is_background(command) {
            let known: BTreeSet<u32> = self.background.iter().map(|(pid, _)| *pid).collect();
            for pid in procs::children(shell).difference(&before).filter(|p| !known.contains(p)) {
                self.background.push((*pid, n));
                self.wait_listening(*pid, n, command)?;
            }
        }
        let (stdout, stderr) = self.read_outputs(n);
        // A shell reports death by signal N as 128 + N.
        let code = if status > 128 && interrupted.is_none() { None } else { Some(status) };
        Ok(Outcome { code, stdout, stderr, interrupted: interrupted.is_some() })
    }

    fn due(&self, n: usize, interrupt: Option<&Interrupt>, elapsed: Duration) -> bool {
        match interrupt {
            None => false,
            Some(Interrupt::AfterSecs(secs)) => elapsed >= Duration::from_secs(*secs),
            Some(Interrupt::AfterText(text)) => {
                let (out, err) = self.read_outputs(n);
                out.contains(text.as_str()) || err.contains(text.as_str())
            }
        }
    }

    /// Waits until the server `pid` (or a process below it) listens on TCP and has bound
    /// every listener it will (the count holds for a second).
    fn wait_listening(&self, pid: u32, n: usize, command: &str) -> Result<(), String> {
        let deadline = Instant::now() + SERVER_START_LIMIT;
        let (mut seen, mut since) = (0, Instant::now());
        while Instant::now() < deadline {
            if !procs::alive(pid) {
                return Err(format!("`{command}` exited instead of serving\n{}", self.outputs(n)));
            }
            let count: usize = procs::tree(pid).into_iter().map(procs::listeners).sum();
            if count != seen {
                (seen, since) = (count, Instant::now());
            } else if seen > 0 && since.elapsed() >= Duration::from_secs(1) {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(format!("`{command}` did not listen within {} s\n{}", SERVER_START_LIMIT.as_secs(), self.outputs(n)))
    }

    fn read_outputs(&self, n: usize) -> (String, String) {
        let read = |ext: &str| {
            std::fs::read(self.control(&format!("{n}.{ext}")))
                .map(|b| String::from_utf8_lossy(&b).into_owned())
                .unwrap_or_default()
        };
        (read("out"), read("err"))
    }

    /// A command's output for a failure report, the ends of long streams only.
    pub(crate) fn outputs(&self, n: usize) -> String {
        let (out, err) = self.read_outputs(n);
        format!("--- stdout\n{}\n--- stderr\n{}", tail(&out), tail(&err))
    }

    /// Stops everything the document started and returns the output of each server it ran
    /// in the background (for the caller's panic check), with the command's index.
    pub(crate) fn finish(mut self) -> Vec<(usize, String)> {
        self.stop();
        self.background.iter().map(|(_, n)| (*n, self.outputs(*n))).collect()
    }

    fn stop(&mut self) {
        let group = i32::try_from(self.shell.id()).ok().and_then(Pid::from_raw);
        if let Some(group) = group {
            let _ = kill_process_group(group, Signal::TERM);
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        let servers: Vec<u32> = self.background.iter().map(|(pid, _)| *pid).collect();
        while Instant::now() < deadline && servers.iter().any(|pid| procs::alive(*pid)) {
            std::thread::sleep(Duration::from_millis(50));
        }
        if let Some(group) = group {
            let _ = kill_process_group(group, Signal::KILL);
        }
        let _ = self.shell.wait();
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if self.shell.try_wait().ok().flatten().is_none() {
            self.stop();
        }
    }
}

/// Whether `command` runs in the background (`... &`, not `... &&`).
pub(crate) fn is_background(command: &str) -> bool {
    let command = without_comment(command);
    command.ends_with('&') && !command.ends_with("&&")
}

fn tail(text: &str) -> &str {
    let limit = 4000;
    if text.len() <= limit {
        return text;
    }
    let mut start = text.len() - limit;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

fn copy_tree(from: &Path, to: &Path) -> Result<(), String> {
    std::fs::create_dir_all(to).map_err(|e| format!("{}: {e}", to.display()))?;
    let entries = std::fs::read_dir(from).map_err(|e| format!("{}: {e}", from.display()))?;
    for entry in entries {
        let entry = entry.map_err(|e| format!("{}: {e}", from.display()))?;
        let (source, target) = (entry.path(), to.join(entry.file_name()));
        if entry.file_type().map_err(|e| format!("{}: {e}", source.display()))?.is_dir() {
            if entry.file_name() != "node_modules" {
                copy_tree(&source, &target)?;
            }
        } else {
            std::fs::copy(&source, &target).map_err(|e| format!("{}: {e}", source.display()))?;
        }
    }
    Ok(())
}
