//! `svc ingress catalog show|verify`: fetch the relay's signed service catalog (or read a
//! saved one), check it against the key pinned for that relay, and move the pin forward only
//! when it is accepted. Pins are a small JSON file (`SVC_RELAY_PINS`, or
//! `svc/relay-pins.json` in the user config directory) keyed by relay URL.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hyper::Method;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use relay_api::catalog::{
    CatalogError, Pin, PublicKey, Seen, SignedCatalog, VerifiedCatalog, Verifier, human_duration,
};
use relay_api::coordinator::store::now_ms;

use crate::args::{CatalogCommand, CatalogTarget, OutputFormat};
use crate::client::{Client, ClientError};

const EXIT_REFUSED: u8 = 1;
const EXIT_USAGE: u8 = 2;

/// The version of the pins file.
const PINS_VERSION: u32 = 1;

/// Why `svc ingress catalog` accepted no catalog: said once, by [`crate::failure::report`],
/// as `svc ingress catalog: ...` (a refused catalog with its fix, and under `--format json`
/// as the verdict `{"verified": false, ...}`).
#[derive(Debug, thiserror::Error)]
pub(crate) enum CatalogCommandError {
    /// No place for the pins file.
    #[error("no user config directory for the pins file: set SVC_RELAY_PINS to a file")]
    NoConfigDir,
    /// The pins file cannot be read (the error names it).
    #[error("cannot read the pins file: {0}")]
    ReadPins(#[source] std::io::Error),
    /// The pins file is not valid.
    #[error(
        "the pins file {} is not valid ({source}); fix it, or remove the relay's entry and pin its key again with --pin",
        path.display()
    )]
    InvalidPins {
        /// The pins file.
        path: PathBuf,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
    /// The pins file is of another version.
    #[error("the pins file {} has version {version}; this svc reads version {PINS_VERSION}", path.display())]
    PinsVersion {
        /// The pins file.
        path: PathBuf,
        /// Its version.
        version: u32,
    },
    /// `--file` cannot be read (the error names it).
    #[error("cannot read the catalog file: {0}")]
    ReadCatalog(#[source] std::io::Error),
    /// No `SVC_RELAY_TOKEN` and no `--file`.
    #[error(
        "no token: set SVC_RELAY_TOKEN (an operator issues one with `svc relay admin token`), or check a saved catalog with --file"
    )]
    NoToken,
    /// The relay URL or the CA cannot be used.
    #[error(transparent)]
    Client(ClientError),
    /// The request got no answer.
    #[error(transparent)]
    Unanswered(ClientError),
    /// The relay refused to give its catalog.
    #[error(
        "{} (HTTP {status}): {}",
        body["error"]["code"].as_str().unwrap_or("error"),
        body["error"]["message"].as_str().unwrap_or("the relay refused the request")
    )]
    Refused {
        /// The HTTP status.
        status: u16,
        /// Its body.
        body: Value,
    },
    /// `--pin` is not a key.
    #[error("--pin: {}", match source { CatalogError::Malformed(why) => why.to_string(), other => other.to_string() })]
    Pin {
        /// Why.
        #[source]
        source: CatalogError,
    },
    /// The verifier accepted a catalog and pinned nothing (a bug).
    #[error("internal error: an accepted catalog left no pin")]
    NoPinLeft,
    /// The verified catalog's pin cannot be saved.
    #[error("the catalog verified, but the pins file {} could not be written: {source}", path.display())]
    SavePins {
        /// The pins file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The catalog was refused: the pin stays as it was.
    #[error("refused: {}: {source}", source.code())]
    Rejected {
        /// Why.
        #[source]
        source: CatalogError,
        /// The relay (its URL, without a trailing `/`).
        relay: String,
        /// What to do.
        fix: &'static str,
    },
}

impl crate::failure::Failure for CatalogCommandError {
    fn exit_code(&self) -> u8 {
        match self {
            CatalogCommandError::NoConfigDir
            | CatalogCommandError::ReadPins(_)
            | CatalogCommandError::InvalidPins { .. }
            | CatalogCommandError::PinsVersion { .. }
            | CatalogCommandError::ReadCatalog(_)
            | CatalogCommandError::NoToken
            | CatalogCommandError::Client(_)
            | CatalogCommandError::Pin { .. } => EXIT_USAGE,
            CatalogCommandError::Unanswered(_)
            | CatalogCommandError::Refused { .. }
            | CatalogCommandError::NoPinLeft
            | CatalogCommandError::SavePins { .. }
            | CatalogCommandError::Rejected { .. } => EXIT_REFUSED,
        }
    }

    fn envelope(&self) -> svc_http::ErrorBody {
        let code = if self.exit_code() == EXIT_USAGE { "invalid_input" } else { "catalog_unavailable" };
        svc_http::ErrorBody::new(code, self.to_string())
    }

    fn json_answer(&self) -> Option<Value> {
        let CatalogCommandError::Rejected { source, relay, fix } = self else { return None };
        Some(json!({
            "verified": false,
            "relay": relay,
            "error": svc_http::ErrorBody::new(source.code(), source.to_string()).with("fix", *fix).error,
        }))
    }

    fn text(&self) -> String {
        let line = crate::failure::line("svc ingress catalog", self);
        match self {
            CatalogCommandError::Rejected { fix, .. } => format!("{line}  fix: {fix}\n  the pin was not changed\n"),
            _ => line,
        }
    }
}

/// The pins file: `{"version": 1, "relays": {URL: StoredPin}}`.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct PinsFile {
    version: u32,
    relays: BTreeMap<String, StoredPin>,
}

/// How a key came to be pinned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum Source {
    /// Trusted on first use (to be checked out of band).
    FirstUse,
    /// Given with `--pin`.
    Configured,
    /// Named by a rotation statement signed by the key pinned before.
    Rotation,
}

impl Source {
    fn describe(self) -> &'static str {
        match self {
            Source::FirstUse => "pinned on first use; verify it out of band",
            Source::Configured => "configured with --pin",
            Source::Rotation => "followed a rotation signed by the key pinned before",
        }
    }
}

/// One relay's pin.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct StoredPin {
    key: PublicKey,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    last: Option<Seen>,
    source: Source,
    /// When this key was pinned, Unix ms.
    pinned_at: i64,
}

fn pins_path() -> Result<PathBuf, CatalogCommandError> {
    if let Some(path) = std::env::var_os("SVC_RELAY_PINS").filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(path));
    }
    dirs::config_dir().map(|d| d.join("svc").join("relay-pins.json")).ok_or(CatalogCommandError::NoConfigDir)
}

fn load_pins(path: &Path) -> Result<PinsFile, CatalogCommandError> {
    let text = match fs_err::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(PinsFile { version: PINS_VERSION, relays: BTreeMap::new() });
        }
        Err(e) => return Err(CatalogCommandError::ReadPins(e)),
    };
    let pins: PinsFile = serde_json::from_str(&text)
        .map_err(|source| CatalogCommandError::InvalidPins { path: path.to_owned(), source })?;
    if pins.version != PINS_VERSION {
        return Err(CatalogCommandError::PinsVersion { path: path.to_owned(), version: pins.version });
    }
    Ok(pins)
}

/// Writes the pins file whole or not at all.
fn save_pins(path: &Path, pins: &PinsFile) -> std::io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        fs_err::create_dir_all(dir)?;
    }
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".tmp");
    let tmp = path.with_file_name(name);
    fs_err::write(&tmp, serde_json::to_vec_pretty(pins).unwrap_or_default())?;
    fs_err::rename(&tmp, path)
}

/// The signed catalog: from `--file`, or fetched with the relay token.
/// (The bytes read: a catalog that does not parse is refused as a verification would be.)
fn obtain(t: &CatalogTarget) -> Result<Result<SignedCatalog, CatalogError>, CatalogCommandError> {
    if let Some(file) = &t.file {
        let bytes = fs_err::read(file).map_err(CatalogCommandError::ReadCatalog)?;
        return Ok(SignedCatalog::from_json(&bytes));
    }
    let token = std::env::var("SVC_RELAY_TOKEN").ok().filter(|t| !t.is_empty()).ok_or(CatalogCommandError::NoToken)?;
    let client = Client::new(&t.relay, Some(token), t.trust.ca.as_deref()).map_err(CatalogCommandError::Client)?;
    let response =
        client.send(Method::GET, "/api/ingress/catalog", None, &[]).map_err(CatalogCommandError::Unanswered)?;
    if !(200..300).contains(&response.status) {
        return Err(CatalogCommandError::Refused { status: response.status, body: response.json() });
    }
    Ok(SignedCatalog::from_json(&response.body))
}

/// `svc ingress catalog show|verify`
pub(crate) fn run(command: &CatalogCommand) -> Result<ExitCode, CatalogCommandError> {
    let (target, show) = match command {
        CatalogCommand::Show { target } => (target, true),
        CatalogCommand::Verify { target } => (target, false),
    };
    check(target, show)
}

fn check(t: &CatalogTarget, show: bool) -> Result<ExitCode, CatalogCommandError> {
    let configured = t
        .pin
        .as_deref()
        .map(|k| k.trim().parse::<PublicKey>().map_err(|source| CatalogCommandError::Pin { source }))
        .transpose()?;
    let relay = t.relay.trim_end_matches('/').to_owned();
    let path = pins_path()?;
    let mut pins = load_pins(&path)?;
    let stored = pins.relays.get(&relay).cloned();
    let (mut verifier, source) = match (configured, &stored) {
        (Some(key), Some(s)) if s.key == key => (Verifier::pinned(Pin { key, last: s.last.clone() }), Some(s.source)),
        // A key given by hand replaces the pinned one; what was seen from the relay still counts.
        (Some(key), s) => {
            (Verifier::pinned(Pin { key, last: s.as_ref().and_then(|s| s.last.clone()) }), Some(Source::Configured))
        }
        (None, Some(s)) => (Verifier::pinned(Pin { key: s.key, last: s.last.clone() }), Some(s.source)),
        (None, None) => (Verifier::first_use(), None),
    };
    let result = obtain(t)?.and_then(|signed| verifier.verify(&signed, now_ms()).map(|v| (signed, v)));
    let (signed, verified) = match result {
        Ok(ok) => ok,
        Err(e) => return Err(refused(t, relay, e)),
    };
    let source = if verified.first_use {
        Source::FirstUse
    } else if verified.rotated_from.is_some() {
        Source::Rotation
    } else {
        source.unwrap_or(Source::Configured)
    };
    let Some(pin) = verifier.pin().cloned() else {
        return Err(CatalogCommandError::NoPinLeft);
    };
    let pinned_at = match &stored {
        Some(s) if s.key == pin.key => s.pinned_at,
        _ => now_ms(),
    };
    pins.relays.insert(relay.clone(), StoredPin { key: pin.key, last: pin.last, source, pinned_at });
    save_pins(&path, &pins).map_err(|source| CatalogCommandError::SavePins { path: path.clone(), source })?;
    if verified.first_use {
        eprintln!(
            "svc ingress catalog: pinned key {} for {relay} on first use; verify it out of band (the relay's operator \
             prints it with `svc relay admin catalog-key`)",
            pin.key
        );
    }
    if let Some(from) = verified.rotated_from {
        eprintln!(
            "svc ingress catalog: the relay rotated its catalog key from {from} to {} (signed by the pinned key); the pin now holds the new key",
            pin.key
        );
    }
    let verdict = verdict(&relay, &verified, source, &path);
    match t.format {
        OutputFormat::Json => {
            let mut out = verdict;
            if show {
                out["catalog"] = json!(verified.catalog);
            }
            crate::output::normalize_times(&mut out);
            if show {
                // The signed bytes stay as signed (Unix ms), to be checked again with --file.
                out["signedCatalog"] = json!(signed);
            }
            println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
        }
        OutputFormat::Text => print_text(&relay, &verified, source, show),
    }
    Ok(ExitCode::SUCCESS)
}

fn verdict(relay: &str, v: &VerifiedCatalog, source: Source, pins: &Path) -> Value {
    let c = &v.catalog;
    let mut out = json!({
        "verified": true,
        "relay": relay,
        "key": c.signing_key,
        "keySource": source,
        "firstUse": v.first_use,
        "sequence": c.sequence,
        "digest": v.digest,
        "issuedAt": c.issued_at,
        "expiresAt": c.expires_at,
        "pinsFile": pins,
    });
    if let Some(from) = v.rotated_from {
        out["rotatedFrom"] = json!(from);
    }
    out
}

/// The catalog refused, with what to do about it.
fn refused(t: &CatalogTarget, relay: String, e: CatalogError) -> CatalogCommandError {
    let fix = match e {
        CatalogError::SignatureInvalid { .. } => {
            "do not use this catalog: it was altered after signing; tell the relay's operator"
        }
        CatalogError::KeyUnknown { .. } => {
            "ask the relay's operator for the current key (`svc relay admin catalog-key`) and pass it with --pin"
        }
        CatalogError::Rollback { .. } | CatalogError::SequenceReused { .. } => {
            "do not use this catalog: an older or altered one is being served; try again, and tell the relay's operator if it persists"
        }
        CatalogError::Expired { .. } if t.file.is_some() => "fetch a fresh one from the relay (without --file)",
        CatalogError::Expired { .. } => {
            "the relay serves an expired catalog: tell its operator (its clock, or its signing)"
        }
        _ => "the relay or the file did not give a signed catalog this svc can read",
    };
    CatalogCommandError::Rejected { source: e, relay, fix }
}

/// RFC 3339 (seconds, UTC) of a Unix ms time.
fn rfc3339(ms: i64) -> String {
    let at = UNIX_EPOCH + Duration::from_millis(u64::try_from(ms).unwrap_or(0));
    humantime::format_rfc3339_seconds(at).to_string()
}

fn expiry(ms: i64) -> String {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis());
    let left = u64::try_from(i128::from(ms) - i128::try_from(now).unwrap_or(0)).unwrap_or(0);
    format!("{} (in {})", rfc3339(ms), human_duration(left))
}

fn print_text(relay: &str, v: &VerifiedCatalog, source: Source, show: bool) {
    let c = &v.catalog;
    println!("verified: catalog sequence {} of relay {} at {relay}", c.sequence, c.relay);
    println!("  signed by  {} ({})", c.signing_key, source.describe());
    println!("  digest     {}", v.digest);
    println!("  issued     {}", rfc3339(c.issued_at));
    println!("  expires    {}", expiry(c.expires_at));
    if !show {
        return;
    }
    let p = &c.prices;
    // Amounts in a currency this release knows are shown in it; another is shown as sent.
    if p.currency == relay_api::catalog::CURRENCY {
        println!(
            "prices: {} ({} {})",
            svc_execution::money::usd_per(p.price_micros, p.period_secs),
            p.price_micros,
            p.currency
        );
    } else {
        println!("prices: {} {} per period of {} s", p.price_micros, p.currency, p.period_secs);
    }
    println!("validators:");
    for validator in &c.validators {
        println!("  {}  {}", validator.version, validator.digest);
    }
    println!("certificate authorities:");
    for ca in &c.certificate_authorities {
        let caa = if ca.caa_identities.is_empty() {
            String::new()
        } else {
            format!(" (CAA: {})", ca.caa_identities.join(", "))
        };
        println!("  {}  {}{caa}", ca.kind, ca.name);
    }
    if c.gateways.is_empty() {
        println!("gateways: none admitted");
    } else {
        println!("gateways:");
        for g in &c.gateways {
            println!("  {}  {}  {}", g.hostname, g.operator, g.public_key);
        }
    }
}
