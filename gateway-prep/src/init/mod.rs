//! `gateway-prep init`: the operator key, the registration with the coordinator, the
//! gateway configuration, the tunnel certificate and the systemd unit.
//!
//! It plans every file first and decides for each: create, update (init wrote it, and the
//! inputs changed), unchanged, or changed (someone edited it since init wrote it, which the
//! registration record's SHA-256 shows): a changed file stops init before anything is
//! written or registered, unless `--force`. The registration happens once: its record
//! (`operator.json`) makes later runs skip it. `--dry-run` reports the plan and writes
//! nothing.

pub mod files;
pub mod record;
pub mod unit;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use relay_gateway::file::{FeedSource, GatewayFile};
use relay_wire::admission::{Operator, RegisterRequest, registration_message};
use serde::Serialize;

use crate::args::{ArgsError, InitArgs, LIMIT_NOFILE_RANGE};
use crate::coordinator::{ClientError, CoordinatorClient};
use crate::key::{KeyError, OperatorKey, check_tls_identity, tunnel_cert};
use crate::{Root, layout};
use files::{Action, FileReport, Fingerprint, Planned};
use record::Registration;

/// What init is asked to do.
#[derive(Debug, Clone)]
pub struct InitOptions {
    /// The host's files.
    pub root: Root,
    /// The coordinator's base URL (default: the record's).
    pub coordinator: Option<String>,
    /// Roots to trust for an https coordinator.
    pub coordinator_ca: Option<PathBuf>,
    /// The admission token (needed only to register).
    pub admission_token: Option<String>,
    /// The operator name the token was issued to, if given.
    pub operator: Option<String>,
    /// The gateway's public hostname (default: the record's).
    pub hostname: Option<String>,
    /// The public TLS address (`None`: the existing configuration's, else the default).
    pub public: Option<SocketAddr>,
    /// The tunnel address (`None`: as for `public`).
    pub tunnel: Option<SocketAddr>,
    /// The metrics address (`None`: as for `public`).
    pub admin: Option<SocketAddr>,
    /// The `svc` binary the unit runs.
    pub svc_binary: PathBuf,
    /// The unit's `LimitNOFILE=`.
    pub limit_nofile: u64,
    /// Report only.
    pub dry_run: bool,
    /// Replace changed files.
    pub force: bool,
}

impl TryFrom<&InitArgs> for InitOptions {
    type Error = ArgsError;

    /// The options from the command line; an out-of-range `--limit-nofile` is refused.
    fn try_from(args: &InitArgs) -> Result<InitOptions, ArgsError> {
        Ok(InitOptions {
            root: Root::new(&args.host.root),
            coordinator: args.host.coordinator.clone(),
            coordinator_ca: args.host.coordinator_ca.clone(),
            admission_token: args.admission_token.clone(),
            operator: args.operator.clone(),
            hostname: args.host.hostname.clone(),
            public: args.public,
            tunnel: args.tunnel,
            admin: args.admin,
            svc_binary: args.svc_binary.clone(),
            limit_nofile: ArgsError::check("--limit-nofile", LIMIT_NOFILE_RANGE, args.limit_nofile)?,
            dry_run: args.dry_run,
            force: args.force,
        })
    }
}

/// Why init stopped. Nothing was written when it stops before writing (every refusal).
#[derive(Debug, thiserror::Error)]
pub enum InitError {
    /// A missing or bad option.
    #[error("{0}")]
    Usage(String),
    /// Files changed since init wrote them.
    #[error(
        "{} changed since gateway-prep init wrote it; nothing was written: undo the change, or run again with --force to replace it (the change is lost)",
        .0.join(", ")
    )]
    Changed(Vec<String>),
    /// The host's state does not fit this run (another hostname, coordinator or key).
    #[error("{0}")]
    Conflict(String),
    /// The coordinator refused the registration.
    #[error("registration refused: {0}")]
    Refused(ClientError),
    /// The coordinator could not be asked.
    #[error(transparent)]
    Client(ClientError),
    /// A key could not be made.
    #[error(transparent)]
    Key(#[from] KeyError),
    /// A file could not be written.
    #[error("cannot write {path}: {source}")]
    Io {
        /// The host path.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
}

impl InitError {
    /// The exit code: 2 for refusals (changed files, admission, conflicts), 64 for usage, 3
    /// for failures to carry out.
    pub fn exit_code(&self) -> u8 {
        match self {
            InitError::Usage(_) => 64,
            InitError::Changed(_) | InitError::Conflict(_) | InitError::Refused(_) => 2,
            InitError::Client(_) | InitError::Key(_) | InitError::Io { .. } => 3,
        }
    }

    /// The stable code of the JSON error envelope: the coordinator's own when it refused.
    pub fn code(&self) -> &str {
        match self {
            InitError::Usage(_) => "usage",
            InitError::Changed(_) => "files_changed",
            InitError::Conflict(_) => "host_conflict",
            InitError::Refused(_) => self.refusal_code().unwrap_or("registration_refused"),
            InitError::Client(_) => "coordinator_unreachable",
            InitError::Key(_) => "key_failed",
            InitError::Io { .. } => "write_failed",
        }
    }

    /// The coordinator's refusal code (`admission_token_unknown`, ...), if it refused.
    pub fn refusal_code(&self) -> Option<&str> {
        match self {
            InitError::Refused(ClientError::Refused { code, .. }) => Some(code),
            _ => None,
        }
    }
}

/// What happened (or would) with the registration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RegistrationAction {
    /// Registered in this run (or would be, in a dry run).
    Register,
    /// The record says this host is registered: nothing sent.
    Unchanged,
}

/// The registration in init's report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RegistrationReport {
    /// `register` or `unchanged`.
    pub action: RegistrationAction,
    /// The coordinator.
    pub coordinator: String,
    /// The gateway hostname.
    pub hostname: String,
    /// The public key sent (or registered).
    pub public_key: String,
    /// The operator as the coordinator recorded it (absent in a dry run that would register).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub operator: Option<Operator>,
}

/// What init did (or would do): the JSON shape of `init --format json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InitReport {
    /// Nothing was written.
    pub dry_run: bool,
    /// Every file, in the order written.
    pub files: Vec<FileReport>,
    /// The registration.
    pub registration: RegistrationReport,
    /// What works but needs fixing, each with its fix (`found; fix: ...`): the coordinator
    /// routes for another operator than the one this host is registered as. Absent when none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

impl InitReport {
    /// Whether the run changed nothing (every file unchanged, no registration).
    pub fn unchanged(&self) -> bool {
        self.registration.action == RegistrationAction::Unchanged
            && self.files.iter().all(|f| f.action == Action::Unchanged)
    }

    /// The text people read.
    pub fn text(&self) -> String {
        let mut out = String::new();
        if self.dry_run {
            out.push_str("dry run: nothing is written or registered\n");
        }
        for f in &self.files {
            out.push_str(&format!("{:<9}  {}  {}\n", f.action.as_str(), f.mode, f.path));
        }
        let r = &self.registration;
        match (r.action, self.dry_run) {
            (RegistrationAction::Unchanged, _) => {
                out.push_str(&format!("registered  gateway {} with {} (unchanged)\n", r.hostname, r.coordinator))
            }
            (RegistrationAction::Register, true) => out.push_str(&format!(
                "register   gateway {} with {}, public key {}\n",
                r.hostname, r.coordinator, r.public_key
            )),
            (RegistrationAction::Register, false) => out.push_str(&format!(
                "registered  operator \"{}\" gateway {} with {}, public key {}\n",
                r.operator.as_ref().map_or("", |o| o.name.as_str()),
                r.hostname,
                r.coordinator,
                r.public_key
            )),
        }
        let unit_written = self.files.iter().any(|f| f.path == layout::UNIT && f.action.writes());
        if unit_written && !self.dry_run {
            out.push_str("next: systemctl daemon-reload && systemctl enable --now svc-gateway\n");
        }
        out
    }
}

fn config_path(name: &str) -> PathBuf {
    Path::new(layout::CONFIG_DIR).join(name)
}

fn read_existing(root: &Root, path: &Path) -> Option<String> {
    std::fs::read_to_string(root.path(path)).ok()
}

/// The operator key: the one on the host (which must be the registered one), or a new one.
fn operator_key(root: &Root, record: Option<&Registration>) -> Result<(OperatorKey, String), InitError> {
    let host = config_path(layout::OPERATOR_KEY);
    match (read_existing(root, &host), record) {
        (Some(text), record) => {
            let key = OperatorKey::from_pem(&text).map_err(|e| {
                InitError::Conflict(format!(
                    "{} is not an operator key ({e}); restore it from a backup, or remove it{} and run init again",
                    host.display(),
                    if record.is_some() {
                        " and operator.json (registering again needs a new admission token)"
                    } else {
                        ""
                    }
                ))
            })?;
            if let Some(record) = record
                && key.public_key() != record.operator.public_key
            {
                return Err(InitError::Conflict(format!(
                    "{} is not the key registered for gateway {}; restore the registered key, or remove it and \
                     operator.json and register again with a new admission token",
                    host.display(),
                    record.operator.hostname
                )));
            }
            Ok((key, text))
        }
        (None, Some(record)) => Err(InitError::Conflict(format!(
            "the operator key {} registered for gateway {} is missing; restore it from a backup, or remove \
             operator.json and register again with a new admission token",
            host.display(),
            record.operator.hostname
        ))),
        (None, None) => {
            let key = OperatorKey::generate()?;
            let pem = key.pem().to_owned();
            Ok((key, pem))
        }
    }
}

/// The tunnel certificate and key: the pair on the host when it is a usable TLS identity,
/// else a new self-signed pair.
fn tunnel_pair(root: &Root, hostname: &str) -> Result<(String, String), InitError> {
    let cert = read_existing(root, &config_path(layout::TUNNEL_CERT));
    let key = read_existing(root, &config_path(layout::TUNNEL_KEY));
    if let (Some(cert), Some(key)) = (&cert, &key)
        && check_tls_identity(cert, key).is_ok()
    {
        return Ok((cert.clone(), key.clone()));
    }
    let pair = tunnel_cert(hostname)?;
    Ok((pair.cert_pem, pair.key_pem))
}

/// The gateway configuration: the addresses and tunnel files given, the coordinator whose
/// route feed it follows as operator `operator_id` (known once registered), and the routes of
/// the existing file (routes are the gateway's to change; init keeps them). The files init
/// writes beside it are named relative to it, so a host prepared under `--root` runs as is.
fn gateway_json(root: &Root, opts: &InitOptions, coordinator: &str, operator_id: &str) -> String {
    let host = config_path(layout::GATEWAY_FILE);
    // A re-run keeps the configured addresses and CA: only a flag given now changes one.
    let existing = GatewayFile::read_as_written(&root.path(&host)).ok();
    let address = |given: Option<SocketAddr>, configured: Option<SocketAddr>, default: &str| {
        given.or(configured).unwrap_or_else(|| default.parse().unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0))))
    };
    let ca = opts.coordinator_ca.clone().or_else(|| existing.as_ref()?.coordinator.as_ref()?.ca.clone());
    let file = GatewayFile {
        public: address(opts.public, existing.as_ref().map(|f| f.public), layout::PUBLIC),
        tunnel: address(opts.tunnel, existing.as_ref().map(|f| f.tunnel), layout::TUNNEL),
        admin: address(opts.admin, existing.as_ref().map(|f| f.admin), layout::ADMIN),
        tunnel_cert: PathBuf::from(layout::TUNNEL_CERT),
        tunnel_key: PathBuf::from(layout::TUNNEL_KEY),
        client_hello_max_bytes: None,
        client_hello_timeout_secs: None,
        idle_timeout_secs: None,
        half_close_linger_secs: None,
        client_share_percent: None,
        client_hellos_per_client: None,
        coordinator: Some(FeedSource {
            url: coordinator.to_owned(),
            operator_id: operator_id.to_owned(),
            operator_key: PathBuf::from(layout::OPERATOR_KEY),
            ca,
        }),
        routes: existing.map(|f| f.routes).unwrap_or_default(),
    };
    let mut text = serde_json::to_string_pretty(&file).unwrap_or_default();
    text.push('\n');
    text
}

/// Runs init: plans, refuses changed files, registers (once), writes.
pub async fn init(opts: &InitOptions) -> Result<InitReport, InitError> {
    let root = &opts.root;
    let record = Registration::read(root).map_err(|e| InitError::Conflict(e.to_string()))?;
    let hostname = match (&opts.hostname, &record) {
        (Some(h), _) => {
            relay_dns::customer_hostname(h.trim()).map_err(|e| InitError::Usage(format!("--hostname: {e}")))?
        }
        (None, Some(r)) => r.operator.hostname.clone(),
        (None, None) => {
            return Err(InitError::Usage("--hostname NAME is needed: the gateway's public hostname".into()));
        }
    };
    let coordinator = match (&opts.coordinator, &record) {
        (Some(c), _) => c.trim().trim_end_matches('/').to_owned(),
        (None, Some(r)) => r.coordinator.clone(),
        (None, None) => return Err(InitError::Usage("--coordinator URL is needed to register".into())),
    };
    if let Some(r) = &record
        && (r.operator.hostname != hostname || r.coordinator != coordinator)
    {
        return Err(InitError::Conflict(format!(
            "this host is registered as gateway {} with {}; to register it as {hostname} with {coordinator}, \
             remove {} and run init with a new admission token",
            r.operator.hostname,
            r.coordinator,
            Registration::path().display()
        )));
    }
    let client = CoordinatorClient::new(&coordinator, opts.coordinator_ca.as_deref()).map_err(InitError::Client)?;

    let (key, key_text) = operator_key(root, record.as_ref())?;
    // Known once registered: a first run plans gateway.json without it and again after.
    let operator_id = record.as_ref().map(|r| r.operator.id.clone()).unwrap_or_default();
    let (cert_pem, tunnel_key_pem) = tunnel_pair(root, &hostname)?;
    let wanted = [
        (config_path(layout::OPERATOR_KEY), key_text, 0o600, Fingerprint::Bytes),
        (config_path(layout::TUNNEL_KEY), tunnel_key_pem, 0o600, Fingerprint::Bytes),
        (config_path(layout::TUNNEL_CERT), cert_pem, 0o644, Fingerprint::Bytes),
        (
            config_path(layout::GATEWAY_FILE),
            gateway_json(root, opts, &coordinator, &operator_id),
            0o644,
            Fingerprint::GatewayConfig,
        ),
        (
            PathBuf::from(layout::UNIT),
            unit::unit(&opts.svc_binary, &config_path(layout::GATEWAY_FILE), opts.limit_nofile, &hostname),
            0o644,
            Fingerprint::Bytes,
        ),
    ];
    let recorded = |p: &Path| record.as_ref().and_then(|r| r.files.get(&p.display().to_string()).cloned());
    let mut planned: Vec<Planned> = wanted
        .into_iter()
        .map(|(path, content, mode, fingerprint)| {
            let action =
                files::classify(root, &path, &content, mode, fingerprint, recorded(&path).as_deref(), opts.force);
            Planned { path, content, mode, fingerprint, action }
        })
        .collect();
    let changed: Vec<String> =
        planned.iter().filter(|f| f.action == Action::Changed).map(|f| f.path.display().to_string()).collect();
    if !changed.is_empty() && !opts.dry_run {
        return Err(InitError::Changed(changed));
    }

    let public_key = key.public_key();
    let record_path = Registration::path();
    let mut report = InitReport {
        dry_run: opts.dry_run,
        files: Vec::new(),
        registration: RegistrationReport {
            action: if record.is_some() { RegistrationAction::Unchanged } else { RegistrationAction::Register },
            coordinator: coordinator.clone(),
            hostname: hostname.clone(),
            public_key: public_key.clone(),
            operator: record.as_ref().map(|r| r.operator.clone()),
        },
        warnings: Vec::new(),
    };
    if record.is_none() && opts.admission_token.is_none() {
        return Err(InitError::Usage(
            "--admission-token TOKEN is needed to register this host (or set SVC_ADMISSION_TOKEN)".into(),
        ));
    }
    if opts.dry_run {
        report.files = planned.iter().map(Planned::report).collect();
        let record_action = if record.is_some() {
            // The record changes only if a file it describes does.
            if planned.iter().all(|f| f.action == Action::Unchanged) { Action::Unchanged } else { Action::Update }
        } else {
            Action::Create
        };
        report.files.push(FileReport {
            path: record_path.display().to_string(),
            mode: "0644".into(),
            action: record_action,
        });
        let name = record.as_ref().map(|r| r.operator.name.clone()).or_else(|| opts.operator.clone());
        report.warnings = operator_warnings(&client, name.as_deref()).await;
        return Ok(report);
    }

    let write = |f: &Planned| {
        files::write_atomic(&root.path(&f.path), f.content.as_bytes(), f.mode)
            .map_err(|source| InitError::Io { path: f.path.display().to_string(), source })
    };
    // The key is on disk before the coordinator learns it, so a crash after registering
    // never loses the registered key; a refused registration removes a key this run made.
    let key_file = &planned[0];
    let config_dir_existed = root.path(layout::CONFIG_DIR).exists();
    if key_file.action.writes() {
        write(key_file)?;
    }
    let operator = match &record {
        Some(r) => r.operator.clone(),
        None => {
            let token = opts.admission_token.as_deref().unwrap_or_default().trim().to_owned();
            let request = RegisterRequest {
                signature: key.sign(&registration_message(&token, &hostname, &public_key)),
                admission_token: token,
                operator: opts.operator.clone(),
                public_key: public_key.clone(),
                hostname: hostname.clone(),
            };
            match client.register(&request).await {
                Ok(op) => op,
                Err(e) => {
                    if key_file.action == Action::Create {
                        let _ = std::fs::remove_file(root.path(&key_file.path));
                        if !config_dir_existed {
                            let _ = std::fs::remove_dir(root.path(layout::CONFIG_DIR));
                        }
                    }
                    return Err(match e {
                        ClientError::Refused { .. } => InitError::Refused(e),
                        other => InitError::Client(other),
                    });
                }
            }
        }
    };
    if operator.id != operator_id
        && let Some(gateway) = planned.iter_mut().find(|f| f.path == config_path(layout::GATEWAY_FILE))
    {
        gateway.content = gateway_json(root, opts, &coordinator, &operator.id);
        gateway.action = files::classify(
            root,
            &gateway.path,
            &gateway.content,
            gateway.mode,
            gateway.fingerprint,
            recorded(&gateway.path).as_deref(),
            opts.force,
        );
    }
    for f in &planned[1..] {
        if f.action.writes() {
            write(f)?;
        }
    }
    let new_record = Registration {
        version: record::VERSION,
        coordinator,
        operator: operator.clone(),
        files: files::digests(&planned),
    };
    let text = new_record.to_text();
    let record_file = Planned {
        action: match read_existing(root, &record_path) {
            Some(old) if old == text => Action::Unchanged,
            Some(_) => Action::Update,
            None => Action::Create,
        },
        path: record_path,
        content: text,
        mode: 0o644,
        fingerprint: Fingerprint::Bytes,
    };
    if record_file.action.writes() {
        write(&record_file)?;
    }
    planned.push(record_file);
    report.files = planned.iter().map(Planned::report).collect();
    report.warnings = operator_warnings(&client, Some(&operator.name)).await;
    report.registration.operator = Some(operator);
    Ok(report)
}

/// A warning when the coordinator routes its deployments through another operator's hosts
/// than `operator` (this host's): its route feed would assign this host nothing. Nothing
/// when it cannot tell (no operator name yet, no answer, a coordinator that does not say):
/// `check`'s `coordinator.operator` says so.
async fn operator_warnings(client: &CoordinatorClient, operator: Option<&str>) -> Vec<String> {
    let Some(name) = operator else { return Vec::new() };
    let Ok(health) = client.health().await else { return Vec::new() };
    match health.gateway_operator.as_deref() {
        Some(routed) if routed != name => vec![format!(
            "{}; fix: {}",
            crate::check::network::operator_mismatch(name, routed),
            crate::check::network::operator_fix(name, routed)
        )],
        _ => Vec::new(),
    }
}
