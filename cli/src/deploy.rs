//! `svc ingress deploy|status|logs|hints|fund|ledger|stop|hostname|schema`: the customer's
//! side of the relay coordinator. The project file is validated here first (nothing is sent
//! for an invalid one), then the relay API does the rest.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use base64::Engine as _;
use hyper::Method;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use relay_api::coordinator::api::{
    DeployResponse, HintsResponse, HostnameResponse, LedgerResponse, LogsResponse, PolicyResponse, Status,
};
use relay_api::coordinator::model::{Deployment, LedgerEntry, QUOTE_MARGIN_MS, Quote, Successor, SuccessorState};
use relay_api::coordinator::state::DeploymentState;
use relay_api::hint::Hint;
use relay_api::project::Project;
use svc_execution::money;

use crate::args::{HostnameCommand, OutputFormat, ProjectTarget, Trust};
use crate::client::{Client, ClientError, Response};

const EXIT_FAILED: u8 = 1;
const EXIT_USAGE: u8 = 2;

use relay_api::coordinator::api::{BUNDLE_MAX_BYTES, BUNDLE_MAX_FILES};

/// Why an `svc ingress` command against the relay failed: each said once, by
/// [`crate::failure::report`], as `svc ingress: ...` (a refusal with its diagnostics and
/// hints; a deploy that failed with the hints that say why).
#[derive(Debug, thiserror::Error)]
pub(crate) enum IngressError {
    /// The project file cannot be read (the error names it).
    #[error("cannot read the project file: {0} (use --config FILE, or --project NAME)")]
    UnreadableProject(#[source] std::io::Error),
    /// The project file is not valid: nothing was sent.
    #[error("{} is not a valid project file; nothing was sent", path.display())]
    InvalidProject {
        /// The project file.
        path: PathBuf,
        /// Its diagnostics.
        #[source]
        source: relay_api::project::ProjectErrors,
    },
    /// No `SVC_RELAY_TOKEN`.
    #[error("no token: set SVC_RELAY_TOKEN (an operator issues one with `svc relay admin token`)")]
    NoToken,
    /// The relay URL or the CA cannot be used.
    #[error(transparent)]
    Client(ClientError),
    /// A request got no answer.
    #[error(transparent)]
    Unanswered(ClientError),
    /// The relay refused the request (a non-2xx answer).
    #[error("{}", refusal_line(*status, body))]
    Refused {
        /// The HTTP status.
        status: u16,
        /// The answer's body (the envelope, when the relay sent one).
        body: Vec<u8>,
    },
    /// A 2xx answer that is not what the command reads.
    #[error("the relay answered something unexpected: {0}")]
    Unexpected(#[source] serde_json::Error),
    /// `deploy` given `--deployment`.
    #[error("deploy sends a project file (--config); --deployment names an existing one")]
    DeploymentGiven,
    /// The app directory cannot be sent.
    #[error(transparent)]
    Bundle(BundleError),
    /// A secret's environment variable is not set.
    #[error("secret {name} reads ${variable}, which is not set in this environment")]
    SecretUnset {
        /// The secret.
        name: String,
        /// The variable it reads.
        variable: String,
        /// Why it cannot be read.
        #[source]
        source: std::env::VarError,
    },
    /// The project's manifest cannot be read (the error names it).
    #[error("cannot read the manifest: {0}")]
    UnreadableManifest(#[source] std::io::Error),
    /// The project file is not JSON.
    #[error(transparent)]
    ProjectJson(serde_json::Error),
    /// A redeploy's new revision failed; the previous one still serves.
    #[error("revision {revision} failed: {reason}; revision {serving} still serves (the deployment is {state})")]
    RedeployFailed {
        /// The new revision.
        revision: u32,
        /// Why it failed.
        reason: String,
        /// The revision that serves.
        serving: u32,
        /// The deployment's state.
        state: DeploymentState,
        /// Why, as the relay's hints say (funding hints left out).
        hints: Vec<Hint>,
    },
    /// Another deploy replaced the revision this one waited for.
    #[error("revision {revision} was replaced by another deploy of the project; revision {serving} serves")]
    Superseded {
        /// The revision waited for.
        revision: u32,
        /// The revision that serves.
        serving: u32,
    },
    /// A redeploy's revision did not take over in time.
    #[error("revision {revision} did not take over within {timeout} s; `svc ingress status` says why")]
    NotTakenOver {
        /// The revision waited for.
        revision: u32,
        /// The wait, seconds.
        timeout: u64,
        /// What keeps running, as the deploy's progress says it.
        left: Option<String>,
    },
    /// The deployment failed or was stopped.
    #[error("the deployment is {state}: {reason}")]
    DeploymentFailed {
        /// Its state.
        state: DeploymentState,
        /// Why.
        reason: String,
        /// The relay's hints.
        hints: Vec<Hint>,
    },
    /// The deployment was not live in time.
    #[error("not live after {timeout} s (still {state}); `svc ingress hints` says what to fix")]
    NotLive {
        /// The wait, seconds.
        timeout: u64,
        /// The deployment's state.
        state: DeploymentState,
        /// The relay's hints.
        hints: Vec<Hint>,
        /// What keeps running, as the deploy's progress says it.
        left: Option<String>,
    },
}

impl crate::failure::Failure for IngressError {
    fn exit_code(&self) -> u8 {
        match self {
            IngressError::UnreadableProject(_)
            | IngressError::NoToken
            | IngressError::Client(_)
            | IngressError::DeploymentGiven
            | IngressError::Bundle(_)
            | IngressError::SecretUnset { .. }
            | IngressError::UnreadableManifest(_)
            | IngressError::ProjectJson(_) => EXIT_USAGE,
            IngressError::InvalidProject { .. }
            | IngressError::Unanswered(_)
            | IngressError::Refused { .. }
            | IngressError::Unexpected(_)
            | IngressError::RedeployFailed { .. }
            | IngressError::Superseded { .. }
            | IngressError::NotTakenOver { .. }
            | IngressError::DeploymentFailed { .. }
            | IngressError::NotLive { .. } => EXIT_FAILED,
        }
    }

    fn envelope(&self) -> svc_http::ErrorBody {
        let code = match self {
            IngressError::UnreadableProject(_) | IngressError::UnreadableManifest(_) => "unreadable_file",
            IngressError::InvalidProject { .. } | IngressError::ProjectJson(_) => "invalid_project",
            IngressError::NoToken => "no_token",
            IngressError::Client(e) | IngressError::Unanswered(e) => e.code(),
            IngressError::Refused { status, body } => return crate::output::http_error(*status, body),
            IngressError::Unexpected(_) => "unexpected_answer",
            IngressError::DeploymentGiven => "usage",
            IngressError::Bundle(_) => "invalid_bundle",
            IngressError::SecretUnset { .. } => "secret_unset",
            IngressError::RedeployFailed { .. } => "redeploy_failed",
            IngressError::Superseded { .. } => "redeploy_superseded",
            IngressError::NotTakenOver { .. } | IngressError::NotLive { .. } => "not_live",
            IngressError::DeploymentFailed { .. } => "deployment_failed",
        };
        svc_http::ErrorBody::new(code, self.to_string())
    }

    fn text(&self) -> String {
        let line = crate::failure::line("svc ingress", self);
        match self {
            IngressError::InvalidProject { path, source } => format!("{}: {source}\n{line}", path.display()),
            IngressError::Refused { status, body } => api_error_text(*status, body),
            IngressError::RedeployFailed { hints, .. } | IngressError::DeploymentFailed { hints, .. } => {
                format!("{}{line}", hints_text(hints))
            }
            IngressError::NotTakenOver { left, .. } => format!("{}{line}", left.as_deref().unwrap_or_default()),
            IngressError::NotLive { hints, left, .. } => {
                format!("{}{}{line}", hints_text(hints), left.as_deref().unwrap_or_default())
            }
            _ => line,
        }
    }
}

/// A project file read and validated.
pub(crate) struct Loaded {
    project: Project,
    text: String,
    dir: PathBuf,
}

pub(crate) fn load(path: &Path) -> Result<Loaded, IngressError> {
    let text = fs_err::read_to_string(path).map_err(IngressError::UnreadableProject)?;
    let project = relay_api::project::read(&text)
        .map_err(|source| IngressError::InvalidProject { path: path.to_owned(), source })?;
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    Ok(Loaded { project, text, dir })
}

/// The relay client and the project name of a command.
pub(crate) fn target(t: &ProjectTarget) -> Result<(Client, String), IngressError> {
    // A deployment ID goes where the project's name would: the relay reads either.
    let name = match (&t.deployment, &t.project) {
        (Some(id), _) => id.clone(),
        (None, Some(name)) => name.clone(),
        (None, None) => load(&t.config)?.project.name,
    };
    Ok((client(&t.relay, &t.trust)?, name))
}

pub(crate) fn client(relay: &str, trust: &Trust) -> Result<Client, IngressError> {
    let token = std::env::var("SVC_RELAY_TOKEN").ok().filter(|t| !t.is_empty()).ok_or(IngressError::NoToken)?;
    Client::new(relay, Some(token), trust.ca.as_deref()).map_err(IngressError::Client)
}

/// Sends a request; a non-2xx answer is [`IngressError::Refused`].
pub(crate) fn call<T: DeserializeOwned>(
    client: &Client,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> Result<T, IngressError> {
    answer(&send(client, method, path, body)?)
}

/// Sends a request; only a transport failure is an error here.
fn send(client: &Client, method: Method, path: &str, body: Option<Value>) -> Result<Response, IngressError> {
    client.send(method, path, body.map(|b| b.to_string().into_bytes()), &[]).map_err(IngressError::Unanswered)
}

/// A 2xx answer's body; any other is [`IngressError::Refused`].
fn answer<T: DeserializeOwned>(response: &Response) -> Result<T, IngressError> {
    if !(200..300).contains(&response.status) {
        return Err(IngressError::Refused { status: response.status, body: response.body.clone() });
    }
    serde_json::from_slice(&response.body).map_err(IngressError::Unexpected)
}

/// A refusal's first line without `svc ingress: ` (what the envelope's message would be
/// were there no envelope).
fn refusal_line(status: u16, body: &[u8]) -> String {
    let text = api_error_text(status, body);
    let first = text.lines().next().unwrap_or_default();
    first.strip_prefix("svc ingress: ").unwrap_or(first).to_owned()
}

/// What a refusal of the relay prints on standard error: its code, status and message, then
/// each diagnostic and the hints it carries.
fn api_error_text(status: u16, body: &[u8]) -> String {
    use std::fmt::Write as _;
    let body: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let error = &body["error"];
    let code = error["code"].as_str().unwrap_or("error");
    let message = error["message"].as_str().unwrap_or("the relay refused the request");
    let mut out = format!("svc ingress: {code} (HTTP {status}): {message}\n");
    if let Some(diagnostics) = error["diagnostics"].as_array() {
        for d in diagnostics {
            let _ = writeln!(
                out,
                "  {} {}: {}",
                d["pointer"].as_str().unwrap_or(""),
                d["code"].as_str().unwrap_or(""),
                d["message"].as_str().unwrap_or("")
            );
        }
    }
    if let Some(hints) = error.get("hints").and_then(|h| serde_json::from_value::<Vec<Hint>>(h.clone()).ok()) {
        out.push_str(&hints_text(&hints));
    }
    out
}

pub(crate) fn path(project: &str, rest: &str) -> String {
    format!("/api/ingress/deployments/{project}{rest}")
}

/// Prints an API answer as JSON, its times (`...At` in Unix ms) as RFC 3339.
pub(crate) fn print_json(value: &impl serde::Serialize) {
    let mut value = serde_json::to_value(value).unwrap_or(Value::Null);
    crate::output::normalize_times(&mut value);
    crate::output::print_json(&value);
}

fn print_hints(hints: &[Hint], out: &mut dyn std::io::Write) {
    let _ = out.write_all(hints_text(hints).as_bytes());
}

/// Hints for people, numbered in the order given (the relay ranks them): stage, hostname,
/// problem and code, then the fix and the exact DNS record when there is one.
fn hints_text(hints: &[Hint]) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    for (i, h) in hints.iter().enumerate() {
        let host = h.hostname.as_deref().map(|n| format!("{n}: ")).unwrap_or_default();
        let stage = serde_json::to_value(h.stage).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default();
        let _ = writeln!(out, "{}. [{stage}] {host}{} ({})", i + 1, h.problem, h.code);
        let _ = writeln!(out, "   fix: {}", h.fix);
        if let Some(record) = &h.record {
            let _ = writeln!(out, "   record: {}", record.zone_line());
        }
    }
    out
}

fn quote_line(q: &Quote) -> String {
    format!(
        "quote {}: {} of {} at {} = {} (expires {})",
        q.id,
        manifest_core::plural(q.periods, "period"),
        money::duration_words(q.period_secs),
        money::usd_per(q.price_micros, q.period_secs),
        money::usd(q.total_micros),
        money::relative(relay_api::coordinator::store::now_ms(), q.expires_at)
    )
}

/// Why the app directory cannot be sent.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BundleError {
    /// A directory or file could not be read.
    #[error("cannot read the app directory: {0}")]
    Read(
        /// Why, naming the directory or file.
        #[source]
        std::io::Error,
    ),
    /// It is larger than a deployment carries.
    #[error(
        "the app directory {dir} holds more than {} MiB or {BUNDLE_MAX_FILES} files; point app.dir at the app alone",
        BUNDLE_MAX_BYTES >> 20,
        dir = dir.display()
    )]
    TooLarge {
        /// The app directory.
        dir: PathBuf,
    },
}

/// Every file of the app directory (hidden entries skipped), base64.
fn bundle(dir: &Path) -> Result<BTreeMap<String, String>, BundleError> {
    let mut files = BTreeMap::new();
    let mut total = 0u64;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(current) = stack.pop() {
        for entry in fs_err::read_dir(&current).map_err(BundleError::Read)? {
            let entry = entry.map_err(BundleError::Read)?;
            let name = entry.file_name();
            if name.to_string_lossy().starts_with('.') {
                continue;
            }
            let path = entry.path();
            let kind = entry.file_type().map_err(BundleError::Read)?;
            if kind.is_dir() {
                stack.push(path);
            } else if kind.is_file() {
                let bytes = fs_err::read(&path).map_err(BundleError::Read)?;
                total += bytes.len() as u64;
                if total > BUNDLE_MAX_BYTES || files.len() >= BUNDLE_MAX_FILES {
                    return Err(BundleError::TooLarge { dir: dir.to_owned() });
                }
                // Walked from `dir`, so every path is under it.
                let relative = path.strip_prefix(dir).unwrap_or(&path);
                let key = relative.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/");
                files.insert(key, base64::engine::general_purpose::STANDARD.encode(bytes));
            }
        }
    }
    Ok(files)
}

/// The quote, if it can still be funded: not funded yet, and not about to expire.
fn fundable(quote: &Quote) -> Option<&Quote> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    (quote.funded_at.is_none() && quote.expires_at > now + QUOTE_MARGIN_MS).then_some(quote)
}

/// Funds `quote`; when the relay refuses it as stale (the project, its hostnames or the
/// revision it was made for changed since) or expired, funds a new quote of `periods` (the
/// project's `spend.fundPeriods` when `None`) instead, saying so: a quote that can no longer
/// be funded never traps a deploy or `fund` (issue 41). The quote funded and its entry.
fn fund_quote(
    client: &Client,
    name: &str,
    quote: Quote,
    periods: Option<u64>,
    say: &mut dyn FnMut(&str),
) -> Result<(Quote, LedgerEntry), IngressError> {
    let response = send(client, Method::POST, &path(name, "/fund"), Some(json!({"quoteId": quote.id})))?;
    let body: Value = serde_json::from_slice(&response.body).unwrap_or(Value::Null);
    let code = body["error"]["code"].as_str().unwrap_or_default();
    if response.status != 409 || !["quote_stale", "quote_expired"].contains(&code) {
        return Ok((quote, answer(&response)?));
    }
    let asked = periods.map_or_else(|| json!({}), |p| json!({"periods": p}));
    let new: Quote = call(client, Method::POST, &path(name, "/quotes"), Some(asked))?;
    say(&format!("quote {} can no longer be funded ({code}): a new {}", quote.id, quote_line(&new)));
    let entry = call(client, Method::POST, &path(name, "/fund"), Some(json!({"quoteId": new.id})))?;
    Ok((new, entry))
}

/// `svc ingress deploy`
pub(crate) fn deploy(t: &ProjectTarget, no_fund: bool, no_wait: bool, timeout: u64) -> Result<ExitCode, IngressError> {
    deploy_inner(t, DeployOptions { no_fund, no_wait, timeout })
}

/// How far a deploy goes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DeployOptions {
    /// Send and quote, do not fund.
    pub(crate) no_fund: bool,
    /// Return once funded (a redeploy: once sent).
    pub(crate) no_wait: bool,
    /// How long to wait until live, seconds.
    pub(crate) timeout: u64,
}

/// Where a deploy reports as it goes: its progress lines, and each status it reads while it
/// waits (`svc ingress demo` prints the job's processes from one).
pub(crate) trait DeployProgress {
    /// A line for the person watching.
    fn say(&mut self, line: &str);
    /// A status read while waiting for the revision to serve.
    fn status(&mut self, _status: &Status) {}
    /// What the deploy has left at the relay so far, for Ctrl-C to name (`None`: nothing
    /// to name any more, the deploy ended).
    fn left(&mut self, _left: Option<&Left<'_>>) {}
    /// The wait timed out: what keeps running at the relay all the same, said (a line, its
    /// end included) after the hints of the failure that ends the deploy.
    fn waited_out(&mut self, _left: &Left<'_>) -> Option<String> {
        None
    }
}

/// What a deploy has left at the relay at some point of it: a deployment, funded or not,
/// and the revision the deploy waits for.
pub(crate) struct Left<'a> {
    /// The deployment, as the deploy's answer said.
    pub(crate) deployment: &'a Deployment,
    /// The revision the deploy waits for.
    pub(crate) revision: u32,
    /// Whether this deploy funded it.
    pub(crate) funded: bool,
    /// The newest status read, once waiting.
    pub(crate) status: Option<&'a Status>,
}

/// What a deploy left running at the relay, said on Ctrl-C and when its wait times out: the
/// deployment, what serves and until when it is funded, and the exact commands to follow and
/// stop it (`flags`: ` --relay URL` and
/// ` --ca FILE` when the deploy was given them).
pub(crate) fn left_text(left: &Left<'_>, flags: &str) -> String {
    let id = &left.deployment.id;
    let target = format!("--deployment {id}{flags}");
    let state = left.status.map_or(left.deployment.state, |s| s.deployment.state);
    let stop = format!("stop it: svc ingress stop {target}");
    let follow = format!("follow it: svc ingress status {target} or svc ingress logs --follow {target}");
    if state == DeploymentState::PendingFunding && !left.funded {
        return format!(
            "deployment {id} (revision {}) waits for funds and runs nothing; fund it: svc ingress fund \
             {target}; {stop}",
            left.revision
        );
    }
    if state.is_terminal() {
        return format!("deployment {id} is {state}; nothing of it runs");
    }
    let funds = funded_text(left.status);
    let serving = left.status.map_or(left.deployment.revision, |s| s.deployment.revision);
    let what = match left.status.and_then(|s| s.successor.as_ref()).filter(|s| s.revision == left.revision) {
        Some(next) if serving < left.revision && state.spends() => format!(
            "deployment {id} keeps running: revision {serving} serves, {funds}; revision {} is {} and takes over once \
             it passes validation",
            next.revision,
            next.state.as_str()
        ),
        _ => format!("deployment {id} (revision {}) keeps running ({state}), {funds}", left.revision.max(serving)),
    };
    format!("{what}; {follow}; {stop}")
}

/// Until when a deployment's funds last, from a status: when its funded periods end (the
/// coordinator's `funding.runsOutAt`); before its first period, how many periods it pays.
fn funded_text(status: Option<&Status>) -> String {
    let Some(s) = status else {
        return "funded".to_owned();
    };
    match (s.funding.runs_out_at, s.latest_quote.as_ref()) {
        (Some(end), _) => format!("funded until {}", crate::output::rfc3339_ms(end)),
        (None, Some(q)) => {
            let more = s.balance.available_micros / q.price_micros.max(1);
            let period = money::duration_words(q.period_secs);
            format!("funded for {} of {period} from when it serves", manifest_core::plural(more, "period"))
        }
        (None, None) => "funded".to_owned(),
    }
}

/// How a deploy ended well.
pub(crate) enum Deployed {
    /// Sent (and funded, unless told not to), not waited for: what `--format json` prints.
    Sent(Value),
    /// The revision serves and the deployment is live.
    Live(Box<Status>),
}

/// `svc ingress deploy`'s lines on standard output (none for `--format json`), and what
/// Ctrl-C says it leaves running.
struct Lines {
    format: OutputFormat,
    /// The flags the commands Ctrl-C names need besides `--deployment`.
    flags: String,
}

impl DeployProgress for Lines {
    fn say(&mut self, line: &str) {
        if self.format == OutputFormat::Text {
            println!("svc ingress deploy: {line}");
        }
    }

    fn left(&mut self, left: Option<&Left<'_>>) {
        crate::output::on_interrupt_say(left.map(|l| format!("interrupted: {}", left_text(l, &self.flags))));
    }

    fn waited_out(&mut self, left: &Left<'_>) -> Option<String> {
        Some(format!("svc ingress deploy: stopped waiting; {}\n", left_text(left, &self.flags)))
    }
}

/// The flags another `svc ingress` command needs to reach the relay `t` names: `--relay`
/// unless it is `SVC_RELAY` or the default, `--ca` when one was given.
fn target_flags(t: &ProjectTarget) -> String {
    let mut flags = String::new();
    let from_env = std::env::var("SVC_RELAY").ok().is_some_and(|r| r == t.relay);
    if !from_env && t.relay != DEFAULT_RELAY {
        flags.push_str(&format!(" --relay {}", t.relay));
    }
    if let Some(ca) = &t.trust.ca
        && std::env::var_os("SVC_CA").is_none_or(|c| Path::new(&c) != ca)
    {
        flags.push_str(&format!(" --ca {}", ca.display()));
    }
    flags
}

/// `--relay`'s default.
const DEFAULT_RELAY: &str = "http://127.0.0.1:7300";

fn deploy_inner(t: &ProjectTarget, options: DeployOptions) -> Result<ExitCode, IngressError> {
    if t.deployment.is_some() {
        return Err(IngressError::DeploymentGiven);
    }
    let loaded = load(&t.config)?;
    let client = client(&t.relay, &t.trust)?;
    let mut lines = Lines { format: t.format, flags: target_flags(t) };
    let deployed = deploy_project(&client, &loaded, options, &mut lines);
    lines.left(None);
    match deployed? {
        Deployed::Sent(answer) if t.format == OutputFormat::Json => print_json(&answer),
        Deployed::Sent(_) => {}
        Deployed::Live(status) if t.format == OutputFormat::Json => print_json(&status),
        Deployed::Live(status) => println!("live {}", status.deployment.url),
    }
    Ok(ExitCode::SUCCESS)
}

/// Deploys a loaded project file through `client`: validates it, sends it with its
/// app's files and secrets, funds its quote (unless `no_fund`), and waits until the new
/// revision serves live (unless `no_wait`). A refusal or a failure is the error, not yet
/// said.
pub(crate) fn deploy_project(
    client: &Client,
    loaded: &Loaded,
    options: DeployOptions,
    progress: &mut dyn DeployProgress,
) -> Result<Deployed, IngressError> {
    let DeployOptions { no_fund, no_wait, timeout } = options;
    let project = &loaded.project;
    let app_dir = loaded.dir.join(&project.app.dir);
    let files = bundle(&app_dir).map_err(IngressError::Bundle)?;
    let mut secrets = BTreeMap::new();
    for (name, from) in &project.app.secrets {
        let value = std::env::var(&from.from_env).map_err(|source| IngressError::SecretUnset {
            name: name.clone(),
            variable: from.from_env.clone(),
            source,
        })?;
        secrets.insert(name.clone(), value);
    }
    let manifest = match &project.manifest {
        Some(file) => Some(fs_err::read_to_string(loaded.dir.join(file)).map_err(IngressError::UnreadableManifest)?),
        None => None,
    };
    let project_json: Value = serde_json::from_str(&loaded.text).map_err(IngressError::ProjectJson)?;
    let count = manifest_core::plural(files.len() as u64, "file");
    progress.say(&format!("sending project {} ({count} from {})", project.name, app_dir.display()));
    let body = json!({"project": project_json, "manifest": manifest, "bundle": files, "secrets": secrets});
    let deployed: DeployResponse = call(client, Method::POST, "/api/ingress/deployments", Some(body))?;
    let d = &deployed.deployment;
    match &deployed.successor {
        Some(s) if d.state.spends() => progress.say(&format!(
            "deployment {} is {}: revision {} is {}; revision {} serves until it is validated",
            d.id,
            d.state,
            s.revision,
            s.state.as_str(),
            d.revision
        )),
        // Nothing serves: the successor takes over at once (issue 41: this said revision 1
        // served, and revision 2 was starting, of a deployment waiting for funds).
        Some(s) => progress.say(&format!(
            "deployment {} is {}, so nothing serves: revision {} replaces revision {}{}",
            d.id,
            d.state,
            s.revision,
            d.revision,
            if d.state == DeploymentState::PendingFunding { " and starts once funded" } else { " and starts now" }
        )),
        None => progress.say(&format!(
            "deployment {} is {}{}",
            d.id,
            d.state,
            if deployed.existing { " (unchanged project: nothing new created)" } else { "" }
        )),
    }
    // A redeploy is done when its revision serves.
    let revision = deployed.successor.as_ref().map_or(d.revision, |s| s.revision);
    // A redeploy of a funded deployment carries its funds over: no quote to read.
    if deployed.successor.is_none() || d.state == DeploymentState::PendingFunding {
        progress.say(&quote_line(&deployed.quote));
    }
    let mut funded: Option<LedgerEntry> = None;
    progress.left(Some(&Left { deployment: d, revision, funded: false, status: None }));
    if !no_fund && d.state == DeploymentState::PendingFunding {
        let quote = match fundable(&deployed.quote) {
            Some(quote) => Some(quote.clone()),
            // An unchanged project whose funds ran out (or whose quote expired): a new quote,
            // unless the funds of the one it has are still there (funded a moment ago, not
            // yet spent on a period).
            None => {
                let status: Status = call(client, Method::GET, &path(&project.name, ""), None)?;
                if status.balance.available_micros < deployed.quote.price_micros {
                    let quote: Quote = call(client, Method::POST, &path(&project.name, "/quotes"), Some(json!({})))?;
                    progress.say(&format!("a new {}", quote_line(&quote)));
                    Some(quote)
                } else {
                    None
                }
            }
        };
        if let Some(quote) = quote {
            let (_, entry) = fund_quote(client, &project.name, quote, None, &mut |line| progress.say(line))?;
            progress.say(&format!("funded {} (ledger entry {})", money::usd(entry.amount_micros), entry.seq));
            funded = Some(entry);
        }
    }
    progress.left(Some(&Left { deployment: d, revision, funded: funded.is_some(), status: None }));
    if no_fund || no_wait {
        let mut answer = json!({"deployment": d, "quote": deployed.quote, "funded": funded});
        if let Some(s) = &deployed.successor {
            answer["successor"] = json!(s);
        }
        return Ok(Deployed::Sent(answer));
    }
    let deadline = Instant::now() + Duration::from_secs(timeout);
    // A new deployment's transitions are told from its creation; an existing one's from now.
    let mut seen: Option<usize> = (!deployed.existing && deployed.successor.is_none()).then_some(0);
    let mut seen_revision = d.revision;
    // Each problem is said once, as soon as the relay knows it (issue 42): a validation that
    // fails shows its hint at once, not after the timeout.
    let mut told = Told::default();
    loop {
        let status: Status = call(client, Method::GET, &path(&project.name, ""), None)?;
        progress.status(&status);
        progress.left(Some(&Left { deployment: d, revision, funded: funded.is_some(), status: Some(&status) }));
        for tr in status.transitions.iter().skip(seen.unwrap_or(status.transitions.len())) {
            progress.say(&format!("{} ({})", tr.to, tr.reason));
        }
        seen = Some(status.transitions.len());
        if status.deployment.revision < revision {
            match &status.successor {
                Some(s) if s.revision == revision && s.state == SuccessorState::Failed => {
                    // Why this revision failed; the deployment's funding is another matter.
                    let hints =
                        status.hints.iter().filter(|h| h.stage != relay_api::hint::Stage::Funding).cloned().collect();
                    return Err(IngressError::RedeployFailed {
                        revision,
                        reason: s.reason.clone(),
                        serving: status.deployment.revision,
                        state: status.deployment.state,
                        hints,
                    });
                }
                Some(s) if s.revision == revision => told.successor(s, status.deployment.revision, timeout, progress),
                _ => {
                    return Err(IngressError::Superseded { revision, serving: status.deployment.revision });
                }
            }
            if Instant::now() > deadline {
                let left = progress.waited_out(&Left {
                    deployment: d,
                    revision,
                    funded: funded.is_some(),
                    status: Some(&status),
                });
                return Err(IngressError::NotTakenOver { revision, timeout, left });
            }
            std::thread::sleep(Duration::from_millis(250));
            continue;
        }
        told.hints(&status, timeout, progress);
        // Said once it serves: a revision that took over a deployment serving nothing (one
        // waiting for funds, say) does not serve before it is live (issue 41), nor one that
        // validates no more (degraded) right after it took over (issue 42).
        if status.deployment.revision > seen_revision && status.deployment.state == DeploymentState::Live {
            seen_revision = status.deployment.revision;
            progress.say(&format!("revision {} serves", status.deployment.revision));
        }
        match status.deployment.state {
            DeploymentState::Live => return Ok(Deployed::Live(Box::new(status))),
            DeploymentState::Failed | DeploymentState::Stopped => {
                return Err(IngressError::DeploymentFailed {
                    state: status.deployment.state,
                    reason: status.deployment.state_reason.clone(),
                    hints: status.hints.clone(),
                });
            }
            _ if Instant::now() > deadline => {
                let left = progress.waited_out(&Left {
                    deployment: d,
                    revision,
                    funded: funded.is_some(),
                    status: Some(&status),
                });
                return Err(IngressError::NotLive {
                    timeout,
                    state: status.deployment.state,
                    hints: status.hints.clone(),
                    left,
                });
            }
            _ => std::thread::sleep(Duration::from_millis(500)),
        }
    }
}

/// The problems a deploy's wait has said already.
#[derive(Default)]
struct Told {
    /// Hint codes and problems said.
    said: std::collections::BTreeSet<(String, String)>,
    /// Whether the wait's deadline was said with the first problem.
    waiting: bool,
}

impl Told {
    /// Says each new hint of the deployment's (a validation that failed, a job that ended)
    /// once, as soon as a status carries it; funding hints are the deploy's own business.
    fn hints(&mut self, status: &Status, timeout: u64, progress: &mut dyn DeployProgress) {
        let d = &status.deployment;
        if !matches!(d.state, DeploymentState::Provisioning | DeploymentState::Validating | DeploymentState::Degraded) {
            return;
        }
        for h in status.hints.iter().filter(|h| h.stage != relay_api::hint::Stage::Funding) {
            if self.said.insert((h.code.clone(), h.problem.clone())) {
                let host = h.hostname.as_deref().map(|n| format!("{n}: ")).unwrap_or_default();
                progress.say(&format!("problem: {host}{} ({})", h.problem, h.code));
                progress.say(&format!("  fix: {}", h.fix));
                self.wait_said(timeout, progress);
            }
        }
    }

    /// Says a redeploy's new revision failing its validation (its reason), once per reason.
    fn successor(&mut self, s: &Successor, serving: u32, timeout: u64, progress: &mut dyn DeployProgress) {
        if s.state == SuccessorState::Validating
            && s.reason.starts_with("validation failed")
            && self.said.insert(("successor".to_owned(), s.reason.clone()))
        {
            progress
                .say(&format!("problem: revision {}: {}; revision {serving} serves meanwhile", s.revision, s.reason));
            self.wait_said(timeout, progress);
        }
    }

    fn wait_said(&mut self, timeout: u64, progress: &mut dyn DeployProgress) {
        if !std::mem::replace(&mut self.waiting, true) {
            progress.say(&format!(
                "the relay keeps trying: waiting up to {timeout} s in all (Ctrl-C leaves the deployment running)"
            ));
        }
    }
}

/// `svc ingress status`
pub(crate) fn status(t: &ProjectTarget) -> Result<ExitCode, IngressError> {
    let (client, name) = target(t)?;
    let s: Status = call(&client, Method::GET, &path(&name, ""), None)?;
    if t.format == OutputFormat::Json {
        print_json(&s);
        return Ok(ExitCode::SUCCESS);
    }
    print!("{}", status_text(&s));
    Ok(ExitCode::SUCCESS)
}

/// What `svc ingress status` prints for people: state, funds, hostnames, validations, hints.
fn status_text(s: &Status) -> String {
    status_text_at(s, relay_api::coordinator::store::now_ms())
}

/// [`status_text`] at `now` (Unix ms): when the funds run out is said from it.
fn status_text_at(s: &Status, now: i64) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let d = &s.deployment;
    let _ = writeln!(
        out,
        "project {}  deployment {}  revision {}  state {} ({})",
        d.project, d.id, d.revision, d.state, d.state_reason
    );
    if let Some(next) = &s.successor {
        let _ = writeln!(out, "next revision {}: {} ({})", next.revision, next.state.as_str(), next.reason);
    }
    let _ = writeln!(out, "url {}", d.url);
    // The gateway hosts serving it too (issue 20).
    for url in d.urls.iter().filter(|u| **u != d.url) {
        let _ = writeln!(out, "also {url}");
    }
    out.push_str(&funding_text(s, now));
    for h in &s.hostnames {
        let _ = writeln!(out, "hostname {} {}", h.hostname, h.state.as_str());
    }
    for v in &s.validations {
        let verdict = if v.passed { "passed" } else { "failed" };
        let _ = writeln!(out, "validation {} {verdict} ({})", v.hostname, v.validator_version);
    }
    if !s.hints.is_empty() {
        out.push_str("hints:\n");
        out.push_str(&hints_text(&s.hints));
    }
    out
}

/// The balance, the burn rate and when the funds run out (`status`, and `fund` after funding).
fn funding_text(s: &Status, now: i64) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let d = &s.deployment;
    let (b, f) = (&s.balance, &s.funding);
    let _ = writeln!(
        out,
        "balance: {} left (funded {}, refunded {}; spent {} on {}, a period charged when it starts)",
        money::usd(f.remaining_micros),
        money::usd(b.funded_micros),
        money::usd(b.refunded_micros),
        money::usd(b.spent_micros),
        manifest_core::plural(d.periods_spent, "period")
    );
    match &s.latest_quote {
        Some(q) if f.burn_micros_per_day > 0 => {
            let (day, price) = (money::usd(f.burn_micros_per_day), money::usd_per(q.price_micros, q.period_secs));
            let _ = writeln!(out, "burn rate: {day} per day ({price})");
        }
        Some(q) => {
            let price = money::usd_per(q.price_micros, q.period_secs);
            let _ = writeln!(out, "price: {price} (nothing is spent while no job runs)");
        }
        None => {}
    }
    match f.runs_out_at {
        Some(end) => {
            let _ = writeln!(out, "funds run out: {} ({})", crate::output::rfc3339_ms(end), money::relative(now, end));
        }
        None if matches!(d.state, DeploymentState::Provisioning | DeploymentState::Validating) => {
            let _ = writeln!(out, "funds run out: not counting yet (the first period starts once live)");
        }
        None => {}
    }
    out
}

/// `svc ingress logs`
pub(crate) fn logs(t: &ProjectTarget, follow: bool, after: i64) -> Result<ExitCode, IngressError> {
    let (client, name) = target(t)?;
    let mut cursor = after;
    // Without --follow, JSON is one value: every entry up to now and the next cursor.
    let mut collected = Vec::new();
    loop {
        let page: LogsResponse = call(&client, Method::GET, &path(&name, &format!("/logs?after={cursor}")), None)?;
        for e in &page.entries {
            if t.format == OutputFormat::Json && !follow {
                collected.push(e.clone());
            } else if t.format == OutputFormat::Json {
                // --follow streams: one entry per line (JSON Lines), times in RFC 3339.
                let mut v = serde_json::to_value(e).unwrap_or(Value::Null);
                crate::output::normalize_times(&mut v);
                println!("{v}");
            } else {
                println!("{} {} {}", e.seq, e.source, e.line);
            }
        }
        let more = page.next != cursor;
        cursor = page.next;
        if !follow && !more {
            if t.format == OutputFormat::Json {
                print_json(&LogsResponse { entries: collected, next: cursor });
            }
            return Ok(ExitCode::SUCCESS);
        }
        if !more {
            if crate::output::stdout_closed() {
                return Ok(ExitCode::SUCCESS);
            }
            std::thread::sleep(Duration::from_secs(1));
        }
    }
}

/// `svc ingress hints`
pub(crate) fn hints(t: &ProjectTarget) -> Result<ExitCode, IngressError> {
    let (client, name) = target(t)?;
    let h: HintsResponse = call(&client, Method::GET, &path(&name, "/hints"), None)?;
    if t.format == OutputFormat::Json {
        print_json(&h);
    } else if h.hints.is_empty() {
        println!("nothing to fix: the deployment is {}", h.state);
    } else {
        print_hints(&h.hints, &mut std::io::stdout());
    }
    Ok(ExitCode::SUCCESS)
}

/// `svc ingress executions`
pub(crate) fn executions(
    t: &ProjectTarget,
    limit: Option<u16>,
    cursor: Option<&str>,
) -> Result<ExitCode, IngressError> {
    let (client, name) = target(t)?;
    let rest = format!("/executions{}", crate::remote::page_query(limit, cursor));
    let projection: Value = call(&client, Method::GET, &path(&name, &rest), None)?;
    if t.format == OutputFormat::Json {
        crate::output::print_json(&projection);
    } else {
        print!("{}", crate::remote::executions_text(&projection));
    }
    Ok(ExitCode::SUCCESS)
}

/// `svc ingress policy`
pub(crate) fn policy(t: &ProjectTarget, revision: Option<u32>) -> Result<ExitCode, IngressError> {
    let (client, name) = target(t)?;
    let rest = revision.map_or_else(|| "/policy".to_owned(), |r| format!("/policy?revision={r}"));
    let p: PolicyResponse = call(&client, Method::GET, &path(&name, &rest), None)?;
    if t.format == OutputFormat::Json {
        print_json(&p);
    } else {
        let serving = if p.active { "serving" } else { "not serving" };
        println!("{} policy version {} ({serving}), published {}", p.project, p.policy_version, p.published_at);
        println!("policy digest:   {}", p.policy_digest);
        println!("authored digest: {}", p.authored_digest);
        print_json(&p.policy);
    }
    Ok(ExitCode::SUCCESS)
}

/// `svc ingress fund`
pub(crate) fn fund(t: &ProjectTarget, periods: Option<u64>) -> Result<ExitCode, IngressError> {
    let (client, name) = target(t)?;
    // The quote `deploy --no-fund` (or `status`) showed, while it can still be funded;
    // a new one when there is none, it expired or is stale, or other periods are asked for.
    let status: Status = call(&client, Method::GET, &path(&name, ""), None)?;
    let shown =
        status.latest_quote.as_ref().and_then(fundable).filter(|q| periods.is_none_or(|p| p == q.periods)).cloned();
    let quote = match shown {
        Some(quote) => quote,
        None => {
            let body = periods.map_or_else(|| json!({}), |p| json!({"periods": p}));
            let quote: Quote = call(&client, Method::POST, &path(&name, "/quotes"), Some(body))?;
            if t.format == OutputFormat::Text {
                println!("no open quote to fund: a new quote {}", quote.id);
            }
            quote
        }
    };
    let text = t.format == OutputFormat::Text;
    let (quote, entry) = fund_quote(&client, &name, quote, periods, &mut |line| {
        if text {
            println!("{line}");
        }
    })?;
    if t.format == OutputFormat::Json {
        print_json(&json!({"quote": quote, "entry": entry}));
    } else {
        println!("{}", quote_line(&quote));
        println!("funded {} (ledger entry {})", money::usd(entry.amount_micros), entry.seq);
        // How long the money lasts now (the fund already happened: a failure here is only
        // the summary's).
        match call::<Status>(&client, Method::GET, &path(&name, ""), None) {
            Ok(after) => print!("{}", funding_text(&after, relay_api::coordinator::store::now_ms())),
            // Said as every failure is, but not the command's: the money is in.
            Err(e) => drop(crate::failure::show(&e)),
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `svc ingress ledger`
pub(crate) fn ledger(t: &ProjectTarget) -> Result<ExitCode, IngressError> {
    let (client, name) = target(t)?;
    let l: LedgerResponse = call(&client, Method::GET, &path(&name, "/ledger"), None)?;
    if t.format == OutputFormat::Json {
        print_json(&l);
        return Ok(ExitCode::SUCCESS);
    }
    for e in &l.entries {
        let kind = e.kind.as_str();
        println!("{} {kind:<8} {:>14}  {}", e.seq, money::usd(e.amount_micros), e.note);
    }
    let b = &l.balance;
    println!(
        "funded {}, spent {}, refunded {}; {} in periods not started",
        money::usd(b.funded_micros),
        money::usd(b.spent_micros),
        money::usd(b.refunded_micros),
        money::usd(b.available_micros)
    );
    Ok(ExitCode::SUCCESS)
}

/// `svc ingress stop`
pub(crate) fn stop(t: &ProjectTarget) -> Result<ExitCode, IngressError> {
    let (client, name) = target(t)?;
    let d: Deployment = call(&client, Method::POST, &path(&name, "/stop"), None)?;
    if t.format == OutputFormat::Json {
        print_json(&d);
    } else {
        println!("deployment {} is {}", d.id, d.state);
    }
    Ok(ExitCode::SUCCESS)
}

/// `svc ingress hostname ...`
pub(crate) fn hostname(command: &HostnameCommand) -> Result<ExitCode, IngressError> {
    let (t, host, method, suffix) = match command {
        HostnameCommand::Add { hostname, target } => (target, hostname, Method::POST, String::new()),
        HostnameCommand::Verify { hostname, target } => (target, hostname, Method::POST, format!("/{hostname}/verify")),
        HostnameCommand::Remove { hostname, target } => (target, hostname, Method::DELETE, format!("/{hostname}")),
    };
    let (client, name) = target(t)?;
    let body = matches!(command, HostnameCommand::Add { .. }).then(|| json!({"hostname": host}));
    let r: HostnameResponse = call(&client, method, &path(&name, &format!("/hostnames{suffix}")), body)?;
    // `verify` succeeds only once the records check out: a script can wait on its code.
    let records_missing = matches!(command, HostnameCommand::Verify { .. })
        && r.hostname.state == relay_api::coordinator::model::HostnameState::PendingDns;
    let missing = ExitCode::from(EXIT_RECORDS_MISSING);
    if t.format == OutputFormat::Json {
        print_json(&r);
        return Ok(if records_missing { missing } else { ExitCode::SUCCESS });
    }
    let h = &r.hostname;
    let state = h.state.as_str();
    println!("hostname {} {state}", h.hostname);
    if matches!(command, HostnameCommand::Add { .. }) {
        println!("create these DNS records, then run `svc ingress hostname verify {}`:", h.hostname);
        for record in &r.records {
            println!("  {}", record.zone_line());
        }
    }
    if !h.hints.is_empty() {
        print_hints(&h.hints, &mut std::io::stdout());
    }
    if records_missing {
        eprintln!(
            "svc ingress hostname verify: {} is not verified yet: its DNS records are missing or wrong (above)",
            h.hostname
        );
        return Ok(missing);
    }
    Ok(ExitCode::SUCCESS)
}

/// Exit code of `hostname verify` while the hostname's DNS records are not all there.
const EXIT_RECORDS_MISSING: u8 = 1;

/// `svc ingress list`: every deployment of the organization, newest first, stopped ones too.
pub(crate) fn list(t: &crate::args::RelayTarget) -> Result<ExitCode, IngressError> {
    let client = client(&t.relay, &t.trust)?;
    let all: Vec<Deployment> = call(&client, Method::GET, "/api/ingress/deployments", None)?;
    if t.format == OutputFormat::Json {
        print_json(&json!({ "deployments": all }));
        return Ok(ExitCode::SUCCESS);
    }
    if all.is_empty() {
        println!("no deployments yet: `svc ingress deploy` in a project's directory makes one");
    }
    for d in &all {
        println!(
            "{}  {}  {}  {}  created {}",
            d.id,
            d.project,
            d.state,
            d.url,
            crate::output::rfc3339_ms(d.created_at)
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `svc ingress schema`
pub(crate) fn schema() -> ExitCode {
    print!("{}", relay_api::project::schema());
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests;
