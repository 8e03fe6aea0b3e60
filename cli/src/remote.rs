//! Commands that talk to the service: `svc policy publish`, `svc app ...`, and
//! `svc manifest schema --server` (schemas cached by digest).
//!
//! Exit codes: 0 done; 1 refused (an invalid manifest, or the service said no); 2 usage,
//! configuration or connection trouble.

use std::path::PathBuf;
use std::process::ExitCode;

use hyper::Method;
use manifest_core::{SchemaKind, render_text, sha256, validate};
use serde_json::{Value, json};

use crate::args::{OutputFormat, Remote, Trust};
use crate::client::{Client, ClientError, Response};

const EXIT_REFUSED: u8 = 1;
const EXIT_USAGE: u8 = 2;

/// Why a command against the service failed: said once, by [`crate::failure::report`], as
/// `svc: ...` (a refusal as the service's code, message and diagnostics).
#[derive(Debug, thiserror::Error)]
pub(crate) enum RemoteError {
    /// No service address anywhere.
    #[error("no service given: pass --server URL, set SVC_SERVER, or put \"server\" in the config file")]
    NoServer,
    /// No token anywhere.
    #[error(
        "no token: set SVC_TOKEN, or put \"token\" in {config}; a service administrator makes one on the \
         service's host: `svc admin token create --data-dir DATA_DIR --org ORG --role developer`"
    )]
    NoToken {
        /// The config file, or "the config file" when there is none.
        config: String,
    },
    /// The server URL or the CA cannot be used.
    #[error(transparent)]
    Client(ClientError),
    /// A request got no answer (with what to check).
    #[error("{}", client_failure(.0))]
    Unanswered(#[source] ClientError),
    /// The service refused (a non-2xx answer).
    #[error("{}", refusal_line(*status, body))]
    Refused {
        /// The HTTP status.
        status: u16,
        /// The answer's body (the envelope, when the service sent one).
        body: Vec<u8>,
        /// The exit code: 1, or 2 where the answer was an input to read.
        exit: u8,
        /// What to do, said after the refusal.
        fix: Option<String>,
    },
    /// A file cannot be read (the error names it).
    #[error(transparent)]
    Unreadable(std::io::Error),
    /// The manifest is invalid: nothing was sent.
    #[error("the manifest is invalid; nothing was sent")]
    InvalidManifest {
        /// Its diagnostics for people, as `svc manifest validate` prints them.
        rendered: String,
        /// Its diagnostics as JSON (the envelope's `diagnostics`).
        diagnostics: Value,
    },
    /// The service's schema cannot be had.
    #[error(transparent)]
    Schema(SchemaFetchError),
}

impl crate::failure::Failure for RemoteError {
    fn exit_code(&self) -> u8 {
        match self {
            RemoteError::Refused { exit, .. } => *exit,
            RemoteError::InvalidManifest { .. } => EXIT_REFUSED,
            _ => EXIT_USAGE,
        }
    }

    fn envelope(&self) -> svc_http::ErrorBody {
        let code = match self {
            RemoteError::NoServer => "no_server",
            RemoteError::NoToken { .. } => "no_token",
            RemoteError::Client(e) | RemoteError::Unanswered(e) => e.code(),
            RemoteError::Refused { status, body, .. } => return crate::output::http_error(*status, body),
            RemoteError::Unreadable(_) => "unreadable_file",
            RemoteError::InvalidManifest { diagnostics, .. } => {
                return svc_http::ErrorBody::new("invalid_manifest", self.to_string())
                    .with("diagnostics", diagnostics["diagnostics"].clone());
            }
            RemoteError::Schema(_) => "schema_unavailable",
        };
        svc_http::ErrorBody::new(code, self.to_string())
    }

    fn text(&self) -> String {
        let line = crate::failure::line("svc", self);
        match self {
            RemoteError::Refused { status, body, fix, .. } => {
                let fix = fix.as_deref().map(|f| format!("{f}\n")).unwrap_or_default();
                format!("{}{fix}", error_text(*status, &serde_json::from_slice(body).unwrap_or(Value::Null)))
            }
            RemoteError::InvalidManifest { rendered, .. } => format!("{rendered}{line}"),
            _ => line,
        }
    }
}

/// A refusal's first line without `svc: `.
fn refusal_line(status: u16, body: &[u8]) -> String {
    let text = error_text(status, &serde_json::from_slice(body).unwrap_or(Value::Null));
    let first = text.lines().next().unwrap_or_default();
    first.strip_prefix("svc: ").unwrap_or(first).to_owned()
}

impl RemoteError {
    /// The service's refusal in `response`.
    pub(crate) fn refused(response: &Response, exit: u8) -> RemoteError {
        RemoteError::Refused { status: response.status, body: response.body.clone(), exit, fix: None }
    }
}

/// Validates `bytes` (the manifest `name`) here: an invalid one is [`RemoteError::InvalidManifest`].
pub(crate) fn valid_here<'a>(bytes: &'a [u8], name: &str) -> Result<manifest_core::Report<'a>, RemoteError> {
    let report = validate(bytes);
    if report.is_valid() {
        return Ok(report);
    }
    let diagnostics: Value = serde_json::from_str(&manifest_core::render_json(&report)).unwrap_or(Value::Null);
    Err(RemoteError::InvalidManifest { rendered: render_text(&report, name, bytes), diagnostics })
}

/// `SVC_CONFIG`, or `svc/config.json` in the user config directory.
fn config_file() -> Option<PathBuf> {
    std::env::var_os("SVC_CONFIG").map(PathBuf::from).or_else(|| dirs::config_dir().map(|d| d.join("svc/config.json")))
}

fn config_value(key: &str) -> Option<String> {
    let text = std::fs::read_to_string(config_file()?).ok()?;
    serde_json::from_str::<Value>(&text).ok()?.get(key)?.as_str().map(str::to_owned)
}

/// The client for `remote`: server from the flag or `SVC_SERVER` or the config file; token
/// from `SVC_TOKEN` or the config file.
pub(crate) fn client(remote_server: Option<&str>, trust: &Trust, with_token: bool) -> Result<Client, RemoteError> {
    let server = remote_server.map(str::to_owned).or_else(|| config_value("server")).ok_or(RemoteError::NoServer)?;
    let token = if with_token {
        let token = std::env::var("SVC_TOKEN").ok().filter(|t| !t.is_empty()).or_else(|| config_value("token"));
        Some(token.ok_or_else(|| RemoteError::NoToken {
            config: config_file().map_or_else(|| "the config file".to_owned(), |f| f.display().to_string()),
        })?)
    } else {
        None
    };
    Client::new(&server, token, trust.ca.as_deref()).map_err(RemoteError::Client)
}

pub(crate) fn send(client: &Client, method: Method, path: &str, body: Option<Value>) -> Result<Response, RemoteError> {
    let body = body.map(|b| serde_json::to_vec(&b).unwrap_or_default());
    client.send(method, path, body, &[]).map_err(RemoteError::Unanswered)
}

/// A request that got no answer, with what to check: a service that is not running where
/// `--server` / `SVC_SERVER` says, or one that serves plain HTTP to an `https://` URL.
fn client_failure(e: &ClientError) -> String {
    match e {
        ClientError::Unreachable { .. } => format!(
            "{e}; is `svc serve` running there? --server or SVC_SERVER gives its address, the one it printed \
             (`listening on ...`)"
        ),
        ClientError::Tls { url, reason } if reason.contains("InvalidContentType") => format!(
            "{e}; {url} answered in plain HTTP, not TLS: if it is a `svc serve` without a certificate, use {}",
            url.replacen("https://", "http://", 1)
        ),
        _ => e.to_string(),
    }
}

/// Prints a success (the JSON as it came, or `text`); a refusal is the error (exit 1).
fn finish(
    response: &Response,
    format: OutputFormat,
    text: impl FnOnce(&Value) -> String,
) -> Result<ExitCode, RemoteError> {
    if !(200..300).contains(&response.status) {
        return Err(RemoteError::refused(response, EXIT_REFUSED));
    }
    match format {
        OutputFormat::Json => println!("{}", String::from_utf8_lossy(&response.body).trim_end()),
        OutputFormat::Text => print!("{}", text(&response.json())),
    }
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn error_text(status: u16, body: &Value) -> String {
    let error = &body["error"];
    let code = error["code"].as_str().unwrap_or("error");
    let message = error["message"].as_str().unwrap_or("no message");
    // The diagnostics follow as lines of their own (`see `diagnostics`` is for JSON readers).
    let message = message.strip_suffix("; see `diagnostics`").map_or(message.to_owned(), |m| format!("{m}:"));
    let mut out = format!("svc: the service refused ({status} {code}): {message}\n");
    for d in error["diagnostics"].as_array().into_iter().flatten() {
        out += &diagnostic_line(d);
    }
    if status == 401 {
        // The CLI always sends one: the service does not know it.
        out += "fix: the service does not accept the token in SVC_TOKEN (or the config file's): unknown to it, \
                revoked or expired. Is SVC_SERVER the service whose data directory made it? A service \
                administrator makes a new one there: `svc admin token create --data-dir DATA_DIR --org ORG \
                --role developer`\n";
    }
    out
}

fn diagnostic_line(d: &Value) -> String {
    let pointer = d["pointer"].as_str().unwrap_or("");
    format!(
        "  {}[{}] at {} (layer {}): {}\n",
        d["severity"].as_str().unwrap_or("error"),
        d["code"].as_str().unwrap_or(""),
        if pointer.is_empty() { "(document)" } else { pointer },
        d["layer"],
        d["message"].as_str().unwrap_or("")
    )
}

/// Arguments of `svc policy publish`.
pub(crate) struct Publish<'a> {
    pub(crate) file: &'a std::path::Path,
    pub(crate) app: &'a str,
    pub(crate) dry_run: bool,
    pub(crate) reason: Option<&'a str>,
    pub(crate) expect_version: Option<u64>,
    pub(crate) remote: &'a Remote,
}

/// Validates locally, refusing before sending anything; then publishes.
pub(crate) fn publish(args: &Publish<'_>) -> Result<ExitCode, RemoteError> {
    let bytes = fs_err::read(args.file).map_err(RemoteError::Unreadable)?;
    let report = valid_here(&bytes, &args.file.display().to_string())?;
    let client = client(args.remote.server.as_deref(), &args.remote.trust, true)?;
    // The targeted service's schema, from the cache when its digest has not changed: if it is
    // not the one this svc validates against, say so (local validation may then differ).
    let kind = if report.schema_version == Some(4) { SchemaKind::ManifestV4 } else { SchemaKind::ManifestV5 };
    if let Ok(schema) = fetch_schema(&client, kind)
        && sha256(&schema) != kind.digest()
    {
        eprintln!(
            "svc: warning: {}'s Manifest V{} schema differs from this svc's; update svc so local validation matches",
            client.base(),
            if kind == SchemaKind::ManifestV4 { 4 } else { 5 }
        );
    }
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let mut body = json!({ "manifest": text });
    if args.dry_run {
        body["dryRun"] = json!(true);
    }
    if let Some(reason) = args.reason {
        body["postPublishStatus"] = json!("paused");
        body["reason"] = json!(reason);
    }
    if let Some(n) = args.expect_version {
        body["expectedActivePointerVersion"] = json!(n);
    }
    let path = format!("/api/applications/{}/policy-versions", args.app);
    let response = send(&client, Method::POST, &path, Some(body))?;
    finish(&response, args.remote.format, |b| {
        let what = if b["dryRun"] == json!(true) { "dry run: would publish" } else { "published" };
        let mut out = format!(
            "{what} policy version {} of {} (active version {}, status {})\nauthored digest: {}\npolicy digest: {}\n",
            b["policyVersion"],
            b["applicationId"].as_str().unwrap_or(""),
            b["activePointerVersion"],
            b["status"].as_str().unwrap_or(""),
            b["authoredDigest"].as_str().unwrap_or(""),
            b["policyDigest"].as_str().unwrap_or("")
        );
        for d in b["diagnostics"].as_array().into_iter().flatten() {
            out += &diagnostic_line(d);
        }
        out
    })
}

/// `svc app create ID`
pub(crate) fn app_create(id: &str, remote: &Remote) -> Result<ExitCode, RemoteError> {
    let client = client(remote.server.as_deref(), &remote.trust, true)?;
    let response = send(&client, Method::POST, "/api/applications", Some(json!({ "applicationId": id })))?;
    finish(&response, remote.format, |b| {
        format!(
            "created {} ({}), status {}\n",
            b["applicationId"].as_str().unwrap_or(""),
            b["applicationUid"].as_str().unwrap_or(""),
            b["status"].as_str().unwrap_or("")
        )
    })
}

/// `svc app show ID`
pub(crate) fn app_show(id: &str, remote: &Remote) -> Result<ExitCode, RemoteError> {
    get(&format!("/api/applications/{id}"), remote, |b| {
        let mut out = format!(
            "{} ({})\nstatus: {}\nactive version: {}\n",
            b["applicationId"].as_str().unwrap_or(""),
            b["applicationUid"].as_str().unwrap_or(""),
            b["status"].as_str().unwrap_or(""),
            b["activePointerVersion"]
        );
        if let Some(reason) = b["pauseReason"].as_str() {
            out += &format!("pause reason: {reason}\n");
        }
        if b["settled"] == json!(true) {
            out += "settled: ran once\n";
        }
        if let Some(state) = b["convergence"]["state"].as_str() {
            out += &format!("executions: {state}");
            if let Some(message) = b["convergence"]["reason"]["message"].as_str() {
                out += &format!(" ({message})");
            }
            out += "\n";
        }
        out
    })
}

/// `svc app executions ID [--watch] [--limit N] [--cursor C]`
pub(crate) fn app_executions(
    id: &str,
    watch: bool,
    limit: Option<u16>,
    cursor: Option<&str>,
    remote: &Remote,
) -> Result<ExitCode, RemoteError> {
    let path = format!("/api/applications/{id}/executions{}", page_query(limit, cursor));
    if !watch {
        return get(&path, remote, executions_text);
    }
    let client = client(remote.server.as_deref(), &remote.trust, true)?;
    // Until interrupted: print the projection again whenever it changes.
    let mut last = Vec::new();
    loop {
        let response = send(&client, Method::GET, &path, None)?;
        if !(200..300).contains(&response.status) {
            return finish(&response, remote.format, executions_text);
        }
        if response.body != last {
            match remote.format {
                OutputFormat::Json => {
                    let line: Value = serde_json::from_slice(&response.body).unwrap_or_default();
                    println!("{line}");
                }
                OutputFormat::Text => println!("{}", executions_text(&response.json())),
            }
            last = response.body.clone();
        }
        if crate::output::stdout_closed() {
            return Ok(ExitCode::SUCCESS);
        }
        std::thread::sleep(std::time::Duration::from_secs(1));
    }
}

/// `?limit=N&cursor=C` of a page of executions (empty when neither is given), escaped.
pub(crate) fn page_query(limit: Option<u16>, cursor: Option<&str>) -> String {
    let mut query = form_urlencoded::Serializer::new(String::new());
    if let Some(n) = limit {
        query.append_pair("limit", &n.to_string());
    }
    if let Some(c) = cursor {
        query.append_pair("cursor", c);
    }
    match query.finish() {
        q if q.is_empty() => q,
        q => format!("?{q}"),
    }
}

pub(crate) fn executions_text(b: &Value) -> String {
    let c = &b["convergence"];
    let mut out = format!("{}: {}", b["applicationId"].as_str().unwrap_or(""), c["state"].as_str().unwrap_or(""));
    if let Some(message) = c["reason"]["message"].as_str() {
        out += &format!(" ({message})");
    }
    out.push('\n');
    if let Some(d) = b.get("desired").filter(|d| d.is_object()) {
        out += &format!(
            "desired: policy version {}, {} slot(s), {}\n",
            d["policyVersion"],
            d["slots"],
            d["execution"].as_str().unwrap_or("")
        );
    }
    for s in b["slots"].as_array().into_iter().flatten() {
        out += &format!("slot {} generation {} {}", s["slot"], s["generation"], s["state"].as_str().unwrap_or(""));
        if let Some(p) = s["processorId"].as_str() {
            out += &format!(" on {p}");
        }
        if let (Some(from), Some(to)) = (s["windowStart"].as_str(), s["windowEnd"].as_str()) {
            out += &format!(" window {from} .. {to}");
        }
        out.push('\n');
    }
    if let Some(at) = b["next"]["at"].as_str() {
        out += &format!("next decision: {at}\n");
    }
    let recent = b["recent"].as_array().map_or(&[][..], Vec::as_slice);
    if !recent.is_empty() {
        out += "recent:\n";
    }
    // Each execution as `svc app logs` tags it, APP/SLOT/GENERATION/ATTEMPT: its ID starts
    // with the application's UID, which people do not know it by.
    let app = b["applicationId"].as_str().unwrap_or("");
    for e in recent {
        out += &format!(
            "  {} {app}/{}/{}/{} version {} {}",
            e["changedAt"].as_str().unwrap_or(""),
            e["slot"],
            e["generation"],
            e["attempt"],
            e["policyVersion"],
            e["state"].as_str().unwrap_or("")
        );
        if let Some(message) = e["reason"]["message"].as_str() {
            out += &format!(": {message}");
        }
        out.push('\n');
    }
    if let Some(cursor) = b["nextCursor"].as_str() {
        out += &format!("older: --cursor {cursor}\n");
    }
    out
}

/// `svc app logs ID [--execution ID] [--follow]`: pages of `GET /api/applications/{id}/logs`
/// until the newest line; with `--follow`, then every second, until Ctrl-C (130) or a closed
/// standard output (0). Text: one line each, `TIME APP/SLOT/GENERATION/ATTEMPT [PART] LINE`,
/// and once per execution (again only if it grows) how many lines it did not keep. JSON: one
/// object, every line and the drops; with `--follow`, JSON Lines (lines and drops as they
/// come).
pub(crate) fn app_logs(
    id: &str,
    execution: Option<&str>,
    follow: bool,
    remote: &Remote,
) -> Result<ExitCode, RemoteError> {
    let client = client(remote.server.as_deref(), &remote.trust, true)?;
    let json = remote.format == OutputFormat::Json;
    let mut after: i64 = 0;
    let mut said: std::collections::BTreeMap<String, u64> = std::collections::BTreeMap::new();
    let (mut lines, mut dropped): (Vec<Value>, Vec<Value>) = (Vec::new(), Vec::new());
    // Whether the service has answered (and with a page), and whether it is now out of reach.
    let (mut answered, mut paged, mut lost) = (false, false, false);
    loop {
        let mut query = form_urlencoded::Serializer::new(String::new());
        query.append_pair("after", &after.to_string());
        if let Some(e) = execution {
            query.append_pair("execution", e);
        }
        let path = format!("/api/applications/{id}/logs?{}", query.finish());
        let response = match client.send(Method::GET, &path, None, &[]) {
            Ok(r) => {
                if (200..300).contains(&r.status) && std::mem::take(&mut lost) {
                    eprintln!("svc: {} answers again; following on", client.base());
                }
                answered = true;
                r
            }
            // `--follow` rides through a restart of the service (once it has answered: a wrong
            // address is not waited for): said once, tried again every second.
            Err(e @ ClientError::Unreachable { .. }) if follow && answered => {
                if !std::mem::replace(&mut lost, true) {
                    eprintln!("svc: {e}; following on when it answers again (Ctrl-C stops)");
                }
                if crate::output::stdout_closed() {
                    return Ok(ExitCode::SUCCESS);
                }
                std::thread::sleep(std::time::Duration::from_secs(1));
                continue;
            }
            Err(e) => return Err(RemoteError::Unanswered(e)),
        };
        if !(200..300).contains(&response.status) {
            // `--follow` rides through the service's store being away a while (503: its
            // database restarting) as through a restart of the service: said once, tried
            // again every second.
            if follow && paged && response.status == 503 {
                if !std::mem::replace(&mut lost, true) {
                    let code = response.json()["error"]["code"].as_str().unwrap_or("unavailable").to_owned();
                    eprintln!(
                        "svc: {} cannot read its store for now (503 {code}); following on when it can (Ctrl-C stops)",
                        client.base()
                    );
                }
                if crate::output::stdout_closed() {
                    return Ok(ExitCode::SUCCESS);
                }
                std::thread::sleep(std::time::Duration::from_secs(1));
                continue;
            }
            return finish(&response, remote.format, |_| String::new());
        }
        paged = true;
        let page = response.json();
        let app = page["applicationId"].as_str().unwrap_or(id);
        // Each execution's drops, said before its lines, once (again if the count grew).
        for d in page["dropped"].as_array().into_iter().flatten() {
            let (Some(exec), Some(n)) = (d["executionId"].as_str(), d["dropped"].as_u64()) else { continue };
            if said.get(exec).is_some_and(|&before| before >= n) {
                continue;
            }
            let before = said.insert(exec.to_owned(), n).unwrap_or(0);
            match (json, follow) {
                (true, false) => {
                    dropped.retain(|o: &Value| o["executionId"] != d["executionId"]);
                    dropped.push(d.clone());
                }
                (true, true) => println!("{d}"),
                (false, _) => println!("{}", dropped_text(app, d, before)),
            }
        }
        let page_lines = page["lines"].as_array().cloned().unwrap_or_default();
        for line in page_lines {
            match (json, follow) {
                (true, false) => lines.push(line),
                (true, true) => println!("{line}"),
                (false, _) => println!("{}", log_line_text(app, &line)),
            }
        }
        after = page["next"].as_i64().unwrap_or(after);
        if page["more"] == json!(true) {
            continue;
        }
        if !follow {
            if json {
                crate::output::print_json(
                    &json!({ "applicationId": app, "lines": lines, "dropped": dropped, "next": after }),
                );
            } else if after == 0 {
                let whose = execution.map_or_else(|| format!("{app}'s jobs"), |e| format!("execution {e} of {app}"));
                eprintln!(
                    "svc: no output from {whose} yet (`svc app executions {app}` says whether they run, and lists \
                     the executions)"
                );
            }
            return Ok(ExitCode::SUCCESS);
        }
        if crate::output::stdout_closed() {
            return Ok(ExitCode::SUCCESS);
        }
        std::thread::sleep(std::time::Duration::from_secs(1));
    }
}

/// `TIME APP/SLOT/GENERATION/ATTEMPT [PART] LINE`, the time to the second, control characters
/// (a job's terminal escapes) shown escaped.
fn log_line_text(app: &str, l: &Value) -> String {
    let at = l["at"].as_str().unwrap_or("");
    let at = match at.split_once('.') {
        Some((seconds, _)) => format!("{seconds}Z"),
        None => at.to_owned(),
    };
    format!(
        "{at} {app}/{}/{}/{} [{}] {}",
        l["slot"],
        l["generation"],
        l["attempt"],
        l["part"].as_str().unwrap_or(""),
        escape_controls(l["line"].as_str().unwrap_or(""))
    )
}

fn dropped_text(app: &str, d: &Value, before: u64) -> String {
    let n = d["dropped"].as_u64().unwrap_or(0);
    let (count, more) = if before > 0 { (n - before, " more") } else { (n, "") };
    format!(
        "{app}/{}/{}/{} [svc] {count}{more} {} of this execution not kept: each keeps its newest 10,000 lines (4 MiB), and jobs print at most 64 KiB/s",
        d["slot"],
        d["generation"],
        d["attempt"],
        if count == 1 { "line" } else { "lines" }
    )
}

/// Control characters but tab as `\u{..}`: what a job prints cannot move the reader's cursor.
fn escape_controls(line: &str) -> std::borrow::Cow<'_, str> {
    if !line.chars().any(|c| c.is_control() && c != '\t') {
        return line.into();
    }
    line.chars()
        .map(|c| if c.is_control() && c != '\t' { format!("\\u{{{:04x}}}", u32::from(c)) } else { c.to_string() })
        .collect::<String>()
        .into()
}

/// `svc app list`
pub(crate) fn app_list(remote: &Remote) -> Result<ExitCode, RemoteError> {
    get("/api/applications", remote, |b| {
        let mut out = String::new();
        for a in b["applications"].as_array().into_iter().flatten() {
            out += &format!(
                "{} {} version {}",
                a["applicationId"].as_str().unwrap_or(""),
                a["status"].as_str().unwrap_or(""),
                a["activePointerVersion"]
            );
            if let Some(reason) = a["pauseReason"].as_str() {
                out += &format!(" (paused: {reason})");
            }
            out.push('\n');
        }
        if out.is_empty() { "no applications yet: `svc app create ID` makes one\n".to_owned() } else { out }
    })
}

/// `svc app resume ID --reason TEXT`
pub(crate) fn app_resume(id: &str, reason: &str, remote: &Remote) -> Result<ExitCode, RemoteError> {
    let client = client(remote.server.as_deref(), &remote.trust, true)?;
    let path = format!("/api/applications/{id}/resume");
    let response = send(&client, Method::POST, &path, Some(json!({ "reason": reason })))?;
    finish(&response, remote.format, |b| {
        format!(
            "resumed {}, status {}\n",
            b["applicationId"].as_str().unwrap_or(""),
            b["status"].as_str().unwrap_or("")
        )
    })
}

/// `svc app versions ID [--version N]`
pub(crate) fn app_versions(id: &str, version: Option<u64>, remote: &Remote) -> Result<ExitCode, RemoteError> {
    match version {
        Some(n) => get(&format!("/api/applications/{id}/policy-versions/{n}"), remote, |b| {
            format!("{}\n", serde_json::to_string_pretty(b).unwrap_or_default())
        }),
        None => get(&format!("/api/applications/{id}/policy-versions"), remote, |b| {
            let mut out = String::new();
            for v in b["policyVersions"].as_array().into_iter().flatten() {
                out += &format!(
                    "{}{} V{} policy {} by {}\n",
                    if v["active"] == json!(true) { "* " } else { "  " },
                    v["policyVersion"],
                    v["schemaVersion"],
                    v["policyDigest"].as_str().unwrap_or(""),
                    v["publishedBy"].as_str().unwrap_or("")
                );
            }
            if out.is_empty() { "no policy versions yet\n".to_owned() } else { out }
        }),
    }
}

/// Version `n` of application `id` on the service (`svc app versions ID --version N`, as
/// JSON): its effective policy and the rest of its view, or why not (a refusal exits 2, as
/// for any input that cannot be read).
pub(crate) fn policy_version(id: &str, n: u64, remote: &Remote) -> Result<Value, RemoteError> {
    let client = client(remote.server.as_deref(), &remote.trust, true)?;
    let response = send(&client, Method::GET, &format!("/api/applications/{id}/policy-versions/{n}"), None)?;
    if (200..300).contains(&response.status) {
        return Ok(response.json());
    }
    Err(RemoteError::refused(&response, EXIT_USAGE))
}

/// `svc app activity ID`
pub(crate) fn app_activity(id: &str, remote: &Remote) -> Result<ExitCode, RemoteError> {
    get(&format!("/api/applications/{id}/activity"), remote, |b| {
        let mut out = String::new();
        for a in b["activity"].as_array().into_iter().flatten() {
            out += &format!(
                "{} {} {}",
                a["at"].as_str().unwrap_or(""),
                a["actor"].as_str().unwrap_or(""),
                a["action"].as_str().unwrap_or("")
            );
            if let Some(v) = a["policyVersion"].as_u64() {
                out += &format!(" version {v}");
            }
            if let Some(s) = a["status"].as_str() {
                out += &format!(" -> {s}");
            }
            if let Some(r) = a["reason"].as_str() {
                out += &format!(" (reason: {r})");
            }
            out.push('\n');
        }
        out
    })
}

fn get(path: &str, remote: &Remote, text: impl FnOnce(&Value) -> String) -> Result<ExitCode, RemoteError> {
    let client = client(remote.server.as_deref(), &remote.trust, true)?;
    finish(&send(&client, Method::GET, path, None)?, remote.format, text)
}

/// `svc manifest schema --version V --server URL`: the service's schema bytes.
pub(crate) fn schema(kind: SchemaKind, server: Option<&str>, trust: &Trust) -> Result<ExitCode, RemoteError> {
    use std::io::Write;
    let client = client(server, trust, false)?;
    let bytes = fetch_schema(&client, kind).map_err(RemoteError::Schema)?;
    let _ = std::io::stdout().write_all(&bytes);
    Ok(ExitCode::SUCCESS)
}

fn route(kind: SchemaKind) -> &'static str {
    match kind {
        SchemaKind::ManifestV4 => "/api/application-manifest/schema",
        SchemaKind::ManifestV5 => "/api/application-manifest/v5/schema",
        SchemaKind::PolicyV4 => "/api/application-policy/schema",
        SchemaKind::Executions => "/api/execution-convergence/schema",
    }
}

/// The schema cache: `<user cache>/svc/schemas/<digest hex>.json` holds each schema by its
/// content digest; `<server key>-<route key>.etag` remembers which digest a route last had.
fn cache_dir() -> Option<PathBuf> {
    std::env::var_os("SVC_CACHE_DIR").map(PathBuf::from).or_else(|| dirs::cache_dir().map(|d| d.join("svc")))
}

/// The service's schema: a conditional GET with the cached digest; the cache is used on 304,
/// replaced on 200 (after checking the bytes match their ETag).
fn fetch_schema(client: &Client, kind: SchemaKind) -> Result<Vec<u8>, SchemaFetchError> {
    let dir = cache_dir().map(|d| d.join("schemas"));
    let key = sha256(format!("{} {}", client.base(), route(kind)).as_bytes());
    let index = dir.as_ref().map(|d| d.join(format!("{}.etag", &key[7..23])));
    let cached_etag = index.as_ref().and_then(|i| std::fs::read_to_string(i).ok());
    let cached_file = |etag: &str| {
        dir.as_ref().map(|d| d.join(format!("{}.json", etag.trim_matches('"').trim_start_matches("sha256:"))))
    };
    // A cached copy counts only if its bytes still have the digest it is filed under.
    let cached = cached_etag
        .as_deref()
        .and_then(|e| Some((e, std::fs::read(cached_file(e)?).ok()?)))
        .filter(|(e, bytes)| e.trim_matches('"') == sha256(bytes));
    let headers: Vec<(&str, &str)> = cached.as_ref().map(|(e, _)| vec![("if-none-match", *e)]).unwrap_or_default();
    let response = client.send(Method::GET, route(kind), None, &headers)?;
    match response.status {
        304 => cached.map(|(_, bytes)| bytes).ok_or(SchemaFetchError::Unconditional304),
        200 => {
            let etag = response.header("etag").unwrap_or("").to_owned();
            let digest = sha256(&response.body);
            if etag.trim_matches('"') != digest {
                return Err(SchemaFetchError::Digest { digest, etag });
            }
            if let (Some(dir), Some(index), Some(file)) = (&dir, &index, cached_file(&etag)) {
                // A cache that cannot be written is only slower.
                let _ = std::fs::create_dir_all(dir)
                    .and_then(|()| std::fs::write(&file, &response.body))
                    .and_then(|()| std::fs::write(index, &etag));
            }
            Ok(response.body)
        }
        status => Err(SchemaFetchError::Status { base: client.base().to_owned(), status, route: route(kind) }),
    }
}

/// Why the service's schema could not be had.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SchemaFetchError {
    /// The request failed.
    #[error(transparent)]
    Client(#[from] crate::client::ClientError),
    /// A 304 without a cached copy to match.
    #[error("the service answered 304 to an unconditional request")]
    Unconditional304,
    /// The bytes are not what their ETag says.
    #[error("the schema's bytes ({digest}) do not match its ETag {etag}; not using it")]
    Digest {
        /// What the bytes hash to.
        digest: String,
        /// What the service said.
        etag: String,
    },
    /// Another status.
    #[error("{base} answered {status} for {route}")]
    Status {
        /// The service.
        base: String,
        /// Its answer.
        status: u16,
        /// The route asked.
        route: &'static str,
    },
}
