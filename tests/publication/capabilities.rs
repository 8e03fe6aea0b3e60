//! Layer 5, one gate at a time: each fixture in `tests/capabilities/` is refused without its
//! grant (or tier) with exactly the expected diagnostic, and accepted with it. The table in
//! `docs/capabilities.md` lists every capability, and every capability has a fixture.

use std::collections::BTreeSet;

use manifest_core::service::capability::Capability;
use serde_json::{Value, json};
use svc_e2e::service::{Server, TempDir, add_node_image, admin, fixtures, token};
use svc_e2e::workspace;

use super::diagnostics;

fn fixtures_dir() -> std::path::PathBuf {
    workspace().join("tests/capabilities")
}

fn cases() -> Vec<(String, Value)> {
    let mut cases: Vec<(String, Value)> = std::fs::read_dir(fixtures_dir())
        .expect("tests/capabilities")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p| {
            let text = std::fs::read_to_string(&p).expect("fixture");
            (
                p.file_stem().unwrap_or_default().to_string_lossy().into_owned(),
                serde_json::from_str(&text).expect("JSON"),
            )
        })
        .collect();
    cases.sort_by(|a, b| a.0.cmp(&b.0));
    cases
}

/// Evidence every fixture may need: curated artifacts, accepted builds, an image, an SSH key.
fn provide_evidence(dir: &str) {
    let (cid, d) = (fixtures::CID, fixtures::digest);
    admin(&["artifact", "curate", "--data-dir", dir, "--cid", cid, "--digest", &d('b')]);
    admin(&[
        "artifact",
        "curate",
        "--data-dir",
        dir,
        "--cid",
        cid,
        "--digest",
        &d('d'),
        "--kind",
        "runtime_image",
        "--image-digest",
        &d('e'),
    ]);
    let build = [
        "--org",
        "acme",
        "--app",
        "gated",
        "--repository",
        "acme/gated",
        "--ref",
        "refs/heads/main",
        "--workflow-ref",
        "acme/gated/.github/workflows/build.yml@refs/heads/main",
        "--manifest-path",
        "svc.json",
        "--cid",
        cid,
    ];
    let accept = |extra: &[&str]| admin(&[&["artifact", "accept", "--data-dir", dir], &build[..], extra].concat());
    accept(&["--digest", &d('7'), "--kind", "runtime_image", "--image-digest", &d('8')]);
    accept(&["--digest", &d('9'), "--encryption", "aes256_gcm"]);
    accept(&["--digest", &d('a')]);
    add_node_image(dir, "20.1.0", &d('f'));
    admin(&[
        "ssh-key",
        "add",
        "--data-dir",
        dir,
        "--org",
        "acme",
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGated operator@acme",
    ]);
}

/// Grants `gate`'s capability (adding it to `granted`) or sets its tier.
fn grant(dir: &str, gate: &Value, granted: &mut BTreeSet<String>) {
    if let Some(name) = gate["capability"].as_str() {
        admin(&["capability", "grant", "--data-dir", dir, "--org", "acme", name]);
        granted.insert(name.to_owned());
    }
    if let Some(tier) = gate["tier"].as_str() {
        admin(&["entitlement", "set", "--data-dir", dir, "--org", "acme", tier]);
    }
}

#[test]
fn each_gate_is_refused_without_its_grant_and_accepted_with_it() {
    let dir = TempDir::new("gates");
    let t = token(dir.str(), "acme", "developer");
    let server = Server::start(dir.path(), &[]);
    provide_evidence(dir.str());
    let mut failures = Vec::new();
    // What the cases granted so far: the next one revokes them.
    let mut granted = BTreeSet::new();
    for (name, case) in cases() {
        failures.extend(run_case(&server, dir.str(), &t, &name, &case, &mut granted));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn run_case(
    server: &Server,
    dir: &str,
    t: &str,
    name: &str,
    case: &Value,
    granted: &mut BTreeSet<String>,
) -> Vec<String> {
    let mut failures = Vec::new();
    // Each case starts from the basic tier and no grants: the earlier cases' grants revoked
    // (only this test grants on its data directory). Revoking all 20 capabilities before
    // each of 22 cases was 440 `svc admin` processes, most of the test's 30 s on PostgreSQL.
    admin(&["entitlement", "set", "--data-dir", dir, "--org", "acme", "basic"]);
    for c in std::mem::take(granted) {
        admin(&["capability", "revoke", "--data-dir", dir, "--org", "acme", &c]);
    }
    let _ = server.request("POST", "/api/applications", Some(t), Some(&json!({"applicationId": "gated"})));
    for g in case["setup"]["grants"].as_array().into_iter().flatten() {
        grant(dir, &json!({"capability": g}), granted);
    }
    if let Some(tier) = case["setup"]["tier"].as_str() {
        grant(dir, &json!({"tier": tier}), granted);
    }
    let body = json!({"manifest": case["manifest"], "dryRun": true});
    let refused = server.request("POST", "/api/applications/gated/policy-versions", Some(t), Some(&body));
    let expected = vec![(
        case["refused"]["code"].as_str().unwrap_or("").to_owned(),
        case["refused"]["pointer"].as_str().unwrap_or("").to_owned(),
    )];
    if refused.status != 422 || diagnostics(&refused.json()) != expected {
        failures.push(format!(
            "{name}: without the grant expected 422 {expected:?}, got {} {}",
            refused.status,
            String::from_utf8_lossy(&refused.body)
        ));
    }
    if refused.json()["error"]["diagnostics"][0]["layer"] != 5 {
        failures.push(format!("{name}: the refusal is not layer 5"));
    }
    grant(dir, &case["gate"], granted);
    let accepted = server.request("POST", "/api/applications/gated/policy-versions", Some(t), Some(&body));
    if accepted.status != 200 {
        failures.push(format!(
            "{name}: with the grant expected 200, got {} {}",
            accepted.status,
            String::from_utf8_lossy(&accepted.body)
        ));
    }
    failures
}

#[test]
fn every_capability_has_a_fixture_and_a_row_in_the_docs() {
    let doc = std::fs::read_to_string(workspace().join("docs/capabilities.md")).expect("docs/capabilities.md");
    let rows: BTreeSet<&str> = doc
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split_once('`').map(|(name, _)| name))
        .collect();
    let gated: BTreeSet<String> =
        cases().iter().filter_map(|(_, c)| c["gate"]["capability"].as_str().map(str::to_owned)).collect();
    for c in Capability::ALL {
        assert!(rows.contains(c.name()), "docs/capabilities.md has no row for `{}`", c.name());
        // `once_rearm` needs a settled application: `semantics::a_settled_once_application_...` covers it.
        if *c != Capability::OnceRearm {
            assert!(gated.contains(c.name()), "tests/capabilities has no fixture for `{}`", c.name());
        }
    }
    let known: BTreeSet<&str> = Capability::ALL.iter().map(|c| c.name()).collect();
    for row in rows.iter().filter(|r| !r.contains(' ') && !r.starts_with("tier")) {
        assert!(known.contains(row), "docs/capabilities.md lists `{row}`, which is not a capability");
    }
}
