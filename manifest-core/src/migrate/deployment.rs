//! The V4 deployment as a V5 one: jobs, the paid window, placement, lifecycle (with V4's
//! recovery compared to V5's fixed one) and spend (per job and the rate V5 needs).

use serde_json::{Map, Value, json};

use super::{Migrator, Note, NoteKind};

/// The default window of a derived rate.
const RATE_WINDOW: &str = "30d";
const RATE_WINDOW_MS: u64 = 30 * 86_400_000;

/// A duration in milliseconds as a V5 duration: the largest unit that divides it.
pub(super) fn duration(ms: u64) -> String {
    for (unit, size) in [("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1_000)] {
        if ms > 0 && ms.is_multiple_of(size) {
            return format!("{}{unit}", ms / size);
        }
    }
    format!("{ms}ms")
}

pub(super) fn deployment(m: &mut Migrator<'_>) -> Value {
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
    // validator to judge, with its pointer. A score written as a number (`-1`, `1e30`) stays
    // one, so that the validator speaks of its bounds, not of quotes nobody wrote.
    for (name, value) in &m.options.minimums {
        let value = match serde_json::from_str::<serde_json::Number>(value) {
            Ok(score) if name.starts_with("cpu") => Value::Number(score),
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
