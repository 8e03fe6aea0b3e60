//! A network namespace per job (issue 39, point 1). Jobs of different tenants share a host: in
//! the host's network a job could connect to another job's app on loopback (bypassing TLS, the
//! route's `allowClients` and its rate limit), to the coordinator's internal ports, or flood the
//! gateway's tunnel port. So each job gets a namespace of its own, with nothing in it but its
//! own loopback: its app and its agent meet there, and nothing else of the host is reachable.
//!
//! How: a *holder* process (bwrap with `--unshare-net`, running `cat` on a pipe only the
//! service writes to, so that it ends when the service does, however it ends) owns the namespace for
//! the job's life; each part of the job enters it with `nsenter` before its sandbox is built
//! ([`JobNetwork::enter`]). bwrap brings the namespace's loopback up.
//!
//! A job whose policy grants network access (`requiredModules` names `network`) also gets a
//! way out: `slirp4netns` (a user-mode TCP/IP stack made for exactly this) on a tap device,
//! with `--disable-host-loopback` so its gateway address does not lead to the host's loopback,
//! and `prohibit` routes inside the namespace for every private, shared, reserved and
//! documentation range and for the host's own addresses and networks, so the way out leads to
//! public addresses only. The agent never needs it: it reaches the gateway's tunnel, the agent
//! API and the ACME server through the egress broker ([`crate::egress`]).

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Write};
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Why a job's network could not be made.
#[derive(Debug, thiserror::Error)]
pub enum NetworkError {
    /// A program is missing.
    #[error(
        "{program} is not installed; each job runs in a network namespace of its own and needs it (Debian/Ubuntu: `apt-get install {package}`)"
    )]
    Missing {
        /// The program.
        program: &'static str,
        /// The package that has it.
        package: &'static str,
    },
    /// The holder or slirp4netns would not start or did not say it was ready.
    #[error("cannot make the network namespace of a job: {detail}")]
    Holder {
        /// What went wrong.
        #[source]
        detail: HolderError,
    },
    /// Outbound access needs the service to run as root (it sets routes in the namespace).
    #[error(
        "this job's policy grants network access, which needs the service to run as root here (it routes the job's traffic through slirp4netns and blocks private addresses)"
    )]
    OutboundNeedsRoot,
}

/// What went wrong making a job's network namespace ([`NetworkError::Holder`]).
#[derive(Debug, thiserror::Error)]
pub enum HolderError {
    /// A helper program would not start.
    #[error("{}: {source}", program.display())]
    Spawn {
        /// The program.
        program: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// bwrap's info pipe is missing.
    #[error("no info pipe")]
    NoInfoPipe,
    /// bwrap did not say the pid of the namespace's process.
    #[error("bwrap did not report the namespace's process (said {said:?})")]
    NoChildPid {
        /// What it said.
        said: String,
    },
    /// The namespace's process is gone.
    #[error("the namespace's process {pid} is gone: {source}")]
    Gone {
        /// Its pid.
        pid: u32,
        /// Why its `/proc` entry cannot be read.
        #[source]
        source: std::io::Error,
    },
    /// The namespace's process did not start in time.
    #[error("the namespace's process {pid} did not start within 10 s")]
    NotStarted {
        /// Its pid.
        pid: u32,
    },
    /// slirp4netns ended before the job's route was up.
    #[error("slirp4netns ended before its route was up ({0})")]
    SlirpEnded(std::process::ExitStatus),
    /// slirp4netns did not bring the route up in time.
    #[error("slirp4netns did not bring the job's network up within 10 s")]
    SlirpSlow,
    /// `ip` could not be waited for.
    #[error("ip: {0}")]
    IpWait(#[source] std::io::Error),
    /// `ip route` failed.
    #[error("ip route: {stderr}")]
    IpRoute {
        /// What it said on standard error.
        stderr: String,
    },
}

/// The programs a job's network needs, found once.
#[derive(Debug, Clone)]
pub struct NetworkTools {
    bwrap: PathBuf,
    nsenter: PathBuf,
    cat: PathBuf,
    sh: PathBuf,
    setpriv: PathBuf,
    /// For a service that is not root: its holder is made by `unshare` and brings its loopback
    /// up with `ip`.
    unshare: Option<PathBuf>,
    ip: Option<PathBuf>,
    /// For outbound access: `slirp4netns`, `ip` and `setpriv` (absent: jobs granted network
    /// access are refused at launch with a hint).
    outbound: Option<OutboundTools>,
    privileged: bool,
}

#[derive(Debug, Clone)]
struct OutboundTools {
    slirp4netns: PathBuf,
    ip: PathBuf,
}

impl NetworkTools {
    /// Finds the programs: bwrap, nsenter and cat are required; slirp4netns and ip only for
    /// jobs granted network access.
    pub fn detect(bwrap: PathBuf, setpriv: PathBuf, privileged: bool) -> Result<NetworkTools, NetworkError> {
        let find = |program: &'static str, package: &'static str| {
            crate::which(std::ffi::OsStr::new(program)).map_err(|_| NetworkError::Missing { program, package })
        };
        let outbound = match (find("slirp4netns", "slirp4netns"), find("ip", "iproute2")) {
            (Ok(slirp4netns), Ok(ip)) => Some(OutboundTools { slirp4netns, ip }),
            _ => None,
        };
        Ok(NetworkTools {
            bwrap,
            nsenter: find("nsenter", "util-linux")?,
            cat: find("cat", "coreutils")?,
            sh: find("sh", "dash")?,
            setpriv,
            unshare: find("unshare", "util-linux").ok(),
            ip: find("ip", "iproute2").ok(),
            outbound,
            privileged,
        })
    }

    /// Whether jobs granted network access can have it here; otherwise, why not.
    pub fn outbound_ready(&self) -> Result<(), NetworkError> {
        if !self.privileged {
            return Err(NetworkError::OutboundNeedsRoot);
        }
        match self.outbound {
            Some(_) => Ok(()),
            None => Err(NetworkError::Missing { program: "slirp4netns and ip", package: "slirp4netns iproute2" }),
        }
    }
}

/// A job's network namespace: held while this lives, gone (with everything in it) once it is
/// dropped.
#[derive(Debug)]
pub struct JobNetwork {
    holder: Child,
    /// The holder's info pipe, kept open: bwrap writes the rest of its JSON after the pid,
    /// and a closed pipe killed it with SIGPIPE (its namespace's process then stuck unborn).
    _info: Option<Info>,
    /// The holder's `cat`, inside the namespace: its `/proc/PID/ns/net` is the namespace.
    inside: u32,
    /// The write end of the holder's stdin, which nothing is written to: the holder ends at its
    /// end of file, when this is dropped or the service's process ends in any way. Found:
    /// holders whose service was killed in the moment they were made (before bwrap armed their
    /// parent-death signal) lived on, each holding its empty namespace.
    _lifeline: Option<std::process::ChildStdin>,
    slirp: Option<Child>,
    nsenter: PathBuf,
    privileged: bool,
}

/// How long the holder and slirp4netns get to say they are ready.
const READY_WAIT: Duration = Duration::from_secs(10);

impl JobNetwork {
    /// A new namespace with its loopback up; with `outbound`, a way out to public addresses.
    /// Its way out runs in the cgroup whose `cgroup.procs` files are `cgroup_procs` (none: the
    /// service's).
    pub fn create(tools: &NetworkTools, outbound: bool, cgroup_procs: &[PathBuf]) -> Result<JobNetwork, NetworkError> {
        if outbound {
            tools.outbound_ready()?;
        }
        let holder_error = |detail: HolderError| NetworkError::Holder { detail };
        let (mut holder, info, inside) =
            if tools.privileged { holder_as_root(tools)? } else { holder_unprivileged(tools)? };
        if let Err(detail) = until_holding(inside) {
            end(&mut holder);
            return Err(holder_error(detail));
        }
        let lifeline = holder.stdin.take();

        let mut network = JobNetwork {
            holder,
            _info: info,
            _lifeline: lifeline,
            inside,
            slirp: None,
            nsenter: tools.nsenter.clone(),
            privileged: tools.privileged,
        };
        if outbound && let Some(out) = &tools.outbound {
            network.slirp = Some(network.way_out(out, tools, cgroup_procs)?);
        }
        Ok(network)
    }

    /// The pid (on the host) of a process inside the namespace.
    pub fn inside_pid(&self) -> u32 {
        self.inside
    }

    /// Whether the job has a way out (slirp4netns).
    pub fn outbound(&self) -> bool {
        self.slirp.is_some()
    }

    /// The `nsenter` command line that runs what follows it in this namespace.
    pub fn enter(&self) -> Vec<OsString> {
        let mut argv = vec![self.nsenter.clone().into_os_string()];
        if self.privileged {
            argv.push(format!("--net=/proc/{}/ns/net", self.inside).into());
        } else {
            // Unprivileged, the namespace belongs to the holder's user namespace: enter both,
            // keeping the service's own uid.
            argv.push(format!("--target={}", self.inside).into());
            argv.extend(["--user", "--net", "--preserve-credentials"].map(OsString::from));
        }
        argv.push("--".into());
        argv
    }

    /// Starts slirp4netns on the namespace and routes private ranges to nowhere.
    fn way_out(
        &self,
        out: &OutboundTools,
        tools: &NetworkTools,
        cgroup_procs: &[PathBuf],
    ) -> Result<Child, NetworkError> {
        let error = |detail: HolderError| NetworkError::Holder { detail };
        let mut command = if cgroup_procs.is_empty() {
            Command::new(&tools.setpriv)
        } else {
            let mut join = Command::new(&tools.sh);
            join.arg("-c").arg(crate::cgroup::JOIN_CGROUP).arg("sh").args(cgroup_procs).arg("--").arg(&tools.setpriv);
            join
        };
        // Dies with the service (its parent) even if killed with SIGKILL.
        command.env_clear().args(["--pdeathsig", "KILL", "--"]).arg(&out.slirp4netns);
        command.args(["--configure", "--mtu=65520", "--disable-host-loopback", "--enable-sandbox", "--enable-seccomp"]);
        command.arg(self.inside.to_string()).arg("tap0");
        command.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
        let mut slirp =
            command.spawn().map_err(|source| error(HolderError::Spawn { program: out.slirp4netns.clone(), source }))?;
        // Ready once its default route is in the namespace (`--configure` adds it last).
        let started = Instant::now();
        loop {
            let routes = std::fs::read_to_string(format!("/proc/{}/net/route", self.inside)).unwrap_or_default();
            if routes.lines().skip(1).any(|l| l.split_whitespace().nth(1) == Some("00000000")) {
                break;
            }
            if let Ok(Some(status)) = slirp.try_wait() {
                return Err(error(HolderError::SlirpEnded(status)));
            }
            if started.elapsed() > READY_WAIT {
                end(&mut slirp);
                return Err(error(HolderError::SlirpSlow));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let routes = prohibited_routes(&host_networks());
        let mut ip = Command::new(&self.nsenter);
        ip.env_clear().arg(format!("--net=/proc/{}/ns/net", self.inside)).arg("--").arg(&out.ip);
        ip.args(["-batch", "-"]).stdin(Stdio::piped()).stdout(Stdio::null()).stderr(Stdio::piped());
        let mut ip = ip.spawn().map_err(|source| error(HolderError::Spawn { program: out.ip.clone(), source }))?;
        if let Some(mut input) = ip.stdin.take() {
            for route in &routes {
                let _ = writeln!(input, "route add prohibit {route}");
            }
        }
        let output = ip.wait_with_output().map_err(|e| error(HolderError::IpWait(e)))?;
        if !output.status.success() {
            end(&mut slirp);
            let stderr = String::from_utf8_lossy(&output.stderr).trim().to_owned();
            return Err(error(HolderError::IpRoute { stderr }));
        }
        Ok(slirp)
    }
}

/// The holder under a root service: bwrap with `--unshare-net` (which brings the loopback up)
/// running `cat`; its pid inside comes on bwrap's info pipe.
fn holder_as_root(tools: &NetworkTools) -> Result<(Child, Option<Info>, u32), NetworkError> {
    let holder_error = |detail: HolderError| NetworkError::Holder { detail };
    let mut command = Command::new(&tools.bwrap);
    command.env_clear().args(["--unshare-net", "--die-with-parent", "--new-session"]);
    // The holder is the service's own program (cat), not the job's: it sees the host's files
    // read-only and only ever waits for the end of its stdin.
    // Its stdout is bwrap's info pipe, which bwrap closes in the child: `cat` refused a closed
    // stdout ("Bad file descriptor", found in a test), so it gets /dev/null.
    command.args(["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--info-fd", "1", "--"]);
    command.arg(&tools.sh).arg("-c").arg(r#"exec "$0" > /dev/null"#).arg(&tools.cat);
    // Not its stderr: a pipe the holder keeps open could not be read to its end on failure.
    command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::null());
    let mut holder =
        command.spawn().map_err(|source| holder_error(HolderError::Spawn { program: tools.bwrap.clone(), source }))?;
    let mut info = holder.stdout.take().map(BufReader::new);
    match child_pid(info.as_mut()) {
        Ok(pid) => Ok((holder, info, pid)),
        Err(detail) => {
            end(&mut holder);
            Err(holder_error(detail))
        }
    }
}

/// The holder under a service that is not root: `unshare` makes a user namespace (the
/// service's uid as its root) owning a network namespace, brings its loopback up with `ip`
/// and becomes `cat`. Not bwrap: unprivileged, bwrap's process sits in a second, nested
/// user namespace, which does not own the network namespace, so `nsenter` could not enter it.
fn holder_unprivileged(tools: &NetworkTools) -> Result<(Child, Option<Info>, u32), NetworkError> {
    let holder_error = |detail: HolderError| NetworkError::Holder { detail };
    let (Some(unshare), Some(ip)) = (&tools.unshare, &tools.ip) else {
        return Err(NetworkError::Missing { program: "unshare and ip", package: "util-linux iproute2" });
    };
    // setpriv's parent-death signal passes through both execs: the holder dies with the
    // service, even by SIGKILL.
    let mut command = Command::new(&tools.setpriv);
    command.env_clear().args(["--pdeathsig", "KILL", "--"]).arg(unshare);
    command.args(["--user", "--map-root-user", "--net", "--"]);
    command.arg(&tools.sh).arg("-c").arg(r#""$1" link set lo up && exec "$2" > /dev/null"#).arg("sh");
    command.arg(ip).arg(&tools.cat);
    command.stdin(Stdio::piped()).stdout(Stdio::null()).stderr(Stdio::null());
    let holder =
        command.spawn().map_err(|source| holder_error(HolderError::Spawn { program: unshare.clone(), source }))?;
    let pid = holder.id();
    Ok((holder, None, pid))
}

/// The holder's info pipe.
type Info = BufReader<std::process::ChildStdout>;

impl Drop for JobNetwork {
    fn drop(&mut self) {
        if let Some(slirp) = &mut self.slirp {
            end(slirp);
        }
        end(&mut self.holder);
    }
}

/// Kills and reaps a helper process (the holder's `cat` dies with it: `--die-with-parent`).
fn end(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// The `child-pid` bwrap writes on its info fd (the holder's stdout), read until it comes or
/// the holder ends.
fn child_pid(reader: Option<&mut Info>) -> Result<u32, HolderError> {
    let reader = reader.ok_or(HolderError::NoInfoPipe)?;
    let started = Instant::now();
    let mut info = String::new();
    while started.elapsed() < READY_WAIT {
        let mut line = String::new();
        match reader.read_line(&mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => info.push_str(&line),
        }
        if let Some(pid) = parse_child_pid(&info) {
            return Ok(pid);
        }
    }
    Err(HolderError::NoChildPid { said: info })
}

/// Waits until the holder's child runs `cat`: bwrap reports the child's pid as soon as it is
/// cloned, before the child has brought the namespace's loopback up (a job entering then found
/// its loopback down: ENETUNREACH on 127.0.0.1).
fn until_holding(pid: u32) -> Result<(), HolderError> {
    let started = Instant::now();
    while started.elapsed() < READY_WAIT {
        match std::fs::read_to_string(format!("/proc/{pid}/comm")) {
            Ok(comm) if comm.trim_end() == "cat" => return Ok(()),
            Ok(_) => std::thread::sleep(Duration::from_micros(500)),
            Err(source) => return Err(HolderError::Gone { pid, source }),
        }
    }
    Err(HolderError::NotStarted { pid })
}

/// `"child-pid": N` out of bwrap's info JSON.
fn parse_child_pid(info: &str) -> Option<u32> {
    let after = info.split_once("\"child-pid\"")?.1.trim_start().strip_prefix(':')?.trim_start();
    let digits: String = after.chars().take_while(char::is_ascii_digit).collect();
    if !after[digits.len()..].trim_start().starts_with([',', '}']) {
        return None;
    }
    digits.parse().ok()
}

/// IPv4 ranges a job's way out never leads to (RFC 6890 and its successors: this network,
/// private, shared, loopback, link-local, IETF protocol assignments, documentation, 6to4
/// relays, benchmarking, multicast, reserved and broadcast).
pub const PROHIBITED: [&str; 15] = [
    "0.0.0.0/8",
    "10.0.0.0/8",
    "100.64.0.0/10",
    "127.0.0.0/8",
    "169.254.0.0/16",
    "172.16.0.0/12",
    "192.0.0.0/24",
    "192.0.2.0/24",
    "192.88.99.0/24",
    "192.168.0.0/16",
    "198.18.0.0/15",
    "198.51.100.0/24",
    "203.0.113.0/24",
    "224.0.0.0/4",
    "240.0.0.0/4",
];

/// slirp4netns's own network (its gateway and DNS forwarder): more specific than 10.0.0.0/8,
/// so its connected route still wins; `--disable-host-loopback` keeps the gateway from
/// leading to the host's loopback.
const SLIRP_NETWORK: &str = "10.0.2.0/24";

/// The prohibit routes for a namespace on a host with `host` networks (its own addresses as
/// /32 and its connected networks and gateways): every [`PROHIBITED`] range and each of the
/// host's, except slirp's own network.
pub fn prohibited_routes(host: &[(Ipv4Addr, u8)]) -> Vec<String> {
    let mut routes: Vec<String> = PROHIBITED.iter().map(|r| (*r).to_owned()).collect();
    for (addr, prefix) in host {
        let network = network_of(*addr, *prefix);
        let route = format!("{network}/{prefix}");
        if route != SLIRP_NETWORK && !routes.contains(&route) && *prefix > 0 {
            routes.push(route);
        }
    }
    routes
}

fn network_of(addr: Ipv4Addr, prefix: u8) -> Ipv4Addr {
    let mask = if prefix == 0 { 0 } else { u32::MAX << (32 - u32::from(prefix.min(32))) };
    Ipv4Addr::from(u32::from(addr) & mask)
}

/// The host's own IPv4 addresses (as /32) and the networks and gateways of its routes (from
/// `/proc/net/fib_trie` and `/proc/net/route`): a job's way out must not lead back to the host
/// (where the coordinator may listen on every address) or its neighbours.
pub fn host_networks() -> Vec<(Ipv4Addr, u8)> {
    let mut found = Vec::new();
    if let Ok(trie) = std::fs::read_to_string("/proc/net/fib_trie") {
        found.extend(local_addresses(&trie).into_iter().map(|a| (a, 32)));
    }
    if let Ok(table) = std::fs::read_to_string("/proc/net/route") {
        found.extend(route_networks(&table));
    }
    found.sort_unstable();
    found.dedup();
    found
}

/// The `/32 host LOCAL` entries of `/proc/net/fib_trie`: the host's own addresses.
fn local_addresses(trie: &str) -> Vec<Ipv4Addr> {
    let mut found = Vec::new();
    let mut last: Option<Ipv4Addr> = None;
    for line in trie.lines() {
        let line = line.trim_start_matches([' ', '|', '+', '-']);
        if let Some(addr) = line.split_whitespace().next().and_then(|a| a.parse().ok()) {
            last = Some(addr);
        } else if line.trim() == "/32 host LOCAL"
            && let Some(addr) = last
            && !found.contains(&addr)
        {
            found.push(addr);
        }
    }
    found
}

/// The destinations (with their prefix) and gateways of `/proc/net/route` (little-endian hex),
/// but the default route's destination.
fn route_networks(table: &str) -> Vec<(Ipv4Addr, u8)> {
    let hex = |s: &str| u32::from_str_radix(s, 16).ok().map(|v| Ipv4Addr::from(v.swap_bytes()));
    let mut found = Vec::new();
    for line in table.lines().skip(1) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (Some(dest), Some(gateway), Some(mask)) = (
            fields.get(1).and_then(|s| hex(s)),
            fields.get(2).and_then(|s| hex(s)),
            fields.get(7).and_then(|s| hex(s)),
        ) else {
            continue;
        };
        let prefix = u8::try_from(u32::from(mask).count_ones()).unwrap_or(32);
        if prefix > 0 {
            found.push((dest, prefix));
        }
        if !gateway.is_unspecified() {
            found.push((gateway, 32));
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A holder ends at the end of its lifeline, as when its service is killed before bwrap
    /// armed the holder's parent-death signal (holders so orphaned lived on).
    #[test]
    fn a_holder_ends_when_its_lifeline_closes() {
        let (Ok(bwrap), Ok(setpriv)) = (crate::which("bwrap".as_ref()), crate::which("setpriv".as_ref())) else {
            svc_test_require::skip("bwrap and setpriv are needed");
            return;
        };
        let tools = NetworkTools::detect(bwrap, setpriv, rustix::process::geteuid().is_root()).expect("the tools");
        let mut network = JobNetwork::create(&tools, false, &[]).expect("a namespace");
        let inside = network.inside_pid();
        let alive = || {
            std::fs::read_to_string(format!("/proc/{inside}/stat"))
                .is_ok_and(|s| s.rsplit_once(')').is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z')))
        };
        assert!(alive(), "the holder runs");
        drop(network._lifeline.take());
        let started = Instant::now();
        while alive() {
            assert!(started.elapsed() < Duration::from_secs(5), "the holder outlived its lifeline");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    #[test]
    fn the_child_pid_is_read_from_bwraps_info() {
        assert_eq!(parse_child_pid("{\n    \"child-pid\": 4242\n}\n"), Some(4242));
        assert_eq!(parse_child_pid("{\"child-pid\": 17, \"net-namespace\": 1}"), Some(17));
        assert_eq!(parse_child_pid("{\n    \"child-pid\": 42"), None, "a number not yet complete");
        assert_eq!(parse_child_pid("{}"), None);
    }

    #[test]
    fn the_hosts_own_addresses_come_from_the_fib_trie() {
        let trie = "Main:\n  +-- 0.0.0.0/0 3 0 5\n     |-- 0.0.0.0\n        /0 universe UNICAST\n     +-- 10.1.2.0/24 2 0 2\n        |-- 10.1.2.7\n           /32 host LOCAL\n     |-- 127.0.0.1\n        /32 host LOCAL\n";
        assert_eq!(local_addresses(trie), vec![Ipv4Addr::new(10, 1, 2, 7), Ipv4Addr::LOCALHOST]);
    }

    #[test]
    fn routes_give_networks_and_gateways_but_not_the_default() {
        let table = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\neth0\t00000000\t0102A8C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\neth0\t0002A8C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n";
        assert_eq!(
            route_networks(table),
            vec![(Ipv4Addr::new(192, 168, 2, 1), 32), (Ipv4Addr::new(192, 168, 2, 0), 24)]
        );
    }

    #[test]
    fn prohibited_routes_cover_the_host_but_never_slirps_own_network() {
        let host =
            [(Ipv4Addr::new(203, 0, 113, 9), 32), (Ipv4Addr::new(10, 0, 2, 15), 24), (Ipv4Addr::new(8, 8, 4, 4), 32)];
        let routes = prohibited_routes(&host);
        assert!(routes.contains(&"10.0.0.0/8".to_owned()));
        assert!(routes.contains(&"8.8.4.4/32".to_owned()), "a public address of the host");
        assert!(routes.contains(&"203.0.113.9/32".to_owned()));
        assert!(!routes.contains(&SLIRP_NETWORK.to_owned()));
    }
}
