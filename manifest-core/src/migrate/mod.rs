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
//!   a recovery like V5's, signed diagnostics, deprecated log fields, the server identity),
//!   naming the V5 way to the same behaviour where there is one (a start delay: publish
//!   paused, resume when due).
//! - **Blocking**: what V5 cannot express and the V4 document relies on (ingress, groups,
//!   topology, machine classes, evidence, manager selection, cooperative cease, native-token
//!   spend, an encrypted bundle, a runtime image, a recovery other than V5's, names V5 does
//!   not allow). The document is not migrated until the author supplies the V5 decision:
//!   each note names its [`Options`] field (a `svc manifest migrate` flag), and `--drop`
//!   leaves out what V5 has no form for at all.
//!
//! Every leaf of the V4 document is accounted for: kept, or named by a note.

use std::collections::BTreeSet;

use serde::Serialize;
use serde_json::{Map, Value, json};

mod configuration;
mod deployment;
mod release;

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
    release::release(&mut m, &mut out);
    runtime(&mut m, &mut out);
    out.insert("execution".into(), json!({"mode": "continuous"}));
    let deployment = deployment::deployment(&mut m);
    out.insert("deployment".into(), deployment);
    ingress(&mut m);
    observability(&mut m, &mut out);
    configuration::configuration(&mut m, &mut out);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_take_the_largest_unit_that_divides_them() {
        assert_eq!(deployment::duration(7_200_000), "2h");
        assert_eq!(deployment::duration(90_000), "90s");
        assert_eq!(deployment::duration(86_400_000), "1d");
        assert_eq!(deployment::duration(1_500), "1500ms");
    }

    fn full() -> Value {
        serde_json::from_str(include_str!("../../../tests/golden/v4-full.json")).expect("JSON")
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
