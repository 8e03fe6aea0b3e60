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

/// What the author supplies that V4 cannot.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The JavaScript entrypoint file, when `runtime.command` does not name it.
    pub entrypoint: Option<String>,
    /// The service credits (micros) one job may spend, when the V4 document states none
    /// (`deployment.spend.maxServiceCreditMicrosPerGeneration`).
    pub per_job: Option<u64>,
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

    fn covered(&self, pointer: &str) -> bool {
        self.seen.iter().any(|p| pointer == p || pointer.starts_with(&format!("{p}/")))
    }
}

/// Migrates a V4 manifest, as authored (valid at layers 1-2: see [`crate::validate`]).
pub fn migrate_v4(v4: &Value, options: &Options) -> Migration {
    let mut m = Migrator { v4, options, seen: BTreeSet::new(), notes: Vec::new() };
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
    let mut notes = m.notes;
    notes.sort_by(|a, b| a.pointer.cmp(&b.pointer));
    let blocked = notes.iter().any(|n| n.kind == NoteKind::Blocking);
    Migration { manifest: (!blocked).then_some(Value::Object(out)), notes }
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
            m.note(
                "/metadata/description",
                NoteKind::Blocking,
                "a V5 description is at most 500 characters",
                "shorten it",
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
                    "build an IPFS bundle, or use a native image (`runtime.kind: native_image`)",
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
                "use a native image (`runtime.kind: native_image`) or an IPFS bundle",
            ),
        },
    }
}

fn encryption(m: &mut Migrator<'_>) {
    match m.str("/release/artifact/encryption/mode") {
        Some("aes256_gcm") => m.note(
            "/release/artifact/encryption",
            NoteKind::Blocking,
            "V5 resolves the artifact's encryption as evidence; an encrypted bundle has no supported V5 path",
            "publish an unencrypted bundle (`encryption: none`) and keep secrets in `configuration.secrets`",
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
    for field in ["startDelayMs", "maxStartDelayMs"] {
        m.note_if(
            &format!("/deployment/schedule/{field}"),
            NoteKind::Dropped,
            "V5 starts a window when it is funded and placed; it has no start delay",
            "nothing, unless the job relies on the delay: then delay inside the job",
        );
    }
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
    for (field, v5) in [("memoryMiB", "memory"), ("storageMiB", "storage")] {
        let pointer = format!("/runtime/resources/{field}");
        match m.u64(&pointer) {
            Some(0) => m.note(&pointer, NoteKind::Dropped, "a zero minimum asks for nothing", "nothing"),
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
    m.note_if(
        "/deployment/placement/requirements/machine",
        NoteKind::Blocking,
        "V5 has no machine classes or profile versions, only capability minimums",
        "express what the job needs as `deployment.placement.minimums` (memory, storage, CPU scores)",
    );
    m.note_if(
        "/deployment/placement/requirements/evidence",
        NoteKind::Blocking,
        "V5 has no authored evidence profiles",
        "use `deployment.placement.minimums` (cpuSingleCoreScore, cpuMultiCoreScore)",
    );
    for field in ["groups", "topologyConstraints"] {
        let pointer = format!("/deployment/placement/{field}");
        if m.get(&pointer).and_then(Value::as_array).is_some_and(|a| !a.is_empty()) {
            m.note(
                &pointer,
                NoteKind::Blocking,
                "V5 has no placement groups, geography, spread or topology",
                "remove it: V5 places jobs by minimums and, at most, an exact list of processors",
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
                m.note(
                    "/deployment/placement/processorSelection",
                    NoteKind::Blocking,
                    format!("a V5 exact selection lists 1 to 64 processors; this one lists {count}"),
                    "list the processors the job may run on, or leave the selection out (the open market)",
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
        Some("manager") => m.note(
            "/deployment/placement/processorSelection",
            NoteKind::Blocking,
            "V5 has no selection by manager",
            "list the processors (`processorSelection: {mode: exact, processorIds: [...]}`), or use the open market",
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
    let existing = match m.str("/deployment/lifecycle/update/existingJobs/mode") {
        Some("cooperative_cease") => {
            m.note(
                "/deployment/lifecycle/update/existingJobs",
                NoteKind::Blocking,
                "V5 has no cooperative cease",
                "choose `stop_when_successor_ready` (the old job stops once its successor is ready) or \
                 `run_until_scheduled_end`",
            );
            None
        }
        _ => {
            m.keep("/deployment/lifecycle/update/existingJobs");
            Some("run_until_scheduled_end")
        }
    };
    let mut update = json!({"timing": timing});
    if let Some(mode) = existing {
        update["existingJobs"] = json!({"mode": mode});
    }
    m.note_if(
        "/deployment/lifecycle/recovery",
        NoteKind::Dropped,
        "V5 has no authored recovery: the service's own applies (launch retries, and what happens when a job fails)",
        "nothing, unless the job relied on its V4 recovery: then check the service's default",
    );
    let mut lifecycle = json!({"update": update});
    if let Some(renewal) = renewal {
        lifecycle["renewal"] = renewal;
    }
    lifecycle
}

fn spend(m: &mut Migrator<'_>, jobs: u64, window_ms: u64) -> Value {
    for field in ["maxRewardPlanckPerJob", "maxNativeFeePlanckPerJob"] {
        m.note_if(
            &format!("/deployment/spend/{field}"),
            NoteKind::Blocking,
            "V5 spends service credits only; native-token authority has no V5 form",
            "remove it, and fund the application with service credits",
        );
    }
    let per_job = match m.u64("/deployment/spend/maxServiceCreditMicrosPerGeneration") {
        Some(micros) => {
            m.note(
                "/deployment/spend/maxServiceCreditMicrosPerGeneration",
                NoteKind::Changed,
                "V5 states spend as a decimal string per job",
                format!("kept as `deployment.spend.perJob: \"{micros}\"` ({})", crate::money::usd(micros)),
            );
            micros
        }
        None => match m.options.per_job {
            Some(micros) => micros,
            None => {
                let at = m.present("/deployment/spend");
                m.note(
                    &at,
                    NoteKind::Blocking,
                    "V5 needs the service credits one job may spend (`deployment.spend.perJob`), and the V4 \
                     document states none",
                    "pass it: `svc manifest migrate --file ... --per-job 1000000` (micros), or add \
                     `maxServiceCreditMicrosPerGeneration` to the V4 document",
                );
                return json!({"unit": "service_credit_micros"});
            }
        },
    };
    // A V4 deployment renews until stopped: V5 asks a lifetime ceiling over a window. The one
    // derived lets every job of every window in 30 days spend its whole per-job authority.
    let windows = RATE_WINDOW_MS.div_ceil(window_ms.max(1));
    let rate = u128::from(per_job) * u128::from(jobs) * u128::from(windows);
    let at = m.present("/deployment/spend");
    m.notes.push(Note {
        pointer: at,
        kind: NoteKind::Changed,
        why: "V5 continuous execution needs a spend rate, and V4 had no lifetime ceiling".into(),
        fix: format!(
            "the V5 document allows {} per {} (`spend.rate.amount: \"{rate}\"`: {} per job x {jobs} job{} x \
             {windows} window{}): lower it if that is more than you mean to spend",
            crate::money::usd(rate),
            crate::money::duration_words(RATE_WINDOW_MS / 1000),
            crate::money::usd(per_job),
            if jobs == 1 { "" } else { "s" },
            if windows == 1 { "" } else { "s" }
        ),
    });
    m.keep("/deployment/spend");
    json!({
        "unit": "service_credit_micros",
        "perJob": per_job.to_string(),
        "rate": {"amount": rate.to_string(), "window": RATE_WINDOW},
    })
}

fn ingress(m: &mut Migrator<'_>) {
    for kind in ["http", "ssh"] {
        let pointer = format!("/ingress/{kind}");
        match m.str(&format!("{pointer}/mode")) {
            Some("disabled") => m.note(&pointer, NoteKind::Dropped, "disabled, and absent from V5", "nothing"),
            Some(_) => m.note(
                &pointer,
                NoteKind::Blocking,
                "V5 has no ingress",
                "for a public HTTPS endpoint use the ingress add-on (`svc ingress deploy`); for SSH, `access.ssh` \
                 with a native image",
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
            m.note(
                &format!("{at}/name"),
                NoteKind::Blocking,
                format!("{name:?} is not a V5 environment name (`[A-Z_][A-Z0-9_]{{0,127}}`)"),
                "rename it, and read the new name in the job",
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
                m.note(
                    &format!("{at}/destination"),
                    NoteKind::Blocking,
                    "V5 delivers a secret to an environment name (`[A-Z_][A-Z0-9_]{0,127}`) or an absolute path",
                    "change the destination, and read it there in the job",
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
