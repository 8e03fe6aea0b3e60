//! What every `svc` command shares at the terminal, so each command only says what it prints:
//!
//! - **Broken pipes end quietly.** `svc ... | head -0` closes standard output early; Rust's
//!   `println!` then panics ("failed printing to stdout: Broken pipe", exit 101). A panic hook
//!   turns exactly that panic into a quiet exit 0 (nobody is reading any more), whichever
//!   command or thread printed, including commands added later.
//! - **Ctrl-C is exit 130.** One thread owns SIGINT. A command that owns child processes or
//!   a server ([`graceful_shutdown`]) gets a graceful stop and then exits 130; every other
//!   command exits 130 at once (a second Ctrl-C always does).
//! - **One JSON contract.** With `--format json`, a failure is the shared envelope
//!   [`svc_http::ErrorBody`] on standard output (exactly one JSON value) and the text on
//!   standard error; without it, the text alone. Both are written in one place,
//!   [`crate::failure::report`], from the typed error the command returns.

use std::io::Write as _;
use std::process::ExitCode;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::Value;
use svc_http::ErrorBody;

/// The exit code after Ctrl-C (128 + SIGINT), as shells report it.
pub(crate) const EXIT_INTERRUPTED: u8 = 130;

/// Whether the running command was asked for `--format json` (set once from the parsed
/// command line, read by every failure path).
static JSON: AtomicBool = AtomicBool::new(false);
/// Set when SIGINT arrived.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);
/// Set by a command that stops gracefully on SIGINT (it owns children or a server).
static GRACEFUL: AtomicBool = AtomicBool::new(false);
/// Wakes the graceful stop.
static INTERRUPT: OnceLock<tokio::sync::watch::Sender<bool>> = OnceLock::new();
/// What a command that stops at once on Ctrl-C leaves behind, said on standard error before
/// it exits 130 (`svc ingress deploy`: the deployment it funded keeps running).
static LEFT_BEHIND: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

/// Installs the broken-pipe hook and the SIGINT owner; `json` is the command's `--format json`.
pub(crate) fn install(json: bool) {
    JSON.store(json, Ordering::Relaxed);
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if is_broken_pipe(info) {
            // Standard output or error is closed: there is nobody to tell. Exit 0 rather
            // than 101 so `svc ... | head` pipelines do not report a failure.
            std::process::exit(0);
        }
        default(info);
    }));
    let sender = INTERRUPT.get_or_init(|| tokio::sync::watch::channel(false).0).clone();
    // Without a signal thread Ctrl-C keeps its default (the process ends by the signal).
    let _ = std::thread::Builder::new().name("svc-sigint".to_owned()).spawn(move || watch_sigint(&sender));
}

/// `println!`'s panic on a closed stdout or stderr: "failed printing to stdout: Broken pipe".
fn is_broken_pipe(info: &std::panic::PanicHookInfo<'_>) -> bool {
    let payload = info.payload();
    let message = payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied())
        .unwrap_or("");
    message.starts_with("failed printing to std") && message.contains("Broken pipe")
}

fn watch_sigint(sender: &tokio::sync::watch::Sender<bool>) {
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread().enable_all().build() else { return };
    runtime.block_on(async {
        #[cfg(unix)]
        let Ok(mut int) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt()) else { return };
        loop {
            #[cfg(unix)]
            let got = int.recv().await.is_some();
            #[cfg(not(unix))]
            let got = tokio::signal::ctrl_c().await.is_ok();
            if !got {
                return;
            }
            // A second Ctrl-C, or a command with nothing to stop: exit now.
            if INTERRUPTED.swap(true, Ordering::SeqCst) || !GRACEFUL.load(Ordering::SeqCst) {
                let _ = std::io::stdout().flush();
                if let Some(note) = LEFT_BEHIND.lock().ok().and_then(|mut n| n.take()) {
                    let _ = writeln!(std::io::stderr().lock(), "{note}");
                }
                std::process::exit(i32::from(EXIT_INTERRUPTED));
            }
            let _ = sender.send(true);
        }
    });
}

/// Sets (or with `None` clears) what Ctrl-C says it leaves behind, for a command that
/// exits at once on it: one line naming what keeps running and the commands to follow and
/// stop it.
pub(crate) fn on_interrupt_say(note: Option<String>) {
    if let Ok(mut left) = LEFT_BEHIND.lock() {
        *left = note;
    }
}

/// Whether Ctrl-C arrived.
pub(crate) fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// For a command that owns a server or child processes: completes on Ctrl-C (then the
/// command stops what it started and [`finish`] makes the exit 130) or SIGTERM (exit as
/// the command decides). Registers at the call, not at the first poll, so a Ctrl-C between
/// the two still stops gracefully.
pub(crate) fn graceful_shutdown() -> impl std::future::Future<Output = ()> + Send + 'static {
    GRACEFUL.store(true, Ordering::SeqCst);
    let mut interrupt = INTERRUPT.get_or_init(|| tokio::sync::watch::channel(false).0).subscribe();
    async move {
        let ctrl_c = async move {
            // An error means the sender is gone: then only SIGTERM can stop us.
            if interrupt.wait_for(|&v| v).await.is_err() {
                std::future::pending::<()>().await;
            }
        };
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            if let Ok(mut term) = signal(SignalKind::terminate()) {
                tokio::select! {
                    _ = term.recv() => {}
                    () = ctrl_c => {}
                }
                return;
            }
        }
        ctrl_c.await;
    }
}

/// The process's exit code: 130 after Ctrl-C, whatever the command returned.
pub(crate) fn finish(code: ExitCode) -> ExitCode {
    if interrupted() { ExitCode::from(EXIT_INTERRUPTED) } else { code }
}

/// A line on standard output for a command that owns a server or children: a closed stdout
/// is ignored (the server keeps serving, its log is on stderr) instead of ending the process
/// through the broken-pipe hook, which would leave its children behind.
pub(crate) fn say(line: &str) {
    let _ = writeln!(std::io::stdout().lock(), "{line}");
}

/// Whether failures go out as JSON.
pub(crate) fn json() -> bool {
    JSON.load(Ordering::Relaxed)
}

/// Prints a value as pretty JSON on standard output.
pub(crate) fn print_json(value: &impl serde::Serialize) {
    println!("{}", serde_json::to_string_pretty(value).unwrap_or_default());
}

/// The envelope for a non-2xx answer: the server's own when it sent one (with `httpStatus`
/// added), else `http_error` with the status.
pub(crate) fn http_error(status: u16, body: &[u8]) -> ErrorBody {
    match ErrorBody::parse(body) {
        Some(envelope) => envelope.with("httpStatus", status),
        None => ErrorBody::new("http_error", format!("the server answered HTTP {status} without an error body"))
            .with("httpStatus", status),
    }
}

/// A Unix time in milliseconds as RFC 3339 (UTC, millisecond precision), as every time in
/// `svc`'s JSON output is written.
pub(crate) fn rfc3339_ms(ms: i64) -> String {
    let ms = u64::try_from(ms).unwrap_or(0);
    humantime::format_rfc3339_millis(std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms)).to_string()
}

/// Makes every time in `value` RFC 3339, at any depth: the API's Unix milliseconds (`at`
/// and `...At` fields holding an integer) and `SystemTime`'s serde form
/// (`{"secs_since_epoch", "nanos_since_epoch"}`, in validations stored by older coordinators).
pub(crate) fn normalize_times(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (key, v) in map.iter_mut() {
                let is_time = key == "at" || key.ends_with("At");
                match v.as_i64() {
                    Some(ms) if is_time => *v = Value::String(rfc3339_ms(ms)),
                    _ => match system_time(v) {
                        Some(text) => *v = Value::String(text),
                        None => normalize_times(v),
                    },
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(normalize_times),
        _ => {}
    }
}

/// `{"secs_since_epoch": S, "nanos_since_epoch": N}` as RFC 3339 (seconds).
fn system_time(v: &Value) -> Option<String> {
    let map = v.as_object()?;
    if map.len() != 2 {
        return None;
    }
    let secs = map.get("secs_since_epoch")?.as_u64()?;
    map.get("nanos_since_epoch")?.as_u64()?;
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs);
    Some(humantime::format_rfc3339_seconds(at).to_string())
}

/// How the servers write their logs (`--log-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// One line of text per event, for people.
    Text,
    /// One JSON object per line: `timestamp`, `level`, `target`, `fields` (`message`, and for
    /// a request `method`, `path`, `status`, `latency_ms`, `request_id`).
    Json,
}

/// Starts the servers' logging on standard error: `RUST_LOG` filters (default `info`), in
/// `format` (`--log-format`, else `SVC_LOG_FORMAT`, else text). Only the server commands
/// call it: a client command's standard error stays its own messages.
pub(crate) fn start_logging(format: Option<LogFormat>) {
    use tracing_subscriber::EnvFilter;
    let format = format.unwrap_or_else(|| match std::env::var("SVC_LOG_FORMAT").as_deref() {
        Ok("json") => LogFormat::Json,
        _ => LogFormat::Text,
    });
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    // A second call (a test harness, an embedding) keeps the first subscriber.
    let _ = match format {
        LogFormat::Text => builder.with_target(false).try_init(),
        LogFormat::Json => builder.json().with_current_span(false).try_init(),
    };
}

/// What `--format json` prints, per command: each command's `--help` describes its own
/// output. A command missing here keeps the generic help (the test in `cli/tests/terminal.rs`
/// lists it).
const FORMAT_HELP: &[(&str, &str)] = &[
    (
        "manifest validate",
        "json: {valid, schemaVersion, authoredDigest, diagnostics} for one file, {files: [{path, ...}], summary} for several; junit, github, sarif: CI reports, one file as several",
    ),
    (
        "manifest migrate",
        "json: {migrated, manifest, notes: [{pointer, kind, why, fix}]} (kind: changed, dropped or blocking); when not migrated, {error, migrated: false, notes}",
    ),
    (
        "policy diff",
        "json: {from, to, compared, changes: [{pointer, kind, from?, to?, key?, effect: {reaches, area?}}], summary: {changes, runningJobs, noEffect}} (compared: effective or as_written; reaches: running_jobs, next_jobs or nothing)",
    ),
    (
        "policy publish",
        "json: the published version {applicationId, policyVersion, activePointerVersion, status, authoredDigest, policyDigest, diagnostics, dryRun?}",
    ),
    (
        "app deploy",
        "json: {applicationId, digest, cid, files: [{path, bytes}], policyVersion, outcome, reason?, fix?} (outcome: running, settled, refused, failed, timeout, interrupted or published); progress on standard error",
    ),
    ("app create", "json: the new application {applicationId, applicationUid, status, activePointerVersion}"),
    (
        "app list",
        "json: {applications: [{applicationId, applicationUid, status, activePointerVersion, pauseReason, settled}]}",
    ),
    (
        "app resume",
        "json: the resumed application {applicationId, applicationUid, status, activePointerVersion, pauseReason, settled}",
    ),
    (
        "app show",
        "json: the application {applicationId, applicationUid, status, activePointerVersion, pauseReason, settled, convergence}",
    ),
    ("app versions", "json: {policyVersions: [...]}, or with --version that version with its effective policy"),
    ("app activity", "json: {activity: [{at, actor, action, policyVersion?, status?, reason?}]}"),
    (
        "app executions",
        "json: the svc.execution-convergence.v1 projection (schema: `svc manifest schema --version executions`); with --watch one per line on each change",
    ),
    (
        "app logs",
        "json: {applicationId, lines: [{seq, executionId, slot, generation, attempt, part, at, line}], dropped: [{executionId, slot, generation, attempt, kept, dropped}], next}; with --follow each line and drop as it comes, one object per line",
    ),
    (
        "ingress deploy",
        "json: the Status once live; with --no-fund or --no-wait {deployment, quote, funded, successor?}",
    ),
    (
        "ingress status",
        "json: the Status {deployment, balance, funding, latestQuote?, hostnames, validations, transitions, hints, processes}",
    ),
    ("ingress logs", "json: {entries: [{seq, source, line, at}], next}; with --follow one entry per line (JSON Lines)"),
    ("ingress list", "json: {deployments: [Deployment]}, newest first, stopped ones included"),
    ("ingress hints", "json: {state, hints}"),
    (
        "ingress executions",
        "json: the deployment's svc.execution-convergence.v1 projection (schema: `svc manifest schema --version executions`)",
    ),
    (
        "ingress policy",
        "json: {deploymentId, project, policyVersion, schemaVersion, authoredDigest, policyDigest, publishedAt, active, policy}",
    ),
    ("ingress fund", "json: {quote, entry}: the funded quote and its `fund` ledger entry"),
    ("ingress ledger", "json: {entries, balance}"),
    ("ingress stop", "json: the stopped Deployment"),
    ("ingress hostname add", "json: {hostname, records}: the hostname and the DNS records to create"),
    ("ingress hostname verify", "json: {hostname, records}: the hostname's state and hints after the check"),
    ("ingress hostname remove", "json: {hostname, records}: the removed hostname"),
    ("ingress sessions", "json: {sessions, balance}"),
    ("ingress refund", "json: the `refund` ledger entry {seq, kind, amountMicros, note, at}"),
    ("ingress rewards", "json: {operator, accruedMicros, pendingMicros, claimableMicros, claimedMicros, rewards}"),
    ("ingress claim", "json: {claimId, amountMicros, rewards}"),
    ("ingress pins list", "json: {current, pins}"),
    ("ingress pins add", "json: {current, pins} after adding"),
    ("ingress pins remove", "json: {current, pins} after removing"),
    (
        "ingress catalog show",
        "json: the verdict {verified, relay, key, sequence, issuedAt, expiresAt, ...} with {catalog, signedCatalog}",
    ),
    ("ingress catalog verify", "json: the verdict {verified, relay, key, sequence, issuedAt, expiresAt, ...}"),
    ("relay admin rotate-catalog-key", "json: {from, to, sequence}"),
];

/// The rest of every `--format` help: text is for people; failures are the envelope.
const FORMAT_TAIL: &str = "; any failure: {\"error\": {\"code\", \"message\", ...}}; times RFC 3339. text: for people";

/// The command tree with each command's `--format` help describing its own output.
pub(crate) fn describe_formats(cmd: clap::Command) -> clap::Command {
    describe(cmd, "")
}

fn describe(mut cmd: clap::Command, path: &str) -> clap::Command {
    let names: Vec<String> = cmd.get_subcommands().map(|s| s.get_name().to_owned()).collect();
    for name in names {
        let sub_path = if path.is_empty() { name.clone() } else { format!("{path} {name}") };
        cmd = cmd.mut_subcommand(&name, |sub| describe(sub, &sub_path));
    }
    let own = FORMAT_HELP.iter().find(|(p, _)| *p == path).map(|(_, h)| *h);
    if let Some(help) = own
        && cmd.get_arguments().any(|a| a.get_id() == "format")
    {
        cmd = cmd.mut_arg("format", |a| a.help(format!("Output format. {help}{FORMAT_TAIL}")));
    }
    cmd
}

/// Whether nobody reads standard output any more (its pipe's reader has closed): a command
/// that waits between lines (`--watch`, `--follow`) checks it before waiting again, since it
/// would only learn it from a write, and may have nothing to write for hours.
pub(crate) fn stdout_closed() -> bool {
    use rustix::event::{PollFd, PollFlags, poll};
    let stdout = std::io::stdout();
    let mut fds = [PollFd::new(&stdout, PollFlags::OUT)];
    let zero = rustix::event::Timespec { tv_sec: 0, tv_nsec: 0 };
    poll(&mut fds, Some(&zero)).is_ok() && fds[0].revents().intersects(PollFlags::ERR | PollFlags::HUP)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_become_rfc3339_at_any_depth() {
        let mut v = serde_json::json!({
            "claimableAt": 1_700_000_000_123_i64,
            "rewards": [{"claimableAt": 0, "at": 1_000}],
            "amountMicros": 5,
            "periodMs": 3_600_000,
            "detail": {"notAfter": {"secs_since_epoch": 1_700_000_000_u64, "nanos_since_epoch": 5}},
        });
        normalize_times(&mut v);
        assert_eq!(v["claimableAt"], "2023-11-14T22:13:20.123Z");
        assert_eq!(v["rewards"][0]["claimableAt"], "1970-01-01T00:00:00.000Z");
        assert_eq!(v["rewards"][0]["at"], "1970-01-01T00:00:01.000Z");
        assert_eq!(v["detail"]["notAfter"], "2023-11-14T22:13:20Z");
        assert_eq!((v["amountMicros"].as_i64(), v["periodMs"].as_i64()), (Some(5), Some(3_600_000)), "not times");
    }

    #[test]
    fn a_server_envelope_is_kept_and_anything_else_is_wrapped() {
        let kept = http_error(409, br#"{"error": {"code": "quote_expired", "message": "too late", "hints": []}}"#);
        assert_eq!(kept.error.code, "quote_expired");
        assert_eq!(kept.error.extra["httpStatus"], 409);
        assert!(kept.error.extra.contains_key("hints"));
        let wrapped = http_error(502, b"<html>bad gateway</html>");
        assert_eq!(wrapped.error.code, "http_error");
        assert!(wrapped.error.message.contains("502"), "{}", wrapped.error.message);
    }
}
