//! Validation speed against the floor of merely parsing the same bytes, in one run.
//!
//! For each syntax, over every document of the conformance corpus and the golden files:
//! - `validate`: `manifest_core::validate` (read, layer 1 with defaults, layer 2, every
//!   diagnostic placed in the source);
//! - `validate+digest`: the same and the authored digest, as `svc manifest validate` prints;
//! - `floor`: parsing the same bytes into a `serde_json::Value` (JSON) or reading all YAML
//!   events with `saphyr-parser` (YAML);
//! - `peer`: the `jsonschema` crate checking the same documents against our generated schema
//!   (shape only: no cross-field rules, no positions, no digest). JSON documents are parsed by
//!   serde_json; YAML documents by our reader (there is no second YAML reader to use), then
//!   converted to a `serde_json::Value`.
//!
//! Run with `cargo bench -p manifest-core --bench validate`; the ratios `validate / floor`
//! (goal: at most 3) and `validate / peer` (goal: below 1) are printed at the end, measured
//! in interleaved rounds so that load from other processes weighs on both passes alike.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};

fn documents(extension: &str) -> Vec<Vec<u8>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let dirs = [root.join("tests/corpus/v4"), root.join("tests/corpus/v5"), root.join("tests/golden")];
    let mut paths: Vec<PathBuf> = dirs
        .iter()
        .filter_map(|d| std::fs::read_dir(d).ok())
        .flatten()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let name = p.to_string_lossy();
            name.ends_with(extension) && !name.ends_with(".expect.json") && !name.ends_with(".model.json")
        })
        .collect();
    paths.sort();
    paths.iter().filter_map(|p| std::fs::read(p).ok()).collect()
}

fn floor_json(docs: &[Vec<u8>]) -> usize {
    docs.iter().filter(|d| serde_json::from_slice::<serde_json::Value>(d).is_ok()).count()
}

fn floor_yaml(docs: &[Vec<u8>]) -> usize {
    let mut events = 0;
    for d in docs {
        let Ok(text) = std::str::from_utf8(d) else { continue };
        for event in saphyr_parser::Parser::new_from_str(text) {
            if event.is_err() {
                break;
            }
            events += 1;
        }
    }
    events
}

fn validate_all(docs: &[Vec<u8>]) -> usize {
    docs.iter().filter(|d| manifest_core::validate(d).is_valid()).count()
}

fn validate_and_digest_all(docs: &[Vec<u8>]) -> usize {
    docs.iter().filter(|d| manifest_core::validate(d).authored_digest().is_some()).count()
}

type Pass = fn(&[Vec<u8>]) -> usize;

/// One syntax's documents and the passes measured over them.
struct Set {
    name: &'static str,
    docs: Vec<Vec<u8>>,
    floor: Pass,
    peer: Pass,
    verdict: Pass,
}

/// The peer's validators, compiled once from the schemas we serve.
fn validators() -> &'static [jsonschema::Validator; 2] {
    static CELL: std::sync::OnceLock<[jsonschema::Validator; 2]> = std::sync::OnceLock::new();
    CELL.get_or_init(|| {
        let compile = |kind: manifest_core::SchemaKind| {
            let schema: serde_json::Value = serde_json::from_str(kind.bytes()).expect("schema is JSON");
            jsonschema::draft202012::new(&schema).expect("schema compiles")
        };
        [compile(manifest_core::SchemaKind::ManifestV4), compile(manifest_core::SchemaKind::ManifestV5)]
    })
}

fn validator_for(value: &serde_json::Value) -> Option<&'static jsonschema::Validator> {
    let [v4, v5] = validators();
    match value.get("schemaVersion").and_then(serde_json::Value::as_u64) {
        Some(4) => Some(v4),
        Some(5) => Some(v5),
        _ => None,
    }
}

/// Like `validate`: every error of every document (the peer's errors carry a pointer and a
/// message, but no source position).
fn peer_errors(value: &serde_json::Value) -> usize {
    validator_for(value).map_or(1, |v| v.iter_errors(value).count())
}

/// The peer's cheapest pass: stop at the first error, report nothing.
fn peer_verdict(value: &serde_json::Value) -> usize {
    validator_for(value).map_or(0, |v| usize::from(v.is_valid(value)))
}

fn json_values(docs: &[Vec<u8>]) -> impl Iterator<Item = serde_json::Value> + '_ {
    docs.iter().filter_map(|d| serde_json::from_slice::<serde_json::Value>(d).ok())
}

fn yaml_values(docs: &[Vec<u8>]) -> impl Iterator<Item = serde_json::Value> + '_ {
    docs.iter()
        .filter_map(|d| std::str::from_utf8(d).ok())
        .filter_map(|t| manifest_core::parse::yaml(t).0)
        .filter_map(|node| serde_json::to_value(&node).ok())
}

fn peer_json(docs: &[Vec<u8>]) -> usize {
    json_values(docs).map(|v| peer_errors(&v)).sum()
}

fn peer_json_verdict(docs: &[Vec<u8>]) -> usize {
    json_values(docs).map(|v| peer_verdict(&v)).sum()
}

fn peer_yaml(docs: &[Vec<u8>]) -> usize {
    yaml_values(docs).map(|v| peer_errors(&v)).sum()
}

fn peer_yaml_verdict(docs: &[Vec<u8>]) -> usize {
    yaml_values(docs).map(|v| peer_verdict(&v)).sum()
}

fn main() {
    let sets = [
        Set { name: "json", docs: documents(".json"), floor: floor_json, peer: peer_json, verdict: peer_json_verdict },
        Set { name: "yaml", docs: documents(".yaml"), floor: floor_yaml, peer: peer_yaml, verdict: peer_yaml_verdict },
    ];
    // `SVC_VALIDATE_PROFILE=json` (or `yaml`): only `validate` over that syntax's documents,
    // in a loop, for a profiler (`perf record`, `valgrind --tool=callgrind`) to read alone.
    // `SVC_VALIDATE_PASS=floor` (or `peer-all-errors`, `peer-verdict-only`) loops that pass
    // instead, so that instruction counts, which the machine's load does not move, can be
    // compared pass to pass.
    if let Ok(only) = std::env::var("SVC_VALIDATE_PROFILE") {
        let rounds: usize = std::env::var("SVC_VALIDATE_ROUNDS").ok().and_then(|r| r.parse().ok()).unwrap_or(2000);
        let chosen = std::env::var("SVC_VALIDATE_PASS").unwrap_or_else(|_| "validate".to_owned());
        for Set { name, docs, floor, peer, verdict } in sets.iter().filter(|s| s.name == only) {
            let pass: Pass = match chosen.as_str() {
                "validate" => validate_all,
                "floor" => *floor,
                "peer-all-errors" => *peer,
                "peer-verdict-only" => *verdict,
                other => {
                    eprintln!("SVC_VALIDATE_PASS={other}: use validate, floor, peer-all-errors or peer-verdict-only");
                    std::process::exit(2);
                }
            };
            let counted: usize = (0..rounds).map(|_| pass(std::hint::black_box(docs))).sum();
            println!("{name}: {chosen}, {rounds} rounds, {counted} counted");
        }
        return;
    }
    // Warm every pass up first (allocator, caches, the peer's compiled schemas), so the first
    // benchmark of the run is not the one that pays for it.
    for Set { docs, floor, peer, verdict, .. } in &sets {
        for pass in [validate_all as Pass, validate_and_digest_all, *floor, *peer, *verdict] {
            for _ in 0..20 {
                std::hint::black_box(pass(docs));
            }
        }
    }
    let mut criterion = Criterion::default().configure_from_args();
    for Set { name, docs, floor, peer, verdict } in &sets {
        let mut group = criterion.benchmark_group(*name);
        group.throughput(Throughput::Elements(docs.len() as u64));
        group.bench_function("validate", |b| b.iter(|| validate_all(std::hint::black_box(docs))));
        group.bench_function("validate+digest", |b| b.iter(|| validate_and_digest_all(std::hint::black_box(docs))));
        group.bench_function("floor", |b| b.iter(|| floor(std::hint::black_box(docs))));
        group.bench_function("peer-all-errors", |b| b.iter(|| peer(std::hint::black_box(docs))));
        group.bench_function("peer-verdict-only", |b| b.iter(|| verdict(std::hint::black_box(docs))));
        group.finish();
    }
    criterion.final_summary();

    // The ratios, measured here the same way for every pair of passes: interleaved rounds,
    // median of the per-round ratios.
    println!("\nratios of time per pass (goals: validate/floor at most 3x; validate/peer below 1x):");
    for Set { name, docs, floor, peer, verdict } in &sets {
        let v = median_round(docs, validate_all);
        println!(
            "  {name}: {} documents, validate {:.0} docs/s; validate/floor {:.2}x, validate/peer-all-errors {:.2}x, validate/peer-verdict-only {:.2}x",
            docs.len(),
            docs.len() as f64 / v.as_secs_f64(),
            ratio(docs, validate_all, *floor),
            ratio(docs, validate_all, *peer),
            ratio(docs, validate_all, *verdict),
        );
        let d = median_round(docs, validate_and_digest_all);
        println!(
            "  {name}: validate+digest {:.0} docs/s; validate+digest/floor {:.2}x",
            docs.len() as f64 / d.as_secs_f64(),
            ratio(docs, validate_and_digest_all, *floor),
        );
    }
}

const ROUNDS: usize = 101;

/// The time of one pass over `docs`.
fn time(docs: &[Vec<u8>], pass: Pass) -> Duration {
    let start = Instant::now();
    std::hint::black_box(pass(std::hint::black_box(docs)));
    start.elapsed()
}

/// Median time of one pass over `docs`, over 101 rounds.
fn median_round(docs: &[Vec<u8>], pass: Pass) -> Duration {
    let mut times: Vec<Duration> = (0..ROUNDS).map(|_| time(docs, pass)).collect();
    times.sort();
    times[times.len() / 2]
}

/// Time of pass `a` over time of pass `b`: 101 rounds, each timing `a` and `b` back to back
/// (in alternating order), and the median of the rounds' ratios. A change of load on the
/// machine (another build, frequency scaling) then weighs on both passes alike instead of on
/// whichever ran while it lasted.
fn ratio(docs: &[Vec<u8>], a: Pass, b: Pass) -> f64 {
    let mut ratios: Vec<f64> = (0..ROUNDS)
        .map(|round| {
            let (ta, tb) = if round % 2 == 0 {
                let ta = time(docs, a);
                (ta, time(docs, b))
            } else {
                let tb = time(docs, b);
                (time(docs, a), tb)
            };
            ta.as_secs_f64() / tb.as_secs_f64()
        })
        .collect();
    ratios.sort_by(f64::total_cmp);
    ratios[ratios.len() / 2]
}
