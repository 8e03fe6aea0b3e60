//! Replays the committed `tunnel_wire` fuzz corpus (`fuzz/corpus/tunnel_wire/`) through the
//! property the fuzz target checks, so anything fuzzing found stays fixed without libFuzzer or
//! nightly.

#[test]
fn tunnel_wire_corpus() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/tunnel_wire");
    let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let mut replayed = 0;
    for entry in entries.flatten() {
        // A running fuzzer may remove an entry while this reads the folder.
        let Ok(bytes) = std::fs::read(entry.path()) else { continue };
        agent::invariants::tunnel_wire(&bytes);
        replayed += 1;
    }
    assert!(replayed > 0, "{} is empty", dir.display());
}
