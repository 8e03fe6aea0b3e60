//! Flags become validated settings in one step: `TryFrom<&ListenerArgs>` for the listener of
//! `svc serve` and `svc relay serve`, `TryFrom<&RelayServeArgs>` for the relay coordinator's
//! configuration. A value that cannot be used is refused with the flag and what it accepts,
//! never clamped or saturated in silence. (Plain ranges are refused earlier, by clap's
//! `value_parser!(..).range(..)` in `args.rs`; what is checked here needs more than one flag,
//! a unit conversion or a format.)

use std::time::Duration;

use relay_api::coordinator::{AgentCertificates, CoordinatorConfig};

use relay_api::runner::JobResources;

use crate::args::{DatabaseArgs, JobResourceArgs, ListenerArgs, RelayServeArgs, ServiceDatabaseArgs};

/// A flag whose value cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    /// A number outside what it can mean.
    #[error("{flag} must be from {min} to {max}; {value} is outside that range")]
    OutOfRange {
        /// The flag, as typed (`--job-memory-mib`).
        flag: &'static str,
        /// The least it accepts.
        min: u64,
        /// The most it accepts.
        max: u64,
        /// What was given.
        value: u64,
    },
    /// `--relay-domain` is not a DNS name.
    #[error("--relay-domain must be a DNS name: {0}")]
    RelayDomain(#[source] relay_api::dns::DnsError),
    /// `--relay-domain` leaves no room for canonical hostnames before it.
    #[error(
        "--relay-domain must be at most {MAX_RELAY_DOMAIN} characters (canonical hostnames go before it); {0:?} is {len}",
        len = .0.len()
    )]
    RelayDomainTooLong(String),
    /// `--acme-directory` without `--acme-roots`.
    #[error("--acme-directory needs --acme-roots: the roots its certificates chain to, for route validation")]
    AcmeRoots,
    /// `--acme-directory` without `--caa-identity`.
    #[error(
        "--acme-directory needs --caa-identity: the CA's issuer domain that customer hostnames' CAA records must permit"
    )]
    CaaIdentity,
    /// `--database` cannot be used.
    #[error("--database: {0}")]
    Database(#[source] svc_postgres::DbError),
    /// `--database-password-file` beside a URL that holds a password already.
    #[error(
        "the database URL holds a password and --database-password-file gives another: give it once (the URL without \
         its password, or no --database-password-file)"
    )]
    PasswordTwice,
    /// The agent command is this binary, which could not be found.
    #[error("cannot find the svc binary")]
    NoExecutable,
}

/// `--database`, `--database-password-file`, `--database-ca` and `--database-pool`, as the
/// relay's and the service's commands take them (each under its own environment variables):
/// made into settings once. (A password in `--database` itself is refused before, where the
/// command line is parsed: [`password_on_command_line`].)
pub(crate) trait DatabaseFlags {
    /// The URL, the password file, the CA file and the pool size given.
    fn flags(&self) -> (Option<&str>, Option<&std::path::Path>, Option<&std::path::Path>, u32);

    /// The database and its pool, if `--database` is given.
    fn settings(&self) -> Result<Option<(svc_postgres::Database, svc_postgres::PoolSettings)>, SettingsError> {
        let (url, password_file, ca, pool) = self.flags();
        let Some(url) = url else { return Ok(None) };
        let mut db = svc_postgres::Database::parse(url, ca).map_err(SettingsError::Database)?;
        if let Some(file) = password_file {
            if svc_postgres::has_password(url) {
                return Err(SettingsError::PasswordTwice);
            }
            db.set_password(&svc_postgres::read_password_file(file).map_err(SettingsError::Database)?);
        }
        Ok(Some((db, svc_postgres::PoolSettings { size: pool, ..Default::default() })))
    }

    /// Where the store lives, for the data directory `data_dir`.
    fn store_at(&self, data_dir: &std::path::Path) -> Result<svc_sql::StoreAt, SettingsError> {
        Ok(svc_sql::StoreAt::of(data_dir, self.settings()?.as_ref()))
    }
}

impl DatabaseFlags for DatabaseArgs {
    fn flags(&self) -> (Option<&str>, Option<&std::path::Path>, Option<&std::path::Path>, u32) {
        (
            self.database.as_deref(),
            self.database_password_file.as_deref(),
            self.database_ca.as_deref(),
            self.database_pool,
        )
    }
}

impl DatabaseFlags for ServiceDatabaseArgs {
    fn flags(&self) -> (Option<&str>, Option<&std::path::Path>, Option<&std::path::Path>, u32) {
        (
            self.database.as_deref(),
            self.database_password_file.as_deref(),
            self.database_ca.as_deref(),
            self.database_pool,
        )
    }
}

/// The database flags as `Debug` shows them (a parsed command line printed whole): the URL
/// with its password hidden.
fn debug_database(name: &str, flags: &dyn DatabaseFlags, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
    let (url, password_file, ca, pool) = flags.flags();
    f.debug_struct(name)
        .field("database", &url.map(svc_postgres::redacted))
        .field("database_password_file", &password_file)
        .field("database_ca", &ca)
        .field("database_pool", &pool)
        .finish_non_exhaustive()
}

impl std::fmt::Debug for DatabaseArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        debug_database("DatabaseArgs", self, f)
    }
}

impl std::fmt::Debug for ServiceDatabaseArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        debug_database("ServiceDatabaseArgs", self, f)
    }
}

/// A `--database` URL typed on the command line with a password in it (`ps` shows every
/// process's arguments to every user of the machine), on whichever command takes one: the
/// refusal names the command's environment variable and the password file, and shows the URL
/// with its password hidden. The same URL from the environment is accepted.
pub(crate) fn password_on_command_line(command: &clap::Command, matches: &clap::ArgMatches) -> Option<String> {
    let (mut command, mut matches) = (command, matches);
    loop {
        if let Ok(Some(url)) = matches.try_get_one::<String>("database")
            && matches.value_source("database") == Some(clap::parser::ValueSource::CommandLine)
            && svc_postgres::has_password(url)
        {
            let variable = command
                .get_arguments()
                .find(|a| a.get_id() == "database")
                .and_then(|a| a.get_env())
                .map_or_else(|| "the environment".to_owned(), |v| v.to_string_lossy().into_owned());
            return Some(format!(
                "--database {} holds a password, which every user of this machine can read in the process list \
                 (ps): give the whole URL in the environment instead ({variable}=postgres://...), or keep the password \
                 alone in a file only you can read (chmod 600) and pass --database-password-file FILE with the URL \
                 without it",
                svc_postgres::redacted(url)
            ));
        }
        let (name, sub) = matches.subcommand()?;
        command = command.find_subcommand(name)?;
        matches = sub;
    }
}

/// The longest relay domain: a DNS name is at most 253 characters, and canonical hostnames
/// (`<project>-<org>.<DOMAIN>`) need room before it.
const MAX_RELAY_DOMAIN: usize = 200;

/// `value * factor`, or the error naming `flag` and the largest value that fits.
fn scaled(flag: &'static str, min: u64, value: u64, factor: u64) -> Result<u64, SettingsError> {
    value.checked_mul(factor).ok_or(SettingsError::OutOfRange { flag, min, max: u64::MAX / factor, value })
}

/// How each job is bounded: `--job-memory-mib`, `--job-processes`, `--job-cpu-millicores`
/// and `--without-job-cgroups`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct JobSettings {
    /// What each job may use where its policy says nothing.
    pub(crate) resources: JobResources,
    /// Whether each job gets a cgroup (the service refuses to start where it cannot).
    pub(crate) cgroups: bool,
}

impl TryFrom<&JobResourceArgs> for JobSettings {
    type Error = SettingsError;

    fn try_from(args: &JobResourceArgs) -> Result<JobSettings, SettingsError> {
        Ok(JobSettings {
            resources: JobResources {
                memory_bytes: scaled("--job-memory-mib", 1, args.job_memory_mib, 1024 * 1024)?,
                processes: args.job_processes,
                cpu_millicores: args.job_cpu_millicores,
            },
            cgroups: !args.without_job_cgroups,
        })
    }
}

impl TryFrom<&ListenerArgs> for svc_http::Settings {
    type Error = SettingsError;

    fn try_from(args: &ListenerArgs) -> Result<svc_http::Settings, SettingsError> {
        let max_connections = usize::try_from(args.max_connections).map_err(|_| SettingsError::OutOfRange {
            flag: "--max-connections",
            min: 1,
            max: usize::MAX as u64,
            value: args.max_connections,
        })?;
        if args.max_large_bodies_per_org > args.max_large_bodies {
            return Err(SettingsError::OutOfRange {
                flag: "--max-large-bodies-per-org",
                min: 1,
                max: u64::from(args.max_large_bodies),
                value: u64::from(args.max_large_bodies_per_org),
            });
        }
        Ok(svc_http::Settings {
            header_timeout: Duration::from_secs(args.header_timeout_secs),
            body_timeout: Duration::from_secs(args.body_timeout_secs),
            idle_timeout: Duration::from_secs(args.idle_timeout_secs),
            max_connections,
            intake: svc_http::IntakeLimits {
                per_tenant: usize::from(args.max_large_bodies_per_org),
                total: usize::from(args.max_large_bodies),
            },
            ..svc_http::Settings::DEFAULT
        })
    }
}

/// `--relay-domain` as the coordinator keeps it: lowercase, without leading or trailing dots,
/// checked by the DNS name rule customer hostnames follow (`relay-dns`).
fn relay_domain(text: &str) -> Result<String, SettingsError> {
    let domain = relay_api::dns::dns_name(&text.trim_matches('.').to_ascii_lowercase(), "relay domain")
        .map_err(SettingsError::RelayDomain)?;
    if domain.len() > MAX_RELAY_DOMAIN {
        return Err(SettingsError::RelayDomainTooLong(domain));
    }
    Ok(domain)
}

impl TryFrom<&RelayServeArgs> for CoordinatorConfig {
    type Error = SettingsError;

    /// Everything of `svc relay serve` but the API's TLS (which may create the development
    /// CA's files) and `SVC_NODE` (the environment, not a flag).
    fn try_from(args: &RelayServeArgs) -> Result<CoordinatorConfig, SettingsError> {
        let exe = std::env::current_exe().map_err(|_| SettingsError::NoExecutable)?;
        let mut config = CoordinatorConfig::new(
            args.data_dir.clone(),
            args.listen,
            args.public,
            vec![exe.into_os_string(), "agent".into(), "run".into()],
        );
        config.relay_domain = relay_domain(&args.relay_domain)?;
        config.nameservers = args.nameservers.clone();
        config.caa_identities = args.caa_identities.clone();
        config.allow_private_targets = args.allow_private_targets;
        config.revalidate = Duration::from_secs(args.revalidate_secs);
        config.period = Duration::from_secs(args.period_secs);
        config.price_micros = args.price_micros;
        config.gateway_operator = args.gateway_operator.clone();
        config.gateway_hosts_per_route = args.gateway_hosts_per_route.map(usize::from);
        config.terms = relay_api::coordinator::money::Terms {
            reward_share_bps: args.reward_share_bps,
            downtime_tolerance_bps: args.downtime_tolerance_bps,
            settlement_delay_ms: scaled("--settlement-delay-secs", 0, args.settlement_delay_secs, 1000)?,
        };
        config.catalog_validity = Duration::from_secs(args.catalog_validity_secs);
        if let Some(jobs_dir) = &args.jobs_dir {
            config.jobs_dir = jobs_dir.clone();
        }
        config.restarts.max_restarts = args.max_restarts;
        config.successor_deadline = Duration::from_secs(args.successor_deadline_secs);
        let jobs = JobSettings::try_from(&args.jobs)?;
        // Each process alone within the job's bounds, also where jobs have no cgroup.
        config.job_limits.memory_bytes = jobs.resources.memory_bytes;
        config.job_limits.processes = jobs.resources.processes;
        config.job_resources = jobs.resources;
        config.job_cgroups = jobs.cgroups;
        config.job_limits.open_files = args.job_open_files;
        config.api_http = svc_http::Settings::try_from(&args.listener)?;
        config.database = args.database.settings()?;
        if let Some(directory_url) = &args.acme_directory {
            let roots = args.acme_roots.clone().ok_or(SettingsError::AcmeRoots)?;
            if args.caa_identities.is_empty() {
                return Err(SettingsError::CaaIdentity);
            }
            config.certificates = AgentCertificates::Acme {
                directory_url: directory_url.clone(),
                directory_ca: args.acme_directory_ca.clone(),
                roots,
            };
        }
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::*;
    use crate::args::{Cli, Command, RelayCommand};

    fn relay_serve(extra: &[&str]) -> RelayServeArgs {
        let cli = Cli::try_parse_from([&["svc", "relay", "serve", "--data-dir", "/nonexistent"], extra].concat())
            .expect("parses");
        let Command::Relay { command: RelayCommand::Serve(args) } = cli.command else { panic!("not relay serve") };
        *args
    }

    #[test]
    fn the_defaults_convert() {
        let config = CoordinatorConfig::try_from(&relay_serve(&["--relay-domain", "Relay.Example."])).expect("valid");
        assert_eq!(config.relay_domain, "relay.example");
        assert_eq!(config.job_limits.memory_bytes, 512 << 20);
        assert_eq!(
            config.job_resources,
            JobResources { memory_bytes: 512 << 20, processes: 256, cpu_millicores: 1000 }
        );
        assert!(config.job_cgroups, "jobs get cgroups unless told otherwise");
        assert_eq!(config.terms.settlement_delay_ms, 86_400_000);
        assert_eq!(config.api_http.max_connections, svc_http::Settings::DEFAULT.max_connections);
        assert_eq!(config.api_http.intake, svc_http::IntakeLimits { per_tenant: 2, total: 8 });
    }

    #[test]
    fn large_bodies_per_org_over_those_in_all_are_refused_naming_the_flag() {
        let listener = |extra: &[&str]| relay_serve(extra).listener;
        let settings =
            svc_http::Settings::try_from(&listener(&["--max-large-bodies", "3", "--max-large-bodies-per-org", "3"]))
                .expect("as many per organization as in all");
        assert_eq!(settings.intake, svc_http::IntakeLimits { per_tenant: 3, total: 3 });
        assert!(settings.validate().is_ok());
        let e =
            svc_http::Settings::try_from(&listener(&["--max-large-bodies", "2", "--max-large-bodies-per-org", "3"]))
                .expect_err("more per organization than in all");
        assert_eq!(e.to_string(), "--max-large-bodies-per-org must be from 1 to 2; 3 is outside that range");
        let refused =
            crate::args::Cli::try_parse_from(["svc", "relay", "serve", "--data-dir", "x", "--max-large-bodies", "0"]);
        assert!(refused.is_err(), "clap refuses 0");
    }

    #[test]
    fn job_resources_and_running_without_cgroups_come_from_their_flags() {
        let args = relay_serve(&[
            "--job-memory-mib",
            "256",
            "--job-processes",
            "32",
            "--job-cpu-millicores",
            "250",
            "--without-job-cgroups",
        ]);
        let config = CoordinatorConfig::try_from(&args).expect("valid");
        assert_eq!(config.job_resources, JobResources { memory_bytes: 256 << 20, processes: 32, cpu_millicores: 250 });
        assert_eq!((config.job_limits.memory_bytes, config.job_limits.processes), (256 << 20, 32));
        assert!(!config.job_cgroups);
        let refused = Cli::try_parse_from([
            "svc",
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--data-dir",
            "x",
            "--job-cpu-millicores",
            "5",
        ]);
        assert!(refused.is_err(), "clap refuses under 10 millicores (the kernel's least quota is 1 ms of 100)");
    }

    #[test]
    fn the_hidden_successor_deadline_defaults_to_a_minute_and_is_bounded_by_clap() {
        let deadline =
            |extra: &[&str]| CoordinatorConfig::try_from(&relay_serve(extra)).expect("valid").successor_deadline;
        assert_eq!(deadline(&[]), Duration::from_secs(60));
        assert_eq!(deadline(&["--successor-deadline-secs", "15"]), Duration::from_secs(15));
        for bad in ["9", "86401", "-1", "soon"] {
            let refused =
                Cli::try_parse_from(["svc", "relay", "serve", "--data-dir", "x", "--successor-deadline-secs", bad]);
            assert!(refused.is_err(), "clap refuses {bad}");
        }
    }

    #[test]
    fn a_job_memory_whose_bytes_overflow_is_refused_naming_the_flag() {
        // clap refuses this flag above 1 TiB; built in code, the conversion still refuses it.
        let mut args = relay_serve(&[]);
        args.jobs.job_memory_mib = u64::MAX;
        let e = CoordinatorConfig::try_from(&args).expect_err("refused");
        assert_eq!(
            e.to_string(),
            format!("--job-memory-mib must be from 1 to {}; {} is outside that range", u64::MAX >> 20, u64::MAX)
        );
    }

    #[test]
    fn a_relay_domain_that_is_no_dns_name_is_refused_naming_the_flag() {
        let long = format!("{}.example", "a.".repeat(100));
        for bad in [".", "", "relay_domain.example", "-relay.example", "a..b", &long] {
            let flag = format!("--relay-domain={bad}");
            let e = CoordinatorConfig::try_from(&relay_serve(&[&flag])).expect_err(bad);
            assert!(e.to_string().starts_with("--relay-domain must be a DNS name"), "{bad}: {e}");
        }
        // A DNS name, but one that leaves no room for canonical hostnames before it.
        let roomless = ["a".repeat(60), "b".repeat(60), "c".repeat(60), "d".repeat(60)].join(".");
        let e = CoordinatorConfig::try_from(&relay_serve(&[&format!("--relay-domain={roomless}")])).expect_err("long");
        assert!(e.to_string().starts_with("--relay-domain must be at most 200 characters"), "{e}");
    }

    #[test]
    fn an_acme_directory_needs_its_roots_and_a_caa_identity() {
        let e = CoordinatorConfig::try_from(&relay_serve(&["--acme-directory", "https://acme.test/dir"]))
            .expect_err("no roots");
        assert!(e.to_string().starts_with("--acme-directory needs --acme-roots"), "{e}");
        let e = CoordinatorConfig::try_from(&relay_serve(&[
            "--acme-directory",
            "https://acme.test/dir",
            "--acme-roots",
            "roots.pem",
        ]))
        .expect_err("no CAA identity");
        assert!(e.to_string().starts_with("--acme-directory needs --caa-identity"), "{e}");
    }

    #[test]
    fn max_connections_beyond_the_address_space_are_refused_naming_the_flag() {
        let mut args = relay_serve(&[]).listener;
        args.max_connections = u64::MAX;
        match svc_http::Settings::try_from(&args) {
            // 64-bit targets hold any u64 (clap refuses above 1,000,000 anyway).
            Ok(settings) => assert_eq!(settings.max_connections as u64, u64::MAX),
            Err(e) => assert!(e.to_string().starts_with("--max-connections must be from 1 to"), "{e}"),
        }
    }

    #[test]
    fn a_parsed_command_line_printed_whole_shows_no_database_password() {
        let url = "postgres://svc:s3cret@db/svc?password=s3cret";
        for line in [
            &["svc", "relay", "serve", "--data-dir", "d", "--database", url][..],
            &["svc", "serve", "--listen", "127.0.0.1:0", "--data-dir", "d", "--database", url],
        ] {
            let cli = Cli::try_parse_from(line).expect("parses");
            let shown = format!("{cli:?}");
            assert!(shown.contains("postgres://svc:***@db/svc?password=***"), "{shown}");
            assert!(!shown.contains("s3cret"), "{shown}");
        }
    }

    /// Every command that takes `--database` (found in the command tree, so one added later
    /// is covered) has a variable that keeps the URL off the command line and a password
    /// file beside it; the refusal walks the same tree.
    #[test]
    fn every_command_that_takes_a_database_has_a_variable_and_a_password_file() {
        fn walk(command: &clap::Command, path: &str, found: &mut Vec<(String, String)>) {
            if let Some(database) = command.get_arguments().find(|a| a.get_id() == "database") {
                let variable = database.get_env().map(|v| v.to_string_lossy().into_owned()).unwrap_or_default();
                let file = command.get_arguments().find(|a| a.get_id() == "database_password_file");
                assert!(file.is_some_and(|f| f.get_env().is_some()), "{path}: --database-password-file");
                found.push((path.to_owned(), variable));
            }
            for sub in command.get_subcommands() {
                walk(sub, &format!("{path} {}", sub.get_name()), found);
            }
        }
        let mut found = Vec::new();
        walk(&crate::command(), "svc", &mut found);
        for (path, variable) in &found {
            let expected = if path.starts_with("svc relay") { "SVC_RELAY_DATABASE" } else { "SVC_DATABASE" };
            assert_eq!(variable, expected, "{path}");
        }
        let paths: Vec<&str> = found.iter().map(|(p, _)| p.as_str()).collect();
        for family in ["svc serve", "svc admin token create", "svc relay serve", "svc relay admin invite"] {
            assert!(paths.contains(&family), "{family} in {paths:?}");
        }
    }
}
