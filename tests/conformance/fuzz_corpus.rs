//! Replays the committed fuzz corpora (`fuzz/corpus/<target>/`) through the same invariants the
//! fuzz targets check, so anything fuzzing found stays fixed without libFuzzer or nightly.

use manifest_core::invariants;
use svc_e2e::workspace;

fn replay(target: &str, check: fn(&[u8])) -> usize {
    let dir = workspace().join("fuzz/corpus").join(target);
    let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let mut count = 0;
    for entry in entries.flatten() {
        // A running fuzzer may remove an entry while this reads the folder.
        let Ok(bytes) = std::fs::read(entry.path()) else { continue };
        check(&bytes);
        count += 1;
    }
    count
}

#[test]
fn json_differential_corpus() {
    assert!(replay("json_differential", invariants::json_agrees_with_serde) > 0);
}

#[test]
fn yaml_reader_corpus() {
    assert!(replay("yaml_reader", invariants::yaml_reads_safely) > 0);
}

#[test]
fn validate_corpus() {
    assert!(replay("validate", invariants::validation_is_consistent) > 0);
}
