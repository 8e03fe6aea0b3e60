//! Issue 41, point 2, the publication side: chaos over the real `svc serve`. Two continuous
//! applications (two slots of 4 s windows, one slot of 6 s windows: a renewal launches every
//! second or two, half a window ahead) priced 1000 micros a millisecond of window, then
//! rounds of `kill -9` of the service at moments the seed picks: after a quiet 0-3 s, 0-200 ms
//! after a publication (an `immediate` update launching), 0-200 ms after a launch was
//! recorded, and a second kill 0-500 ms into the restart (recovery itself killed). After each
//! kill, no job process of the service survives it; 0-2 s later the service starts again on
//! the same data directory, and once it has settled:
//!
//! - (a) per (application, slot, generation) at most one live attempt, and no attempt started
//!   twice by one service (its job's outer sandbox, by pid);
//! - (b) money: each generation is charged once, its window's price exactly; refunds never pass
//!   the charge, are stretches of its window, disjoint; every moment an outage took from a
//!   generation that was running at the kill (not being stopped), in its window and in no newer
//!   window charged before the kill, is inside one of its refunded stretches; so charged -
//!   refunded <= price x (window - outages) + the documented rounding;
//! - (c) no job runs that the store does not own (live);
//! - (d) every slot of every application runs again, a job the store records `ready`.
//!
//! Each job gets a file secret, so its sandbox binds its scratch directory, named after its
//! execution ID: that is how a process says which job it is. The seed comes from
//! `SVC_CHAOS_SEED` or the clock, and is printed: `SVC_CHAOS_SEED=N` replays the order and the
//! delays (the service's own timing is the machine's). Bounded: 17-34 s on SQLite, about a
//! minute with `SVC_E2E_BACKEND=postgres` (each restart waits out the killed instance's
//! scheduling lease). Found: a kill while a renewal ran ahead left the predecessor's window
//! charged for the outage (seed 1, round 1; `docs/decisions.md`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use svc_e2e::service::{Server, accept_build_of, admin};

use super::{World, v5};

/// A job that stays up until it is stopped.
const STAY_UP: &str = "setInterval(() => {}, 1000);\n";

/// What an hour of window costs: 1000 micros a millisecond, so a second's refund is visible.
const PRICE_PER_HOUR: u128 = 3_600_000_000;

/// The applications: name, slots, window.
const APPS: [(&str, u16, &str); 2] = [("alpha", 2, "4s"), ("beta", 1, "6s")];

/// The longest any wait takes.
const WAIT: Duration = Duration::from_secs(20);

/// Unix milliseconds now (the service's clock: the same machine's).
fn now_ms() -> u64 {
    u64::try_from(SystemTime::now().duration_since(UNIX_EPOCH).expect("after 1970").as_millis()).expect("ms")
}

/// The seed: `SVC_CHAOS_SEED`, or one from the clock.
fn seed() -> u64 {
    std::env::var("SVC_CHAOS_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        SystemTime::now().duration_since(UNIX_EPOCH).map_or(7, |d| d.as_secs() ^ u64::from(d.subsec_nanos()))
    })
}

/// Where the kill falls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Moment {
    /// This long after the service settled.
    Quiet(u64),
    /// This long after publishing a new version of an application (an immediate update).
    AfterPublish(&'static str, u64),
    /// This long after the next launch is recorded.
    AfterLaunch(u64),
    /// This long after the previous round's restart, before it settles (recovery killed),
    /// after a first kill this long into the quiet.
    DuringRecovery(u64, u64),
}

/// One execution row (every column printed when a check fails).
#[derive(Debug, Clone)]
#[allow(dead_code, reason = "attempt, changed_at and reason are printed, not read")]
struct Row {
    key: i64,
    app: String,
    id: String,
    slot: u16,
    generation: u64,
    attempt: u32,
    state: String,
    window_start: u64,
    window_end: u64,
    charged: u128,
    created_at: u64,
    changed_at: u64,
    reason: String,
}

impl Row {
    fn live(&self) -> bool {
        ["launching", "running", "ready", "restarting", "stopping"].contains(&self.state.as_str())
    }
}

/// One ledger entry.
#[derive(Debug, Clone)]
struct Entry {
    app: String,
    execution: i64,
    slot: u16,
    generation: u64,
    micros: u128,
    refund: bool,
    /// The refunded stretch, if a refund of unserved time.
    stretch: Option<(u64, u64)>,
}

/// A generation's charges and refunds.
type Entries<'a> = (Vec<&'a Entry>, Vec<&'a Entry>);

/// A query's rows, on SQLite or PostgreSQL, split into columns.
fn query(dir: &Path, sql: &str) -> Vec<Vec<String>> {
    let text = svc_e2e::service::postgres_sql(dir, sql)
        .unwrap_or_else(|| svc_e2e::service::sqlite_rows(&dir.join(manifest_core::service::store::DATABASE_FILE), sql));
    text.lines().filter(|l| !l.is_empty()).map(|l| l.split('|').map(str::to_owned).collect()).collect()
}

fn num<T: std::str::FromStr>(c: &[String], i: usize) -> T {
    c[i].parse().unwrap_or_else(|_| panic!("column {i} of {c:?}"))
}

fn rows(dir: &Path) -> Vec<Row> {
    const SQL: &str = "SELECT e.id, a.application_id, e.execution_id, e.slot, e.generation, e.attempt, e.state, \
                       e.window_start, e.window_end, e.charged_micros, e.created_at, e.changed_at, \
                       COALESCE(e.reason_code, '') FROM executions e JOIN applications a ON a.id = e.application_id \
                       ORDER BY e.id";
    query(dir, SQL)
        .into_iter()
        .map(|c| Row {
            key: num(&c, 0),
            app: c[1].clone(),
            id: c[2].clone(),
            slot: num(&c, 3),
            generation: num(&c, 4),
            attempt: num(&c, 5),
            state: c[6].clone(),
            window_start: num(&c, 7),
            window_end: num(&c, 8),
            charged: num(&c, 9),
            created_at: num(&c, 10),
            changed_at: num(&c, 11),
            reason: c[12].clone(),
        })
        .collect()
}

fn ledger(dir: &Path) -> Vec<Entry> {
    const SQL: &str = "SELECT a.application_id, l.execution, l.slot, l.generation, l.micros, l.refund, \
                       COALESCE(l.unserved_from, -1), COALESCE(l.unserved_to, -1) FROM spend_ledger l \
                       JOIN applications a ON a.id = l.application_id ORDER BY l.id";
    query(dir, SQL)
        .into_iter()
        .map(|c| {
            let (from, to): (i64, i64) = (num(&c, 6), num(&c, 7));
            Entry {
                app: c[0].clone(),
                execution: num(&c, 1),
                slot: num(&c, 2),
                generation: num(&c, 3),
                micros: num(&c, 4),
                refund: matches!(c[5].as_str(), "1" | "t" | "true"),
                stretch: (from >= 0).then(|| (from.unsigned_abs(), to.unsigned_abs())),
            }
        })
        .collect()
}

/// A job's scratch directory's prefix for an execution ID, as the local pool names it.
fn scratch_prefix(id: &str) -> String {
    id.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).take(48).collect()
}

/// A process: pid, parent, command name, command line, and whether it is in this test's
/// PID namespace (a job's processes but its outer sandbox are in the job's own).
#[derive(Debug, Clone)]
#[allow(dead_code, reason = "the parent is printed, not read")]
struct Proc {
    pid: u32,
    ppid: u32,
    comm: String,
    cmdline: String,
    host_pid_namespace: bool,
}

fn procs() -> Vec<Proc> {
    let mut found = Vec::new();
    let ours = std::fs::read_link("/proc/self/ns/pid").expect("this test's PID namespace");
    for entry in std::fs::read_dir("/proc").expect("/proc").filter_map(Result::ok) {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        let (Ok(raw), Ok(stat)) =
            (std::fs::read(entry.path().join("cmdline")), std::fs::read_to_string(entry.path().join("stat")))
        else {
            continue;
        };
        let Some((head, rest)) = stat.rsplit_once(')') else { continue };
        let mut fields = rest.split_whitespace();
        if fields.next() == Some("Z") {
            continue;
        }
        let ppid = fields.next().and_then(|p| p.parse().ok()).unwrap_or(0);
        let comm = head.split_once('(').map_or("", |(_, c)| c).to_owned();
        let host_pid_namespace = std::fs::read_link(entry.path().join("ns/pid")).is_ok_and(|ns| ns == ours);
        let cmdline = String::from_utf8_lossy(&raw).replace('\0', " ");
        found.push(Proc { pid, ppid, comm, cmdline, host_pid_namespace });
    }
    found
}

/// The processes of this data directory's jobs: any whose command line names its artifact
/// store or its job scratch space.
fn job_procs(dir: &Path) -> Vec<Proc> {
    let markers = [dir.join("artifacts"), dir.join("pool")].map(|p| p.to_string_lossy().into_owned());
    procs().into_iter().filter(|p| markers.iter().any(|m| p.cmdline.contains(m.as_str()))).collect()
}

/// The jobs running: by scratch prefix (an execution ID), the outer sandboxes' pids (a
/// `bwrap` in this test's PID namespace: one per start of the job). Not "a `bwrap` whose parent
/// is no `bwrap`": the sandbox's init, orphaned for a moment while its job is stopped, read
/// as a second start of the job (a nextest run under load, seed 1925586321).
fn running(dir: &Path) -> BTreeMap<String, BTreeSet<u32>> {
    let all = job_procs(dir);
    let pool = format!("{}/", dir.join("pool").display());
    let mut jobs: BTreeMap<String, BTreeSet<u32>> = BTreeMap::new();
    for p in &all {
        let Some(rest) = p.cmdline.split(pool.as_str()).nth(1) else { continue };
        let Some((prefix, _)) = rest.split_once('.') else { continue };
        let outer = p.comm == "bwrap" && p.host_pid_namespace;
        let entry = jobs.entry(prefix.to_owned()).or_default();
        if outer {
            entry.insert(p.pid);
        }
    }
    jobs
}

/// Waits (at most 5 s) until no job process of this data directory is left.
fn assert_no_job_left(dir: &Path, when: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let left = job_procs(dir);
        if left.is_empty() {
            return;
        }
        assert!(Instant::now() < deadline, "{when}: job processes outlived the service: {left:#?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// An outage: from when the killed service was dead to when the next one was started (Unix
/// ms), and the slot generations that had a live attempt (not being stopped) at the kill.
#[derive(Debug, Clone)]
struct Outage {
    dead: u64,
    spawned: u64,
    running: BTreeSet<(String, u16, u64)>,
}

struct Chaos {
    w: World,
    extra: Vec<String>,
    outages: Vec<Outage>,
    /// Per service life, per execution ID prefix, the outer sandboxes seen.
    starts: BTreeMap<(usize, String), BTreeSet<u32>>,
    life: usize,
    /// The executions the last killed service left live: settled only once each is recorded
    /// ended. On PostgreSQL the restarted service stands by until the killed one's lease runs
    /// out, and meanwhile their rows still say `ready` (a CI run read that as settled and
    /// found no job running).
    left_live: BTreeSet<String>,
}

impl Chaos {
    fn args(&self) -> Vec<&str> {
        self.extra.iter().map(String::as_str).collect()
    }

    /// Records the jobs running now under this service life.
    fn sample(&mut self) -> BTreeMap<String, BTreeSet<u32>> {
        let jobs = running(self.w.dir.path());
        for (prefix, pids) in &jobs {
            self.starts.entry((self.life, prefix.clone())).or_default().extend(pids);
        }
        jobs
    }

    /// `kill -9` of the service; checks that no job outlives it; records the outage's start.
    fn kill(&mut self, what: &str) -> (u64, BTreeSet<(String, u16, u64)>) {
        self.sample();
        self.w.server.signal("KILL");
        self.w.server.wait(Duration::from_secs(10)).expect("svc serve dies at SIGKILL");
        let dead = now_ms();
        assert_no_job_left(self.w.dir.path(), what);
        let now = rows(self.w.dir.path());
        self.left_live = now.iter().filter(|r| r.live()).map(|r| r.id.clone()).collect();
        let running = now
            .iter()
            .filter(|r| r.live() && r.state != "stopping")
            .map(|r| (r.app.clone(), r.slot, r.generation))
            .collect();
        (dead, running)
    }

    fn restart(&mut self, dead: u64, running: BTreeSet<(String, u16, u64)>) {
        let spawned = now_ms();
        self.outages.push(Outage { dead, spawned, running });
        self.life += 1;
        self.w.server = Server::start(self.w.dir.path(), &self.args());
    }

    /// Waits until every slot of every application runs a `ready` job again (d), what the
    /// killed service left live is recorded ended, and no launch is in flight.
    fn settle(&mut self, round: usize) {
        let deadline = Instant::now() + WAIT;
        loop {
            self.sample();
            let now = rows(self.w.dir.path());
            // A ready job with a second of its window left: one whose window is about to end
            // may be stopped before the checks look, its renewal not yet ready (that is the
            // handover, not a slot left unserved).
            let soon = now_ms() + 1_000;
            let ready = APPS.iter().all(|(app, slots, _)| {
                (0..*slots).all(|slot| {
                    now.iter().any(|r| r.app == *app && r.slot == slot && r.state == "ready" && r.window_end > soon)
                })
            });
            let in_flight = now.iter().any(|r| r.state == "launching");
            let recovered = now.iter().all(|r| !(self.left_live.contains(&r.id) && r.live()));
            let answers = APPS.iter().all(|(app, _, _)| {
                self.w.get(&format!("/api/applications/{app}/executions?limit=1"))["convergence"]["state"]
                    == "converged"
            });
            if ready && !in_flight && recovered && answers {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "round {round}: not settled within {WAIT:?}: {now:#?}\nsvc stderr:\n{}",
                self.w.server.stderr()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// (a), (c), (d) now.
    fn check_jobs(&mut self, round: usize) {
        let jobs = self.sample();
        let now = rows(self.w.dir.path());
        let context =
            || format!("round {round}: jobs {jobs:?}\nrows {now:#?}\nsvc stderr:\n{}", self.w.server.stderr());
        // (a) At most one live attempt per (application, slot, generation).
        let mut live: BTreeMap<(&str, u16, u64), Vec<&str>> = BTreeMap::new();
        for r in now.iter().filter(|r| r.live()) {
            live.entry((r.app.as_str(), r.slot, r.generation)).or_default().push(&r.id);
        }
        if let Some(two) = live.values().find(|ids| ids.len() > 1) {
            panic!("two live attempts of one slot generation: {two:?}\n{}", context());
        }
        // (a) No attempt started twice by one service.
        if let Some(((life, prefix), pids)) = self.starts.iter().find(|(_, pids)| pids.len() > 1) {
            panic!("{prefix} was started {} times by service life {life} ({pids:?})\n{}", pids.len(), context());
        }
        // (c) No job runs that the store does not own: every job seen is a live execution, or
        // its processes are gone within 2 s (ended as the store recorded it).
        let owned: BTreeSet<String> = now.iter().filter(|r| r.live()).map(|r| scratch_prefix(&r.id)).collect();
        let known: BTreeMap<String, &Row> = now.iter().map(|r| (scratch_prefix(&r.id), r)).collect();
        let stray: Vec<(&String, &BTreeSet<u32>)> = jobs.iter().filter(|(p, _)| !owned.contains(*p)).collect();
        let deadline = Instant::now() + Duration::from_secs(2);
        for (prefix, _) in &stray {
            while running(self.w.dir.path()).contains_key(*prefix) {
                assert!(
                    Instant::now() < deadline,
                    "a job the store does not own runs: {prefix} (recorded {:?})\n{}",
                    known.get(*prefix).map(|r| r.state.as_str()),
                    context()
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        // (d) Each slot's `ready` job runs.
        for (app, slots, _) in APPS {
            for slot in 0..slots {
                let runs = now
                    .iter()
                    .filter(|r| r.app == app && r.slot == slot && r.state == "ready")
                    .any(|r| jobs.contains_key(&scratch_prefix(&r.id)));
                assert!(runs, "{app} slot {slot}: no ready job runs\n{}", context());
            }
        }
    }

    /// (b): the money, from the ledger and the executions.
    fn check_money(&self, round: usize) -> (u128, u128) {
        let now = rows(self.w.dir.path());
        let entries = ledger(self.w.dir.path());
        let by_key: BTreeMap<i64, &Row> = now.iter().map(|r| (r.key, r)).collect();
        let context = || format!("round {round}\noutages {:#?}\nledger {entries:#?}\nrows {now:#?}", self.outages);
        let mut generations: BTreeMap<(&str, u16, u64), Entries<'_>> = BTreeMap::new();
        for e in &entries {
            let row = by_key.get(&e.execution).unwrap_or_else(|| panic!("an entry of no execution: {e:?}"));
            assert_eq!((row.app.as_str(), row.slot, row.generation), (e.app.as_str(), e.slot, e.generation));
            let g = generations.entry((row.app.as_str(), row.slot, row.generation)).or_default();
            if e.refund { g.1.push(e) } else { g.0.push(e) }
        }
        let (mut charged_all, mut refunded_all) = (0, 0);
        for (&(app, slot, generation), (charges, refunds)) in &generations {
            let what = format!("{app} slot {slot} generation {generation}");
            // One charge per generation: its window's price, on the attempt that launched it.
            let [charge] = charges[..] else {
                panic!("{what} is charged {} times: {charges:?}\n{}", charges.len(), context());
            };
            let paid = by_key[&charge.execution];
            let window = paid.window_end - paid.window_start;
            let price = (PRICE_PER_HOUR * u128::from(window)).div_ceil(3_600_000);
            assert_eq!((charge.micros, paid.charged), (price, price), "{what}: the window's price\n{}", context());
            for other in now.iter().filter(|r| r.app == app && r.slot == slot && r.generation == generation) {
                assert!(
                    other.key == paid.key || other.charged == 0,
                    "{what}: {} charged again\n{}",
                    other.id,
                    context()
                );
            }
            // Refunds: against the charged attempt, stretches of its window, disjoint, pro rata.
            let mut stretches: Vec<(u64, u64)> = Vec::new();
            for r in refunds {
                assert_eq!(r.execution, paid.key, "{what}: a refund against another attempt\n{}", context());
                let s = r.stretch.unwrap_or_else(|| panic!("{what}: a refund of no stretch: {r:?}\n{}", context()));
                assert!(
                    paid.window_start <= s.0 && s.0 < s.1 && s.1 <= paid.window_end,
                    "{what}: {s:?} outside its window\n{}",
                    context()
                );
                stretches.push(s);
            }
            stretches.sort_unstable();
            assert!(stretches.windows(2).all(|p| p[0].1 <= p[1].0), "{what}: overlapping refunds\n{}", context());
            let refunded: u128 = refunds.iter().map(|r| r.micros).sum();
            let unserved: u64 = stretches.iter().map(|s| s.1 - s.0).sum();
            assert!(
                refunded <= charge.micros,
                "{what}: refunded {refunded} > charged {}\n{}",
                charge.micros,
                context()
            );
            assert!(
                refunded <= charge.micros * u128::from(unserved) / u128::from(window.max(1)) + refunds.len() as u128,
                "{what}: refunded {refunded} for {unserved} ms of {window}\n{}",
                context()
            );
            // Every moment an outage took from this generation while it ran, in its window and
            // in no newer generation's charged before the kill, is refunded.
            let mut lost = 0u64;
            for o in self.outages.iter().filter(|o| o.running.contains(&(app.to_owned(), slot, generation))) {
                let (from, to) = (o.dead.max(paid.window_start), o.spawned.min(paid.window_end));
                if from >= to {
                    continue;
                }
                // Moments of [from, to) a newer generation's window holds are that one's.
                let mut cut = vec![(from, to)];
                for newer in generations.keys().filter(|(a, s, g)| *a == app && *s == slot && *g > generation) {
                    let Some(n) = generations[newer].0.first().map(|c| by_key[&c.execution]) else { continue };
                    if n.created_at > o.dead {
                        continue;
                    }
                    cut = cut
                        .into_iter()
                        .flat_map(|(a, b)| {
                            [(a, b.min(n.window_start)), (a.max(n.window_end), b)].into_iter().filter(|(x, y)| x < y)
                        })
                        .collect();
                }
                for (a, b) in cut {
                    // The service's clock is in ms; allow one either side.
                    let covered = stretches.iter().any(|s| s.0 <= a + 1 && b <= s.1 + 1);
                    assert!(
                        covered,
                        "{what}: the outage {a}..{b} ({} ms, the service down from {} to {}) is not refunded \
                         (refunded stretches {stretches:?})\n{}",
                        b - a,
                        o.dead,
                        o.spawned,
                        context()
                    );
                    lost += b - a;
                }
            }
            let net = charge.micros - refunded;
            let bound = PRICE_PER_HOUR * u128::from(window - lost.min(window)) / 3_600_000 + 2 + refunds.len() as u128;
            assert!(
                net <= bound,
                "{what}: charged {} - refunded {refunded} = {net} > price x (window {window} - outages {lost} ms) = \
                 {bound}\n{}",
                charge.micros,
                context()
            );
            charged_all += charge.micros;
            refunded_all += refunded;
        }
        (charged_all, refunded_all)
    }
}

#[test]
fn chaos_kill_9s_of_svc_serve_at_random_moments_keep_one_attempt_per_generation_and_the_money_whole() {
    let seed = seed();
    println!("publication chaos seed {seed} (SVC_CHAOS_SEED={seed} replays the order and the delays)");
    let mut rng = fastrand::Rng::with_seed(seed);
    let started = Instant::now();
    let price = PRICE_PER_HOUR.to_string();
    let extra = vec!["--price-micros-per-hour".to_owned(), price];
    let w = World::with_args("chaos", &extra.iter().map(String::as_str).collect::<Vec<_>>());
    let bundle = w.dir.path().join("bundle-web");
    std::fs::create_dir_all(&bundle).expect("bundle dir");
    std::fs::write(bundle.join("server.js"), STAY_UP).expect("server.js");
    let digest =
        admin(&["artifact", "store", "--data-dir", w.dir.str(), "--bundle", bundle.to_str().expect("UTF-8 path")]);
    admin(&["spend-authority", "set", "--data-dir", w.dir.str(), "--org", "acme", "--micros", "1000000000"]);
    let manifest = |app: &str, slots: u16, window: &str| -> Value {
        let mut m = v5(app);
        m["execution"] = json!({"mode": "continuous"});
        m["deployment"]["jobs"] = json!(slots);
        m["deployment"]["schedule"]["duration"] = json!(window);
        m["deployment"]["spend"]["perJob"] = json!("1000000000");
        m["deployment"]["spend"]["rate"] = json!({"amount": "1000000000000", "window": "30d"});
        // A file secret: each job's sandbox then binds its own scratch directory, named after
        // its execution ID, so a process says which job it is.
        m["configuration"] =
            json!({"secrets": [{"secretId": "tag", "destination": {"kind": "file", "path": "/run/secrets/tag"}}]});
        m
    };
    let secret = w.dir.path().join("secret-tag");
    std::fs::write(&secret, "tag\n").expect("secret file");
    for (app, slots, window) in APPS {
        w.create(app);
        accept_build_of(w.dir.str(), "acme", app, &digest);
        admin(
            &["secret", "provision", "--data-dir", w.dir.str(), "--org", "acme", "--app", app, "--secret-id", "tag"]
                .into_iter()
                .chain(["--value-file", secret.to_str().expect("UTF-8 path")])
                .collect::<Vec<_>>(),
        );
        let r = w.publish(app, &json!({ "manifest": manifest(app, slots, window) }));
        assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    }
    let mut chaos =
        Chaos { w, extra, outages: Vec::new(), starts: BTreeMap::new(), life: 0, left_live: BTreeSet::new() };
    chaos.settle(0);

    let rounds = 6 + rng.usize(..3);
    for round in 1..=rounds {
        let moment = match rng.u8(..4) {
            0 => Moment::Quiet(rng.u64(..3000)),
            1 => Moment::AfterPublish(APPS[rng.usize(..APPS.len())].0, rng.u64(..200)),
            2 => Moment::AfterLaunch(rng.u64(..200)),
            _ => Moment::DuringRecovery(rng.u64(..3000), rng.u64(..500)),
        };
        let down = rng.u64(..2000);
        println!("round {round}/{rounds}: kill -9 at {moment:?}, down {down} ms ({:?} in)", started.elapsed());
        match moment {
            Moment::Quiet(ms) => std::thread::sleep(Duration::from_millis(ms)),
            Moment::AfterPublish(app, ms) => {
                let (_, slots, window) = APPS.iter().find(|a| a.0 == app).expect("an app");
                let r = chaos.w.publish(app, &json!({ "manifest": manifest(app, *slots, window) }));
                assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
                std::thread::sleep(Duration::from_millis(ms));
            }
            Moment::AfterLaunch(ms) => {
                let newest = |c: &Chaos| rows(c.w.dir.path()).iter().map(|r| r.key).max().unwrap_or(0);
                let before = newest(&chaos);
                let deadline = Instant::now() + Duration::from_secs(8);
                while newest(&chaos) == before {
                    assert!(Instant::now() < deadline, "round {round}: no launch within 8 s");
                    std::thread::sleep(Duration::from_millis(5));
                }
                std::thread::sleep(Duration::from_millis(ms));
            }
            Moment::DuringRecovery(quiet, ms) => {
                std::thread::sleep(Duration::from_millis(quiet));
                let (dead, running) = chaos.kill(&format!("round {round}: the first kill"));
                std::thread::sleep(Duration::from_millis(down));
                chaos.restart(dead, running);
                std::thread::sleep(Duration::from_millis(ms));
            }
        }
        let (dead, running) = chaos.kill(&format!("round {round} ({moment:?}): after kill -9"));
        std::thread::sleep(Duration::from_millis(down));
        chaos.restart(dead, running);
        chaos.settle(round);
        chaos.check_jobs(round);
        let (charged, refunded) = chaos.check_money(round);
        println!("round {round}: settled at {:?}; charged {charged}, refunded {refunded}", started.elapsed());
    }
    // Once more after a quiet while: the renewals since the last restart.
    std::thread::sleep(Duration::from_millis(1000));
    chaos.settle(rounds + 1);
    chaos.check_jobs(rounds + 1);
    let (charged, refunded) = chaos.check_money(rounds + 1);
    let entries = ledger(chaos.w.dir.path());
    let lost: u64 = chaos.outages.iter().map(|o| o.spawned - o.dead).sum();
    println!(
        "publication chaos seed {seed}: {rounds} rounds, {} kills ({lost} ms down), {} job starts seen, {} charges \
         ({charged} micros), {} refunds ({refunded} micros), in {:?}",
        chaos.outages.len(),
        chaos.starts.len(),
        entries.iter().filter(|e| !e.refund).count(),
        entries.iter().filter(|e| e.refund).count(),
        started.elapsed()
    );
    let Chaos { w, .. } = chaos;
    let World { server, dir, .. } = w;
    let status = server.stop();
    assert!(status.success(), "svc serve exited with {status:?}");
    assert_no_job_left(dir.path(), "after SIGTERM");
}
