//! Every report of the corpus, byte for byte: for each document of the conformance corpus
//! (`tests/corpus/v4`, `tests/corpus/v5`), the golden files and the render fixtures, the
//! verdict, version, omitted count, authored digest, every field of every diagnostic (message,
//! line, column, span, suggestion) and a digest of the whole defaulted tree (keys, values,
//! spans, which members are defaults). The conformance harness checks codes and pointers
//! only; this snapshot is what keeps speed work on the reader and layer 1 from changing any
//! answer. A change fails here until the snapshot is reviewed:
//! `INSTA_UPDATE=always cargo test -p manifest-core --test corpus_reports`, then read the diff.

use std::fmt::Write;
use std::path::{Path, PathBuf};

use manifest_core::{sha256, validate};

fn documents() -> Vec<(String, Vec<u8>)> {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = crate_dir.join("..");
    // Each directory with the name its documents are shown under.
    let dirs = [
        ("tests/corpus/v4", root.join("tests/corpus/v4")),
        ("tests/corpus/v5", root.join("tests/corpus/v5")),
        ("tests/golden", root.join("tests/golden")),
        ("manifest-core/tests/render", crate_dir.join("tests/render")),
    ];
    let mut found: Vec<(String, PathBuf)> = Vec::new();
    for (label, dir) in &dirs {
        let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        for entry in entries {
            let path = entry.expect("directory entry").path();
            let file = path.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
            let document = (file.ends_with(".json") || file.ends_with(".yaml"))
                && !file.ends_with(".expect.json")
                && !file.ends_with(".model.json");
            if document {
                found.push((format!("{label}/{file}"), path));
            }
        }
    }
    found.sort();
    found
        .into_iter()
        .map(|(name, path)| {
            let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            (name, bytes)
        })
        .collect()
}

/// One document's report as text: a header line, then one line per diagnostic.
fn report(name: &str, bytes: &[u8]) -> String {
    let r = validate(bytes);
    let tree = r.document.as_ref().map(|d| sha256(format!("{d:?}").as_bytes()));
    let mut out = format!(
        "{name}: format {:?}, version {:?}, valid {}, omitted {}, digest {}, tree {}\n",
        r.format,
        r.schema_version,
        r.is_valid(),
        r.omitted(),
        r.authored_digest().as_deref().unwrap_or("-"),
        tree.as_deref().unwrap_or("-"),
    );
    for d in &r.diagnostics {
        let _ = writeln!(
            out,
            "  {} {} {} {:?} {:?} {:?} {:?}: {}",
            d.severity.as_str(),
            d.code.as_str(),
            d.layer.number(),
            d.pointer,
            (d.line, d.column),
            d.span.map(|s| (s.start, s.end)),
            d.suggestion,
            d.message,
        );
    }
    out
}

#[test]
fn every_report_of_the_corpus_is_unchanged() {
    let docs = documents();
    assert!(docs.len() > 600, "found {} documents", docs.len());
    let text: String = docs.iter().map(|(name, bytes)| report(name, bytes)).collect();
    insta::assert_snapshot!(text);
}
