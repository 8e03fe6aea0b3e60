//! Golden files: the fully defaulted model of a minimal and a full V4 and V5 document.
//! Regenerate with `UPDATE_GOLDEN=1 cargo test -p svc-e2e golden` and review the diff.

use svc_e2e::workspace;

fn check(input: &str) {
    let dir = workspace().join("tests/golden");
    let bytes = std::fs::read(dir.join(input)).expect("golden input");
    let report = manifest_core::validate(&bytes);
    assert!(report.is_valid(), "{input}: {:?}", report.diagnostics);
    let manifest = report.manifest().expect("a valid document has a model");
    let model = serde_json::to_string_pretty(&manifest).expect("model serializes") + "\n";
    let stem = input.rsplit_once('.').map_or(input, |(s, _)| s);
    let golden = dir.join(format!("{stem}.model.json"));
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&golden, &model).expect("write golden");
    }
    let want = std::fs::read_to_string(&golden)
        .unwrap_or_else(|e| panic!("{}: {e} (run with UPDATE_GOLDEN=1)", golden.display()));
    assert_eq!(model, want, "{input}: the defaulted model changed; review and regenerate with UPDATE_GOLDEN=1");
}

#[test]
fn v4_minimal() {
    check("v4-minimal.json");
}

#[test]
fn v4_full() {
    check("v4-full.json");
}

#[test]
fn v5_minimal() {
    check("v5-minimal.yaml");
}

#[test]
fn v5_full() {
    check("v5-full.yaml");
}

/// The model round-trips through its own JSON: every defaulted field is written out, so a
/// model read back from its JSON is the same model.
#[test]
fn defaulted_model_validates_to_itself() {
    for input in ["v4-minimal.json", "v4-full.json", "v5-minimal.yaml", "v5-full.yaml"] {
        let bytes = std::fs::read(workspace().join("tests/golden").join(input)).expect("golden input");
        let first = manifest_core::validate(&bytes).manifest().expect("valid");
        let json = serde_json::to_vec(&first).expect("serializes");
        let again = manifest_core::validate(&json);
        assert!(again.diagnostics.iter().all(|d| !d.is_error()), "{input}: {:?}", again.diagnostics);
        assert_eq!(again.manifest().ok(), Some(first), "{input}");
    }
}
