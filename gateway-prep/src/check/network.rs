//! Checks that touch the network: the gateway's ports, the hostname's A/AAAA records, the
//! coordinator's reachability and the clock against the coordinator's.

use std::io::ErrorKind;
use std::net::{IpAddr, SocketAddr, TcpListener, UdpSocket};
use std::time::{Duration, SystemTime};

use relay_dns::{DnsChecker, DnsError};

use super::CheckResult;
use crate::Root;
use crate::coordinator::{CoordinatorClient, Health};

/// Whether `/proc/net/tcp` or `/proc/net/tcp6` (under the root) lists a listening socket on
/// `port`; `None` when neither can be read.
pub fn listening_on(root: &Root, port: u16) -> Option<bool> {
    let mut read_any = false;
    for file in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = root.read(file) else { continue };
        read_any = true;
        let listening = text.lines().skip(1).any(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let local_port =
                fields.get(1).and_then(|a| a.rsplit(':').next()).and_then(|p| u16::from_str_radix(p, 16).ok());
            local_port == Some(port) && fields.get(3) == Some(&"0A") // 0A: TCP_LISTEN
        });
        if listening {
            return Some(true);
        }
    }
    read_any.then_some(false)
}

/// `ports.public` / `ports.tunnel`: the address can be bound now (the listener is closed at
/// once). A port below 1024 without the privilege to bind it is judged from the kernel's
/// socket tables instead: the unit grants `CAP_NET_BIND_SERVICE`.
pub fn port(id: &str, addr: SocketAddr, root: &Root) -> CheckResult {
    let in_use = || {
        CheckResult::fail(
            id,
            format!("{addr} is in use by another program"),
            format!(
                "find it with `ss -ltnp 'sport = :{}'` and stop it, or give init another address (--public/--tunnel)",
                addr.port()
            ),
        )
    };
    match TcpListener::bind(addr) {
        Ok(listener) => {
            drop(listener);
            CheckResult::pass(id, format!("{addr} is free and bindable"))
        }
        Err(e) if e.kind() == ErrorKind::AddrInUse => in_use(),
        Err(e) if e.kind() == ErrorKind::PermissionDenied => match listening_on(root, addr.port()) {
            Some(true) => in_use(),
            Some(false) => CheckResult::pass(
                id,
                format!(
                    "nothing listens on port {} (binding {addr} needs CAP_NET_BIND_SERVICE, which the unit grants)",
                    addr.port()
                ),
            ),
            None => CheckResult::warn(
                id,
                format!("cannot bind {addr} without privileges, nor read /proc/net/tcp"),
                "run the check as root to know whether the port is free",
            ),
        },
        Err(e) if e.kind() == ErrorKind::AddrNotAvailable => CheckResult::fail(
            id,
            format!("{} is not an address of this host", addr.ip()),
            "use 0.0.0.0 (every address) or one shown by `ip -brief address`",
        ),
        Err(e) => CheckResult::fail(id, format!("cannot bind {addr}: {e}"), "check the address and the firewall rules"),
    }
}

/// The address this host uses to reach the coordinator: the best guess at the address the
/// gateway is reached at when nothing more is known. A connected UDP socket reveals it
/// without sending a packet. Behind NAT it is a private address: pass `--public-ip`.
pub async fn detect_source_ip(coordinator: Option<&CoordinatorClient>) -> Option<IpAddr> {
    let (host, port) = coordinator?.host_port()?;
    let target = tokio::net::lookup_host((host.as_str(), port)).await.ok()?.next()?;
    let local: SocketAddr =
        if target.is_ipv4() { ([0, 0, 0, 0], 0).into() } else { (IpAddr::from([0u16; 8]), 0).into() };
    let socket = UdpSocket::bind(local).ok()?;
    socket.connect(target).ok()?;
    socket.local_addr().ok().map(|a| a.ip())
}

/// The record a fix names for `ip`.
fn record_for(hostname: &str, ip: IpAddr) -> String {
    let kind = if ip.is_ipv4() { "A" } else { "AAAA" };
    format!("{hostname}. 300 IN {kind} {ip}")
}

fn list(ips: &[IpAddr]) -> String {
    ips.iter().map(IpAddr::to_string).collect::<Vec<_>>().join(", ")
}

/// `dns.hostname`: the gateway hostname's A and AAAA records include one of the addresses
/// this host is reached at (`expected`). Other addresses beside it pass (several gateways
/// may share a name).
pub async fn hostname_dns(
    checker: Result<&DnsChecker, &DnsError>,
    hostname: Option<&str>,
    expected: &[IpAddr],
) -> CheckResult {
    const ID: &str = "dns.hostname";
    let Some(hostname) = hostname else {
        return CheckResult::warn(
            ID,
            "no gateway hostname known",
            "pass --hostname NAME (init records it in /etc/svc-gateway/operator.json)",
        );
    };
    let checker = match checker {
        Ok(c) => c,
        Err(e) => {
            return CheckResult::warn(ID, format!("cannot ask DNS: {e}"), "pass --dns ADDR or fix /etc/resolv.conf");
        }
    };
    let ips = match checker.lookup_ips(hostname).await {
        Ok(ips) => ips,
        Err(e @ DnsError::InvalidName { .. }) => {
            return CheckResult::fail(ID, e.to_string(), "pass the gateway's fully qualified hostname");
        }
        Err(e) => {
            return CheckResult::fail(
                ID,
                e.to_string(),
                "check the resolvers (/etc/resolv.conf or --dns) and that the hostname's zone is served",
            );
        }
    };
    let example = expected.first().copied();
    if ips.is_empty() {
        let fix = match example {
            Some(ip) => format!("add the record `{}`", record_for(hostname, ip)),
            None => format!("add an A (or AAAA) record for {hostname} with this host's public address"),
        };
        return CheckResult::fail(ID, format!("{hostname} has no A or AAAA record"), fix);
    }
    let Some(ip) = example else {
        return CheckResult::warn(
            ID,
            format!("{hostname} resolves to {}; this host's public address is unknown", list(&ips)),
            "pass --public-ip IP to check the records point here",
        );
    };
    if let Some(hit) = expected.iter().find(|e| ips.contains(e)) {
        return CheckResult::pass(ID, format!("{hostname} resolves to {}, including this host ({hit})", list(&ips)));
    }
    CheckResult::fail(
        ID,
        format!("{hostname} resolves to {}, not to this host ({})", list(&ips), list(expected)),
        format!("point it here: `{}` (DNS changes take the record's TTL to show)", record_for(hostname, ip)),
    )
}

/// `coordinator`: `GET /api/relay/health` answers `{"status": "ok"}`. Returns the answer
/// too, for the clock check.
pub async fn coordinator(client: Option<&CoordinatorClient>) -> (CheckResult, Option<Health>) {
    const ID: &str = "coordinator";
    let Some(client) = client else {
        let r = CheckResult::warn(
            ID,
            "no coordinator known",
            "pass --coordinator URL (init records it in /etc/svc-gateway/operator.json)",
        );
        return (r, None);
    };
    match client.health().await {
        Ok(h) if h.ok => (CheckResult::pass(ID, format!("{} answers /api/relay/health", client.base())), Some(h)),
        Ok(h) => {
            let r = CheckResult::fail(
                ID,
                format!("{}/api/relay/health answered {} without {{\"status\": \"ok\"}}", client.base(), h.status),
                "check the URL is the relay coordinator's (`svc relay serve`), not another service's",
            );
            (r, Some(h))
        }
        Err(e) => {
            let r = CheckResult::fail(
                ID,
                e.to_string(),
                "check the URL, its DNS, and that the firewall lets this host connect out to it",
            );
            (r, None)
        }
    }
}

/// The coordinator's health answer a check `id` reads, or why the check could not be made
/// (no coordinator given, or it did not answer).
fn answered<'a>(id: &str, known: bool, health: Option<&'a Health>) -> Result<&'a Health, CheckResult> {
    if !known {
        return Err(CheckResult::warn(id, "not checked: no coordinator known", "pass --coordinator URL"));
    }
    health.ok_or_else(|| {
        CheckResult::warn(id, "not checked: the coordinator did not answer", "fix the `coordinator` check first")
    })
}

/// `coordinator.operator`: the coordinator routes its deployments through the hosts of the
/// operator this host is registered as (`registered`, from the registration record). Its
/// feed assigns a host of another operator no route: the gateway connects, reports its feed
/// connected and serves nothing, so this is said here, with the fix.
pub fn coordinator_operator(known: bool, registered: Option<&str>, health: Option<&Health>) -> CheckResult {
    const ID: &str = "coordinator.operator";
    let health = match answered(ID, known, health) {
        Ok(health) => health,
        Err(not_checked) => return not_checked,
    };
    let Some(routed) = health.gateway_operator.as_deref() else {
        return CheckResult::warn(
            ID,
            "not checked: the coordinator does not say which gateway operator it routes for (an older version)",
            "compare `svc relay serve --gateway-operator` (default `local`) with the operator in \
             /etc/svc-gateway/operator.json by hand",
        );
    };
    match registered {
        Some(name) if name == routed => CheckResult::pass(
            ID,
            format!(
                "the coordinator routes its deployments through operator \"{routed}\"'s hosts, this host's operator"
            ),
        ),
        Some(name) => CheckResult::warn(ID, operator_mismatch(name, routed), operator_fix(name, routed)),
        None => CheckResult::warn(
            ID,
            format!(
                "this host is not registered yet; the coordinator routes its deployments through operator \
                 \"{routed}\"'s hosts"
            ),
            format!(
                "register as that operator: an admission token for it (`svc relay admin admission-token --operator \
                 {routed}`), then `gateway-prep init --operator {routed} ...`"
            ),
        ),
    }
}

/// What `check` and `init` say of a host registered as `registered` when the coordinator
/// routes for `routed`.
pub fn operator_mismatch(registered: &str, routed: &str) -> String {
    format!(
        "this host is registered as operator \"{registered}\", but the coordinator routes its deployments through \
         operator \"{routed}\"'s hosts: it assigns this host no route (the gateway's feed connects and it serves \
         nothing)"
    )
}

/// The fix for [`operator_mismatch`].
pub fn operator_fix(registered: &str, routed: &str) -> String {
    format!(
        "run the coordinator as this operator's: `svc relay serve ... --gateway-operator {registered}` (deployments \
         made from then on go through its hosts); or prepare a host for operator \"{routed}\" instead (an admission \
         token from `svc relay admin admission-token --operator {routed}`)"
    )
}

/// `clock.skew`: this host's clock is within `max` of the coordinator's (its `Date` header),
/// which admission tokens and certificates are judged by.
pub fn clock_skew(known: bool, health: Option<&Health>, now: SystemTime, max: Duration) -> CheckResult {
    const ID: &str = "clock.skew";
    let health = match answered(ID, known, health) {
        Ok(health) => health,
        Err(not_checked) => return not_checked,
    };
    let Some(date) = health.date else {
        return CheckResult::warn(ID, "not checked: the coordinator sent no Date header", "compare the clocks by hand");
    };
    // The header has whole seconds and the answer took time: allow one second either way.
    let (ahead, by) = match now.duration_since(date) {
        Ok(d) => (true, d),
        Err(e) => (false, e.duration()),
    };
    let secs = by.as_secs();
    let word = if ahead { "ahead of" } else { "behind" };
    if by <= max + Duration::from_secs(1) {
        CheckResult::pass(ID, format!("within {secs} s of the coordinator's clock"))
    } else {
        CheckResult::fail(
            ID,
            format!("this host's clock is {secs} s {word} the coordinator's (more than {} s)", max.as_secs()),
            "synchronise the clock: `timedatectl set-ntp true` (systemd-timesyncd) or start chrony",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listeners_are_found_in_the_kernels_tables() {
        let scratch = tempfile::tempdir().expect("a scratch directory");
        let dir = scratch.path();
        let root = Root::new(dir);
        assert_eq!(listening_on(&root, 443), None);
        std::fs::create_dir_all(dir.join("proc/net")).expect("dir");
        let tcp = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
                   0: 00000000:01BB 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1\n\
                   1: 0100007F:1F90 0100007F:D2F0 01 00000000:00000000 00:00000000 00000000     0        0 2\n";
        std::fs::write(dir.join("proc/net/tcp"), tcp).expect("tcp");
        assert_eq!(listening_on(&root, 443), Some(true));
        assert_eq!(listening_on(&root, 8080), Some(false), "8080 is an established connection, not a listener");
    }

    #[test]
    fn clock_skew_judges_the_date_header() {
        let now = SystemTime::now();
        let max = Duration::from_secs(30);
        let health = |date| Health { status: 200, ok: true, date, gateway_operator: None };
        assert_eq!(clock_skew(false, None, now, max).status, super::super::Status::Warn);
        assert_eq!(clock_skew(true, None, now, max).status, super::super::Status::Warn);
        assert_eq!(clock_skew(true, Some(&health(Some(now))), now, max).status, super::super::Status::Pass);
        let behind = clock_skew(true, Some(&health(Some(now + Duration::from_secs(300)))), now, max);
        assert_eq!(behind.status, super::super::Status::Fail);
        assert!(behind.found.contains("300 s behind"), "{}", behind.found);
        let ahead = clock_skew(true, Some(&health(Some(now - Duration::from_secs(90)))), now, max);
        assert!(ahead.found.contains("90 s ahead of"), "{}", ahead.found);
    }

    #[test]
    fn the_operator_check_compares_the_registration_with_what_the_coordinator_routes_for() {
        use super::super::Status;
        let health =
            |op: Option<&str>| Health { status: 200, ok: true, date: None, gateway_operator: op.map(Into::into) };
        let local = health(Some("local"));
        assert_eq!(coordinator_operator(true, Some("local"), Some(&local)).status, Status::Pass);
        let other = coordinator_operator(true, Some("north"), Some(&local));
        assert_eq!(other.status, Status::Warn);
        assert!(
            other.found.contains("registered as operator \"north\"") && other.found.contains("\"local\""),
            "{other:?}"
        );
        assert!(other.fix.as_deref().is_some_and(|f| f.contains("--gateway-operator north")), "{other:?}");
        assert_eq!(coordinator_operator(true, None, Some(&local)).status, Status::Warn);
        assert_eq!(coordinator_operator(true, Some("local"), Some(&health(None))).status, Status::Warn);
        assert_eq!(coordinator_operator(true, Some("local"), None).status, Status::Warn);
        assert_eq!(coordinator_operator(false, Some("local"), None).status, Status::Warn);
    }
}
