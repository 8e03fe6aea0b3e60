//! The preflight checks. Each returns a [`CheckResult`]: a stable id, pass/warn/fail, what
//! was found, and for anything but a pass, the fix. Checks read the host's files under a
//! [`Root`] and take every other fact as an input, so tests run them against a fake root and
//! loopback ports.

pub mod config;
pub mod network;
pub mod system;

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use relay_dns::{DnsChecker, DnsConfig};
use serde::Serialize;

use crate::Root;
use crate::args::{ArgsError, CheckArgs, MAX_MIN_FREE_MIB};
use crate::coordinator::CoordinatorClient;
use crate::init::record::Registration;
use crate::layout;

/// A check's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// As it should be.
    Pass,
    /// Works, but worth fixing (or could not be determined).
    Warn,
    /// The gateway will not work (well) until fixed.
    Fail,
}

impl Status {
    /// `pass`, `warn`, `fail`.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Warn => "warn",
            Status::Fail => "fail",
        }
    }
}

/// One check's result: the JSON shape of `check --format json` (an array of these).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckResult {
    /// Stable id (`ports.public`, `sysctl.net.core.somaxconn`, ...).
    pub id: String,
    /// Pass, warn or fail.
    pub status: Status,
    /// What was found, in one sentence.
    pub found: String,
    /// What to do about it (`null` on a pass).
    pub fix: Option<String>,
}

impl CheckResult {
    /// A pass.
    pub fn pass(id: &str, found: impl Into<String>) -> CheckResult {
        CheckResult { id: id.to_owned(), status: Status::Pass, found: found.into(), fix: None }
    }

    /// A warning and its fix.
    pub fn warn(id: &str, found: impl Into<String>, fix: impl Into<String>) -> CheckResult {
        CheckResult { id: id.to_owned(), status: Status::Warn, found: found.into(), fix: Some(fix.into()) }
    }

    /// A failure and its fix.
    pub fn fail(id: &str, found: impl Into<String>, fix: impl Into<String>) -> CheckResult {
        CheckResult { id: id.to_owned(), status: Status::Fail, found: found.into(), fix: Some(fix.into()) }
    }
}

/// Every check's result, in the order run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Report(pub Vec<CheckResult>);

impl Report {
    /// The worst status (a pass when empty).
    pub fn worst(&self) -> Status {
        self.0.iter().map(|r| r.status).max().unwrap_or(Status::Pass)
    }

    /// 0 when everything passed, 1 with warnings, 2 with failures.
    pub fn exit_code(&self) -> u8 {
        match self.worst() {
            Status::Pass => 0,
            Status::Warn => 1,
            Status::Fail => 2,
        }
    }

    /// The result of one check.
    pub fn get(&self, id: &str) -> Option<&CheckResult> {
        self.0.iter().find(|r| r.id == id)
    }

    /// The table people read: status, id, finding, and the fix under anything not passing.
    pub fn table(&self) -> String {
        let width = self.0.iter().map(|r| r.id.len()).max().unwrap_or(0);
        let mut out = String::new();
        for r in &self.0 {
            out.push_str(&format!("{:<4}  {:<width$}  {}\n", r.status.as_str(), r.id, r.found));
            if let Some(fix) = &r.fix {
                out.push_str(&format!("{:<4}  {:<width$}  fix: {fix}\n", "", ""));
            }
        }
        let count = |s: Status| self.0.iter().filter(|r| r.status == s).count();
        out.push_str(&format!(
            "{} checks: {} pass, {} warn, {} fail\n",
            self.0.len(),
            count(Status::Pass),
            count(Status::Warn),
            count(Status::Fail)
        ));
        out
    }

    /// The JSON array.
    pub fn json(&self) -> String {
        serde_json::to_string_pretty(&self.0).unwrap_or_else(|_| "[]".into())
    }
}

/// Why the checks could not run at all.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// A bad option.
    #[error("{0}")]
    Usage(String),
    /// A flag's value is out of its range.
    #[error(transparent)]
    Flag(#[from] ArgsError),
}

/// Everything the checks look at besides the files under the root.
#[derive(Debug, Clone)]
pub struct CheckInputs {
    /// The host's files.
    pub root: Root,
    /// The gateway's public hostname, if known.
    pub hostname: Option<String>,
    /// The public TLS address.
    pub public: SocketAddr,
    /// The tunnel address.
    pub tunnel: SocketAddr,
    /// Addresses the hostname must include (empty: detect).
    pub public_ips: Vec<IpAddr>,
    /// The coordinator, if known.
    pub coordinator: Option<CoordinatorClient>,
    /// The operator this host is registered as (the registration record's), if registered.
    pub operator: Option<String>,
    /// Where DNS questions go.
    pub dns: DnsConfig,
    /// The directory whose file system needs free space (host path).
    pub data_dir: PathBuf,
    /// Bytes needed free there.
    pub min_free_bytes: u64,
    /// The open-files limit the gateway will run with (the unit's `LimitNOFILE=`).
    pub limit_nofile: u64,
    /// Largest clock difference to the coordinator that passes.
    pub max_skew: Duration,
}

impl TryFrom<&CheckArgs> for CheckInputs {
    type Error = CheckError;

    /// The inputs from the command line, with defaults from the existing configuration
    /// (addresses from `gateway.json`, hostname and coordinator from the registration
    /// record, the open-files limit from the unit); an out-of-range `--min-free-mib` is
    /// refused.
    fn try_from(args: &CheckArgs) -> Result<CheckInputs, CheckError> {
        let min_free_mib = ArgsError::check("--min-free-mib", 0..=MAX_MIN_FREE_MIB, args.min_free_mib)?;
        let root = Root::new(&args.host.root);
        let config_dir = std::path::Path::new(layout::CONFIG_DIR);
        let gateway =
            relay_gateway::file::GatewayFile::read_as_written(&root.path(config_dir.join(layout::GATEWAY_FILE)));
        let record = Registration::read(&root).ok().flatten();
        let public =
            args.public.or(gateway.as_ref().ok().map(|g| g.public)).unwrap_or_else(|| default_addr(layout::PUBLIC));
        let tunnel =
            args.tunnel.or(gateway.as_ref().ok().map(|g| g.tunnel)).unwrap_or_else(|| default_addr(layout::TUNNEL));
        let hostname = args.host.hostname.clone().or_else(|| record.as_ref().map(|r| r.operator.hostname.clone()));
        let url = args.host.coordinator.clone().or_else(|| record.as_ref().map(|r| r.coordinator.clone()));
        let coordinator = url
            .map(|u| CoordinatorClient::new(&u, args.host.coordinator_ca.as_deref()))
            .transpose()
            .map_err(|e| CheckError::Usage(e.to_string()))?;
        let limit_nofile =
            root.read(layout::UNIT).ok().and_then(|unit| unit_limit_nofile(&unit)).unwrap_or(layout::LIMIT_NOFILE);
        Ok(CheckInputs {
            root,
            hostname,
            public,
            tunnel,
            public_ips: args.public_ips.clone(),
            coordinator,
            operator: record.as_ref().map(|r| r.operator.name.clone()),
            dns: DnsConfig { nameservers: args.nameservers.clone(), ..DnsConfig::default() },
            data_dir: args.data_dir.clone(),
            min_free_bytes: min_free_mib << 20,
            limit_nofile,
            max_skew: Duration::from_secs(30),
        })
    }
}

fn default_addr(text: &str) -> SocketAddr {
    text.parse().unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)))
}

/// The `LimitNOFILE=` of a unit file (its last setting; `a:b` takes the soft limit `a`).
pub fn unit_limit_nofile(unit: &str) -> Option<u64> {
    unit.lines()
        .filter_map(|l| l.trim().strip_prefix("LimitNOFILE="))
        .filter_map(|v| v.split(':').next().and_then(|n| n.trim().parse().ok()))
        .next_back()
}

/// Runs every check, in the documented order.
pub async fn run_checks(inputs: &CheckInputs) -> Report {
    let root = &inputs.root;
    let mut results = vec![
        config::gateway(root),
        config::registration(root),
        config::feed(root),
        network::port("ports.public", inputs.public, root),
        network::port("ports.tunnel", inputs.tunnel, root),
        system::nofile(root),
    ];
    results.extend(system::sysctls(root, inputs.limit_nofile));
    results.push(system::pacing(root));
    results.push(system::clock_sync(root));
    let (coordinator, health) = network::coordinator(inputs.coordinator.as_ref()).await;
    results.push(network::clock_skew(
        inputs.coordinator.is_some(),
        health.as_ref(),
        SystemTime::now(),
        inputs.max_skew,
    ));
    let mut expected = inputs.public_ips.clone();
    if expected.is_empty() {
        if !inputs.public.ip().is_unspecified() {
            expected.push(inputs.public.ip());
        } else if let Some(ip) = network::detect_source_ip(inputs.coordinator.as_ref()).await {
            expected.push(ip);
        }
    }
    let checker = DnsChecker::new(&inputs.dns);
    results.push(network::hostname_dns(checker.as_ref(), inputs.hostname.as_deref(), &expected).await);
    results.push(coordinator);
    results.push(network::coordinator_operator(
        inputs.coordinator.is_some(),
        inputs.operator.as_deref(),
        health.as_ref(),
    ));
    results.push(system::disk(root, &inputs.data_dir, inputs.min_free_bytes));
    Report(results)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exit_code_is_the_worst_status() {
        let pass = CheckResult::pass("a", "fine");
        let warn = CheckResult::warn("b", "meh", "do x");
        let fail = CheckResult::fail("c", "broken", "do y");
        assert_eq!(Report(vec![]).exit_code(), 0);
        assert_eq!(Report(vec![pass.clone()]).exit_code(), 0);
        assert_eq!(Report(vec![pass.clone(), warn.clone()]).exit_code(), 1);
        let all = Report(vec![pass, warn, fail]);
        assert_eq!(all.exit_code(), 2);
        let table = all.table();
        assert!(table.contains("fail  c  broken\n") && table.contains("fix: do y"), "{table}");
        assert!(table.ends_with("3 checks: 1 pass, 1 warn, 1 fail\n"), "{table}");
        let json: serde_json::Value = serde_json::from_str(&all.json()).expect("json");
        assert_eq!(json[0], serde_json::json!({"id": "a", "status": "pass", "found": "fine", "fix": null}));
        assert_eq!(json[2]["status"], "fail");
    }

    #[test]
    fn the_units_open_files_limit_is_read() {
        assert_eq!(unit_limit_nofile("[Service]\nLimitNOFILE=4096\n"), Some(4096));
        assert_eq!(unit_limit_nofile("LimitNOFILE=1024:2048\nLimitNOFILE=8192\n"), Some(8192));
        assert_eq!(unit_limit_nofile("LimitNOFILE=infinity\n"), None);
        assert_eq!(unit_limit_nofile(""), None);
    }
}
