//! Arrows one way (issue 43): the workspace's internal dependencies, as `cargo metadata` reads
//! them from every Cargo.toml (normal dependencies only: a test may run any crate), are
//! exactly the arrows `docs/architecture.md` allows, in the ```text block under its heading
//! "The arrows, exactly". A crate that gains an internal dependency the list does not allow
//! fails here, naming the edge; so does an arrow the list keeps after Cargo.toml dropped it,
//! so the picture never drifts from the code.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

/// The heading the allowed list sits under.
const HEADING: &str = "### The arrows, exactly";

/// Each workspace crate and the internal crates it depends on.
type Edges = BTreeMap<String, BTreeSet<String>>;

/// The internal normal dependencies of every workspace member, from `cargo metadata`.
fn actual() -> Edges {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let output = Command::new(&cargo)
        .args(["metadata", "--format-version", "1", "--no-deps", "--offline"])
        .current_dir(svc_e2e::workspace())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cargo} metadata: {e}"));
    assert!(output.status.success(), "cargo metadata failed: {}", String::from_utf8_lossy(&output.stderr));
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout).expect("cargo metadata prints JSON");
    let packages = metadata["packages"].as_array().expect("cargo metadata lists packages");
    let members: BTreeSet<String> = packages.iter().filter_map(|p| p["name"].as_str()).map(str::to_owned).collect();
    packages
        .iter()
        .map(|package| {
            let name = package["name"].as_str().expect("a package has a name").to_owned();
            let internal = package["dependencies"]
                .as_array()
                .into_iter()
                .flatten()
                // `kind` is null for [dependencies] (target-specific ones included), "dev" or "build" otherwise.
                .filter(|d| d["kind"].is_null() && d["path"].is_string())
                .filter_map(|d| d["name"].as_str())
                .filter(|d| members.contains(*d))
                .map(str::to_owned)
                .collect();
            (name, internal)
        })
        .collect()
}

/// The allowed list: `crate -> dependency, dependency` (nothing after `->`: no internal
/// dependency), one line per workspace crate.
fn allowed(document: &str) -> Result<Edges, String> {
    let after = document.split_once(HEADING).map(|(_, rest)| rest).ok_or(format!("no heading {HEADING:?}"))?;
    let block = after
        .split_once("```text\n")
        .and_then(|(_, rest)| rest.split_once("\n```"))
        .map(|(block, _)| block)
        .ok_or(format!("no ```text block under {HEADING:?}"))?;
    let mut edges = Edges::new();
    for (n, line) in block.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let (from, to) = line.split_once("->").ok_or(format!("line {} of the list has no `->`: {line:?}", n + 1))?;
        let to = to.split(',').map(str::trim).filter(|d| !d.is_empty()).map(str::to_owned).collect();
        if edges.insert(from.trim().to_owned(), to).is_some() {
            return Err(format!("{} is listed twice", from.trim()));
        }
    }
    Ok(edges)
}

/// Every difference between the dependencies and the list, one sentence each.
fn differences(actual: &Edges, allowed: &Edges) -> Vec<String> {
    let mut found = Vec::new();
    for (krate, deps) in actual {
        let Some(listed) = allowed.get(krate) else {
            found.push(format!("{krate} is a workspace crate the list does not name (add `{krate} -> ...`)"));
            continue;
        };
        for dep in deps.difference(listed) {
            found.push(format!("{krate} -> {dep}: Cargo.toml has this dependency, the allowed list forbids it"));
        }
        for dep in listed.difference(deps) {
            found.push(format!("{krate} -> {dep}: listed, but Cargo.toml has no such dependency (update the picture)"));
        }
    }
    for krate in allowed.keys().filter(|k| !actual.contains_key(*k)) {
        found.push(format!("{krate} is listed but is no workspace crate"));
    }
    found
}

#[test]
fn internal_dependencies_are_the_arrows_docs_architecture_allows() {
    let path = svc_e2e::workspace().join("docs/architecture.md");
    let document = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let allowed = allowed(&document).unwrap_or_else(|e| panic!("docs/architecture.md: {e}"));
    let found = differences(&actual(), &allowed);
    assert!(found.is_empty(), "docs/architecture.md, \"{HEADING}\":\n  {}", found.join("\n  "));
}

#[test]
fn a_forbidden_or_stale_arrow_is_named() {
    let allowed = allowed(&format!("{HEADING}\n\n```text\na -> b\nb ->\n```\n")).expect("a list");
    let actual: Edges = [("a", vec!["b", "c"]), ("b", vec![]), ("c", vec![])]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.into_iter().map(str::to_owned).collect()))
        .collect();
    assert_eq!(
        differences(&actual, &allowed),
        [
            "a -> c: Cargo.toml has this dependency, the allowed list forbids it",
            "c is a workspace crate the list does not name (add `c -> ...`)"
        ]
    );
    let stale: Edges = [("a", vec![]), ("b", vec![])]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.into_iter().map(str::to_owned).collect()))
        .collect();
    assert_eq!(
        differences(&stale, &allowed),
        ["a -> b: listed, but Cargo.toml has no such dependency (update the picture)"]
    );
}
