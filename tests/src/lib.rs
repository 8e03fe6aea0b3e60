//! Shared helpers for the cross-crate tests: the conformance corpus in `tests/corpus/` (one
//! case per file, its expected outcome in `<case>.expect.json` beside it) and paths in the
//! workspace.

#![forbid(unsafe_code)]

pub mod flood;
pub mod path_ids;
pub mod service;

use std::path::{Path, PathBuf};

use serde_json::Value;

/// The workspace root.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().map_or_else(|| PathBuf::from(".."), Path::to_path_buf)
}

/// One expected diagnostic: what the corpus pins down (the message is free to improve).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Expected {
    /// `error` or `warning`.
    pub severity: String,
    /// Stable code.
    pub code: String,
    /// RFC 6901 pointer.
    pub pointer: String,
    /// Layer number.
    pub layer: u64,
}

/// One corpus case.
#[derive(Debug, Clone)]
pub struct Case {
    /// The document's path.
    pub path: PathBuf,
    /// Its bytes.
    pub bytes: Vec<u8>,
    /// The expectation file, parsed.
    pub expect: Value,
}

impl Case {
    /// The case's name relative to the corpus (`v5/labels-too-many.yaml`).
    pub fn name(&self) -> String {
        let root = workspace().join("tests/corpus");
        self.path.strip_prefix(&root).unwrap_or(&self.path).display().to_string()
    }

    /// Whether the case is expected to be valid.
    pub fn valid(&self) -> bool {
        self.expect["valid"].as_bool().unwrap_or(false)
    }

    /// The expected diagnostics, sorted.
    pub fn expected(&self) -> Vec<Expected> {
        let mut list: Vec<Expected> =
            self.expect["diagnostics"].as_array().map(|a| a.iter().map(expected_from).collect()).unwrap_or_default();
        list.sort();
        list
    }

    /// Row ids this case covers.
    pub fn rows(&self) -> Vec<String> {
        self.expect["rows"]
            .as_array()
            .map(|a| a.iter().filter_map(|r| r.as_str().map(str::to_owned)).collect())
            .unwrap_or_default()
    }
}

/// Reads an expected diagnostic from JSON (also used on the CLI's JSON output).
pub fn expected_from(v: &Value) -> Expected {
    Expected {
        severity: v["severity"].as_str().unwrap_or("error").to_owned(),
        code: v["code"].as_str().unwrap_or_default().to_owned(),
        pointer: v["pointer"].as_str().unwrap_or_default().to_owned(),
        layer: v["layer"].as_u64().unwrap_or(0),
    }
}

/// What a report says, in the corpus's terms, sorted.
pub fn actual(report: &manifest_core::Report) -> Vec<Expected> {
    let mut list: Vec<Expected> = report
        .diagnostics
        .iter()
        .map(|d| Expected {
            severity: d.severity.as_str().to_owned(),
            code: d.code.as_str().to_owned(),
            pointer: d.pointer.clone(),
            layer: u64::from(d.layer.number()),
        })
        .collect();
    list.sort();
    list
}

/// Every case of the corpus, in path order.
pub fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    for version in ["v4", "v5"] {
        let dir = workspace().join("tests/corpus").join(version);
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
        paths.sort();
        for path in paths {
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            if name.ends_with(".expect.json") || !(name.ends_with(".json") || name.ends_with(".yaml")) {
                continue;
            }
            let stem = name.rsplit_once('.').map_or(name, |(s, _)| s);
            let expect_path = path.with_file_name(format!("{stem}.expect.json"));
            let expect = std::fs::read_to_string(&expect_path)
                .ok()
                .and_then(|t| serde_json::from_str(&t).ok())
                .unwrap_or_else(|| panic!("{} has no readable {}", path.display(), expect_path.display()));
            let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            out.push(Case { path, bytes, expect });
        }
    }
    out
}

/// The corpus's row registry (`tests/corpus/rows.json`).
pub fn rows() -> Vec<Value> {
    let path = workspace().join("tests/corpus/rows.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str::<Value>(&text).ok().and_then(|v| v.as_array().cloned()).expect("rows.json is an array")
}
