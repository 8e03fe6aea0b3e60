//! Writes what the independent JSON Schema check (`tests/ajv/check.mjs`) needs, to a folder:
//! the three generated schemas, exactly as served, and `corpus.jsonl`, one line per corpus
//! document that reads as a JSON object: its name, version, verdict, whether its fault is
//! shape-only (so a schema must refuse it), and the document as plain JSON.
//!
//! `cargo run -p svc-e2e --bin corpus-export -- DIR`

use std::io::Write;
use std::path::PathBuf;

use manifest_core::{Code, SchemaKind};
use serde_json::json;

/// The effective policy of a valid V4 case, with made-up server facts.
fn policy_line(out: &mut impl Write, case: &svc_e2e::Case) -> std::io::Result<()> {
    let report = manifest_core::validate(&case.bytes);
    let Ok(manifest_core::Manifest::V4(manifest)) = report.manifest() else { return Ok(()) };
    let facts = manifest_core::ServerFacts {
        application_uid: manifest.application_uid.clone().unwrap_or_else(|| "app_corpus".to_owned()),
        artifact: Some(manifest_core::ArtifactVersion {
            cid: "ipfs://bafybeigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi".to_owned(),
            digest: format!("sha256:{}", "0".repeat(64)),
            image_digest: None,
        }),
    };
    // Pinned releases must not be given another artifact; build releases need one.
    let facts = match &manifest.release {
        manifest_core::v4::release::Release::Pinned { .. } => manifest_core::ServerFacts { artifact: None, ..facts },
        manifest_core::v4::release::Release::Build { .. } => facts,
    };
    let Ok(policy) = manifest_core::PolicyV4::materialize(&manifest, &facts) else { return Ok(()) };
    let line = json!({ "name": format!("{} (policy)", case.name()), "version": "policy", "valid": true, "shapeOnly": false, "codes": [], "document": policy });
    writeln!(out, "{line}")
}

fn main() -> std::io::Result<()> {
    let Some(dir) = std::env::args_os().nth(1).map(PathBuf::from) else {
        eprintln!("usage: corpus-export DIR");
        std::process::exit(2);
    };
    std::fs::create_dir_all(&dir)?;
    for (kind, name) in [
        (SchemaKind::ManifestV4, "manifest-v4"),
        (SchemaKind::ManifestV5, "manifest-v5"),
        (SchemaKind::PolicyV4, "policy-v4"),
    ] {
        std::fs::write(dir.join(format!("{name}.schema.json")), kind.bytes())?;
    }
    let mut out = std::io::BufWriter::new(std::fs::File::create(dir.join("corpus.jsonl"))?);
    for case in svc_e2e::cases() {
        let Ok(text) = std::str::from_utf8(&case.bytes) else { continue };
        let (root, problems) = match manifest_core::Format::detect(text) {
            manifest_core::Format::Json => manifest_core::parse::json(text),
            manifest_core::Format::Yaml => manifest_core::parse::yaml(text),
        };
        let Some(root) = root.filter(|_| problems.is_empty()) else { continue };
        let Ok(document) = serde_json::to_value(&root) else { continue };
        let Some(version) = document.get("schemaVersion").and_then(|v| v.as_u64()).filter(|v| *v == 4 || *v == 5)
        else {
            continue;
        };
        let expected = case.expected();
        let shape_only = !case.valid()
            && !expected.is_empty()
            && expected
                .iter()
                .filter(|d| d.severity == "error")
                .all(|d| d.layer == 1 && Code::is_schema_expressible(&d.code));
        let line = json!({
            "name": case.name(),
            "version": version,
            "valid": case.valid(),
            "shapeOnly": shape_only,
            "codes": expected.iter().map(|d| d.code.clone()).collect::<Vec<_>>(),
            "document": document,
        });
        writeln!(out, "{line}")?;
        if version == 4 && case.valid() {
            policy_line(&mut out, &case)?;
        }
    }
    out.flush()
}
