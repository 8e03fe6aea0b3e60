//! Checks of the host itself: the open-files limit, sysctls, clock synchronisation and free
//! disk space. Kernel values are read from files (`/proc/self/limits`, `/proc/sys/...`)
//! under the root, so a fake root can hold any value.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::CheckResult;
use crate::Root;

/// The open-files soft limit a gateway run by hand should have (the unit sets its own).
pub const MIN_PROCESS_NOFILE: u64 = 65_536;

/// The listen backlog tokio asks for; `net.core.somaxconn` below it truncates the queue.
pub const LISTEN_BACKLOG: u64 = 1024;

/// The persistent sysctl file the fixes name.
const SYSCTL_FILE: &str = "/etc/sysctl.d/90-svc-gateway.conf";

/// A limit as the kernel prints it (`unlimited` is the largest).
fn limit_value(text: &str) -> Option<u64> {
    if text == "unlimited" { Some(u64::MAX) } else { text.parse().ok() }
}

/// The soft and hard open-files limits in a `/proc/<pid>/limits` text.
pub fn parse_nofile(limits: &str) -> Option<(u64, u64)> {
    let line = limits.lines().find_map(|l| l.strip_prefix("Max open files"))?;
    let mut fields = line.split_whitespace();
    Some((limit_value(fields.next()?)?, limit_value(fields.next()?)?))
}

/// `limits.nofile`: the open-files limits of this process (`/proc/self/limits`), what a
/// gateway started by hand from this shell would get. Below [`MIN_PROCESS_NOFILE`] it warns:
/// the unit sets its own `LimitNOFILE=`, so only a run by hand is short of descriptors.
pub fn nofile(root: &Root) -> CheckResult {
    const ID: &str = "limits.nofile";
    let text = match root.read("/proc/self/limits") {
        Ok(t) => t,
        Err(e) => {
            return CheckResult::warn(
                ID,
                e.to_string(),
                "run on Linux with /proc mounted to check the open-files limit",
            );
        }
    };
    let Some((soft, hard)) = parse_nofile(&text) else {
        return CheckResult::warn(ID, "/proc/self/limits has no \"Max open files\" line", "check `ulimit -n` by hand");
    };
    let show = |v: u64| if v == u64::MAX { "unlimited".to_owned() } else { v.to_string() };
    let found = format!("open files: soft {}, hard {}", show(soft), show(hard));
    if soft >= MIN_PROCESS_NOFILE {
        return CheckResult::pass(ID, found);
    }
    CheckResult::warn(
        ID,
        format!("{found}: below {MIN_PROCESS_NOFILE}, so a gateway started from this shell runs out of descriptors"),
        format!(
            "the systemd unit sets LimitNOFILE itself; for a run by hand raise the soft limit (`ulimit -n {MIN_PROCESS_NOFILE}`{}), or raise nofile in /etc/security/limits.conf",
            if hard < MIN_PROCESS_NOFILE { " after raising the hard limit as root" } else { "" }
        ),
    )
}

/// What a sysctl must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rule {
    /// At least this; below it fails (or warns when `warn_only`).
    AtLeast { min: u64, warn_only: bool, why: &'static str },
    /// At most this; above it warns.
    AtMost { max: u64, why: &'static str },
    /// A `low high` range spanning at least this many values; fewer warns.
    Span { min: u64, why: &'static str },
}

/// One sysctl check and the value that fixes it.
struct Sysctl {
    name: &'static str,
    rule: Rule,
    fix_value: String,
}

fn rules(limit_nofile: u64) -> Vec<Sysctl> {
    vec![
        Sysctl {
            name: "fs.nr_open",
            rule: Rule::AtLeast {
                min: limit_nofile,
                warn_only: false,
                why: "the unit's LimitNOFILE cannot exceed it and the gateway would not start",
            },
            fix_value: limit_nofile.to_string(),
        },
        Sysctl {
            name: "fs.file-max",
            rule: Rule::AtLeast {
                min: limit_nofile,
                warn_only: true,
                why: "the whole system would run out of open files before the gateway reaches its limit",
            },
            fix_value: limit_nofile.saturating_mul(2).to_string(),
        },
        Sysctl {
            name: "net.core.somaxconn",
            rule: Rule::AtLeast {
                min: LISTEN_BACKLOG,
                warn_only: true,
                why: "it truncates the gateway's listen backlog, so bursts of new connections are dropped",
            },
            fix_value: "4096".into(),
        },
        Sysctl {
            name: "net.ipv4.ip_local_port_range",
            rule: Rule::Span {
                min: 16_384,
                why: "outbound connections from this host (to the coordinator, DNS) share few ephemeral ports",
            },
            fix_value: "\"15000 65000\"".into(),
        },
        Sysctl {
            name: "net.ipv4.tcp_fin_timeout",
            rule: Rule::AtMost { max: 60, why: "closed idle connections linger in FIN-WAIT-2 and hold memory" },
            fix_value: "30".into(),
        },
    ]
}

/// The sysctl checks (`sysctl.<name>`): `fs.nr_open` and `fs.file-max` against the unit's
/// open-files limit, `net.core.somaxconn` against the listen backlog, the ephemeral port
/// range, `net.ipv4.tcp_fin_timeout`. Only `fs.nr_open` fails; the others warn.
pub fn sysctls(root: &Root, limit_nofile: u64) -> Vec<CheckResult> {
    rules(limit_nofile).iter().map(|s| sysctl(root, s)).collect()
}

/// Where the kernel shows a sysctl (`net.core.somaxconn` → `/proc/sys/net/core/somaxconn`).
fn sysctl_path(name: &str) -> String {
    format!("/proc/sys/{}", name.replace('.', "/"))
}

fn sysctl(root: &Root, s: &Sysctl) -> CheckResult {
    let id = format!("sysctl.{}", s.name);
    let path = sysctl_path(s.name);
    let fix = format!(
        "sysctl -w {name}={value} and keep it with `echo '{name} = {plain}' >> {SYSCTL_FILE}`",
        name = s.name,
        value = s.fix_value,
        plain = s.fix_value.trim_matches('"'),
    );
    let text = match root.read(&path) {
        Ok(t) => t,
        Err(e) => {
            return CheckResult::warn(&id, e.to_string(), "run on Linux with /proc mounted");
        }
    };
    let values: Vec<u64> = text.split_whitespace().filter_map(|v| v.parse().ok()).collect();
    let unreadable = || CheckResult::warn(&id, format!("{path} holds \"{}\"", text.trim()), fix.clone());
    match s.rule {
        Rule::AtLeast { min, warn_only, why } => {
            let Some(&v) = values.first() else { return unreadable() };
            if v >= min {
                CheckResult::pass(&id, format!("{} = {v} (at least {min})", s.name))
            } else {
                let found = format!("{} = {v}, below {min}: {why}", s.name);
                if warn_only { CheckResult::warn(&id, found, fix) } else { CheckResult::fail(&id, found, fix) }
            }
        }
        Rule::AtMost { max, why } => {
            let Some(&v) = values.first() else { return unreadable() };
            if v <= max {
                CheckResult::pass(&id, format!("{} = {v} (at most {max})", s.name))
            } else {
                CheckResult::warn(&id, format!("{} = {v}, above {max}: {why}", s.name), fix)
            }
        }
        Rule::Span { min, why } => {
            let [low, high] = values[..] else { return unreadable() };
            let span = high.saturating_sub(low) + 1;
            if span >= min {
                CheckResult::pass(&id, format!("{} = {low} {high} ({span} ports)", s.name))
            } else {
                CheckResult::warn(&id, format!("{} = {low} {high}, only {span} ports: {why}", s.name), fix)
            }
        }
    }
}

/// `tcp.pacing`: BBR paces every connection it sends on. With the `fq` qdisc the qdisc does
/// the pacing; without it TCP falls back to its own pacing, a high-resolution timer per paced
/// burst, which costs CPU on every busy connection and runs the delayed sends from whatever
/// process holds the CPU (measured on loopback: docs/performance.md, "Congestion control").
/// Passes when the congestion control does not pace (cubic, reno) or `fq` is the default
/// qdisc; warns otherwise, and when either value cannot be read. Only the default qdisc is
/// read: an interface given `fq` by hand (`tc qdisc show`) still warns.
pub fn pacing(root: &Root) -> CheckResult {
    const ID: &str = "tcp.pacing";
    let read = |name: &str| {
        let path = sysctl_path(name);
        root.read(&path).map(|text| text.trim().to_owned())
    };
    let congestion = match read("net.ipv4.tcp_congestion_control") {
        Ok(name) => name,
        Err(e) => return CheckResult::warn(ID, e.to_string(), "run on Linux with /proc mounted"),
    };
    if !congestion.starts_with("bbr") {
        return CheckResult::pass(ID, format!("congestion control {congestion} (it does not pace)"));
    }
    let qdisc = match read("net.core.default_qdisc") {
        Ok(name) => name,
        Err(e) => return CheckResult::warn(ID, e.to_string(), "run on Linux with /proc mounted"),
    };
    if qdisc == "fq" {
        return CheckResult::pass(ID, format!("congestion control {congestion} with the fq qdisc"));
    }
    CheckResult::warn(
        ID,
        format!(
            "congestion control {congestion} with default qdisc {qdisc}: without fq, TCP paces with a timer \
             per burst, which costs CPU on every busy connection"
        ),
        format!(
            "sysctl -w net.core.default_qdisc=fq, keep it with `echo 'net.core.default_qdisc = fq' >> \
             {SYSCTL_FILE}`, and `tc qdisc replace dev IFACE root fq` for the public interface (or reboot); \
             or a congestion control that does not pace: `net.ipv4.tcp_congestion_control = cubic`"
        ),
    )
}

/// Files whose presence says a time daemon runs (its synchronisation is not readable here).
const TIME_DAEMONS: &[(&str, &str)] = &[
    ("/run/chrony/chronyd.pid", "chronyd"),
    ("/var/run/chrony/chronyd.pid", "chronyd"),
    ("/run/ntpd.pid", "ntpd"),
    ("/var/run/ntpd.pid", "ntpd"),
    ("/run/systemd/timesync/", "systemd-timesyncd"),
];

/// `clock.sync`: passes when systemd-timesyncd has marked the clock synchronised
/// (`/run/systemd/timesync/synchronized` exists, as it does from the first synchronisation
/// on). Otherwise it warns: a running chronyd or ntpd is reported, but whether it has
/// synchronised cannot be read from a file. `clock.skew` compares with the coordinator.
pub fn clock_sync(root: &Root) -> CheckResult {
    const ID: &str = "clock.sync";
    if root.path("/run/systemd/timesync/synchronized").exists() {
        return CheckResult::pass(ID, "systemd-timesyncd reports the clock synchronised");
    }
    if let Some((_, daemon)) = TIME_DAEMONS.iter().find(|(path, _)| root.path(path).exists()) {
        return CheckResult::warn(
            ID,
            format!("{daemon} runs, but whether the clock is synchronised is unknown"),
            match *daemon {
                "chronyd" => "check `chronyc tracking` shows \"Leap status : Normal\"",
                "ntpd" => "check `ntpq -p` shows a selected peer (*)",
                _ => "wait for systemd-timesyncd to reach a server; see `timedatectl timesync-status`",
            },
        );
    }
    CheckResult::warn(
        ID,
        "no time synchronisation found (no systemd-timesyncd, chronyd or ntpd)",
        "install and start one: `apt-get install systemd-timesyncd` (or chrony); certificates and admission expire by the clock",
    )
}

/// The `Available` column (1024-byte blocks) of `df -P -k` output: the field before the
/// `Capacity` percentage, so a file system name with spaces does not shift it.
pub fn parse_df_available(output: &str) -> Option<u64> {
    let line = output.lines().nth(1)?;
    let fields: Vec<&str> = line.split_whitespace().collect();
    let capacity = fields.iter().position(|f| f.ends_with('%'))?;
    fields.get(capacity.checked_sub(1)?)?.parse().ok()
}

/// The nearest existing directory at or above `path`.
fn existing_ancestor(path: &Path) -> Option<PathBuf> {
    path.ancestors().find(|p| p.is_dir()).map(Path::to_path_buf)
}

/// `disk`: free space on the file system of the data directory (or its nearest existing
/// parent) under the root, by running `df -P -k` (POSIX output; no statvfs binding, which
/// would need unsafe code or a new dependency). Below `min_free` it fails.
pub fn disk(root: &Root, data_dir: &Path, min_free: u64) -> CheckResult {
    const ID: &str = "disk";
    let mib = |b: u64| b / (1024 * 1024);
    let Some(dir) = existing_ancestor(&root.path(data_dir)) else {
        return CheckResult::warn(ID, format!("no directory of {} exists", data_dir.display()), "check the root path");
    };
    let output = Command::new("df").args(["-P", "-k", "--"]).arg(&dir).env("LC_ALL", "C").output();
    let available = match output {
        Ok(out) if out.status.success() => parse_df_available(&String::from_utf8_lossy(&out.stdout)),
        Ok(out) => {
            return CheckResult::warn(
                ID,
                format!("`df` failed for {}: {}", dir.display(), String::from_utf8_lossy(&out.stderr).trim()),
                "check free space with `df -h` by hand",
            );
        }
        Err(e) => {
            return CheckResult::warn(
                ID,
                format!("cannot run `df`: {e}"),
                "install coreutils, or check `df -h` by hand",
            );
        }
    };
    let Some(kib) = available else {
        return CheckResult::warn(ID, "cannot read `df` output", "check free space with `df -h` by hand");
    };
    let free = kib.saturating_mul(1024);
    let found = format!("{} MiB free on the file system of {}", mib(free), dir.display());
    if free >= min_free {
        CheckResult::pass(ID, format!("{found} (at least {} MiB)", mib(min_free)))
    } else {
        CheckResult::fail(
            ID,
            format!("{found}, below {} MiB", mib(min_free)),
            "free space there (old logs: `journalctl --vacuum-size=200M`) or grow the file system",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_texts_parse() {
        let limits = "Limit                     Soft Limit           Hard Limit           Units\n\
                      Max cpu time              unlimited            unlimited            seconds\n\
                      Max open files            1024                 524288               files\n";
        assert_eq!(parse_nofile(limits), Some((1024, 524_288)));
        assert_eq!(parse_nofile("Max open files  unlimited unlimited files"), Some((u64::MAX, u64::MAX)));
        assert_eq!(parse_nofile("nothing"), None);
        let df = "Filesystem     1024-blocks      Used Available Capacity Mounted on\n\
                  /dev/my disk    102687672  55075612  42352716      57% /\n";
        assert_eq!(parse_df_available(df), Some(42_352_716));
        assert_eq!(parse_df_available("Filesystem\n"), None);
    }
}
