//! A network of its own per job (issue 39, point 1), with real sandboxes and Node.js: a job's
//! loopback is its own (its app and agent meet there, no other job and nothing of the host is
//! on it); a job granted network access gets out to public addresses only, never to the
//! host's loopback through slirp's gateway, the host's own addresses or a private range.

use std::io::Write;
use std::net::{Ipv4Addr, TcpListener};
use std::path::PathBuf;
use std::time::Duration;

use svc_runner::{
    Confined, DEFAULT_UID_BASE, JobRunner, JobSpec, Limits, LocalRunner, Mount, Network, Part, RunningJob,
};

fn probe(args: &[&str]) -> Confined {
    let fixtures = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut argv = vec!["node".into(), "/probe/probe.js".into()];
    argv.extend(args.iter().map(|a| (*a).into()));
    Confined {
        argv,
        env: Vec::new(),
        mounts: vec![Mount { host: fixtures, inside: "/probe".into(), writable: false, job_owned: false }],
        cwd: "/".into(),
    }
}

fn job(id: &str, app: Confined, agent: Option<Confined>, network: Network) -> JobSpec {
    JobSpec { agent, network, ..JobSpec::new(id, app) }
}

async fn runner() -> LocalRunner {
    LocalRunner::new(Limits::default(), DEFAULT_UID_BASE).await.expect("bubblewrap works here")
}

/// Lines of `running` until one of `part` contains `until` (30 s at most).
async fn lines_until(running: &mut Box<dyn RunningJob>, part: Part, until: &str) -> Vec<String> {
    let mut lines = Vec::new();
    for _ in 0..600 {
        for (p, line) in running.output() {
            if p == part {
                lines.push(line);
            }
        }
        if lines.iter().any(|l| l.contains(until)) {
            return lines;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no {until:?} from the {} within 30 s: {lines:?}", part.as_str());
}

/// What `connect` printed for `target`.
fn result_for<'a>(lines: &'a [String], target: &str) -> &'a str {
    lines
        .iter()
        .find_map(|l| l.strip_prefix(target).and_then(|r| r.strip_prefix(' ')))
        .unwrap_or_else(|| panic!("no result for {target}: {lines:?}"))
}

/// A free port on the host's loopback, with a listener answering on it.
fn host_listener() -> (TcpListener, u16) {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let serving = listener.try_clone().expect("clone");
    std::thread::spawn(move || {
        while let Ok((mut s, _)) = serving.accept() {
            let _ = s.write_all(b"hello from the host\n");
        }
    });
    (listener, port)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_job_reaches_its_own_app_on_loopback_but_no_other_jobs_and_nothing_of_the_hosts() {
    let runner = runner().await;
    let (_host, host_port) = host_listener();
    // Job A: an app listening on 127.0.0.1:4100 inside.
    let mut a =
        runner.launch(&job("iso_a", probe(&["listen", "4100", "job-a"]), None, Network::default())).expect("launched");
    lines_until(&mut a, Part::App, "listening").await;

    // Job B: the same port, and the host's listener, from another namespace.
    let mut b = runner
        .launch(&job(
            "iso_b",
            probe(&["connect", "127.0.0.1", "4100", &host_port.to_string()]),
            None,
            Network::default(),
        ))
        .expect("launched");
    let seen = lines_until(&mut b, Part::App, &format!("127.0.0.1:{host_port}")).await;
    let seen = lines_until_both(&mut b, seen, &["127.0.0.1:4100"]).await;
    assert_eq!(result_for(&seen, "127.0.0.1:4100"), "ECONNREFUSED", "job A's app from job B: {seen:?}");
    assert_eq!(result_for(&seen, &format!("127.0.0.1:{host_port}")), "ECONNREFUSED", "the host's loopback");

    // Job C: an app and its agent (which waits a second for the app to listen).
    let mut c = runner
        .launch(&job(
            "iso_c",
            probe(&["listen", "4101", "job-c"]),
            Some(Confined {
                argv: vec![
                    "sh".into(),
                    "-c".into(),
                    "sleep 1; exec node /probe/probe.js connect 127.0.0.1 4101".into(),
                ],
                ..probe(&[])
            }),
            Network::default(),
        ))
        .expect("launched");
    let agent = lines_until(&mut c, Part::Agent, "127.0.0.1:4101").await;
    assert_eq!(result_for(&agent, "127.0.0.1:4101"), "ok hello from job-c", "app and agent share the job's loopback");
    for job in [a, b, c] {
        job.stop().await;
    }
}

/// Abstract unix sockets belong to a network namespace: before issue 39 a job could connect to
/// any the host's processes listened on (a desktop's, a service's); now to none.
#[tokio::test(flavor = "multi_thread")]
async fn a_job_reaches_no_abstract_unix_socket_of_the_host() {
    use std::os::linux::net::SocketAddrExt;
    let runner = runner().await;
    let name = format!("svc-isolation-test-{}", std::process::id());
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).expect("an abstract name");
    let listener = std::os::unix::net::UnixListener::bind_addr(&addr).expect("bind");
    // The listener answers on the host: the name is live.
    std::os::unix::net::UnixStream::connect_addr(&addr).expect("the host reaches it");
    let mut running =
        runner.launch(&job("iso_abstract", probe(&["abstract", &name]), None, Network::default())).expect("launched");
    let lines = lines_until(&mut running, Part::App, &format!("@{name}")).await;
    assert_eq!(result_for(&lines, &format!("@{name}")), "ECONNREFUSED", "{lines:?}");
    running.stop().await;
    drop(listener);
}

/// Collects more lines until each of `targets` has a result.
async fn lines_until_both(running: &mut Box<dyn RunningJob>, mut lines: Vec<String>, targets: &[&str]) -> Vec<String> {
    for target in targets {
        if !lines.iter().any(|l| l.starts_with(target)) {
            lines.extend(lines_until(running, Part::App, target).await);
        }
    }
    lines
}

/// The host's first non-loopback IPv4 address, if it has one.
fn host_address() -> Option<Ipv4Addr> {
    let socket = std::net::UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)).ok()?;
    // No packet is sent: connecting a UDP socket only picks the route's source address.
    socket.connect((Ipv4Addr::new(192, 0, 2, 1), 9)).ok()?;
    match socket.local_addr().ok()?.ip() {
        std::net::IpAddr::V4(ip) if !ip.is_loopback() && !ip.is_unspecified() => Some(ip),
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_job_granted_network_access_gets_out_but_never_to_the_hosts_loopback_its_addresses_or_private_ranges() {
    let runner = runner().await;
    if runner.outbound_ready().is_err() {
        svc_test_require::skip("outbound access needs root, slirp4netns and ip");
        return;
    }
    // Listening on every address: reachable on loopback and on the host's own addresses.
    let listener = TcpListener::bind((Ipv4Addr::UNSPECIFIED, 0)).expect("bind");
    let port = listener.local_addr().expect("addr").port().to_string();
    std::thread::spawn(move || {
        while let Ok((mut s, _)) = listener.accept() {
            let _ = s.write_all(b"hello from the host\n");
        }
    });
    let mut targets = vec!["10.0.2.2".to_owned(), "10.1.2.3".to_owned(), "192.168.1.1".to_owned()];
    targets.extend(host_address().map(|a| a.to_string()));
    let mut results = Vec::new();
    for outbound in [true, false] {
        let mut seen = Vec::new();
        for target in targets.iter().chain(["1.1.1.1".to_owned()].iter()) {
            let port = if target == "1.1.1.1" { "443" } else { port.as_str() };
            let mut running = runner
                .launch(&job("iso_out", probe(&["connect", target, port]), None, Network { outbound }))
                .expect("launched");
            let lines = lines_until(&mut running, Part::App, &format!("{target}:{port}")).await;
            seen.push((target.clone(), result_for(&lines, &format!("{target}:{port}")).to_owned()));
            running.stop().await;
        }
        results.push(seen);
    }
    eprintln!("with a way out: {:?}\nwithout: {:?}", results[0], results[1]);
    for (target, result) in &results[0] {
        if target == "1.1.1.1" {
            // A public address: the attempt leaves the namespace (this machine may have no
            // route to the internet, so it may be refused or time out, but not for want of a
            // route in the job).
            assert_ne!(result, "ENETUNREACH", "{target}: the way out is not there");
            assert_ne!(result, "EACCES", "{target}: a public address is prohibited");
        } else {
            assert!(!result.starts_with("ok"), "{target} reached the host or a private network: {result}");
        }
    }
    for (target, result) in &results[1] {
        assert_eq!(result, "ENETUNREACH", "{target}: without network access, nothing but loopback");
    }
}

/// A job's way out is part of the job: slirp4netns runs in the job's cgroup, so what the
/// job's traffic costs (slirp's memory and CPU) is bounded with the job's own.
#[tokio::test(flavor = "multi_thread")]
async fn a_jobs_way_out_runs_in_the_jobs_cgroup() {
    let runner = runner().await;
    if runner.outbound_ready().is_err() {
        svc_test_require::skip("outbound access needs root, slirp4netns and ip");
        return;
    }
    let cgroups = svc_runner::Cgroups::detect().expect("this host has cgroups");
    let resources = svc_runner::JobResources { memory_bytes: 512 << 20, processes: 256, cpu_millicores: 1000 };
    let runner = runner.with_cgroups(cgroups, resources);
    let mut running = runner
        .launch(&job("iso_slirp_cgroup", probe(&["listen", "4102", "slirp"]), None, Network { outbound: true }))
        .expect("launched");
    lines_until(&mut running, Part::App, "listening").await;
    // The job's group, as its app's process sees it, and every process in it.
    let app = running.pids()[0];
    let membership = std::fs::read_to_string(format!("/proc/{app}/cgroup")).expect("its cgroup");
    let group = membership
        .lines()
        .find_map(|l| l.split_once("memory:").map(|(_, p)| p).or_else(|| l.strip_prefix("0::")))
        .expect("a memory or unified hierarchy");
    assert!(group.contains("svc-jobs"), "the app is in a job group: {membership}");
    let members: Vec<u32> = std::fs::read_dir("/proc")
        .expect("/proc")
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .filter(|pid: &u32| {
            std::fs::read_to_string(format!("/proc/{pid}/cgroup")).is_ok_and(|c| c.lines().any(|l| l.ends_with(group)))
        })
        .collect();
    let names: Vec<String> = members
        .iter()
        .filter_map(|pid| std::fs::read_to_string(format!("/proc/{pid}/comm")).ok())
        .map(|c| c.trim_end().to_owned())
        .collect();
    assert!(names.iter().any(|n| n == "slirp4netns"), "slirp4netns is not in the job's group: {names:?}");
    running.stop().await;
}
