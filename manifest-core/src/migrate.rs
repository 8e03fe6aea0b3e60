//! Manifest V4 to Manifest V5: the V5 document that keeps what a valid V4 manifest says, and a
//! note for every V4 field that has no V5 form (its pointer, why, what to do).
//!
//! - **Kept**: the application ID, description and labels; the release (a build becomes
//!   `source`, its builder now the server's authority; a pinned bundle becomes its digest);
//!   the engine and the entrypoint (from `runtime.command` when it is `<engine> <file>`, else
//!   from [`Options::entrypoint`]); `parallelism` as `jobs`; the paid window; renewal lead,
//!   update timing and existing jobs; static processors as `exact` selection; resource
//!   minimums; the service-credit spend; logs; variables and secrets.
//! - **Added** where V5 needs what V4 never said: `execution: continuous` (a V4 deployment
//!   renews window after window), `state: off`, and a spend `rate` over 30 days derived from
//!   the per-generation ceiling (V4 had no lifetime ceiling: a note says so).
//! - **Dropped with a note**: what V5 fixes or the server decides (bootstrap, trust profile,
//!   recovery, signed diagnostics, deprecated log fields, the server identity).
//! - **Blocking**: what V5 cannot express and the V4 document relies on (ingress, groups,
//!   topology, evidence, manager selection, cooperative cease, native-token spend, a
//!   runtime image, names V5 does not allow). The document is not migrated; the notes say
//!   what to change.
//!
//! Every leaf of the V4 document is accounted for: kept, or named by a note.

use std::collections::BTreeSet;

use serde::Serialize;
use serde_json::{Map, Value, json};

/// What the author decides where V4 says nothing V5 can use: each field is one
/// `svc manifest migrate` flag, and each blocking note names the one that unblocks it.
/// Build it with `..Options::default()`: decisions may be added.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The JavaScript entrypoint file, when `runtime.command` does not name it
    /// (`--entrypoint`).
    pub entrypoint: Option<String>,
    /// The service credits (micros) one job may spend (`--per-job`): needed when the V4
    /// document states none or spends native tokens; it replaces the V4 value when given.
    pub per_job: Option<u64>,
    /// The V5 spend rate (micros) over [`Options::rate_window`], instead of the derived one
    /// (`--rate`).
    pub rate: Option<u64>,
    /// The window of [`Options::rate`] (a V5 duration; `30d` when `None`; `--rate-window`).
    pub rate_window: Option<String>,
    /// The artifact the V5 document pins (`sha256:...`), instead of the V4 release: the way
    /// on for an encrypted bundle or a runtime image (`--pin-artifact`).
    pub pin_artifact: Option<String>,
    /// What happens to the running jobs on an update (`--existing-jobs`): needed for a V4
    /// cooperative cease; it replaces the V4 mode when given.
    pub existing_jobs: Option<ExistingJobs>,
    /// V5 placement minimums (`memory`, `storage`, `cpuSingleCoreScore`,
    /// `cpuMultiCoreScore`) and their values (`--minimum NAME=VALUE`): the way on for V4
    /// machine classes and evidence profiles.
    pub minimums: Vec<(String, String)>,
    /// V4 fields (RFC 6901 pointers, as the notes name them) to leave out although V5 cannot
    /// say the same (`--drop`): the way on for what V5 has no form for at all.
    pub drop: Vec<String>,
}

/// V5 `deployment.lifecycle.update.existingJobs.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExistingJobs {
    /// The old job stops once its successor is ready (V5's default).
    StopWhenSuccessorReady,
    /// The old job runs until its window ends.
    RunUntilScheduledEnd,
}

impl ExistingJobs {
    /// The value in V4 and V5 documents.
    pub fn as_str(self) -> &'static str {
        match self {
            ExistingJobs::StopWhenSuccessorReady => "stop_when_successor_ready",
            ExistingJobs::RunUntilScheduledEnd => "run_until_scheduled_end",
        }
    }
}

/// How a V4 field fares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NoteKind {
    /// Kept in another form, or derived: check it.
    Changed,
    /// Has no V5 form and is left out; the V5 document means the same or the server decides.
    Dropped,
    /// Has no V5 form and changes what runs: the document is not migrated until it is changed.
    Blocking,
}

/// One V4 field's fate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Note {
    /// The V4 field (RFC 6901).
    pub pointer: String,
    /// Changed, dropped or blocking.
    pub kind: NoteKind,
    /// Why.
    pub why: String,
    /// What to do.
    pub fix: String,
}

/// The outcome: the V5 document (absent while a note blocks it) and the notes, by pointer.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Migration {
    /// The V5 manifest, when nothing blocks it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub manifest: Option<Value>,
    /// Every V4 field with no plain V5 form.
    pub notes: Vec<Note>,
    /// [`Options::drop`] pointers that named no blocking field (a mistyped pointer: the CLI
    /// refuses them).
    #[serde(skip)]
    pub unused_drops: Vec<String>,
}

impl Migration {
    /// Whether a note blocks the migration.
    pub fn is_blocked(&self) -> bool {
        self.notes.iter().any(|n| n.kind == NoteKind::Blocking)
    }
}

/// The default window of a derived rate.
const RATE_WINDOW: &str = "30d";
const RATE_WINDOW_MS: u64 = 30 * 86_400_000;

struct Migrator<'a> {
    v4: &'a Value,
    options: &'a Options,
    /// V4 pointers (prefixes) accounted for.
    seen: BTreeSet<String>,
    notes: Vec<Note>,
    /// The [`Options::drop`] pointers that left a blocking field out.
    used_drops: BTreeSet<String>,
}

impl Migrator<'_> {
    fn get(&self, pointer: &str) -> Option<&Value> {
        self.v4.pointer(pointer)
    }

    fn str(&self, pointer: &str) -> Option<&str> {
        self.get(pointer).and_then(Value::as_str)
    }

    fn u64(&self, pointer: &str) -> Option<u64> {
        self.get(pointer).and_then(Value::as_u64)
    }

    /// `pointer` (and all below it) is kept.
    fn keep(&mut self, pointer: &str) {
        self.seen.insert(pointer.to_owned());
    }

    fn note(&mut self, pointer: &str, kind: NoteKind, why: impl Into<String>, fix: impl Into<String>) {
        self.seen.insert(pointer.to_owned());
        self.notes.push(Note { pointer: pointer.to_owned(), kind, why: why.into(), fix: fix.into() });
    }

    /// `pointer` if the document has it, else its nearest ancestor that it has (a note always
    /// points at something of the V4 document).
    fn present(&self, pointer: &str) -> String {
        let mut at = pointer;
        while !at.is_empty() && self.get(at).is_none() {
            at = at.rsplit_once('/').map_or("", |(parent, _)| parent);
        }
        at.to_owned()
    }

    /// Notes `pointer` if the document has it.
    fn note_if(&mut self, pointer: &str, kind: NoteKind, why: &str, fix: &str) {
        if self.get(pointer).is_some() {
            self.note(pointer, kind, why, fix);
        }
    }

    /// A field V5 cannot express that the author may leave out with `--drop`: blocking,
    /// unless a `--drop` pointer names it or a field above it; then dropped. `fix` is the V5
    /// way to get the same behaviour (or says there is none).
    fn droppable(&mut self, pointer: &str, why: impl Into<String>, fix: impl Into<String>) {
        let (why, fix) = (why.into(), fix.into());
        let chosen =
            self.options.drop.iter().find(|d| pointer == d.as_str() || pointer.starts_with(&format!("{d}/"))).cloned();
        match chosen {
            Some(d) => {
                self.used_drops.insert(d.clone());
                self.note(pointer, NoteKind::Dropped, why, format!("left out, as `--drop {d}` asked; {fix}"));
            }
            None => self.note(
                pointer,
                NoteKind::Blocking,
                why,
                format!("{fix}; or pass `--drop {pointer}` to leave it out"),
            ),
        }
    }

    fn covered(&self, pointer: &str) -> bool {
        self.seen.iter().any(|p| pointer == p || pointer.starts_with(&format!("{p}/")))
    }
}

/// Migrates a V4 manifest, as authored (valid at layers 1-2: see [`crate::validate`]).
pub fn migrate_v4(v4: &Value, options: &Options) -> Migration {
    let mut m = Migrator { v4, options, seen: BTreeSet::new(), notes: Vec::new(), used_drops: BTreeSet::new() };
    let mut out = Map::new();
    out.insert("schema".into(), json!("svc.application-manifest"));
    out.insert("schemaVersion".into(), json!(5));
    m.keep("/schema");
    m.keep("/schemaVersion");
    m.note_if(
        "/$schema",
        NoteKind::Dropped,
        "the editor hint names the V4 schema",
        "point it at the V5 schema (`svc manifest schema --version 5`)",
    );
    application_id(&mut m, &mut out);
    metadata(&mut m, &mut out);
    release(&mut m, &mut out);
    runtime(&mut m, &mut out);
    out.insert("execution".into(), json!({"mode": "continuous"}));
    let deployment = deployment(&mut m);
    out.insert("deployment".into(), deployment);
    ingress(&mut m);
    observability(&mut m, &mut out);
    configuration(&mut m, &mut out);
    out.insert("state".into(), json!({"mode": "off"}));
    // Whatever no rule named: no V5 form.
    let mut leaves = Vec::new();
    collect_leaves(v4, String::new(), &mut leaves);
    for leaf in leaves {
        if !m.covered(&leaf) {
            m.note(&leaf, NoteKind::Dropped, "it has no V5 form", "nothing: V5 leaves it out");
        }
    }
    let unused_drops = options.drop.iter().filter(|d| !m.used_drops.contains(*d)).cloned().collect();
    let mut notes = m.notes;
    notes.sort_by(|a, b| a.pointer.cmp(&b.pointer));
    let blocked = notes.iter().any(|n| n.kind == NoteKind::Blocking);
    Migration { manifest: (!blocked).then_some(Value::Object(out)), notes, unused_drops }
}

fn collect_leaves(v: &Value, at: String, out: &mut Vec<String>) {
    match v {
        Value::Object(map) if !map.is_empty() => {
            for (k, child) in map {
                collect_leaves(child, format!("{at}/{}", k.replace('~', "~0").replace('/', "~1")), out);
            }
        }
        Value::Array(items) if !items.is_empty() => {
            for (i, child) in items.iter().enumerate() {
                collect_leaves(child, format!("{at}/{i}"), out);
            }
        }
        _ if !at.is_empty() => out.push(at),
        _ => {}
    }
}

/// V5 application IDs: 1-63 lowercase letters, digits and hyphens, starting with a letter or
/// digit.
fn v5_application_id(id: &str) -> bool {
    (1..=63).contains(&id.len())
        && id.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && id.bytes().next().is_some_and(|b| b != b'-')
}

fn application_id(m: &mut Migrator<'_>, out: &mut Map<String, Value>) {
    m.note_if(
        "/applicationUid",
        NoteKind::Dropped,
        "the server-issued identity is bound at publication, not authored in V5",
        "nothing: publish to the same application",
    );
    let id = m.str("/applicationId").unwrap_or_default().to_owned();
    if v5_application_id(&id) {
        m.keep("/applicationId");
    } else {
        let suggestion: String = id
            .chars()
            .map(|c| if c.is_ascii_lowercase() || c.is_ascii_digit() { c } else { '-' })
            .collect::<String>()
            .trim_matches('-')
            .chars()
            .take(63)
            .collect();
        m.note(
            "/applicationId",
            NoteKind::Changed,
            format!("{id:?} is not a V5 application ID (1-63 lowercase letters, digits and hyphens)"),
            format!("the V5 document uses {suggestion:?}: publish it as that application, or choose another ID"),
        );
        out.insert("applicationId".into(), json!(suggestion));
        return;
    }
    out.insert("applicationId".into(), json!(id));
}

fn metadata(m: &mut Migrator<'_>, out: &mut Map<String, Value>) {
    let mut metadata = Map::new();
    if let Some(description) = m.str("/metadata/description") {
        if description.chars().count() <= 500 {
            metadata.insert("description".into(), json!(description));
            m.keep("/metadata/description");
        } else {
            m.droppable(
                "/metadata/description",
                "a V5 description is at most 500 characters",
                "write a shorter one in the V5 document (metadata is outside the effective policy)",
            );
        }
    }
    if let Some(labels) = m.get("/metadata/labels").and_then(Value::as_array).cloned() {
        let valid = |l: &str| {
            (1..=63).contains(&l.len())
                && l.bytes().next().is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
                && l.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b))
        };
        let mut kept = Vec::new();
        for (i, label) in labels.iter().enumerate() {
            match label.as_str() {
                Some(l) if valid(l) && kept.len() < 32 => {
                    kept.push(json!(l));
                    m.keep(&format!("/metadata/labels/{i}"));
                }
                _ => m.note(
                    &format!("/metadata/labels/{i}"),
                    NoteKind::Dropped,
                    "not a V5 label (at most 32, each `[a-z0-9][a-z0-9._-]{0,62}`)",
                    "rename it in the V5 document if you need it",
                ),
            }
        }
        if !kept.is_empty() {
            metadata.insert("labels".into(), Value::Array(kept));
        }
        m.keep("/metadata/labels");
    }
    m.note_if(
        "/metadata/appType",
        NoteKind::Dropped,
        "V5 metadata has no workload classification",
        "add it to the description or a label if you need it",
    );
    if !metadata.is_empty() {
        out.insert("metadata".into(), Value::Object(metadata));
    }
}

fn release(m: &mut Migrator<'_>, out: &mut Map<String, Value>) {
    if let Some(digest) = m.options.pin_artifact.clone() {
        pinned_by_flag(m, out, digest);
        return;
    }
    m.keep("/release/mode");
    match m.str("/release/mode") {
        Some("build") => {
            out.insert("release".into(), json!({"mode": "source"}));
            m.note(
                "/release/builder",
                NoteKind::Dropped,
                "a V5 `source` release takes its builder (repository, refs, workflow, manifest path) from the \
                 server's code-host evidence, not from the manifest",
                "register the repository and workflow with the service as the source of this application",
            );
            m.keep("/release/artifact/kind");
            if m.str("/release/artifact/kind") == Some("runtime_image") {
                m.note(
                    "/release/artifact/kind",
                    NoteKind::Blocking,
                    "V5 builds no runtime image",
                    "pin the JavaScript bundle the V5 document runs: `--pin-artifact sha256:<its digest>`",
                );
            }
            encryption(m);
        }
        _ => match m.str("/release/artifact/kind") {
            Some("ipfs_bundle") => {
                let digest = m.str("/release/artifact/digest").unwrap_or_default().to_owned();
                out.insert("release".into(), json!({"mode": "pinned", "artifact": {"digest": digest}}));
                m.keep("/release/artifact/kind");
                m.keep("/release/artifact/digest");
                m.note(
                    "/release/artifact/cid",
                    NoteKind::Dropped,
                    "a V5 pinned release names its artifact by digest; the CID is resolved evidence",
                    "nothing: the service resolves it from the digest",
                );
                encryption(m);
            }
            _ => m.note(
                "/release/artifact",
                NoteKind::Blocking,
                "a pinned runtime image has no V5 form",
                "pin the JavaScript bundle the V5 document runs: `--pin-artifact sha256:<its digest>`",
            ),
        },
    }
}

/// `--pin-artifact`: the V5 document pins that artifact, whatever the V4 release was.
fn pinned_by_flag(m: &mut Migrator<'_>, out: &mut Map<String, Value>, digest: String) {
    out.insert("release".into(), json!({"mode": "pinned", "artifact": {"digest": digest}}));
    let given = format!("the V5 document pins {digest}, given with --pin-artifact");
    m.keep("/release/mode");
    if m.str("/release/mode") == Some("build") {
        m.note(
            "/release/mode",
            NoteKind::Changed,
            "V5 builds this release no more: it runs the artifact given with --pin-artifact",
            format!("{given}; publish that bundle before the V5 document"),
        );
        m.note(
            "/release/builder",
            NoteKind::Dropped,
            "a pinned release has no builder",
            "nothing: to build from source again, use `release: {mode: source}` and register the repository",
        );
    }
    m.keep("/release/artifact/kind");
    if m.str("/release/artifact/kind") == Some("runtime_image") {
        m.note(
            "/release/artifact",
            NoteKind::Changed,
            "V5 runs no runtime image: the V5 document runs the JavaScript bundle given with --pin-artifact",
            format!("{given}; check that it holds the program the image ran"),
        );
        return;
    }
    match m.str("/release/artifact/digest") {
        Some(v4) if v4 == digest => m.keep("/release/artifact/digest"),
        Some(v4) => {
            let v4 = v4.to_owned();
            m.note("/release/artifact/digest", NoteKind::Changed, format!("the V4 document pins {v4}"), given.clone());
        }
        None => {}
    }
    m.note_if(
        "/release/artifact/cid",
        NoteKind::Dropped,
        "a V5 pinned release names its artifact by digest; the CID is resolved evidence",
        "nothing: the service resolves it from the digest",
    );
    match m.str("/release/artifact/encryption/mode") {
        Some("aes256_gcm") => m.note(
            "/release/artifact/encryption",
            NoteKind::Changed,
            "an encrypted bundle has no supported V5 path: the V5 document pins the bundle given with --pin-artifact",
            format!("{given}: it must be the bundle unencrypted; keep secrets in `configuration.secrets`"),
        ),
        _ => m.note_if(
            "/release/artifact/encryption",
            NoteKind::Dropped,
            "V5 resolves the artifact's encryption mode as evidence",
            "nothing",
        ),
    }
}

fn encryption(m: &mut Migrator<'_>) {
    match m.str("/release/artifact/encryption/mode") {
        Some("aes256_gcm") => m.note(
            "/release/artifact/encryption",
            NoteKind::Blocking,
            "V5 resolves the artifact's encryption as evidence; an encrypted bundle has no supported V5 path",
            "publish the bundle unencrypted, pin it with `--pin-artifact sha256:<its digest>`, and keep secrets in \
             `configuration.secrets`",
        ),
        _ => m.note_if(
            "/release/artifact/encryption",
            NoteKind::Dropped,
            "V5 resolves the artifact's encryption mode as evidence",
            "nothing",
        ),
    }
}

/// The file a V4 command such as `node dist/worker.js` (or `deno run x.ts`, `bun x.js`) runs.
fn entry_file(command: &str) -> Option<String> {
    let words: Vec<&str> = command.split_whitespace().collect();
    let file = match words.as_slice() {
        ["node" | "bun", file] | ["deno", "run", file] => *file,
        _ => return None,
    };
    let safe = !file.starts_with('/') && !file.split('/').any(|s| s == ".." || s.is_empty()) && !file.starts_with('-');
    safe.then(|| file.to_owned())
}

fn runtime(m: &mut Migrator<'_>, out: &mut Map<String, Value>) {
    let engine = m.str("/runtime/engine").unwrap_or("nodejs").to_owned();
    m.keep("/runtime/engine");
    let from_command = m.str("/runtime/command").and_then(entry_file);
    let file = match (&m.options.entrypoint, from_command) {
        (Some(file), _) => {
            m.note_if(
                "/runtime/command",
                NoteKind::Changed,
                "V5 runs an entrypoint file, not a command",
                "the V5 document runs the file given with --entrypoint",
            );
            Some(file.clone())
        }
        (None, Some(file)) => {
            m.note(
                "/runtime/command",
                NoteKind::Changed,
                "V5 runs an entrypoint file, not a command",
                format!("the V5 document runs {file:?} (`runtime.entrypoint.file`)"),
            );
            Some(file)
        }
        (None, None) => {
            let pointer = m.present("/runtime/command");
            m.note(
                &pointer,
                NoteKind::Blocking,
                "V5 needs the JavaScript file to run (`runtime.entrypoint.file`), and the V4 document does not name \
                 one as `<engine> <file>`",
                "pass it: `svc manifest migrate --file ... --entrypoint dist/worker.js`",
            );
            None
        }
    };
    if let Some(file) = file {
        out.insert("runtime".into(), json!({"kind": "javascript", "engine": engine, "entrypoint": {"file": file}}));
    }
    m.note_if("/runtime/role", NoteKind::Dropped, "V5 has no runtime role label", "nothing");
    m.note_if(
        "/runtime/bootstrap",
        NoteKind::Dropped,
        "V5 fixes the attested bootstrap (trust profile, signed diagnostics, identity-bound secrets); it is not \
         authored",
        "nothing",
    );
    m.note_if(
        "/runtime/requiredModules",
        NoteKind::Dropped,
        "V5 has no runtime modules; capabilities are the organization's entitlements",
        "check the organization's capabilities",
    );
    m.note_if(
        "/runtime/resources/networkRequestQuota",
        NoteKind::Dropped,
        "V5 has no network request quota",
        "nothing",
    );
}

/// A duration in milliseconds as a V5 duration: the largest unit that divides it.
fn duration(ms: u64) -> String {
    for (unit, size) in [("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1_000)] {
        if ms > 0 && ms.is_multiple_of(size) {
            return format!("{}{unit}", ms / size);
        }
    }
    format!("{ms}ms")
}

fn deployment(m: &mut Migrator<'_>) -> Value {
    let mut d = Map::new();
    let jobs = m.u64("/deployment/parallelism").unwrap_or(1);
    if m.get("/deployment/parallelism").is_some() {
        m.keep("/deployment/parallelism");
        d.insert("jobs".into(), json!(jobs));
    }
    let window_ms = m.u64("/deployment/schedule/durationMs").unwrap_or(3_600_000);
    m.keep("/deployment/schedule/durationMs");
    d.insert("schedule".into(), json!({"duration": duration(window_ms)}));
    match m.u64("/deployment/schedule/startDelayMs") {
        Some(0) => m.note(
            "/deployment/schedule/startDelayMs",
            NoteKind::Dropped,
            "no delay, and V5 has no start delay",
            "nothing: the same behaviour",
        ),
        Some(delay) => m.note(
            "/deployment/schedule/startDelayMs",
            NoteKind::Dropped,
            format!(
                "V5 starts the first window once the version is published, funded and placed; it has no start \
                 delay ({} here)",
                duration(delay)
            ),
            "to start later, publish the V5 document paused (`svc policy publish --paused --reason ...`) and \
             resume it when it is due (`svc app resume ID --reason ...`)",
        ),
        None => {}
    }
    m.note_if(
        "/deployment/schedule/maxStartDelayMs",
        NoteKind::Dropped,
        "a bound on `startDelayMs`; V5 has no start delay",
        "nothing",
    );
    if let Some(placement) = placement(m) {
        d.insert("placement".into(), placement);
    }
    d.insert("lifecycle".into(), lifecycle(m));
    d.insert("spend".into(), spend(m, jobs, window_ms));
    Value::Object(d)
}

fn placement(m: &mut Migrator<'_>) -> Option<Value> {
    let mut placement = Map::new();
    let mut minimums = Map::new();
    // `--minimum NAME=VALUE`: scores are integers in V5; anything else is left for the V5
    // validator to judge, with its pointer.
    for (name, value) in &m.options.minimums {
        let value = match value.parse::<u64>() {
            Ok(score) if name.starts_with("cpu") => json!(score),
            _ => json!(value),
        };
        minimums.insert(name.clone(), value);
    }
    let given: Vec<String> = m.options.minimums.iter().map(|(n, v)| format!("--minimum {n}={v}")).collect();
    for (field, v5) in [("memoryMiB", "memory"), ("storageMiB", "storage")] {
        let pointer = format!("/runtime/resources/{field}");
        let flag = m.options.minimums.iter().find(|(n, _)| n == v5).map(|(n, v)| format!("--minimum {n}={v}"));
        match m.u64(&pointer) {
            Some(_) if flag.is_some() => m.note(
                &pointer,
                NoteKind::Changed,
                "V5 states resources as placement minimums",
                format!("the V5 document asks {}, given with {}", minimums[v5], flag.unwrap_or_default()),
            ),
            Some(0) => {
                m.note(&pointer, NoteKind::Dropped, "a zero minimum asks for nothing", "nothing: the same behaviour")
            }
            Some(mib) => {
                minimums.insert(v5.into(), json!(format!("{mib}MiB")));
                m.note(
                    &pointer,
                    NoteKind::Changed,
                    "V5 states resources as placement minimums",
                    format!("kept as `deployment.placement.minimums.{v5}`"),
                );
            }
            None => {}
        }
    }
    m.note_if(
        "/deployment/placement/requirements/trustProfile",
        NoteKind::Dropped,
        "every V5 job runs on the attested runtime; the trust profile is not authored",
        "nothing",
    );
    for (field, why) in [
        ("machine", "V5 has no machine classes or profile versions, only capability minimums"),
        ("evidence", "V5 has no authored evidence profiles, only capability minimums"),
    ] {
        let pointer = format!("/deployment/placement/requirements/{field}");
        if m.get(&pointer).is_none() {
            continue;
        }
        if given.is_empty() {
            m.droppable(
                &pointer,
                why,
                "state what the job needs as V5 minimums: `--minimum memory=2GiB`, `--minimum cpuMultiCoreScore=N` \
                 (also storage, cpuSingleCoreScore)",
            );
        } else {
            m.note(
                &pointer,
                NoteKind::Changed,
                why,
                format!("the V5 document asks the minimums given with {}: check they stand for it", given.join(" ")),
            );
        }
    }
    for field in ["groups", "topologyConstraints"] {
        let pointer = format!("/deployment/placement/{field}");
        if m.get(&pointer).and_then(Value::as_array).is_some_and(|a| !a.is_empty()) {
            m.droppable(
                &pointer,
                "V5 has no placement groups, geography, spread or topology",
                "V5 has none: it places jobs by minimums and, at most, an exact list of processors",
            );
        } else {
            m.note_if(&pointer, NoteKind::Dropped, "empty, and absent from V5", "nothing");
        }
    }
    match m.str("/deployment/placement/processorSelection/mode") {
        Some("static") => {
            let ids = m.get("/deployment/placement/processorSelection/processorIds").cloned().unwrap_or_default();
            let count = ids.as_array().map_or(0, Vec::len);
            if !(1..=64).contains(&count) {
                m.droppable(
                    "/deployment/placement/processorSelection",
                    format!("a V5 exact selection lists 1 to 64 processors; this one lists {count}"),
                    "V5 has no larger selection: without one, the job runs on the open market",
                );
                return (!placement.is_empty()).then_some(Value::Object(placement));
            }
            placement.insert("processorSelection".into(), json!({"mode": "exact", "processorIds": ids}));
            m.keep("/deployment/placement/processorSelection/mode");
            m.keep("/deployment/placement/processorSelection/processorIds");
            m.note_if(
                "/deployment/placement/processorSelection/managerId",
                NoteKind::Dropped,
                "V5 selects processors by ID alone",
                "nothing",
            );
        }
        Some("manager") => m.droppable(
            "/deployment/placement/processorSelection",
            "V5 has no selection by manager",
            "list the manager's processors in the V5 document (`processorSelection: {mode: exact, processorIds: \
             [...]}`); without a selection, the job runs on the open market",
        ),
        Some(_) => {
            m.keep("/deployment/placement/processorSelection/mode");
            let filters: Vec<String> = m
                .get("/deployment/placement/processorSelection")
                .and_then(Value::as_object)
                .map(|o| o.keys().filter(|k| *k != "mode").cloned().collect())
                .unwrap_or_default();
            for filter in filters {
                m.note(
                    &format!("/deployment/placement/processorSelection/{filter}"),
                    NoteKind::Dropped,
                    "V5's open market has no authored filters",
                    "nothing: the service chooses among the processors that meet the minimums",
                );
            }
        }
        None => {}
    }
    if !minimums.is_empty() {
        placement.insert("minimums".into(), Value::Object(minimums));
    }
    (!placement.is_empty()).then_some(Value::Object(placement))
}

fn lifecycle(m: &mut Migrator<'_>) -> Value {
    let mut renewal = None;
    m.keep("/deployment/lifecycle/renewal/mode");
    match m.str("/deployment/lifecycle/renewal/mode") {
        Some("after_scheduled_end") => m.note(
            "/deployment/lifecycle/renewal",
            NoteKind::Changed,
            "V5 renews before a window ends (an automatic lead), never after it",
            "nothing: the next window starts before this one ends, without a gap",
        ),
        _ => match m.str("/deployment/lifecycle/renewal/leadTime/mode") {
            Some("fixed") => {
                let lead = m.u64("/deployment/lifecycle/renewal/leadTime/durationMs").unwrap_or(60_000);
                renewal = Some(json!({"leadTime": {"mode": "fixed", "duration": duration(lead)}}));
                m.keep("/deployment/lifecycle/renewal/leadTime");
            }
            _ => {
                renewal = Some(json!({"leadTime": {"mode": "automatic"}}));
                m.keep("/deployment/lifecycle/renewal/leadTime");
            }
        },
    }
    let timing = match m.str("/deployment/lifecycle/update/timing") {
        Some("immediate") => "immediate",
        _ => "next_renewal",
    };
    m.keep("/deployment/lifecycle/update/timing");
    let pointer = "/deployment/lifecycle/update/existingJobs";
    let authored = m.str("/deployment/lifecycle/update/existingJobs/mode").map(str::to_owned);
    let existing = match (m.options.existing_jobs, authored.as_deref()) {
        (Some(chosen), Some(v4)) if v4 == chosen.as_str() => {
            m.keep(pointer);
            Some(chosen.as_str())
        }
        (Some(chosen), v4) => {
            m.note(
                pointer,
                NoteKind::Changed,
                format!("V5 has no `{}` for the running jobs", v4.unwrap_or("cooperative_cease")),
                format!("the V5 document uses `{}`, given with --existing-jobs", chosen.as_str()),
            );
            Some(chosen.as_str())
        }
        (None, Some("cooperative_cease")) => {
            m.note(
                pointer,
                NoteKind::Blocking,
                "V5 has no cooperative cease",
                "choose with `--existing-jobs stop_when_successor_ready` (the old job stops once its successor is \
                 ready: the nearest) or `--existing-jobs run_until_scheduled_end`",
            );
            None
        }
        _ => {
            m.keep(pointer);
            Some("run_until_scheduled_end")
        }
    };
    let mut update = json!({"timing": timing});
    if let Some(mode) = existing {
        update["existingJobs"] = json!({"mode": mode});
    }
    recovery(m);
    let mut lifecycle = json!({"update": update});
    if let Some(renewal) = renewal {
        lifecycle["renewal"] = renewal;
    }
    lifecycle
}

/// The launch retries of every V5 job (`docs/executions.md`), as V4's default.
const V5_LAUNCH_RETRIES: u64 = 5;

/// V5 has no authored recovery: every job gets [`V5_LAUNCH_RETRIES`] launch retries and, after
/// a runtime failure, waits for its window's end. What asks the same is dropped; what asks
/// otherwise blocks (V5 has no way to ask it) until `--drop` accepts V5's.
fn recovery(m: &mut Migrator<'_>) {
    let retries = "/deployment/lifecycle/recovery/launch/maxRetries";
    match m.u64(retries) {
        Some(V5_LAUNCH_RETRIES) => m.note(
            retries,
            NoteKind::Dropped,
            format!("V5 retries a refused launch {V5_LAUNCH_RETRIES} times, as this asks; it is not authored"),
            "nothing: the same behaviour",
        ),
        Some(n) => m.droppable(
            retries,
            format!("V5 retries a refused launch {V5_LAUNCH_RETRIES} times; this asks {n}"),
            "V5 has no way to ask another number",
        ),
        None => {}
    }
    let failure = "/deployment/lifecycle/recovery/runtimeFailure";
    match m.str(&format!("{failure}/mode")) {
        Some("wait_until_scheduled_end") => m.note(
            failure,
            NoteKind::Dropped,
            "after a runtime failure V5 waits for the window's end, as this asks; it is not authored",
            "nothing: the same behaviour",
        ),
        Some(mode) => {
            let mode = mode.to_owned();
            m.droppable(
                failure,
                format!("after a runtime failure V5 waits for the window's end; this asks `{mode}`"),
                "V5 has no way to replace a failed job before its window ends",
            );
        }
        None => {}
    }
    // An empty `launch` asks V4's default, which is V5's.
    m.keep("/deployment/lifecycle/recovery");
}

fn spend(m: &mut Migrator<'_>, jobs: u64, window_ms: u64) -> Value {
    let flag = m.options.per_job;
    let mut native = false;
    for field in ["maxRewardPlanckPerJob", "maxNativeFeePlanckPerJob"] {
        let pointer = format!("/deployment/spend/{field}");
        if m.get(&pointer).is_none() {
            continue;
        }
        native = true;
        match flag {
            Some(micros) => m.note(
                &pointer,
                NoteKind::Changed,
                "V5 spends service credits only: the native-token authority is replaced by the credits given with \
                 --per-job",
                format!(
                    "the V5 document lets one job spend {} of service credits: it must cover what the job paid in \
                     native tokens",
                    crate::money::usd(micros)
                ),
            ),
            None => m.note(
                &pointer,
                NoteKind::Blocking,
                "V5 spends service credits only; native-token authority has no V5 form",
                "pass the service credits (micros) one job may spend instead, covering what it paid in native \
                 tokens: `--per-job MICROS` (and `--rate MICROS` for the ceiling over 30 days)",
            ),
        }
    }
    let authored = "/deployment/spend/maxServiceCreditMicrosPerGeneration";
    let per_job = match (flag, m.u64(authored)) {
        (Some(micros), Some(v4)) if micros != v4 => {
            m.note(
                authored,
                NoteKind::Changed,
                format!("the V4 document allows {} per generation", crate::money::usd(v4)),
                format!(
                    "the V5 document allows {} per job (`deployment.spend.perJob`), given with --per-job",
                    crate::money::usd(micros)
                ),
            );
            micros
        }
        (_, Some(micros)) => {
            m.note(
                authored,
                NoteKind::Changed,
                "V5 states spend as a decimal string per job",
                format!("kept as `deployment.spend.perJob: \"{micros}\"` ({})", crate::money::usd(micros)),
            );
            micros
        }
        (Some(micros), None) => micros,
        (None, None) => {
            if !native {
                let at = m.present("/deployment/spend");
                m.note(
                    &at,
                    NoteKind::Blocking,
                    "V5 needs the service credits one job may spend (`deployment.spend.perJob`), and the V4 \
                     document states none",
                    "pass it: `svc manifest migrate --file ... --per-job 1000000` (micros), or add \
                     `maxServiceCreditMicrosPerGeneration` to the V4 document",
                );
            }
            return json!({"unit": "service_credit_micros"});
        }
    };
    if native && flag.is_none() {
        return json!({"unit": "service_credit_micros"});
    }
    m.keep("/deployment/spend");
    let at = m.present("/deployment/spend");
    let why = "V5 continuous execution needs a spend rate, and V4 had no lifetime ceiling";
    let window = m.options.rate_window.clone();
    let rate = match m.options.rate {
        Some(amount) => {
            let over = window.clone().unwrap_or_else(|| RATE_WINDOW.to_owned());
            m.notes.push(Note {
                pointer: at,
                kind: NoteKind::Changed,
                why: why.into(),
                fix: format!(
                    "the V5 document allows {} per {over} (`spend.rate`), given with --rate",
                    crate::money::usd(amount)
                ),
            });
            let mut rate = json!({"amount": amount.to_string()});
            if let Some(window) = window {
                rate["window"] = json!(window);
            }
            rate
        }
        None => {
            // A V4 deployment renews until stopped: V5 asks a lifetime ceiling over a window.
            // The one derived lets every job of every window in 30 days spend its whole
            // per-job authority: what V4 allowed, and so large.
            let windows = RATE_WINDOW_MS.div_ceil(window_ms.max(1));
            let rate = u128::from(per_job) * u128::from(jobs) * u128::from(windows);
            m.notes.push(Note {
                pointer: at,
                kind: NoteKind::Changed,
                why: why.into(),
                fix: format!(
                    "the V5 document allows {} per {} (`spend.rate.amount: \"{rate}\"`: {} per job x {jobs} job{} x \
                     {windows} window{}), all V4 allowed: pass `--rate MICROS` (and `--rate-window`) for what you \
                     mean to spend",
                    crate::money::usd(rate),
                    crate::money::duration_words(RATE_WINDOW_MS / 1000),
                    crate::money::usd(per_job),
                    if jobs == 1 { "" } else { "s" },
                    if windows == 1 { "" } else { "s" }
                ),
            });
            json!({"amount": rate.to_string(), "window": RATE_WINDOW})
        }
    };
    json!({"unit": "service_credit_micros", "perJob": per_job.to_string(), "rate": rate})
}

fn ingress(m: &mut Migrator<'_>) {
    for kind in ["http", "ssh"] {
        let pointer = format!("/ingress/{kind}");
        match m.str(&format!("{pointer}/mode")) {
            Some("disabled") => m.note(&pointer, NoteKind::Dropped, "disabled, and absent from V5", "nothing"),
            Some(_) if kind == "http" => m.droppable(
                &pointer,
                "V5 has no ingress",
                "for a public HTTPS endpoint, deploy the application with the ingress add-on (`svc ingress deploy`)",
            ),
            Some(_) => m.droppable(
                &pointer,
                "V5 has no ingress",
                "for SSH into the job, `access: {ssh: {provider: {kind: managed}}}` with a native image runtime",
            ),
            None => {}
        }
    }
}

fn observability(m: &mut Migrator<'_>, out: &mut Map<String, Value>) {
    if let Some(enabled) = m.get("/observability/logs/enabled").and_then(Value::as_bool) {
        out.insert("observability".into(), json!({"logs": {"enabled": enabled}}));
        m.keep("/observability/logs/enabled");
    }
    for field in ["profileId", "sinkName", "context"] {
        m.note_if(
            &format!("/observability/logs/{field}"),
            NoteKind::Dropped,
            "a deprecated logging field; V5 provisions managed logging itself",
            "nothing",
        );
    }
    m.note_if(
        "/observability/runtimeDiagnostics",
        NoteKind::Dropped,
        "V5 always signs runtime diagnostics; it is not authored",
        "nothing",
    );
}

/// V5 environment names: `[A-Z_][A-Z0-9_]{0,127}`.
fn env_name(name: &str) -> bool {
    (1..=128).contains(&name.len())
        && name.bytes().next().is_some_and(|b| b.is_ascii_uppercase() || b == b'_')
        && name.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
}

fn configuration(m: &mut Migrator<'_>, out: &mut Map<String, Value>) {
    let mut variables = Vec::new();
    let listed = m.get("/configuration/variables").and_then(Value::as_array).cloned().unwrap_or_default();
    for (i, v) in listed.iter().enumerate() {
        let at = format!("/configuration/variables/{i}");
        let name = v["name"].as_str().unwrap_or_default();
        if !env_name(name) {
            // The note names the variable, not its name alone: `--drop` leaves it out whole.
            m.droppable(
                &at,
                format!("its name {name:?} is not a V5 environment name (`[A-Z_][A-Z0-9_]{{0,127}}`)"),
                "V5 cannot set it: rename it in the V5 document, and read the new name in the job",
            );
            continue;
        }
        let managed = v["managed"].as_bool().unwrap_or(false);
        let required = v["required"].as_bool().unwrap_or(false);
        let variable = match (managed, v.get("default")) {
            (false, Some(default)) if !required => {
                m.note(
                    &at,
                    NoteKind::Changed,
                    "V5 variables are literal (a fixed value) or managed; an optional V4 variable with a default is \
                     the default",
                    format!("kept as the literal {name}={default}: make it `source: managed` to set it per deployment"),
                );
                json!({"source": "literal", "name": name, "value": default})
            }
            _ => {
                let mut variable = json!({"source": "managed", "name": name, "required": required});
                if let Some(default) = v.get("default") {
                    variable["default"] = default.clone();
                }
                if !managed {
                    m.note(
                        &at,
                        NoteKind::Changed,
                        "a V4 variable without a fixed value is a managed variable in V5",
                        "set its value among the application's managed variables",
                    );
                } else {
                    m.keep(&at);
                }
                variable
            }
        };
        variables.push(variable);
    }
    let mut secrets = Vec::new();
    let listed = m.get("/configuration/secrets").and_then(Value::as_array).cloned().unwrap_or_default();
    for (i, s) in listed.iter().enumerate() {
        let at = format!("/configuration/secrets/{i}");
        let destination = match (s["destination"]["kind"].as_str(), &s["destination"]) {
            (Some("env"), d) if d["name"].as_str().is_some_and(env_name) => {
                json!({"kind": "environment", "name": d["name"]})
            }
            (Some("file"), d) if d["path"].as_str().is_some_and(|p| p.starts_with('/')) => {
                json!({"kind": "file", "path": d["path"]})
            }
            _ => {
                m.droppable(
                    &at,
                    "its destination is not one V5 delivers to: an environment name (`[A-Z_][A-Z0-9_]{0,127}`) or \
                     an absolute path",
                    "V5 cannot deliver it there: give it another destination in the V5 document, and read it there in \
                     the job",
                );
                continue;
            }
        };
        let mut secret = json!({"secretId": s["secretId"], "destination": destination});
        if let Some(required) = s.get("required") {
            secret["required"] = required.clone();
        }
        m.keep(&format!("{at}/secretId"));
        m.keep(&format!("{at}/required"));
        m.keep(&format!("{at}/destination"));
        m.note_if(
            &format!("{at}/bundleId"),
            NoteKind::Dropped,
            "V5 does not group secrets in bundles",
            "nothing: each secret is delivered on its own",
        );
        secrets.push(secret);
    }
    let mut configuration = Map::new();
    if !variables.is_empty() {
        configuration.insert("variables".into(), Value::Array(variables));
    }
    if !secrets.is_empty() {
        configuration.insert("secrets".into(), Value::Array(secrets));
    }
    if !configuration.is_empty() {
        out.insert("configuration".into(), Value::Object(configuration));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_take_the_largest_unit_that_divides_them() {
        assert_eq!(duration(7_200_000), "2h");
        assert_eq!(duration(90_000), "90s");
        assert_eq!(duration(86_400_000), "1d");
        assert_eq!(duration(1_500), "1500ms");
    }

    fn full() -> Value {
        serde_json::from_str(include_str!("../../tests/golden/v4-full.json")).expect("JSON")
    }

    fn kinds(m: &Migration, pointer: &str) -> Vec<NoteKind> {
        m.notes.iter().filter(|n| n.pointer == pointer).map(|n| n.kind).collect()
    }

    #[test]
    fn each_blocker_of_the_full_v4_manifest_has_a_flag_and_the_flags_supply_v5_values() {
        let blocked = migrate_v4(&full(), &Options::default());
        let blocking: Vec<&str> =
            blocked.notes.iter().filter(|n| n.kind == NoteKind::Blocking).map(|n| n.pointer.as_str()).collect();
        assert_eq!(blocking.len(), 10, "{blocking:?}");
        let options = Options {
            per_job: Some(3_000_000),
            rate: Some(40_000_000),
            rate_window: Some("7d".into()),
            existing_jobs: Some(ExistingJobs::StopWhenSuccessorReady),
            minimums: vec![("cpuMultiCoreScore".into(), "100".into())],
            drop: vec!["/ingress".into(), "/deployment/placement/groups".into(), "/nowhere".into()],
            ..Options::default()
        };
        let m = migrate_v4(&full(), &options);
        // Topology and the replace-after-failure recovery still block: only `--drop` leaves them out.
        let still: Vec<&str> =
            m.notes.iter().filter(|n| n.kind == NoteKind::Blocking).map(|n| n.pointer.as_str()).collect();
        assert_eq!(
            still,
            [
                "/deployment/lifecycle/recovery/launch/maxRetries",
                "/deployment/lifecycle/recovery/runtimeFailure",
                "/deployment/placement/topologyConstraints"
            ]
        );
        assert_eq!(m.unused_drops, ["/nowhere"]);
        assert_eq!(kinds(&m, "/ingress/http"), [NoteKind::Dropped]);
        assert_eq!(kinds(&m, "/deployment/spend/maxRewardPlanckPerJob"), [NoteKind::Changed]);
        let mut options = options;
        options
            .drop
            .extend(["/deployment/lifecycle/recovery".into(), "/deployment/placement/topologyConstraints".into()]);
        let m = migrate_v4(&full(), &options);
        let v5 = m.manifest.expect("migrated");
        assert_eq!(v5["deployment"]["spend"]["perJob"], "3000000", "--per-job wins over the V4 value");
        assert_eq!(v5["deployment"]["spend"]["rate"], json!({"amount": "40000000", "window": "7d"}));
        assert_eq!(v5["deployment"]["lifecycle"]["update"]["existingJobs"]["mode"], "stop_when_successor_ready");
        assert_eq!(v5["deployment"]["placement"]["minimums"], json!({"cpuMultiCoreScore": 100, "memory": "512MiB"}));
        assert!(v5.get("ingress").is_none());
    }

    #[test]
    fn an_encrypted_bundle_migrates_pinned_to_the_artifact_given() {
        let mut v4 = full();
        v4["release"]["artifact"]["encryption"]["mode"] = json!("aes256_gcm");
        let blocked = migrate_v4(&v4, &Options::default());
        assert_eq!(kinds(&blocked, "/release/artifact/encryption"), [NoteKind::Blocking]);
        let digest = format!("sha256:{}", "b".repeat(64));
        let m = migrate_v4(&v4, &Options { pin_artifact: Some(digest.clone()), ..Options::default() });
        assert_eq!(kinds(&m, "/release/artifact/encryption"), [NoteKind::Changed]);
        assert_eq!(kinds(&m, "/release/mode"), [NoteKind::Changed], "a build becomes a pin");
        assert!(m.notes.iter().all(|n| !n.pointer.starts_with("/release") || n.kind != NoteKind::Blocking));
    }

    #[test]
    fn a_recovery_as_v5_does_it_is_dropped_and_another_blocks() {
        let mut v4 = full();
        let recovery = "/deployment/lifecycle/recovery";
        v4["deployment"]["lifecycle"]["recovery"] =
            json!({"launch": {"maxRetries": 5}, "runtimeFailure": {"mode": "wait_until_scheduled_end"}});
        let m = migrate_v4(&v4, &Options::default());
        assert_eq!(kinds(&m, &format!("{recovery}/launch/maxRetries")), [NoteKind::Dropped]);
        assert_eq!(kinds(&m, &format!("{recovery}/runtimeFailure")), [NoteKind::Dropped]);
        v4["deployment"]["lifecycle"]["recovery"]["launch"]["maxRetries"] = json!(0);
        let m = migrate_v4(&v4, &Options::default());
        assert_eq!(kinds(&m, &format!("{recovery}/launch/maxRetries")), [NoteKind::Blocking]);
        // A start delay is dropped, naming the V5 way to start later.
        let note = m.notes.iter().find(|n| n.pointer == "/deployment/schedule/startDelayMs").expect("a note");
        assert!(note.kind == NoteKind::Dropped && note.fix.contains("--paused"), "{note:?}");
    }

    #[test]
    fn an_entry_file_is_read_from_a_plain_engine_command_only() {
        assert_eq!(entry_file("node dist/worker.js").as_deref(), Some("dist/worker.js"));
        assert_eq!(entry_file("deno run main.ts").as_deref(), Some("main.ts"));
        assert_eq!(entry_file("node --inspect a.js"), None);
        assert_eq!(entry_file("node ../a.js"), None);
        assert_eq!(entry_file("node /abs.js"), None);
        assert_eq!(entry_file("sh -c 'node a.js'"), None);
    }
}
