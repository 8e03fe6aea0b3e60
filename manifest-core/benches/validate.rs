//! Validation speed against the floor of merely parsing the same bytes, in one run.
//!
//! For each syntax, over every document of the conformance corpus and the golden files:
//! - `validate`: `manifest_core::validate` (read, layer 1 with defaults, layer 2, digest,
//!   diagnostics placed in the source);
//! - `floor`: parsing the same bytes into a `serde_json::Value` (JSON) or reading all YAML
//!   events with `saphyr-parser` (YAML).
//!
//! Run with `cargo bench -p manifest-core --bench validate`; the ratio `validate / floor`
//! (goal: at most 3) is printed at the end.

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

type Pass = fn(&[Vec<u8>]) -> usize;

fn main() {
    let sets: [(&str, Vec<Vec<u8>>, Pass); 2] =
        [("json", documents(".json"), floor_json), ("yaml", documents(".yaml"), floor_yaml)];
    let mut criterion = Criterion::default().configure_from_args();
    for (name, docs, floor) in &sets {
        let mut group = criterion.benchmark_group(*name);
        group.throughput(Throughput::Elements(docs.len() as u64));
        group.bench_function("validate", |b| b.iter(|| validate_all(std::hint::black_box(docs))));
        group.bench_function("floor", |b| b.iter(|| floor(std::hint::black_box(docs))));
        group.finish();
    }
    criterion.final_summary();

    // The ratio, measured here the same way for both passes: interleaved rounds, median.
    println!("\nvalidate / floor (goal: at most 3x):");
    for (name, docs, floor) in &sets {
        let (v, f) = (median_round(docs, validate_all), median_round(docs, *floor));
        let per_sec = |t: Duration| docs.len() as f64 / t.as_secs_f64();
        println!(
            "  {name}: {} documents; validate {:.0} docs/s, floor {:.0} docs/s, ratio {:.2}x",
            docs.len(),
            per_sec(v),
            per_sec(f),
            v.as_secs_f64() / f.as_secs_f64()
        );
    }
}

/// Median time of one pass over `docs`, over 31 rounds.
fn median_round(docs: &[Vec<u8>], pass: Pass) -> Duration {
    let mut times: Vec<Duration> = (0..31)
        .map(|_| {
            let start = Instant::now();
            std::hint::black_box(pass(std::hint::black_box(docs)));
            start.elapsed()
        })
        .collect();
    times.sort();
    times[times.len() / 2]
}
