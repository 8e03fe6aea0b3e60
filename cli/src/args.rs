//! Command-line arguments. Usage errors exit with 2 (clap's convention, and the contract).

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

// Numeric flags are refused outside their range with a usage error naming the flag (exit 2),
// never clamped or saturated in silence.

/// A day, in seconds: the longest wait or revalidation interval.
const DAY_SECS: u64 = 86_400;
/// A year, in seconds: the longest lifetime, period or delay.
const YEAR_SECS: u64 = 365 * DAY_SECS;
/// The stores keep micros as signed 64-bit integers.
const MAX_STORED_MICROS: u64 = i64::MAX as u64;
/// A quote of the most periods (10,000) at this price still fits the ledger.
const MAX_PRICE_MICROS: u64 = MAX_STORED_MICROS / 10_000;

/// `svc`: describe a background application as a manifest and run it on attested processors.
#[derive(Debug, Parser)]
#[command(name = "svc", version, about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Top-level commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Work with application manifests offline.
    Manifest {
        /// What to do with the manifest.
        #[command(subcommand)]
        command: ManifestCommand,
    },
    /// Publish policy versions to the service.
    Policy {
        /// What to do.
        #[command(subcommand)]
        command: PolicyCommand,
    },
    /// Applications on the service.
    App {
        /// What to do.
        #[command(subcommand)]
        command: AppCommand,
    },
    /// Run the publication service.
    Serve(ServeArgs),
    /// Administer a service's data directory offline (works while the server runs).
    Admin {
        /// What to do.
        #[command(subcommand)]
        command: AdminCommand,
    },
    /// The ingress add-on: a public HTTPS endpoint for a Node.js web job.
    Ingress {
        /// What to do.
        #[command(subcommand)]
        command: IngressCommand,
    },
    /// Run the public SNI gateway.
    Gateway {
        /// What to do.
        #[command(subcommand)]
        command: GatewayCommand,
    },
    /// Run the relay coordinator (deployments, quotes, hostnames, validation) and its gateway.
    Relay {
        /// What to do.
        #[command(subcommand)]
        command: RelayCommand,
    },
    /// Run the job-side agent (the job runner starts it beside the app).
    Agent {
        /// What to do.
        #[command(subcommand)]
        command: AgentCommand,
    },
    /// A language server for manifests and ingress.json over standard input and output: live
    /// diagnostics, hover, completion and quick fixes in an editor.
    Lsp {
        /// Standard input and output, the only transport (accepted because editors' clients
        /// pass it).
        #[arg(long)]
        stdio: bool,
    },
}

/// `svc ingress ...`
#[derive(Debug, Subcommand)]
pub enum IngressCommand {
    /// Everything on this machine in one command: a relay coordinator (API, console, gateway,
    /// development CA, jobs confined), an invited organization with a token, and the bundled
    /// Node.js project deployed to it as `svc ingress deploy` would. Prints the console's URL,
    /// then `ready <url>` once the route is live; stops everything on Ctrl-C.
    Demo {
        /// Data directory (may exist; the CA certificate is written to DIR/ca.pem, the
        /// organization's token to DIR/token, the project to DIR/project/).
        #[arg(long, value_name = "DIR")]
        data_dir: Option<PathBuf>,
        /// The gateway's public TLS address.
        #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8443")]
        listen: std::net::SocketAddr,
        /// The relay API and console (plain HTTP: loopback only).
        #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:7300", value_parser = loopback_addr)]
        api_listen: std::net::SocketAddr,
        /// Development certificate lifetime in seconds (renewed after two thirds), 10 s to 90 days.
        #[arg(long, value_name = "SECS", default_value_t = 86_400, hide = true,
            value_parser = clap::value_parser!(u64).range(10..=90 * DAY_SECS))]
        cert_validity_secs: u64,
        /// Seconds between route validations, and between the agent's route refreshes up to
        /// 30 s (hidden: for tests), at most a day.
        #[arg(long, value_name = "SECS", default_value_t = 30, hide = true,
            value_parser = clap::value_parser!(u64).range(1..=DAY_SECS))]
        revalidate_secs: u64,
        /// What the demo's job may use (its cgroup).
        #[command(flatten)]
        jobs: JobResourceArgs,
    },
    /// Deploy the project: validate it, send it with the app's files, fund its quote (within
    /// the project's spend ceiling), and wait until its URL is live. Deploying a changed
    /// project again (its file, an app file, a secret) ships it as the deployment's next
    /// revision: started beside the serving one and switched to once validated, with no
    /// downtime and no new funding; if it fails, the serving revision stays.
    Deploy {
        /// Send and show the quote, but do not fund it.
        #[arg(long)]
        no_fund: bool,
        /// Return once funded (a redeploy: once sent) instead of waiting until live.
        #[arg(long)]
        no_wait: bool,
        /// How long to wait until live, seconds (at most a day).
        #[arg(long, value_name = "SECS", default_value_t = 120, value_parser = clap::value_parser!(u64).range(1..=DAY_SECS))]
        timeout: u64,
        /// Which project, at which relay.
        #[command(flatten)]
        target: ProjectTarget,
    },
    /// Every deployment of the organization, newest first, stopped ones included (their IDs
    /// reach their sessions, ledger and refunds with `--deployment`).
    List {
        /// Which relay.
        #[command(flatten)]
        target: RelayTarget,
    },
    /// The deployment's state, URL, funds, hostnames, validations and hints.
    Status {
        /// Which project, at which relay.
        #[command(flatten)]
        target: ProjectTarget,
    },
    /// Job and route logs (`--after` continues from a cursor).
    Logs {
        /// Keep printing new entries.
        #[arg(long)]
        follow: bool,
        /// Start after this cursor (the `seq` of an entry).
        #[arg(long, value_name = "CURSOR", default_value_t = 0, value_parser = clap::value_parser!(i64).range(0..))]
        after: i64,
        /// Which project, at which relay.
        #[command(flatten)]
        target: ProjectTarget,
    },
    /// The deployment's jobs as executions (`svc.execution-convergence.v1`, as `svc app
    /// executions` shows a published application's): each launch, restart and redeploy, where
    /// it ran and why it ended.
    Executions {
        /// How many recent executions (1-100).
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=100))]
        limit: Option<u16>,
        /// Older executions: the `nextCursor` of a previous answer.
        #[arg(long, value_name = "CURSOR")]
        cursor: Option<String>,
        /// Which project, at which relay.
        #[command(flatten)]
        target: ProjectTarget,
    },
    /// The policy the deployment's revision published: its Manifest V5 (the project's named
    /// file, or the one derived from it) as the effective document its jobs run, with its
    /// version and digest (the `desired` of `svc ingress executions`).
    Policy {
        /// Another revision's (default: the serving one's).
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
        revision: Option<u32>,
        /// Which project, at which relay.
        #[command(flatten)]
        target: ProjectTarget,
    },
    /// What to fix, first things first.
    Hints {
        /// Which project, at which relay.
        #[command(flatten)]
        target: ProjectTarget,
    },
    /// Fund a new quote for more periods.
    Fund {
        /// Periods to fund, 1-10000 (default: the project's `spend.fundPeriods`).
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..=10_000))]
        periods: Option<u64>,
        /// Which project, at which relay.
        #[command(flatten)]
        target: ProjectTarget,
    },
    /// Every ledger movement of the deployment, and its balance.
    Ledger {
        /// Which project, at which relay.
        #[command(flatten)]
        target: ProjectTarget,
    },
    /// Stop the deployment: the job ends and no new period starts; unspent funds stay in
    /// their sessions until `svc ingress refund SESSION` (see `svc ingress sessions`).
    Stop {
        /// Which project, at which relay.
        #[command(flatten)]
        target: ProjectTarget,
    },
    /// Customer hostnames: add one, verify its DNS, remove it.
    Hostname {
        /// What to do.
        #[command(subcommand)]
        command: HostnameCommand,
    },
    /// Print the JSON Schema of the project file.
    Schema,
    /// Trust a local relay's development CA (DIR/ca.pem) in this user's browsers: adds it to
    /// the NSS database Chromium and Chrome read ($HOME/.pki/nssdb, made if missing) with
    /// `certutil` (libnss3-tools; without it, prints the commands), so the demo's `ready`
    /// URL opens without a warning. Prints how curl trusts it (--cacert, SSL_CERT_FILE).
    Trust {
        /// The relay's (or the demo's) data directory, whose ca.pem to trust [default: the
        /// demo's data directory].
        #[arg(long, value_name = "DIR", conflicts_with = "ca")]
        data_dir: Option<PathBuf>,
        /// The CA certificate file (PEM) to trust.
        #[arg(long, value_name = "FILE")]
        ca: Option<PathBuf>,
        /// Take the CA out of the database instead.
        #[arg(long)]
        remove: bool,
    },
    /// The deployment's sessions (one per funded period) with funded, spent and refundable amounts.
    Sessions {
        /// Which project, at which relay.
        #[command(flatten)]
        target: ProjectTarget,
    },
    /// Refund what a session has refundable (once). The session is found among all the
    /// project's deployments (an older or stopped one's too).
    Refund {
        /// The session (`ses_...`, from `svc ingress sessions`).
        session: String,
        /// Which project, at which relay.
        #[command(flatten)]
        target: ProjectTarget,
    },
    /// A gateway operator's rewards: accrued, pending, claimable and claimed (operator token).
    Rewards {
        /// Which relay.
        #[command(flatten)]
        target: RelayTarget,
    },
    /// Claim every claimable reward (operator token; once).
    Claim {
        /// Which relay.
        #[command(flatten)]
        target: RelayTarget,
    },
    /// The validator versions a project accepts: list, add or remove their digests.
    Pins {
        /// What to do.
        #[command(subcommand)]
        command: PinsCommand,
    },
    /// The relay's signed service catalog (gateways, prices, validator digests, CAs), checked
    /// against the pinned key.
    Catalog {
        /// What to do.
        #[command(subcommand)]
        command: CatalogCommand,
    },
}

/// `svc ingress pins ...`
#[derive(Debug, Subcommand)]
pub enum PinsCommand {
    /// The pinned digests and the coordinator's current validator version.
    List {
        /// Which project, at which relay.
        #[command(flatten)]
        target: ProjectTarget,
    },
    /// Accept a validator version by its digest (`sha256:...`).
    Add {
        /// The digest.
        digest: String,
        /// Which project, at which relay.
        #[command(flatten)]
        target: ProjectTarget,
    },
    /// Stop accepting a validator version.
    Remove {
        /// The digest.
        digest: String,
        /// Which project, at which relay.
        #[command(flatten)]
        target: ProjectTarget,
    },
}

/// Which relay coordinator: `--relay` (or `SVC_RELAY`), the token from `SVC_RELAY_TOKEN`.
#[derive(Debug, Clone, clap::Args)]
pub struct RelayTarget {
    /// The relay coordinator's base URL.
    #[arg(long, value_name = "URL", env = "SVC_RELAY", default_value = "http://127.0.0.1:7300")]
    pub relay: String,
    /// Which CA to trust for an https:// server.
    #[command(flatten)]
    pub trust: Trust,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub format: OutputFormat,
}

/// `svc ingress catalog ...`: each checks the signature against the pinned key (`--pin`, or
/// the key pinned on first use), refuses an expired catalog and one older than the last seen
/// (rollback), follows a key rotation signed by the pinned key, and only then updates the pin.
#[derive(Debug, Subcommand)]
pub enum CatalogCommand {
    /// Verify the catalog and print it.
    Show {
        /// Which relay, which key.
        #[command(flatten)]
        target: CatalogTarget,
    },
    /// Verify the catalog and print the verdict: exit 0 verified, 1 refused.
    Verify {
        /// Which relay, which key.
        #[command(flatten)]
        target: CatalogTarget,
    },
}

/// Which relay's catalog, checked against which key. Pins live in `SVC_RELAY_PINS`, or
/// `svc/relay-pins.json` in the user config directory, by relay URL.
#[derive(Debug, Clone, clap::Args)]
pub struct CatalogTarget {
    /// The relay coordinator's base URL (also the pin's name).
    #[arg(long, value_name = "URL", env = "SVC_RELAY", default_value = "http://127.0.0.1:7300")]
    pub relay: String,
    /// Which CA to trust for an https:// server.
    #[command(flatten)]
    pub trust: Trust,
    /// The key the relay's operator gave you (`ed25519:...`): it replaces the pinned key
    /// (the last sequence seen is kept).
    #[arg(long, value_name = "ed25519:KEY")]
    pub pin: Option<String>,
    /// Check a saved signed catalog instead of fetching one (no token needed).
    #[arg(long, value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub format: OutputFormat,
}

/// `svc ingress hostname ...`
#[derive(Debug, Subcommand)]
pub enum HostnameCommand {
    /// Add a hostname; prints the DNS records to create.
    Add {
        /// The hostname (`shop.example.com`).
        hostname: String,
        /// Which project, at which relay.
        #[command(flatten)]
        target: ProjectTarget,
    },
    /// Check the hostname's DNS records now; prints what is missing. Exit 0 verified (or live), 1
    /// while records are missing or wrong.
    Verify {
        /// The hostname.
        hostname: String,
        /// Which project, at which relay.
        #[command(flatten)]
        target: ProjectTarget,
    },
    /// Remove a hostname from the route.
    Remove {
        /// The hostname.
        hostname: String,
        /// Which project, at which relay.
        #[command(flatten)]
        target: ProjectTarget,
    },
}

/// Which project, at which relay coordinator: `--relay` (or `SVC_RELAY`), the token from
/// `SVC_RELAY_TOKEN`, the project from `--project` or the `name` in the project file.
#[derive(Debug, Clone, clap::Args)]
pub struct ProjectTarget {
    /// The project file.
    #[arg(long, value_name = "FILE", default_value = "ingress.json")]
    pub config: PathBuf,
    /// The project's name (instead of reading the project file).
    #[arg(long, value_name = "NAME")]
    pub project: Option<String>,
    /// One deployment by its ID (`dep_...`, from `svc ingress list`), instead of the
    /// project's newest: an older or stopped deployment, its sessions, ledger and refunds.
    #[arg(long, value_name = "ID", conflicts_with = "project", value_parser = deployment_id)]
    pub deployment: Option<String>,
    /// The relay coordinator's base URL.
    #[arg(long, value_name = "URL", env = "SVC_RELAY", default_value = "http://127.0.0.1:7300")]
    pub relay: String,
    /// Which CA to trust for an https:// server.
    #[command(flatten)]
    pub trust: Trust,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub format: OutputFormat,
}

/// A loopback address: a plain-HTTP listener that carries tokens serves this machine only.
fn loopback_addr(text: &str) -> Result<std::net::SocketAddr, String> {
    let addr: std::net::SocketAddr = text.parse().map_err(|e| format!("{e} (an address such as 127.0.0.1:7300)"))?;
    if addr.ip().is_loopback() {
        Ok(addr)
    } else {
        Err(format!(
            "{} is not a loopback address: the demo serves its API over plain HTTP, to this machine only",
            addr.ip()
        ))
    }
}

/// A deployment ID: `dep_` and 16 lower-case hex digits.
fn deployment_id(text: &str) -> Result<String, NotDeploymentId> {
    let hex = text.strip_prefix("dep_").unwrap_or_default();
    if hex.len() == 16 && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
        Ok(text.to_owned())
    } else {
        Err(NotDeploymentId)
    }
}

/// What `--deployment` must be.
#[derive(Debug, thiserror::Error)]
#[error("a deployment ID is `dep_` and 16 hex digits, as `svc ingress list` prints it")]
pub(crate) struct NotDeploymentId;

/// `svc relay ...`
#[derive(Debug, Subcommand)]
pub enum RelayCommand {
    /// Run the relay coordinator with its gateway.
    Serve(Box<RelayServeArgs>),
    /// Administer a coordinator's data directory offline (works while it runs).
    Admin {
        /// What to do.
        #[command(subcommand)]
        command: RelayAdminCommand,
    },
}

/// `svc relay admin ...`
#[derive(Debug, Subcommand)]
pub enum RelayAdminCommand {
    /// Invite an organization to the ingress add-on (creating it if needed).
    Invite {
        /// The coordinator's data directory.
        #[arg(long, value_name = "DIR")]
        data_dir: PathBuf,
        /// Where its store lives.
        #[command(flatten)]
        database: DatabaseArgs,
        /// The organization (a-z, 0-9 and single hyphens, 1-32: it becomes part of canonical
        /// hostnames).
        #[arg(long, value_parser = manifest_core::names::parse_organization)]
        org: String,
    },
    /// Issue an API token for an invited organization; prints the token alone on stdout,
    /// once, and its ID and name on stderr.
    Token {
        /// The coordinator's data directory.
        #[arg(long, value_name = "DIR")]
        data_dir: PathBuf,
        /// Where its store lives.
        #[command(flatten)]
        database: DatabaseArgs,
        /// The organization, invited first (`svc relay admin invite`); for `--operator`, the
        /// gateway operator's name.
        #[arg(long, value_parser = manifest_core::names::parse_organization)]
        org: String,
        /// A gateway operator's token: reads and claims its rewards.
        #[arg(long)]
        operator: bool,
        /// Who holds it, shown in timelines and the console (default: the role and the first
        /// digits of the token's ID, `customer-6f42`).
        #[arg(long, value_name = "NAME", value_parser = manifest_core::names::parse_token_name)]
        name: Option<String>,
    },
    /// Print the catalog signing key (`ed25519:...`; created if there is none) for
    /// customers to pin.
    CatalogKey {
        /// The coordinator's data directory.
        #[arg(long, value_name = "DIR")]
        data_dir: PathBuf,
    },
    /// Replace the catalog signing key; the old key signs a statement naming the new one,
    /// which every later catalog carries (works while the coordinator runs).
    RotateCatalogKey {
        /// The coordinator's data directory.
        #[arg(long, value_name = "DIR")]
        data_dir: PathBuf,
        /// Output format.
        #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
        format: OutputFormat,
    },
    /// Issue a single-use admission token that lets a gateway operator register a host
    /// (`gateway-prep init`); prints it once.
    AdmissionToken {
        /// The coordinator's data directory.
        #[arg(long, value_name = "DIR")]
        data_dir: PathBuf,
        /// Where its store lives.
        #[command(flatten)]
        database: DatabaseArgs,
        /// The operator it admits (a DNS label).
        #[arg(long, value_name = "NAME")]
        operator: String,
        /// Seconds until the token expires (at most a year).
        #[arg(long, value_name = "N", default_value_t = 86_400, value_parser = clap::value_parser!(u64).range(1..=YEAR_SECS))]
        ttl_secs: u64,
    },
    /// The keys that seal the store's secret values at rest.
    Keys {
        /// What to do.
        #[command(subcommand)]
        command: RelayKeysCommand,
    },
}

/// `svc relay admin keys rotate`
#[derive(Debug, Subcommand)]
pub enum RelayKeysCommand {
    /// Rotate the keys while the coordinators run: a new key-encryption key in the key file, a
    /// new data key wrapped under it, every secret value resealed, older keys dropped.
    /// Back the key file up again afterwards, and copy it to every coordinator's host.
    Rotate {
        /// The coordinator's data directory.
        #[arg(long, value_name = "DIR")]
        data_dir: PathBuf,
        /// Where the store lives, and its key file.
        #[command(flatten)]
        database: DatabaseArgs,
    },
}

/// Where the relay's store lives: `--database`, else SQLite in the data directory.
// `Debug` by hand (`settings.rs`): the URL's password hidden.
#[derive(Clone, clap::Args)]
pub struct DatabaseArgs {
    /// Keep the store in this PostgreSQL database (`postgres://USER@HOST[:PORT]/DB`,
    /// `?sslmode=require` for TLS) instead of SQLite in the data directory. A URL with a
    /// password is refused here (`ps` shows it): give it in SVC_RELAY_DATABASE, or the
    /// password in --database-password-file.
    #[arg(long, value_name = "URL", env = "SVC_RELAY_DATABASE", hide_env_values = true)]
    pub database: Option<String>,
    /// The database's password, alone in this file (mode 0600 or stricter, else refused).
    #[arg(long, value_name = "FILE", env = "SVC_RELAY_DATABASE_PASSWORD_FILE", requires = "database")]
    pub database_password_file: Option<PathBuf>,
    /// Check the database's TLS certificate against this PEM file instead of the system's roots.
    #[arg(long, value_name = "FILE", requires = "database")]
    pub database_ca: Option<PathBuf>,
    /// Connections to the database at most.
    #[arg(long, value_name = "N", default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub database_pool: u32,
    /// The key file (0600) that unwraps the store's secret values, kept apart from the
    /// database; every coordinator on one database reads the same one [default:
    /// DIR/secrets.key, created with the store's first key].
    #[arg(long, value_name = "FILE", env = "SVC_RELAY_KEY_FILE")]
    pub key_file: Option<PathBuf>,
}

/// Where the publication service's store lives: `--database`, else SQLite in the data
/// directory. Its own variable (`SVC_DATABASE`): the relay's store and the service's are
/// different databases.
// `Debug` by hand (`settings.rs`): the URL's password hidden.
#[derive(Clone, clap::Args)]
pub struct ServiceDatabaseArgs {
    /// Keep the store in this PostgreSQL database (`postgres://USER@HOST[:PORT]/DB`,
    /// `?sslmode=require` for TLS) instead of SQLite in the data directory; several `svc
    /// serve` instances may share it. A URL with a password is refused here (`ps` shows it):
    /// give it in SVC_DATABASE, or the password in --database-password-file.
    #[arg(long, value_name = "URL", env = "SVC_DATABASE", hide_env_values = true)]
    pub database: Option<String>,
    /// The database's password, alone in this file (mode 0600 or stricter, else refused).
    #[arg(long, value_name = "FILE", env = "SVC_DATABASE_PASSWORD_FILE", requires = "database")]
    pub database_password_file: Option<PathBuf>,
    /// Check the database's TLS certificate against this PEM file instead of the system's roots.
    #[arg(long, value_name = "FILE", requires = "database")]
    pub database_ca: Option<PathBuf>,
    /// Connections to the database at most.
    #[arg(long, value_name = "N", default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub database_pool: u32,
    /// The key file (0600) that unwraps the store's secret values, kept apart from the
    /// database; every instance on one database reads the same one [default:
    /// DIR/secrets.key, created with the store's first key].
    #[arg(long, value_name = "FILE", env = "SVC_KEY_FILE")]
    pub key_file: Option<PathBuf>,
}

/// `svc relay serve`
#[derive(Debug, Clone, clap::Args)]
pub struct RelayServeArgs {
    /// Data directory (0700): the store (`relay.sqlite3`), the development CA, the catalog
    /// key, each deployment's app files, secrets and output.
    #[arg(long, value_name = "DIR")]
    pub data_dir: PathBuf,
    /// Job directory (0700): each job's own writable state, outside the data directory
    /// [default: DIR-jobs beside the data directory].
    #[arg(long, value_name = "DIR")]
    pub jobs_dir: Option<PathBuf>,
    /// The relay API's address.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:7300")]
    pub listen: std::net::SocketAddr,
    /// The gateway's public TLS address.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8443")]
    pub public: std::net::SocketAddr,
    /// Canonical hostnames are `<project>-<org>.<DOMAIN>`.
    #[arg(long, value_name = "DOMAIN", default_value = "localhost")]
    pub relay_domain: String,
    /// A name server for hostname checks and route validation (repeatable; default: the system's).
    #[arg(long = "dns", value_name = "ADDR")]
    pub nameservers: Vec<std::net::SocketAddr>,
    /// A CA identity that customer hostnames' CAA records must permit (repeatable).
    #[arg(long = "caa-identity", value_name = "DOMAIN")]
    pub caa_identities: Vec<String>,
    /// Agents get certificates from this ACME directory (default: the development CA).
    #[arg(long, value_name = "URL")]
    pub acme_directory: Option<String>,
    /// PEM file to trust for the ACME server's own HTTPS.
    #[arg(long, value_name = "FILE", requires = "acme_directory")]
    pub acme_directory_ca: Option<PathBuf>,
    /// PEM file of the roots the ACME CA's certificates chain to (route validation trusts them).
    #[arg(long, value_name = "FILE", requires = "acme_directory")]
    pub acme_roots: Option<PathBuf>,
    /// Also validate customer hostnames that resolve to loopback or private addresses: for a
    /// relay inside a private network only (on a public one it would let a customer aim the
    /// coordinator at internal services). `.localhost` routes of a gateway on loopback need no
    /// flag.
    #[arg(long)]
    pub allow_private_targets: bool,
    /// Seconds between route validations (at most a day).
    #[arg(long, value_name = "SECS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=DAY_SECS))]
    pub revalidate_secs: u64,
    /// Seconds in a funding period (at most a year).
    #[arg(long, value_name = "SECS", default_value_t = 3600, value_parser = clap::value_parser!(u64).range(1..=YEAR_SECS))]
    pub period_secs: u64,
    /// Price per period, service-credit micros (at most what 10,000 periods can cost in the
    /// ledger's signed 64-bit range).
    #[arg(long, value_name = "MICROS", default_value_t = 250_000,
        value_parser = clap::value_parser!(u64).range(0..=MAX_PRICE_MICROS))]
    pub price_micros: u64,
    /// The operator of this coordinator's gateway (rewards of the routes it carries go there).
    #[arg(long, value_name = "NAME", default_value = "local")]
    pub gateway_operator: String,
    /// How many of the gateway operator's hosts (`gateway-prep init`, `svc gateway run`)
    /// serve each route besides this coordinator's gateway, 1-16, chosen so routes spread
    /// evenly over the hosts; for a relay whose DNS answers each route's name with its own
    /// hosts (its URLs). Default: every host serves every route.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=16))]
    pub gateway_hosts_per_route: Option<u16>,
    /// The gateway operator's share of a served period, basis points (0-10000).
    #[arg(long, value_name = "BPS", default_value_t = 7_000, value_parser = clap::value_parser!(u32).range(0..=10_000))]
    pub reward_share_bps: u32,
    /// Downtime within a period up to this share (basis points, 0-10000) counts as served.
    #[arg(long, value_name = "BPS", default_value_t = 500, value_parser = clap::value_parser!(u32).range(0..=10_000))]
    pub downtime_tolerance_bps: u32,
    /// Seconds after a period settles before its reward can be claimed (at most a year).
    #[arg(long, value_name = "SECS", default_value_t = 86_400, value_parser = clap::value_parser!(u64).range(0..=YEAR_SECS))]
    pub settlement_delay_secs: u64,
    /// How long a signed service catalog is valid, seconds (re-signed after half), at most a year.
    #[arg(long, value_name = "SECS", default_value_t = 86_400, value_parser = clap::value_parser!(u64).range(1..=YEAR_SECS))]
    pub catalog_validity_secs: u64,
    /// Restarts of a job whose app or agent ended (each after a backoff of 1 s doubling to
    /// 60 s, at most 255) before its deployment fails with `job_exited`.
    #[arg(long, value_name = "N", default_value_t = 5, value_parser = clap::value_parser!(u32).range(0..=255))]
    pub max_restarts: u32,
    /// Seconds a redeploy's new revision has, from its deploy, to pass validation before it
    /// fails and the serving revision keeps serving, 10 s to a day (hidden: for tests).
    #[arg(long, value_name = "SECS", default_value_t = 60, hide = true,
        value_parser = clap::value_parser!(u64).range(10..=DAY_SECS))]
    pub successor_deadline_secs: u64,
    /// What each job may use (its cgroup).
    #[command(flatten)]
    pub jobs: JobResourceArgs,
    /// Open files of each job process (RLIMIT_NOFILE).
    #[arg(long, value_name = "N", default_value_t = 4096, value_parser = clap::value_parser!(u64).range(64..=1_048_576))]
    pub job_open_files: u64,
    /// The relay API's TLS, timeouts and connection cap.
    #[command(flatten)]
    pub listener: ListenerArgs,
    /// Where the store lives.
    #[command(flatten)]
    pub database: DatabaseArgs,
}

/// What each job may use where its policy says nothing, all its processes together: bounded
/// by a cgroup per job (v2, or the v1 memory, pids and cpu controllers). `svc serve`,
/// `svc relay serve` and `svc ingress demo` take them.
#[derive(Debug, Clone, clap::Args)]
pub struct JobResourceArgs {
    /// Memory of each job, every process of it together (page cache, /tmp, memfd and shared
    /// mappings included; no swap), MiB; each of its processes' heap (RLIMIT_DATA) too. A
    /// job over it is killed, and says `out_of_memory`.
    #[arg(long, value_name = "MIB", default_value_t = 512, value_parser = clap::value_parser!(u64).range(64..=1_048_576))]
    pub job_memory_mib: u64,
    /// Processes and threads of each job at once (its cgroup's pids.max; RLIMIT_NPROC of the
    /// job's own uid too, when the service runs as root).
    #[arg(long, value_name = "N", default_value_t = 256, value_parser = clap::value_parser!(u64).range(16..=65_536))]
    pub job_processes: u64,
    /// CPU time of each job, thousandths of a core (1000: one core).
    #[arg(long, value_name = "MILLICORES", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(10..=1_024_000))]
    pub job_cpu_millicores: u64,
    /// Run jobs without a cgroup each: memory then bounded per process only, CPU not at all
    /// (not for a host shared by tenants). Without this flag, a host where jobs cannot have
    /// cgroups refuses to start and says what to enable.
    #[arg(long)]
    pub without_job_cgroups: bool,
}

/// `svc gateway run`
#[derive(Debug, Subcommand)]
pub enum GatewayCommand {
    /// Serve the public TLS port, the agents' tunnel port and the metrics port.
    Run {
        /// The gateway configuration (JSON; routes are read again on SIGHUP).
        #[arg(long, value_name = "FILE")]
        config: PathBuf,
    },
}

/// `svc agent run`
#[derive(Debug, Subcommand)]
pub enum AgentCommand {
    /// Keep the key, get the certificate, hold the tunnel, serve the app.
    Run {
        /// The agent configuration (`agent.json` in the job's state directory).
        #[arg(long, value_name = "FILE")]
        config: PathBuf,
    },
}

/// Where the service is and who is calling: `--server` (or `SVC_SERVER`), the token from
/// `SVC_TOKEN`; either falls back to the config file (`SVC_CONFIG`, or `svc/config.json` in
/// the user config directory: `{"server": "http://...", "token": "svc_..."}`).
#[derive(Debug, Clone, clap::Args)]
pub struct Remote {
    /// The service's base URL, such as `http://127.0.0.1:8080` or `https://svc.example.com`.
    #[arg(long, value_name = "URL", env = "SVC_SERVER")]
    pub server: Option<String>,
    /// Which CA to trust for an https:// server.
    #[command(flatten)]
    pub trust: Trust,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub format: OutputFormat,
}

/// Which certificates an https:// server may present: those chaining to the CAs in `--ca`
/// (or `SVC_CA`) if given, else to the system's roots. Plain http:// carries a token only to
/// loopback (127.0.0.0/8, ::1, `localhost`).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct Trust {
    /// Trust the CA certificates in this PEM file (instead of the system's roots) for an
    /// https:// server, such as the development CA's `ca.pem`.
    #[arg(long, value_name = "FILE", env = "SVC_CA")]
    pub ca: Option<PathBuf>,
}

/// The listener of `svc serve` and `svc relay serve`: TLS, timeouts and the connection cap.
#[derive(Debug, Clone, clap::Args)]
pub struct ListenerArgs {
    /// Serve HTTPS with this PEM certificate chain (leaf first); needs --tls-key. Without TLS
    /// the listen address must be loopback.
    #[arg(long, value_name = "FILE", requires = "tls_key", conflicts_with = "dev_tls")]
    pub tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Serve HTTPS with a certificate from the development CA in the data directory (for
    /// localhost, 127.0.0.1, ::1 and the listen address); clients pass its `ca.pem` (printed
    /// at start) with --ca.
    #[arg(long)]
    pub dev_tls: bool,
    /// Seconds a client has to send a complete request head (the TLS handshake included).
    #[arg(long, value_name = "SECS", default_value_t = svc_http::Settings::DEFAULT.header_timeout.as_secs(),
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub header_timeout_secs: u64,
    /// Seconds a request's body has to arrive whole after its head (else 408).
    #[arg(long, value_name = "SECS", default_value_t = svc_http::Settings::DEFAULT.body_timeout.as_secs(),
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub body_timeout_secs: u64,
    /// Seconds a kept-alive connection may wait for its next request.
    #[arg(long, value_name = "SECS", default_value_t = svc_http::Settings::DEFAULT.idle_timeout.as_secs(),
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub idle_timeout_secs: u64,
    /// Open connections at most (lowered to fit the open-file limit); at the cap the oldest
    /// connection without a complete request is closed to make room.
    #[arg(long, value_name = "N", default_value_t = svc_http::Settings::DEFAULT.max_connections as u64,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub max_connections: u64,
    /// Large request bodies (over 64 KiB: deploys, big manifests) read at once for one
    /// organization; beyond it a request is answered 503 with Retry-After before its body is
    /// read. Smaller requests never wait.
    #[arg(long, value_name = "N", default_value_t = svc_http::IntakeLimits::DEFAULT.per_tenant as u16,
          value_parser = clap::value_parser!(u16).range(1..=10_000))]
    pub max_large_bodies_per_org: u16,
    /// Large request bodies read at once for all organizations together (at least
    /// --max-large-bodies-per-org); beyond it, 503 with Retry-After.
    #[arg(long, value_name = "N", default_value_t = svc_http::IntakeLimits::DEFAULT.total as u16,
          value_parser = clap::value_parser!(u16).range(1..=10_000))]
    pub max_large_bodies: u16,
    /// Log lines on standard error: `text` for people, `json` one object per line (RUST_LOG
    /// filters them; default `info`: one line per state change and per request that changes
    /// something or fails; reads and routine refreshes at `debug`).
    #[arg(long, value_enum, value_name = "FORMAT", default_value_t = crate::output::LogFormat::Text)]
    pub log_format: crate::output::LogFormat,
}

/// `svc policy ...`
#[derive(Debug, Subcommand)]
pub enum PolicyCommand {
    /// Validate a manifest locally (layers 1-2), then publish it as a new policy version.
    ///
    /// An invalid manifest is refused before anything is sent (exit 1, pointer shown).
    Publish {
        /// The manifest (JSON or YAML).
        #[arg(long, value_name = "PATH")]
        file: PathBuf,
        /// The target application's ID.
        #[arg(long, value_name = "ID")]
        app: String,
        /// Compile and resolve everything, then roll back: nothing is committed.
        #[arg(long)]
        dry_run: bool,
        /// Commit the version with the application paused (needs --reason).
        #[arg(long, requires = "reason")]
        paused: bool,
        /// Why it is paused: 1-500 characters, shown in activity.
        #[arg(long, value_name = "TEXT", requires = "paused")]
        reason: Option<String>,
        /// Refuse unless the active version is still N (the one you reviewed).
        #[arg(long, value_name = "N")]
        expect_version: Option<u64>,
        /// The service.
        #[command(flatten)]
        remote: Remote,
    },
    /// What changed between two policies: each field, with its JSON pointer, grouped as what
    /// reaches the running jobs (lifecycle, placement, spend), what reaches only the jobs
    /// launched next, and what reaches none (metadata).
    ///
    /// Each side is a file (an effective policy, or the JSON of `svc app versions APP
    /// --version N`; or two manifests, JSON or YAML) or `APP@N`, version N of an application
    /// on the service. Two manifests are compared as what takes effect: defaults written out,
    /// durations and sizes by value. Exit 0 if the effective policy is the same, 1 if it
    /// changed, 2 if a side cannot be read or the two are not the same kind of document.
    Diff {
        /// The policy before: a file, or `APP@N`.
        #[arg(value_name = "A")]
        from: String,
        /// The policy after: a file, or `APP@N`.
        #[arg(value_name = "B")]
        to: String,
        /// Compare the documents as written, field by field, without defaults or the effective
        /// policy (exit 1 for any change, metadata included).
        #[arg(long)]
        as_written: bool,
        /// The service (for `APP@N`), and the output format.
        #[command(flatten)]
        remote: Remote,
    },
}

/// `svc app ...`
#[derive(Debug, Subcommand)]
pub enum AppCommand {
    /// From an application directory to a running job: upload its files, publish, follow.
    ///
    /// Validates the manifest (DIR/manifest.yaml; nothing is sent if it is invalid), lists and
    /// uploads the directory's files as the source release (`.svcignore` leaves files out,
    /// gitignore syntax; hidden files, `.git` and the manifest stay out), creates the
    /// application if missing, publishes (a dry run, then fenced with the version it saw) and
    /// follows the executions until the job runs (a `once` job: until it settles) or is
    /// refused, printing the reason and the fix. Exit 0 running, 1 refused or failed, 130 on
    /// Ctrl-C (the application runs on).
    Deploy {
        /// The application directory (default: the current one).
        #[arg(value_name = "DIR", default_value = ".")]
        dir: PathBuf,
        /// The application meant: refused, before anything is sent, unless it is the
        /// manifest's `applicationId` (the application it deploys).
        #[arg(long, value_name = "NAME")]
        app: Option<String>,
        /// The manifest (default: DIR/manifest.yaml, .yml or .json).
        #[arg(long, value_name = "FILE")]
        manifest: Option<PathBuf>,
        /// Return once published instead of following the executions.
        #[arg(long)]
        no_wait: bool,
        /// How long to follow the executions, seconds (at most a day).
        #[arg(long, value_name = "SECS", default_value_t = 120, value_parser = clap::value_parser!(u64).range(1..=DAY_SECS))]
        timeout: u64,
        /// The service.
        #[command(flatten)]
        remote: Remote,
    },
    /// Create an application in your organization.
    Create {
        /// The application's ID.
        id: String,
        /// The service.
        #[command(flatten)]
        remote: Remote,
    },
    /// List your organization's applications: status, active version, pause reason.
    List {
        /// The service.
        #[command(flatten)]
        remote: Remote,
    },
    /// Lift an application's pause (publishing keeps a pause; this is the only way out),
    /// recorded in its activity with the reason.
    Resume {
        /// The application's ID.
        id: String,
        /// Why it runs again (1-500 characters).
        #[arg(long, value_name = "TEXT")]
        reason: String,
        /// The service.
        #[command(flatten)]
        remote: Remote,
    },
    /// Show an application.
    Show {
        /// The application's ID.
        id: String,
        /// The service.
        #[command(flatten)]
        remote: Remote,
    },
    /// List an application's policy versions, or show one with its effective policy.
    Versions {
        /// The application's ID.
        id: String,
        /// Show this version in full.
        #[arg(long, value_name = "N")]
        version: Option<u64>,
        /// The service.
        #[command(flatten)]
        remote: Remote,
    },
    /// An application's executions (`svc.execution-convergence.v1`): whether what runs
    /// matches its active policy and why not, each slot's current job, recent executions.
    Executions {
        /// The application's ID.
        id: String,
        /// Keep watching: print again whenever something changes (JSON: one object per line).
        #[arg(long)]
        watch: bool,
        /// How many recent executions (1-100).
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=100))]
        limit: Option<u16>,
        /// Older executions: the `nextCursor` of a previous answer.
        #[arg(long, value_name = "CURSOR")]
        cursor: Option<String>,
        /// The service.
        #[command(flatten)]
        remote: Remote,
    },
    /// What an application's jobs printed (program and sidecar), oldest first, each line
    /// tagged APP/SLOT/GENERATION/ATTEMPT (its execution). An execution keeps its newest
    /// 10,000 lines of at most 4 MiB; how many it did not keep is said once.
    Logs {
        /// The application's ID.
        id: String,
        /// Only this execution: its ID, or SLOT/GENERATION/ATTEMPT (as the tag shows).
        #[arg(long, value_name = "ID")]
        execution: Option<String>,
        /// Keep printing new lines as the jobs print them, until Ctrl-C (JSON: one object
        /// per line).
        #[arg(long)]
        follow: bool,
        /// The service.
        #[command(flatten)]
        remote: Remote,
    },
    /// Who did what to an application, with pause reasons.
    Activity {
        /// The application's ID.
        id: String,
        /// The service.
        #[command(flatten)]
        remote: Remote,
    },
}

/// `svc serve`
#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    /// Address to listen on (port 0 picks a free port; the address is printed).
    #[arg(long, value_name = "ADDR")]
    pub listen: std::net::SocketAddr,
    /// Data directory: holds the SQLite database, created on first start.
    #[arg(long, value_name = "DIR")]
    pub data_dir: PathBuf,
    /// Registered schema pairs.
    #[arg(long, value_name = "PAIRS", default_value = "v4_and_v5", value_parser = ["v4_and_v5", "v4"])]
    pub schema_pairs: String,
    /// For crash tests only: abort at this point of a publication.
    #[arg(long, hide = true, value_parser = ["after-version-insert"])]
    pub inject_fault: Option<String>,
    /// Processors of the local pool that runs published applications (each job a confined
    /// process on this machine); 0 runs none, and every launch is refused.
    #[arg(long, value_name = "N", default_value_t = 2, value_parser = clap::value_parser!(u16).range(0..=64))]
    pub processors: u16,
    /// Jobs each local processor runs at once.
    #[arg(long, value_name = "N", default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub jobs_per_processor: u16,
    /// What one hour of job window costs on a local processor, in service-credit micros
    /// (charged against each policy's spend authority).
    #[arg(long, value_name = "MICROS", default_value_t = 10_000)]
    pub price_micros_per_hour: u64,
    /// What each job may use where its policy says nothing (its cgroup).
    #[command(flatten)]
    pub jobs: JobResourceArgs,
    /// Where the store lives.
    #[command(flatten)]
    pub database: ServiceDatabaseArgs,
    /// TLS, timeouts and the connection cap.
    #[command(flatten)]
    pub listener: ListenerArgs,
}

/// `svc admin ...`: each takes the service's data directory.
#[derive(Debug, Subcommand)]
pub enum AdminCommand {
    /// Bearer tokens.
    Token {
        /// What to do.
        #[command(subcommand)]
        command: TokenCommand,
    },
    /// Curated and accepted artifacts.
    Artifact {
        /// What to do.
        #[command(subcommand)]
        command: ArtifactCommand,
    },
    /// Capability grants.
    Capability {
        /// Grant or revoke.
        #[command(subcommand)]
        command: CapabilityCommand,
    },
    /// Organization entitlement tiers.
    Entitlement {
        /// What to do.
        #[command(subcommand)]
        command: EntitlementCommand,
    },
    /// Service-credit spend authority.
    SpendAuthority {
        /// What to do.
        #[command(subcommand)]
        command: SpendAuthorityCommand,
    },
    /// Organization operator SSH keys (snapshotted into V5 policies with `access`).
    SshKey {
        /// What to do.
        #[command(subcommand)]
        command: SshKeyCommand,
    },
    /// Which secrets have a provisioned value.
    Secret {
        /// What to do.
        #[command(subcommand)]
        command: SecretCommand,
    },
    /// The native runtime image catalog.
    Image {
        /// What to do.
        #[command(subcommand)]
        command: ImageCommand,
    },
    /// The keys that seal secret values at rest.
    Keys {
        /// What to do.
        #[command(subcommand)]
        command: KeysCommand,
    },
}

/// `svc admin keys rotate`
#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// Rotate the keys while the service runs: a new key-encryption key in the key file, a
    /// new data key wrapped under it, every secret value resealed, older keys dropped.
    /// Back the key file up again afterwards, and copy it to every instance's host.
    Rotate {
        /// The service's data directory.
        #[arg(long, value_name = "DIR")]
        data_dir: PathBuf,
        /// Where the store lives, and its key file.
        #[command(flatten)]
        database: ServiceDatabaseArgs,
    },
}

/// The data directory and organization most admin commands take.
#[derive(Debug, Clone, clap::Args)]
pub struct OrgArgs {
    /// The service's data directory.
    #[arg(long, value_name = "DIR")]
    pub data_dir: PathBuf,
    /// Where the store lives.
    #[command(flatten)]
    pub database: ServiceDatabaseArgs,
    /// The organization (a-z, 0-9 and single hyphens, 1-32).
    #[arg(long, value_name = "ORG", value_parser = manifest_core::names::parse_organization)]
    pub org: String,
}

/// `svc admin token ...`
#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Create a token (and the organization if new); prints the token alone on stdout, once,
    /// and its ID and name on stderr.
    Create {
        /// Data directory and organization.
        #[command(flatten)]
        target: OrgArgs,
        /// viewer, developer, admin or owner.
        #[arg(long, value_parser = ["viewer", "developer", "admin", "owner"])]
        role: String,
        /// Who holds it, shown in activity and the console (default: the role and the first
        /// digits of the token's ID, `developer-6f42`).
        #[arg(long, value_name = "NAME", value_parser = manifest_core::names::parse_token_name)]
        name: Option<String>,
    },
}

/// An artifact on the command line.
#[derive(Debug, Clone, clap::Args)]
pub struct ArtifactFlags {
    /// `ipfs://<cid>` (a runtime image's bootstrap).
    #[arg(long)]
    pub cid: String,
    /// `sha256:<hex>` (a runtime image's bootstrap).
    #[arg(long)]
    pub digest: String,
    /// Artifact kind.
    #[arg(long, default_value = "ipfs_bundle", value_parser = ["ipfs_bundle", "runtime_image"])]
    pub kind: String,
    /// Encryption mode.
    #[arg(long, default_value = "none", value_parser = ["none", "aes256_gcm"])]
    pub encryption: String,
    /// For a runtime image: the image's digest.
    #[arg(long)]
    pub image_digest: Option<String>,
}

/// `svc admin artifact ...`
#[derive(Debug, Subcommand)]
pub enum ArtifactCommand {
    /// Store a bundle (a directory of files) in the content-addressed artifact store the local
    /// pool launches from; prints its digest (`sha256:...`, what a release pins).
    Store {
        /// The service's data directory.
        #[arg(long, value_name = "DIR")]
        data_dir: PathBuf,
        /// The bundle's directory.
        #[arg(long, value_name = "DIR")]
        bundle: PathBuf,
        /// Refuse the bundle unless it has this digest.
        #[arg(long, value_name = "SHA256")]
        digest: Option<String>,
    },
    /// Curate a first-party artifact (global) for pinned releases.
    Curate {
        /// The service's data directory.
        #[arg(long, value_name = "DIR")]
        data_dir: PathBuf,
        /// Where the store lives.
        #[command(flatten)]
        database: ServiceDatabaseArgs,
        /// The artifact.
        #[command(flatten)]
        artifact: ArtifactFlags,
    },
    /// Accept an artifact version built for an application.
    Accept {
        /// Data directory and organization.
        #[command(flatten)]
        target: OrgArgs,
        /// The application's ID.
        #[arg(long)]
        app: String,
        /// `owner/repository` it was built from.
        #[arg(long)]
        repository: String,
        /// The ref it was built at (`refs/heads/main`).
        #[arg(long = "ref")]
        git_ref: String,
        /// The workflow that built it.
        #[arg(long)]
        workflow_ref: String,
        /// The manifest's path in the repository.
        #[arg(long)]
        manifest_path: String,
        /// The artifact.
        #[command(flatten)]
        artifact: ArtifactFlags,
    },
}

/// `svc admin capability grant|revoke`
#[derive(Debug, Subcommand)]
pub enum CapabilityCommand {
    /// Grant a capability (see `docs/capabilities.md`).
    Grant {
        /// Data directory and organization.
        #[command(flatten)]
        target: OrgArgs,
        /// The capability's name.
        name: String,
    },
    /// Revoke a capability.
    Revoke {
        /// Data directory and organization.
        #[command(flatten)]
        target: OrgArgs,
        /// The capability's name.
        name: String,
    },
}

/// `svc admin entitlement set`
#[derive(Debug, Subcommand)]
pub enum EntitlementCommand {
    /// Set the organization's tier.
    Set {
        /// Data directory and organization.
        #[command(flatten)]
        target: OrgArgs,
        /// basic, developer, business or enterprise.
        #[arg(value_parser = ["basic", "developer", "business", "enterprise"])]
        tier: String,
    },
}

/// `svc admin spend-authority set`
#[derive(Debug, Subcommand)]
pub enum SpendAuthorityCommand {
    /// Set the service-credit authority per job, in micros (1000000 = USD 1.00).
    Set {
        /// Data directory and organization.
        #[command(flatten)]
        target: OrgArgs,
        /// Micros, up to 2^63 - 1 (the store's range); omit with --none.
        #[arg(long, required_unless_present = "none", value_parser = clap::value_parser!(u64).range(0..=MAX_STORED_MICROS))]
        micros: Option<u64>,
        /// Clear the authority.
        #[arg(long, conflicts_with = "micros")]
        none: bool,
    },
}

/// `svc admin ssh-key add`
#[derive(Debug, Subcommand)]
pub enum SshKeyCommand {
    /// Add an OpenSSH public key line.
    Add {
        /// Data directory and organization.
        #[command(flatten)]
        target: OrgArgs,
        /// The key line (`ssh-ed25519 AAAA... comment`).
        key: String,
    },
}

/// `svc admin secret provision`
#[derive(Debug, Subcommand)]
pub enum SecretCommand {
    /// Record that a secret has a provisioned value for an application.
    Provision {
        /// Data directory and organization.
        #[command(flatten)]
        target: OrgArgs,
        /// The application's ID.
        #[arg(long)]
        app: String,
        /// The secret's ID.
        #[arg(long)]
        secret_id: String,
        /// The secret's value, read from this file (kept in the data directory's database,
        /// 0600, and given to the application's jobs); without it only its provisioning is
        /// recorded.
        #[arg(long, value_name = "PATH")]
        value_file: Option<PathBuf>,
    },
}

/// `svc admin image add`
#[derive(Debug, Subcommand)]
pub enum ImageCommand {
    /// Add an exact image version to a catalog.
    Add {
        /// The service's data directory.
        #[arg(long, value_name = "DIR")]
        data_dir: PathBuf,
        /// Where the store lives.
        #[command(flatten)]
        database: ServiceDatabaseArgs,
        /// Catalog.
        #[arg(long, default_value = "svc-runtime-images")]
        catalog: String,
        /// Image name.
        #[arg(long)]
        name: String,
        /// Exact version `MAJOR.MINOR.PATCH`.
        #[arg(long)]
        version: String,
        /// `sha256:<hex>`.
        #[arg(long)]
        digest: String,
    },
}

/// `svc manifest ...`
#[derive(Debug, Subcommand)]
pub enum ManifestCommand {
    /// Validate manifests (layers 1-2: parse, strict schema, cross-field rules), offline.
    ///
    /// One file: its report. Several files or directories: directories are walked (hidden
    /// entries skipped), their files kept by `--include`, all validated in parallel, each
    /// reported in path order, then a summary.
    ///
    /// Exit 0: every file valid (warnings allowed). Exit 1: some file invalid. Exit 2: usage
    /// error, an unreadable file, or no file found.
    Validate {
        /// The manifest (JSON or YAML; V4 is JSON only); `-` reads standard input.
        #[arg(long, value_name = "PATH", required_unless_present = "paths")]
        file: Option<PathBuf>,
        /// More manifests, or directories to walk.
        #[arg(value_name = "PATH")]
        paths: Vec<PathBuf>,
        /// Keep a directory's file when this glob matches its path below the directory
        /// (repeatable; default `**/*.json`, `**/*.yaml`, `**/*.yml`).
        #[arg(long, value_name = "GLOB")]
        include: Vec<String>,
        /// Output format.
        #[arg(long, value_enum, default_value_t = ValidateFormat::Text)]
        format: ValidateFormat,
    },
    /// Write the Manifest V5 equivalent of a V4 manifest, and a note for every V4 field that
    /// has no V5 form (its pointer, why, what to do).
    ///
    /// The V5 document goes to standard output (checked by the validator first), the notes to
    /// standard error; with `--format json`, both in one JSON object. Each blocking note names
    /// the flag that supplies the V5 decision. Exit 0: migrated. Exit 1: the V4 manifest is
    /// invalid, or a field blocks the migration (nothing is written; the notes say what to
    /// change). Exit 2: usage error or an unreadable file.
    Migrate {
        /// The V4 manifest (JSON); `-` reads standard input.
        #[arg(long, value_name = "PATH")]
        file: PathBuf,
        /// The V5 decisions V4 cannot supply.
        #[command(flatten)]
        decisions: crate::MigrateDecisions,
        /// How the V5 document is written.
        #[arg(long, value_enum, default_value_t = MigrateFormat::Yaml)]
        format: MigrateFormat,
    },
    /// Print a JSON Schema (draft 2020-12), byte-identical to what the service serves.
    ///
    /// With `--server`, the targeted service's schema, cached by digest under the user cache
    /// directory and fetched again when the service's digest changes.
    Schema {
        /// `4` and `5` for the authored manifests, `policy` for the effective Policy V4.
        #[arg(long, value_enum)]
        version: SchemaVersion,
        /// Fetch it from this service instead (cached by digest; `SVC_SERVER` also works).
        #[arg(long, value_name = "URL")]
        server: Option<String>,
        /// Which CA to trust for an https:// server.
        #[command(flatten)]
        trust: Trust,
    },
    /// Print the effective Policy V4 of a V4 manifest, and nothing else.
    Policy {
        /// The manifest (JSON); `-` reads standard input.
        #[arg(long, value_name = "PATH")]
        file: PathBuf,
        /// Server facts.
        #[command(flatten)]
        facts: FactArgs,
    },
    /// Print the authored digest, and for V4 with server facts the policy digest.
    Digest {
        /// The manifest (JSON or YAML); `-` reads standard input.
        #[arg(long, value_name = "PATH")]
        file: PathBuf,
        /// Server facts (for the policy digest).
        #[command(flatten)]
        facts: FactArgs,
    },
}

/// Which schema `svc manifest schema` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SchemaVersion {
    /// Manifest V4.
    #[value(name = "4")]
    V4,
    /// Manifest V5.
    #[value(name = "5")]
    V5,
    /// Effective Policy V4.
    Policy,
    /// The `svc.execution-convergence.v1` projection (`svc app executions --format json`).
    Executions,
}

/// Server facts given on the command line (the service resolves them itself).
#[derive(Debug, Clone, clap::Args)]
pub struct FactArgs {
    /// The target application's immutable identity.
    #[arg(long, value_name = "UID")]
    pub application_uid: Option<String>,
    /// For a build release: the accepted artifact version's CID (`ipfs://...`).
    #[arg(long, value_name = "IPFS_URI", requires = "artifact_digest")]
    pub artifact_cid: Option<String>,
    /// For a build release: the accepted artifact version's digest (`sha256:...`).
    #[arg(long, value_name = "SHA256", requires = "artifact_cid")]
    pub artifact_digest: Option<String>,
}

/// How `svc manifest migrate` writes the V5 document.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum MigrateFormat {
    /// YAML (block style, strings quoted).
    Yaml,
    /// JSON, indented.
    Json,
}

/// How `svc manifest validate` prints its results: [`OutputFormat`]'s two, and three that
/// CI systems read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ValidateFormat {
    /// For people.
    Text,
    /// Exactly one JSON value on standard output, success or failure (the command's help says which).
    Json,
    /// JUnit XML: a test case per file, a failure listing its errors.
    Junit,
    /// GitHub Actions workflow commands: an annotation per diagnostic, with file, line and column.
    Github,
    /// SARIF 2.1.0, for GitHub code scanning and other static-analysis viewers.
    Sarif,
}

impl ValidateFormat {
    /// The shared format its errors are printed in (JSON envelopes for `json` only).
    pub fn output(self) -> OutputFormat {
        if self == ValidateFormat::Json { OutputFormat::Json } else { OutputFormat::Text }
    }

    /// Whether it is one of the CI formats, which report one file as they report many.
    pub fn is_ci(self) -> bool {
        matches!(self, ValidateFormat::Junit | ValidateFormat::Github | ValidateFormat::Sarif)
    }
}

/// How results are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// For people.
    Text,
    /// Exactly one JSON value on standard output, success or failure (the command's help says which).
    Json,
}
