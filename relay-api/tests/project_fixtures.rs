//! The project file fixtures: each `tests/project/<case>.json` beside `<case>.expected`,
//! which lists the expected diagnostics in document order, `<pointer> <code>` one per line,
//! or `ok` followed by one `unsupported <pointer> <feature>` line per unsupported feature.
//!
//! Each verdict is also checked against the generated JSON Schema with an independent
//! validator (`jsonschema`): a valid case must pass it; a case whose every error is a shape
//! rule must fail it, except the few [`VALIDATOR_ONLY`] lists with the reason. Parse-level and
//! cross-field problems are the validator's alone.
//!
//! `SVC_PROJECT_EXPORT=DIR cargo test -p relay-api --test project_fixtures export` writes the
//! schema and the fixtures for `.ci/run`'s Ajv check.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use manifest_core::Code;
use relay_api::project::{self, Project};
use serde_json::json;

/// Shape faults the schema cannot state, with why.
const VALIDATOR_ONLY: &[(&str, &str)] = &[
    ("app-port-float", "JSON Schema's `integer` accepts 8080.0; the validator requires an integer literal"),
    ("hostnames-localhost", "a regex without lookaround cannot refuse the `.localhost` suffix"),
    ("access-host-bits", "a regex does not do the arithmetic of a prefix's host bits"),
];

struct Case {
    name: String,
    text: String,
    expected: Vec<String>,
}

impl Case {
    /// Whether the expected outcome is `ok`.
    fn valid(&self) -> bool {
        self.expected.first().is_some_and(|l| l == "ok")
    }

    /// Whether every expected diagnostic is one a JSON Schema can express, so the generated
    /// schema must refuse the document too.
    fn shape_only(&self) -> bool {
        !self.valid()
            && self
                .expected
                .iter()
                .all(|l| l.rsplit_once(' ').is_some_and(|(_, code)| Code::is_schema_expressible(code)))
    }
}

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/project")
}

fn cases() -> Vec<Case> {
    let mut names: Vec<String> = std::fs::read_dir(dir())
        .expect("tests/project")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter_map(|f| f.strip_suffix(".json").map(str::to_owned))
        .collect();
    names.sort();
    names
        .into_iter()
        .map(|name| {
            let text = std::fs::read_to_string(dir().join(format!("{name}.json"))).expect("case");
            let expected = std::fs::read_to_string(dir().join(format!("{name}.expected")))
                .unwrap_or_else(|_| panic!("{name}.expected is missing"));
            let expected = expected.lines().map(str::trim).filter(|l| !l.is_empty()).map(str::to_owned).collect();
            Case { name, text, expected }
        })
        .collect()
}

/// The verdict in the `.expected` format.
fn verdict(result: &Result<Project, project::ProjectErrors>) -> Vec<String> {
    match result {
        Ok(p) => std::iter::once("ok".to_owned())
            .chain(p.unsupported().iter().map(|u| format!("unsupported {} {}", u.pointer(), u.as_str())))
            .collect(),
        Err(e) => e.diagnostics.iter().map(|d| format!("{} {}", d.pointer, d.code.as_str())).collect(),
    }
}

fn schema() -> jsonschema::Validator {
    let schema: serde_json::Value = serde_json::from_str(project::schema()).expect("the schema is JSON");
    jsonschema::draft202012::new(&schema).expect("the schema compiles")
}

#[test]
fn every_fixture_gets_its_expected_verdict() {
    let cases = cases();
    assert!(cases.len() >= 20, "only {} cases", cases.len());
    let mut failures = Vec::new();
    for case in &cases {
        let result = project::read(&case.text);
        let got = verdict(&result);
        if got != case.expected {
            failures.push(format!("{}: expected {:?}, got {:?}", case.name, case.expected, got));
        }
        match &result {
            Err(e) => {
                for d in &e.diagnostics {
                    assert!(d.line.is_some() && d.column.is_some(), "{}: {} has no position", case.name, d.pointer);
                    assert!(!d.message.is_empty(), "{}: {} has no message", case.name, d.pointer);
                }
            }
            // A well-formed, supported project without its own manifest derives a valid one.
            Ok(p) if p.unsupported().is_empty() && p.manifest.is_none() => {
                let manifest = p.manifest_v5(None).unwrap_or_else(|e| panic!("{}: {e}", case.name));
                let text = manifest.to_string();
                let report = manifest_core::validate(text.as_bytes());
                assert!(report.is_valid(), "{}: {:?}", case.name, report.diagnostics);
            }
            Ok(_) => {}
        }
    }
    assert!(failures.is_empty(), "{} fixture(s) differ:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn the_schema_agrees_with_every_verdict_it_can_express() {
    let validator = schema();
    let mut failures = Vec::new();
    let mut used = Vec::new();
    let (mut accepted, mut refused) = (0, 0);
    for case in cases() {
        // A text serde_json cannot read is the strict reader's alone (a duplicate key serde_json
        // reads, keeping the last, but its code is no shape code, so it is not compared).
        let Ok(document) = serde_json::from_str::<serde_json::Value>(&case.text) else { continue };
        let (valid, shape_only) = (case.valid(), case.shape_only());
        let passes = validator.is_valid(&document);
        let listed = VALIDATOR_ONLY.iter().find(|(n, _)| *n == case.name);
        if valid {
            accepted += 1;
            if !passes {
                let errors: Vec<String> = validator.iter_errors(&document).map(|e| e.to_string()).collect();
                failures.push(format!("{}: valid, but the schema refuses it: {errors:?}", case.name));
            }
        } else if shape_only {
            match (passes, listed) {
                (false, None) => refused += 1,
                (false, Some(_)) => {
                    failures.push(format!("{}: listed as validator-only, but the schema refuses it", case.name))
                }
                (true, Some(_)) => used.push(case.name.clone()),
                (true, None) => failures.push(format!("{}: a shape fault the schema accepts", case.name)),
            }
        }
    }
    for (name, _) in VALIDATOR_ONLY {
        if !used.iter().any(|u| u == name) && !failures.iter().any(|f| f.starts_with(name)) {
            failures.push(format!("{name}: listed as validator-only but not a fixture any more"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(accepted >= 5 && refused >= 20, "accepted {accepted}, refused {refused}");
}

#[test]
fn misspelt_fields_are_suggested() {
    let text = std::fs::read_to_string(dir().join("unknown-field-suggestion.json")).expect("case");
    let errors = project::read(&text).expect_err("invalid");
    assert_eq!(errors.diagnostics[0].message, "unknown field \"proxyProtocl\"; did you mean \"proxyProtocol\"?");
}

#[test]
fn the_node_demo_project_is_valid_and_deployable() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/node-demo").join(project::FILE_NAME);
    let text = std::fs::read_to_string(&path).expect("examples/node-demo/ingress.json");
    let p = project::read(&text).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((p.name.as_str(), p.runtime, p.kind), ("node-demo", project::Runtime::Node, project::Kind::WebService));
    assert_eq!((p.app.dir.as_str(), p.app.entrypoint.as_str(), p.app.port), (".", "server.js", 8080));
    assert_eq!(p.app.health_path, "/health");
    assert!(p.proxy_protocol);
    assert_eq!(p.spend.fund_periods, 1);
    assert!(p.unsupported().is_empty());
    // The entry point it names is the demo's.
    assert!(path.parent().expect("dir").join(&p.app.dir).join(&p.app.entrypoint).is_file());
    let manifest = p.manifest_v5(None).expect("derived");
    let manifest_text = manifest.to_string();
    assert!(manifest_core::validate(manifest_text.as_bytes()).is_valid());
    let document: serde_json::Value = serde_json::from_str(&text).expect("json");
    assert!(schema().is_valid(&document), "the schema accepts the demo's project");
}

/// The schema and the fixtures (name, verdict, whether the fault is shape-only or
/// validator-only, the document) that `.ci/run`'s Ajv check reads, checked for what that
/// check needs: the 2020-12 dialect Ajv2020 compiles, every fixture serde_json reads (those
/// it cannot are faults of the strict reader, where a schema has nothing to say), and every
/// [`VALIDATOR_ONLY`] name among the shape-only faults, where the check looks for it.
/// Written to the folder `SVC_PROJECT_EXPORT` names, and read back.
#[test]
fn export() {
    let schema_text = project::schema();
    let schema: serde_json::Value = serde_json::from_str(schema_text).expect("the schema is JSON");
    assert_eq!(schema["$schema"], "https://json-schema.org/draft/2020-12/schema", "the dialect Ajv2020 compiles");
    let listed: BTreeMap<&str, &str> = VALIDATOR_ONLY.iter().copied().collect();
    let cases = cases();
    let mut exported = Vec::new();
    for case in &cases {
        let Ok(document) = serde_json::from_str::<serde_json::Value>(&case.text) else {
            assert!(!case.valid(), "{}: valid, yet left out of the export: serde_json cannot read it", case.name);
            continue;
        };
        exported.push(json!({
            "name": case.name,
            "valid": case.valid(),
            "shapeOnly": case.shape_only(),
            "validatorOnly": listed.get(case.name.as_str()),
            "document": document,
        }));
    }
    let valid = exported.iter().filter(|l| l["valid"] == true).count();
    let refused = exported.iter().filter(|l| l["shapeOnly"] == true && l["validatorOnly"].is_null()).count();
    assert!(valid >= 5 && refused >= 20, "{valid} valid, {refused} shape faults the schema must refuse");
    for (name, _) in VALIDATOR_ONLY {
        let line = exported.iter().find(|l| l["name"] == *name);
        assert!(
            line.is_some_and(|l| l["shapeOnly"] == true && l["validatorOnly"].is_string()),
            "{name}: listed as validator-only, so exported as a shape-only fault marked so: {line:?}"
        );
    }
    let lines: String = exported.iter().map(|line| format!("{line}\n")).collect();
    let Some(out) = std::env::var_os("SVC_PROJECT_EXPORT").map(PathBuf::from) else { return };
    std::fs::create_dir_all(&out).expect("export folder");
    let (schema_file, lines_file) = (out.join("ingress-project.schema.json"), out.join("project.jsonl"));
    std::fs::write(&schema_file, schema_text).expect("write schema");
    std::fs::write(&lines_file, &lines).expect("write fixtures");
    assert_eq!(std::fs::read_to_string(&schema_file).expect("read back"), schema_text);
    assert_eq!(std::fs::read_to_string(&lines_file).expect("read back"), lines);
}
