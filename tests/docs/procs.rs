//! Processes as `/proc` shows them: the session shell's children, whether a server has
//! bound its listeners, and signals (Ctrl-C) sent to them.

use std::collections::BTreeSet;

use rustix::process::{Pid, Signal, kill_process};

/// The direct children of `parent`. Fails when `/proc` cannot be listed: an empty answer
/// would read as "none", and the session would neither interrupt nor wait for them.
pub(crate) fn children(parent: u32) -> BTreeSet<u32> {
    let entries = std::fs::read_dir("/proc").unwrap_or_else(|e| panic!("/proc cannot be listed: {e}"));
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| parent_of(*pid) == Some(parent))
        .collect()
}

/// `pid` and everything below it.
pub(crate) fn tree(pid: u32) -> BTreeSet<u32> {
    let mut all = BTreeSet::from([pid]);
    let mut frontier = vec![pid];
    while let Some(p) = frontier.pop() {
        for child in children(p) {
            if all.insert(child) {
                frontier.push(child);
            }
        }
    }
    all
}

fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may hold spaces: read after the last ')'.
    stat.rsplit_once(')')?.1.split_whitespace().nth(1)?.parse().ok()
}

pub(crate) fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().next().map(|st| st != "Z")))
        .unwrap_or(false)
}

/// How many TCP sockets in LISTEN state `pid` holds.
pub(crate) fn listeners(pid: u32) -> usize {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else { return 0 };
    let inodes: BTreeSet<String> = fds
        .filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
        .filter_map(|target| Some(target.to_str()?.strip_prefix("socket:[")?.strip_suffix(']')?.to_owned()))
        .collect();
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|table| std::fs::read_to_string(table).ok())
        .flat_map(|table| table.lines().skip(1).map(str::to_owned).collect::<Vec<_>>())
        .filter(|row| {
            let cols: Vec<&str> = row.split_whitespace().collect();
            cols.get(3) == Some(&"0A") && cols.get(9).is_some_and(|inode| inodes.contains(*inode))
        })
        .count()
}

pub(crate) fn signal(pid: u32, signal: Signal) {
    if let Some(pid) = i32::try_from(pid).ok().and_then(Pid::from_raw) {
        // The process may have just exited: nothing left to signal is fine.
        let _ = kill_process(pid, signal);
    }
}
