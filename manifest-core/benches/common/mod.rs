//! What the benches over the publication store share: applications published as the publish
//! route publishes them, and how their timings are summarized.

#![allow(dead_code, unreachable_pub)]

use std::error::Error;
use std::time::Duration;

use manifest_core::service::store::{Activity, Application, PolicyVersion, SqliteStore, Status, Store};
use manifest_core::{EncryptionMode, Manifest, PolicyV5, ResolvedArtifact, V5Facts};

pub type Result<T> = std::result::Result<T, Box<dyn Error>>;

/// Slots of every application (`deployment.jobs`).
pub const SLOTS: usize = 2;
/// The organization's spend authority per job, micros.
pub const AUTHORITY: u64 = 1_000_000;

/// A scale setting from the environment.
pub fn setting(name: &str, default: usize) -> Result<usize> {
    match std::env::var(name) {
        Ok(text) => text.parse().map_err(|e| format!("{name}={text}: {e}").into()),
        Err(_) => Ok(default),
    }
}

pub fn uid(n: usize) -> String {
    format!("app_{n:032x}")
}

pub fn artifact_digest() -> String {
    format!("sha256:{}", "a".repeat(64))
}

/// A version of application `n` as publication writes it: a valid V5 manifest (2 continuous
/// slots, 1 h windows, a pinned artifact), materialized into its effective policy.
pub fn policy_version(n: usize, version: u64) -> Result<PolicyVersion> {
    let text = serde_json::json!({
        "schema": "svc.application-manifest", "schemaVersion": 5, "applicationId": format!("app-{n}"),
        "release": {"mode": "pinned", "artifact": {"digest": artifact_digest()}},
        "runtime": {"kind": "javascript", "entrypoint": {"file": "server.js"}},
        "execution": {"mode": "continuous"},
        "configuration": {"variables": [{"source": "literal", "name": "POLICY_VERSION", "value": version.to_string()}]},
        "deployment": {
            "jobs": SLOTS,
            "schedule": {"duration": "1h"},
            "spend": {
                "unit": "service_credit_micros", "perJob": "1000000", "rate": {"amount": "1000000000", "window": "30d"}
            }
        },
        "state": {"mode": "off"}
    })
    .to_string();
    let report = manifest_core::validate(text.as_bytes());
    let manifest = match report.manifest() {
        Ok(Manifest::V5(m)) => m,
        Ok(_) => return Err("the bench's manifest is not V5".into()),
        Err(e) => return Err(format!("the bench's manifest is invalid: {e}: {:?}", report.diagnostics).into()),
    };
    let facts = V5Facts {
        application_uid: uid(n),
        artifact: ResolvedArtifact {
            kind: "ipfs_bundle".into(),
            cid: "ipfs://bafybeigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi".into(),
            digest: artifact_digest(),
            encryption: EncryptionMode { mode: "none".into() },
        },
        image: None,
        ssh_keys: Vec::new(),
    };
    let policy = serde_json_canonicalizer::to_string(&PolicyV5::materialize(&manifest, &facts)?)?;
    let authored = report
        .document
        .as_ref()
        .and_then(|root| manifest_core::canonical_bytes(root, text.len()))
        .map(String::from_utf8)
        .transpose()?
        .unwrap_or_default();
    Ok(PolicyVersion {
        version,
        schema_version: 5,
        authored_digest: report.authored_digest().unwrap_or_default(),
        policy_digest: manifest_core::sha256(policy.as_bytes()),
        policy,
        authored,
        jobs: u64::from(manifest.deployment.jobs),
        execution: "continuous".into(),
        published_by: "bench (owner, tok_bench)".into(),
    })
}

/// The writes of one publication of `version` (as the publish route makes them).
pub fn publish(
    tx: &mut dyn manifest_core::service::store::Transaction,
    app: &mut Application,
    version: PolicyVersion,
) -> Result<()> {
    let number = version.version;
    tx.insert_policy_version(app.key, &version)?;
    app.active_pointer_version = number;
    app.status = Status::Active;
    app.settled = false;
    tx.update_application(app)?;
    tx.record_activity(
        app.key,
        &Activity {
            at: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
            actor: "bench (owner, tok_bench)".into(),
            action: "policy_published".into(),
            policy_version: Some(number),
            status: Some("active".into()),
            reason: None,
        },
    )?;
    tx.record_wakeup(app.key, number)?;
    Ok(())
}

/// One organization with its spend authority, and `count` applications each with version 1
/// published (so each is due now).
pub fn publish_all(store: &SqliteStore, count: usize) -> Result<Vec<Application>> {
    let mut applications = Vec::with_capacity(count);
    let mut tx = store.write()?;
    let org = tx.ensure_organization("acme")?;
    tx.set_spend_authority(org.id, Some(AUTHORITY))?;
    tx.commit()?;
    for chunk in (0..count).collect::<Vec<_>>().chunks(1_000) {
        let mut tx = store.write()?;
        for &n in chunk {
            let mut app = tx.insert_application(org.id, &format!("app-{n}"), &uid(n))?;
            publish(tx.as_mut(), &mut app, policy_version(n, 1)?)?;
            applications.push(app);
        }
        tx.commit()?;
    }
    Ok(applications)
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The nearest-rank percentile.
pub fn percentile(times: &[Duration], p: f64) -> Duration {
    let mut sorted = times.to_vec();
    sorted.sort();
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len().max(1));
    sorted.get(rank - 1).copied().unwrap_or_default()
}
