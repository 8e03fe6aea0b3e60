//! Sandboxes a previous run of the service left behind. A service killed in the few
//! milliseconds between starting a sandbox and bwrap arming its parent-death signal leaves
//! that sandbox running, re-parented to init (`docs/decisions.md`, "Executions"). At start,
//! a pool sweeps them: every `bwrap` whose parent is init and whose command line names one
//! of its own directories (the job scratch space, the artifact store) is stopped, then
//! killed with its PID namespace. A live service's sandboxes are never touched: their
//! parent is that service.

use std::path::Path;

use rustix::process::Signal;

use crate::process::{signal, stat};

/// What a process is, read from `/proc`.
struct Proc {
    pid: u32,
    ppid: u32,
    comm: String,
    cmdline: Vec<u8>,
}

fn read(pid: u32) -> Option<Proc> {
    let (comm, _, ppid) = stat(pid)?;
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    Some(Proc { pid, ppid, comm, cmdline })
}

fn mentions(cmdline: &[u8], marker: &Path) -> bool {
    let marker = marker.as_os_str().as_encoded_bytes();
    !marker.is_empty() && cmdline.windows(marker.len()).any(|w| w == marker)
}

/// Kills every orphaned sandbox whose command line names one of `markers`; how many
/// sandboxes (outer `bwrap` processes, or namespace inits whose outer one is gone) it found.
pub fn sweep_orphans(markers: &[&Path]) -> usize {
    let Ok(entries) = std::fs::read_dir("/proc") else { return 0 };
    let procs: Vec<Proc> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(read)
        .filter(|p| p.comm == "bwrap")
        .collect();
    let orphans: Vec<u32> = procs
        .iter()
        .filter(|p| p.ppid == 1 && markers.iter().any(|m| mentions(&p.cmdline, m)))
        .map(|p| p.pid)
        .collect();
    // Stopped first, so none can fork while its namespace's init is killed.
    for pid in &orphans {
        signal(*pid, Signal::STOP);
    }
    for init in procs.iter().filter(|p| orphans.contains(&p.ppid)) {
        signal(init.pid, Signal::KILL);
    }
    for pid in &orphans {
        signal(*pid, Signal::KILL);
    }
    orphans.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_marker_is_found_anywhere_in_the_command_line_and_never_when_empty() {
        let cmdline = b"bwrap\0--ro-bind\0/data/artifacts/sha256-ab\0/app\0";
        assert!(mentions(cmdline, Path::new("/data/artifacts")));
        assert!(!mentions(cmdline, Path::new("/other/artifacts")));
        assert!(!mentions(cmdline, Path::new("")));
    }

    #[test]
    fn the_running_test_is_read_and_is_no_orphan() {
        let me = read(std::process::id()).expect("this process");
        assert_ne!(me.ppid, 0);
        assert_eq!(sweep_orphans(&[Path::new("/nonexistent-marker-dir")]), 0);
    }
}
