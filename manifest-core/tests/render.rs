//! Snapshots of `svc manifest validate`'s text output (`render_text`): what a person reads,
//! every diagnostic with its source line and carets, then the verdict and the digest.
//!
//! Each document in `tests/render/` gives one snapshot in `tests/snapshots/`, named after the
//! file. A changed wording or layout fails here until the snapshot is reviewed and updated:
//! `INSTA_UPDATE=always cargo test -p manifest-core --test render`, then read the diff.

use std::path::Path;

use manifest_core::{render_text, validate};

/// The text `svc manifest validate --file NAME` prints for the fixture `NAME`.
fn rendered(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/render").join(name);
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    render_text(&validate(&bytes), name, &bytes)
}

/// Every fixture, one snapshot each; the fixture's own name is the name shown in the output.
#[test]
fn every_fixture_renders_as_its_snapshot() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/render");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .expect("tests/render")
        .map(|entry| entry.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert!(names.len() >= 8, "fixtures: {names:?}");
    for name in names {
        // The snapshot's header names the fixture it was made from.
        insta::with_settings!({ input_file => dir.join(&name), omit_expression => true }, {
            insta::assert_snapshot!(name.as_str(), rendered(&name));
        });
    }
}

/// Past 1,000 problems: the last one listed, the `diagnostics_truncated` entry (no line, so no
/// source shown) and the verdict counting what was not shown.
#[test]
fn a_truncated_report_ends_with_what_was_not_shown() {
    let mut doc = String::from("schema: svc.application-manifest\nschemaVersion: 5\n");
    for i in 0..1_200 {
        doc.push_str(&format!("x{i}: 1\n"));
    }
    let text = render_text(&validate(doc.as_bytes()), "many.yaml", doc.as_bytes());
    let lines: Vec<&str> = text.lines().collect();
    let tail = lines[lines.len().saturating_sub(13)..].join("\n");
    insta::assert_snapshot!(tail);
}

/// A source given on standard input is called `<stdin>`; a valid V4 document says its version.
#[test]
fn standard_input_and_a_valid_v4_document() {
    let bytes = std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/node-demo/manifest.v4.json"))
        .expect("the demo's V4 manifest");
    insta::assert_snapshot!(render_text(&validate(&bytes), "<stdin>", &bytes));
}
