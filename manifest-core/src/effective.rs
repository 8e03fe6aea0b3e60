//! What a manifest takes effect as, for comparing two of them (`svc policy diff`): its
//! effective policy as far as it can be made without the service, and quantities compared by
//! value. Two manifests that differ only in defaults written out (`phasing: {mode:
//! simultaneous}`), in how a duration or a size is spelled (`1h`, `60m`) or in field order
//! give the same document here.
//!
//! The policy is the one the service publishes ([`PolicyV4`](crate::PolicyV4),
//! [`PolicyV5`](crate::PolicyV5)): every default written out, the same shape. What only the
//! service resolves stays as authored: `release` (the service turns it into `artifact`),
//! `runtime` (a native image's floor, which it resolves to an exact version) and `access`
//! (the organization's keys); `applicationUid` is left out; `schema` stays the manifest's (a
//! manifest is compared with a manifest). `metadata` is kept beside it, since people want to
//! see it changed, and [`crate::diff`] says it reaches no job.
//!
//! ```
//! let a = "schema: svc.application-manifest\nschemaVersion: 5\napplicationId: web\n\
//!     release: {mode: source}\nruntime: {kind: javascript, entrypoint: {file: server.js}}\n\
//!     execution: {mode: continuous}\nstate: {mode: 'off'}\ndeployment: {schedule: {duration: 1h}, \
//!     spend: {unit: service_credit_micros, perJob: '5', rate: {amount: '9'}}}\n";
//! let b = a.replace("duration: 1h}", "duration: 60m, phasing: {mode: simultaneous}}");
//! let effective = |text: &str| match manifest_core::validate(text.as_bytes()).manifest() {
//!     Ok(m) => manifest_core::effective::of_manifest(&m),
//!     Err(e) => panic!("{e}"),
//! };
//! let (a, mut b) = (effective(a), effective(&b));
//! manifest_core::effective::align_quantities(&a, &mut b);
//! assert!(manifest_core::diff::diff(&a, &b).is_empty());
//! ```

use serde_json::Value;

use crate::policy_v5::{EncryptionMode, PolicyV5, ResolvedArtifact, ResolvedImage, V5Facts};
use crate::v5::ManifestV5;
use crate::validate::Manifest;

/// The V5 fields that hold a duration (`formats::DURATION`, `formats::POSITIVE_DURATION`):
/// the same in a manifest and its policy. A test checks this list against the schema.
pub const DURATIONS: [&str; 4] = [
    "/deployment/schedule/duration",
    "/deployment/lifecycle/renewal/leadTime/duration",
    "/deployment/spend/rate/window",
    "/execution/every",
];

/// The V5 fields that hold a byte size (`formats::BYTE_SIZE`). A test checks this list
/// against the schema.
pub const BYTE_SIZES: [&str; 2] = ["/deployment/placement/minimums/memory", "/deployment/placement/minimums/storage"];

/// The document [`crate::diff::diff`] compares for a valid manifest: its effective policy
/// without the facts only the service resolves, and its metadata (see the module's doc).
pub fn of_manifest(manifest: &Manifest) -> Value {
    let mut document = match manifest {
        // Policy V4 is the manifest's sections as they are, every default written out.
        Manifest::V4(m) => {
            let mut v = to_value(m);
            if let Some(root) = v.as_object_mut() {
                root.remove("$schema");
            }
            v
        }
        Manifest::V5(m) => v5(m),
    };
    // Still a manifest's: one is compared with a manifest, not with a published policy, which
    // holds the resolved artifact in place of `release`.
    if let Some(root) = document.as_object_mut() {
        root.insert("schema".to_owned(), Value::from(crate::v4::SCHEMA_NAME));
    }
    document
}

fn to_value<T: serde::Serialize>(model: &T) -> Value {
    // The models hold strings, booleans, integers and nulls only: they always have a JSON form.
    serde_json::to_value(model).unwrap_or(Value::Null)
}

/// The V5 policy as the service makes it, with stand-ins for what it resolves, which are then
/// replaced by what the manifest authors.
fn v5(m: &ManifestV5) -> Value {
    let image = match &m.runtime {
        crate::v5::runtime::Runtime::NativeImage { image, .. } => Some(ResolvedImage {
            catalog: image.catalog.clone(),
            name: image.name.clone(),
            version_floor: String::new(),
            version: String::new(),
            digest: String::new(),
        }),
        crate::v5::runtime::Runtime::Javascript { .. } => None,
    };
    let facts = V5Facts {
        application_uid: String::new(),
        artifact: ResolvedArtifact {
            kind: String::new(),
            cid: String::new(),
            digest: String::new(),
            encryption: EncryptionMode { mode: String::new() },
        },
        image,
        ssh_keys: Vec::new(),
    };
    // The only refusal is a native image without its resolution, given above.
    let Ok(policy) = PolicyV5::materialize(m, &facts) else { return Value::Null };
    let mut v = to_value(&policy);
    if let Some(root) = v.as_object_mut() {
        root.remove("applicationUid");
        root.remove("artifact");
        root.insert("release".to_owned(), to_value(&m.release));
        root.insert("runtime".to_owned(), to_value(&m.runtime));
        if let Some(access) = root.get_mut("access").and_then(Value::as_object_mut) {
            access.remove("authorizedKeys");
        }
        root.insert("metadata".to_owned(), to_value(&m.metadata));
    }
    v
}

/// Gives `b` the spelling of `a` at every duration and byte size field where both hold the
/// same quantity (`1h` and `60m`, `1GiB` and `1024MiB`), so that only a different quantity is
/// a change, and a change shows each side as written.
pub fn align_quantities(a: &Value, b: &mut Value) {
    let same = |pointer: &str, b: &Value, value: fn(&str) -> Option<u128>| {
        let (Some(x), Some(y)) =
            (a.pointer(pointer).and_then(Value::as_str), b.pointer(pointer).and_then(Value::as_str))
        else {
            return None;
        };
        (x != y && value(x).is_some() && value(x) == value(y)).then(|| x.to_owned())
    };
    let fields = DURATIONS.iter().map(|p| (*p, crate::formats::duration_ms as fn(&str) -> Option<u128>));
    let fields = fields.chain(BYTE_SIZES.iter().map(|p| (*p, crate::formats::byte_size as fn(&str) -> Option<u128>)));
    for (pointer, value) in fields {
        if let Some(spelling) = same(pointer, b, value)
            && let Some(slot) = b.pointer_mut(pointer)
        {
            *slot = Value::from(spelling);
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn manifest(text: &str) -> Manifest {
        let report = crate::validate(text.as_bytes());
        match report.manifest() {
            Ok(m) => m,
            Err(e) => panic!("{e}: {:?}", report.diagnostics),
        }
    }

    const PINNED: &str = "schema: svc.application-manifest\nschemaVersion: 5\napplicationId: web\n\
        metadata: {description: one}\n\
        release: {mode: pinned, artifact: {digest: 'sha256:2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae'}}\n\
        runtime: {kind: javascript, entrypoint: {file: server.js}}\nexecution: {mode: continuous}\n\
        deployment: {schedule: {duration: 1h}, spend: {unit: service_credit_micros, perJob: '5', rate: {amount: '9'}}}\n\
        state: {mode: 'off'}\n";

    /// Beyond what the service resolves, the document is the policy the service publishes.
    #[test]
    fn a_manifest_reads_as_its_policy_with_the_release_and_metadata_as_authored() {
        let m = manifest(PINNED);
        let Manifest::V5(model) = &m else { panic!("V5") };
        let facts = V5Facts {
            application_uid: "app_1".into(),
            artifact: ResolvedArtifact {
                kind: "ipfs_bundle".into(),
                cid: "ipfs://bafy".into(),
                digest: "sha256:aa".into(),
                encryption: EncryptionMode { mode: "none".into() },
            },
            image: None,
            ssh_keys: vec![],
        };
        let mut policy = to_value(&PolicyV5::materialize(model, &facts).expect("a policy"));
        let mut ours = of_manifest(&m);
        for (field, authored) in
            [("release", to_value(&model.release)), ("metadata", json!({"description": "one", "labels": []}))]
        {
            assert_eq!(ours.as_object_mut().and_then(|o| o.remove(field)), Some(authored), "{field}");
        }
        let policy = policy.as_object_mut().expect("an object");
        for field in ["applicationUid", "artifact"] {
            policy.remove(field);
        }
        policy.insert("schema".into(), json!("svc.application-manifest"));
        assert_eq!(ours, Value::Object(policy.clone()));
        assert_eq!(ours["deployment"]["schedule"]["phasing"], json!({"mode": "simultaneous"}), "defaults written");
    }

    #[test]
    fn quantities_compare_by_value_and_keep_their_spelling_when_they_differ() {
        let a = json!({"deployment": {"schedule": {"duration": "1h"}, "spend": {"rate": {"window": "30d"}},
            "placement": {"minimums": {"memory": "1GiB", "storage": "1GB"}}},
            "configuration": {"variables": [{"name": "TTL", "value": "1h"}]}});
        let mut b = json!({"deployment": {"schedule": {"duration": "60m"}, "spend": {"rate": {"window": "31d"}},
            "placement": {"minimums": {"memory": "1024MiB", "storage": "1GiB"}}},
            "configuration": {"variables": [{"name": "TTL", "value": "60m"}]}});
        align_quantities(&a, &mut b);
        let changed: Vec<String> = crate::diff::diff(&a, &b).into_iter().map(|c| c.pointer).collect();
        assert_eq!(
            changed,
            [
                "/configuration/variables/0/value", // a variable's value is text the program reads
                "/deployment/placement/minimums/storage",
                "/deployment/spend/rate/window",
            ]
        );
        assert_eq!(b["deployment"]["spend"]["rate"]["window"], "31d");
    }

    /// Every field of the V5 schema with a duration or byte size pattern is in the lists.
    #[test]
    fn the_quantity_lists_are_every_such_field_of_the_schema() {
        fn walk(node: &Value, path: &mut Vec<String>, found: &mut Vec<(String, &'static str)>) {
            match node {
                Value::Object(map) => {
                    if let Some(pattern) = map.get("pattern").and_then(Value::as_str) {
                        // A pointer into a document: property names only.
                        let pointer: String =
                            path.windows(2).filter(|w| w[0] == "properties").map(|w| format!("/{}", w[1])).collect();
                        if pattern.contains("(?:ms|s|m|h|d)") {
                            found.push((pointer, "duration"));
                        } else if pattern.contains("(?:B|KiB") {
                            found.push((pointer, "size"));
                        }
                    }
                    for (k, v) in map {
                        path.push(k.clone());
                        walk(v, path, found);
                        path.pop();
                    }
                }
                Value::Array(items) => {
                    for (i, v) in items.iter().enumerate() {
                        path.push(i.to_string());
                        walk(v, path, found);
                        path.pop();
                    }
                }
                _ => {}
            }
        }
        let schema: Value = serde_json::from_str(crate::SchemaKind::ManifestV5.bytes()).expect("the schema");
        let mut found = Vec::new();
        walk(&schema, &mut Vec::new(), &mut found);
        found.sort();
        let mut listed: Vec<(String, &str)> = DURATIONS.iter().map(|p| (p.to_string(), "duration")).collect();
        listed.extend(BYTE_SIZES.iter().map(|p| (p.to_string(), "size")));
        listed.sort();
        assert_eq!(found, listed);
    }

    #[test]
    fn a_v4_manifest_reads_as_its_sections_with_every_default() {
        let golden = include_str!("../../tests/golden/v4-minimal.json");
        let text = golden.replacen('{', r#"{"$schema": "./s.json", "metadata": {"description": "d"},"#, 1);
        let v = of_manifest(&manifest(&text));
        assert_eq!((&v["schema"], &v["schemaVersion"]), (&json!("svc.application-manifest"), &json!(4)));
        assert!(v.get("$schema").is_none(), "an editor hint takes no effect");
        assert_eq!(v["deployment"]["parallelism"], 1, "the default written out");
        assert_eq!(v["metadata"]["description"], "d");
    }
}
