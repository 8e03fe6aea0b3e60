//! Replays the committed `relay_api_bodies` fuzz corpus (`fuzz/corpus/relay_api_bodies/`)
//! through the property the fuzz target checks, so anything fuzzing found stays fixed without
//! libFuzzer or nightly.

#[test]
fn relay_api_bodies_corpus() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/relay_api_bodies");
    let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let mut replayed = 0;
    for entry in entries.flatten() {
        // A running fuzzer may remove an entry while this reads the folder.
        let Ok(bytes) = std::fs::read(entry.path()) else { continue };
        relay_api::invariants::api_bodies(&bytes);
        replayed += 1;
    }
    assert!(replayed > 0, "{} is empty", dir.display());
}
