//! What `/proc` says about a process, and signals to one: shared by the runner that starts
//! sandboxes, the cgroups that end them and the sweep of sandboxes a previous run left.

use rustix::process::{Pid, Signal, kill_process};

/// Sends `signal` to `pid`.
pub(crate) fn signal(pid: u32, signal: Signal) {
    if let Some(pid) = i32::try_from(pid).ok().and_then(Pid::from_raw) {
        // It may be gone already: nothing left to do then.
        let _ = kill_process(pid, signal);
    }
}

/// A process's command name and parent, from `/proc/PID/stat`.
pub(crate) fn stat(pid: u32) -> Option<(String, char, u32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) state ppid ...`: comm may hold spaces and parentheses.
    let (head, rest) = stat.rsplit_once(')')?;
    let comm = head.split_once('(')?.1.to_owned();
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    Some((comm, state, fields.next()?.parse().ok()?))
}

/// A process's parent, if it still exists.
pub(crate) fn parent(pid: u32) -> Option<u32> {
    stat(pid).map(|(_, _, ppid)| ppid)
}

/// A process's state (`R`, `S`, `D`, `T` stopped, `Z` a zombie...), if it still exists.
pub(crate) fn state(pid: u32) -> Option<char> {
    stat(pid).map(|(_, state, _)| state)
}
