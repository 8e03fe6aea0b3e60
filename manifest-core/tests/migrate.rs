//! `manifest_core::migrate` over every valid V4 document of the conformance corpus
//! (`tests/corpus/v4`, issue 21 point 1): each migrates to a V5 document that validates, as
//! JSON and as the YAML `svc manifest migrate` writes, or names the fields that block it; and
//! every note points at a field the V4 document has.

use std::path::PathBuf;

use manifest_core::migrate::{NoteKind, Options, migrate_v4};
use serde_json::Value;

fn corpus() -> Vec<(String, Value)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/corpus/v4");
    let mut valid = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("the V4 corpus") {
        let path = entry.expect("an entry").path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_owned();
        if !name.ends_with(".json") || name.ends_with(".expect.json") {
            continue;
        }
        let expect: Value =
            serde_json::from_slice(&std::fs::read(path.with_extension("expect.json")).expect("its expectation"))
                .expect("JSON");
        if expect["valid"] != true {
            continue;
        }
        let bytes = std::fs::read(&path).expect("read");
        assert!(manifest_core::validate(&bytes).is_valid(), "{name} is listed as valid");
        valid.push((name, serde_json::from_slice(&bytes).expect("a valid V4 document is JSON")));
    }
    valid.sort_by(|a, b| a.0.cmp(&b.0));
    valid
}

fn check(options: &Options) -> (usize, usize) {
    let (mut migrated, mut blocked) = (0, 0);
    for (name, v4) in corpus() {
        let migration = migrate_v4(&v4, options);
        for note in &migration.notes {
            assert!(
                v4.pointer(&note.pointer).is_some(),
                "{name}: a note at {} that the V4 document lacks",
                note.pointer
            );
            assert!(!note.why.is_empty() && !note.fix.is_empty(), "{name}: {note:?}");
        }
        match &migration.manifest {
            Some(v5) => {
                assert!(!migration.is_blocked());
                let json = serde_json::to_vec(v5).expect("JSON");
                let report = manifest_core::validate(&json);
                assert!(report.is_valid(), "{name}: the V5 JSON does not validate: {:?}\n{v5:#}", report.diagnostics);
                let yaml = manifest_core::emit::to_yaml(v5, manifest_core::emit::V5_KEY_ORDER);
                let report = manifest_core::validate(yaml.as_bytes());
                assert!(report.is_valid(), "{name}: the V5 YAML does not validate: {:?}\n{yaml}", report.diagnostics);
                migrated += 1;
            }
            None => {
                assert!(migration.notes.iter().any(|n| n.kind == NoteKind::Blocking), "{name}: blocked by nothing");
                blocked += 1;
            }
        }
    }
    (migrated, blocked)
}

#[test]
fn every_valid_v4_document_migrates_to_a_valid_v5_one_or_names_what_blocks_it() {
    let (migrated, blocked) = check(&Options::default());
    println!("without options: {migrated} migrated, {blocked} blocked");
    assert!(migrated + blocked > 50, "the corpus was read");
    // With the two values V4 may not state (the entrypoint file, the spend per job), most
    // documents migrate: what blocks the rest has no V5 form.
    let options = Options { entrypoint: Some("server.js".into()), per_job: Some(1_000_000) };
    let (migrated, blocked) = check(&options);
    println!("with --entrypoint and --per-job: {migrated} migrated, {blocked} blocked");
    assert!(migrated > blocked, "{migrated} migrated, {blocked} blocked");
}
