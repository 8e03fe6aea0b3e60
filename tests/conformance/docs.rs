//! `docs/diagnostics.md` lists exactly the codes the validator has.

use std::collections::BTreeSet;

use manifest_core::Code;
use svc_e2e::workspace;

#[test]
fn diagnostics_md_lists_every_code_and_only_those() {
    let text = std::fs::read_to_string(workspace().join("docs/diagnostics.md")).expect("docs/diagnostics.md");
    let listed: BTreeSet<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split_once('`').map(|(code, _)| code))
        .filter(|c| c.chars().all(|ch| ch.is_ascii_lowercase() || ch == '_' || ch.is_ascii_digit()))
        .collect();
    let known: BTreeSet<&str> = Code::ALL.iter().map(|c| c.as_str()).collect();
    let missing: Vec<_> = known.difference(&listed).collect();
    let stale: Vec<_> = listed
        .difference(&known)
        .filter(|c| !["severity", "code", "pointer", "message", "layer", "line"].contains(c))
        .collect();
    assert!(missing.is_empty(), "codes missing from docs/diagnostics.md: {missing:?}");
    assert!(stale.is_empty(), "docs/diagnostics.md lists codes the validator does not have: {stale:?}");
}
