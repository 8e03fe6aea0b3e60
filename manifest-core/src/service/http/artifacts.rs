//! An application's files, uploaded: `POST /api/applications/{id}/artifacts` with
//! `{"files": {"<path>": "<base64>", ...}}` (the relay's deploy `bundle`, the same bounds and
//! path check: [`svc_execution::bundle`]), a developer or more of the application's
//! organization. The files go into the service's content-addressed artifact store (the one
//! the local pool launches from) under their bundle digest, and are recorded as the
//! application's newest accepted artifact version, so that a V5 `release: {mode: source}`
//! resolves to them at the next publication (`layers/provenance.rs`). The record is the
//! organization's: another organization neither sees nor resolves it (its own upload of the
//! same files is its own record of the same digest). Answers 201 with the digest, the local
//! CID ([`local_cid`]) and the bundle's size.

use std::collections::{BTreeMap, BTreeSet};

use axum::body::Body;
use axum::extract::{Path, State as Extract};
use axum::http::HeaderMap;
use axum::response::Response;
use base64::Engine as _;
use serde_json::json;
use svc_execution::artifacts::ArtifactError;
use svc_execution::bundle::{BUNDLE_MAX_BYTES, BUNDLE_MAX_FILES};

use super::rejection::{ApiError, BundleProblem, Denied, Oversize, Rejection};
use super::{MAX_UPLOAD_BODY_BYTES, Shared, authenticate, blocking, json_response, read_body_up_to, respond};
use crate::service::clock::now;
use crate::service::store::{AcceptedArtifact, Activity, ArtifactEvidence};

/// Where an uploaded version says it came from, in the accepted artifact's build fields: no
/// repository of the `owner/name` form, so no V4 builder ever matches it.
const UPLOADED_FROM: &str = "svc-upload";

/// `{"files": {...}, "executable": [...]}` and nothing else.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct UploadBody {
    files: BTreeMap<String, String>,
    /// Paths of `files` stored executable (a native image's program); the digest does not
    /// cover it.
    #[serde(default)]
    executable: BTreeSet<String>,
}

/// An upload, decoded.
#[derive(Debug)]
struct Upload {
    files: BTreeMap<String, Vec<u8>>,
    executable: BTreeSet<String>,
}

pub(super) async fn upload(
    Extract(state): Extract<Shared>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Body,
) -> Response {
    respond(
        async {
            let caller = authenticate(&state, &headers).await?;
            if !caller.role.can_publish() {
                return Err(Rejection::Forbidden(Denied::Upload).into());
            }
            // The application first: a stranger's or a missing one is 404 before the body is
            // read.
            let org = caller.organization.id;
            let lookup = state.clone();
            let app_id = id.clone();
            blocking(move || {
                lookup
                    .store
                    .read()?
                    .application(org, &app_id)?
                    .ok_or_else(|| Rejection::application_not_found(&app_id))?;
                Ok(())
            })
            .await?;
            let received = read_body_up_to(&state, &caller, &headers, body, MAX_UPLOAD_BODY_BYTES, || {
                Rejection::BundleTooLarge(Oversize::Body { max: MAX_UPLOAD_BODY_BYTES })
            })
            .await?;
            let Upload { files, executable } = decode(&received.bytes)?;
            drop(received.bytes);
            // The permit, if the body was large, is held while the decoded files are.
            let _permit = received.permit;
            let state = state.clone();
            let answer = blocking(move || {
                let artifacts = state.artifacts.as_ref().ok_or_else(|| {
                    // A fault of the service's host (logged at start): a 500 with its request id.
                    ApiError::internal("an upload, but the artifact store did not open at start (see above)")
                })?;
                let bytes: u64 = files.values().map(|b| b.len() as u64).sum();
                let digest = artifacts.store_files(&files, &executable, None).map_err(refused)?;
                let cid = local_cid(&digest);
                let mut tx = state.store.write()?;
                let app = tx.application(org, &id)?.ok_or_else(|| Rejection::application_not_found(&id))?;
                let newest = tx.accepted(org, &id)?.into_iter().next();
                // The same files as the newest version: nothing new to record.
                if newest.is_none_or(|a| a.evidence.digest != digest) {
                    tx.accept(
                        org,
                        &id,
                        &AcceptedArtifact {
                            repository: UPLOADED_FROM.to_owned(),
                            git_ref: UPLOADED_FROM.to_owned(),
                            workflow_ref: UPLOADED_FROM.to_owned(),
                            manifest_path: String::new(),
                            evidence: ArtifactEvidence {
                                cid: cid.clone(),
                                digest: digest.clone(),
                                kind: "ipfs_bundle".to_owned(),
                                encryption: "none".to_owned(),
                                image_digest: None,
                            },
                        },
                    )?;
                    tx.record_activity(
                        app.key,
                        &Activity {
                            at: now(),
                            actor: caller.actor(),
                            action: "artifact_uploaded".to_owned(),
                            policy_version: None,
                            status: None,
                            reason: Some(format!("{digest} ({} files, {bytes} bytes)", files.len())),
                        },
                    )?;
                }
                tx.commit()?;
                Ok(json!({
                    "applicationId": app.application_id,
                    "digest": digest,
                    "cid": cid,
                    "files": files.len(),
                    "bytes": bytes,
                }))
            })
            .await?;
            Ok(json_response(201, &answer))
        }
        .await,
    )
}

/// The files of an upload's body, decoded, within the bounds: more than [`BUNDLE_MAX_FILES`]
/// files or [`BUNDLE_MAX_BYTES`] decoded bytes is 413; no file, a file not base64 or a body
/// not of the form is 400. (The paths are checked where they are stored.)
fn decode(body: &[u8]) -> Result<Upload, ApiError> {
    let request: UploadBody =
        serde_json::from_slice(body).map_err(|e| Rejection::InvalidBundle(BundleProblem::Body(e.to_string())))?;
    if request.files.len() > BUNDLE_MAX_FILES {
        return Err(Rejection::BundleTooLarge(Oversize::Files { count: request.files.len() }).into());
    }
    if request.files.is_empty() {
        return Err(Rejection::InvalidBundle(BundleProblem::Empty).into());
    }
    if let Some(path) = request.executable.iter().find(|p| !request.files.contains_key(*p)) {
        return Err(Rejection::InvalidBundle(BundleProblem::ExecutableMissing(path.clone())).into());
    }
    let executable = request.executable;
    let mut files = BTreeMap::new();
    let mut room = BUNDLE_MAX_BYTES;
    for (path, text) in request.files {
        // Measured before decoding (at least the decoded size): a file over the bound is
        // never allocated.
        let at_most = (text.len() as u64).div_ceil(4) * 3;
        let bytes = if at_most > room {
            None
        } else {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(&text)
                .map_err(|why| Rejection::InvalidBundle(BundleProblem::NotBase64 { path: path.clone(), why }))?;
            Some(bytes).filter(|b| b.len() as u64 <= room)
        };
        let Some(bytes) = bytes else {
            return Err(Rejection::BundleTooLarge(Oversize::Bytes { at: path }).into());
        };
        room -= bytes.len() as u64;
        files.insert(path, bytes);
    }
    Ok(Upload { files, executable })
}

/// Why the store refused the files: the tenant's mistake (a path, the bounds) is 400 or 413
/// and says which file; anything else is the service's (500, the detail in its log).
fn refused(e: ArtifactError) -> ApiError {
    match e {
        ArtifactError::BadPath { path, why } => Rejection::InvalidBundle(BundleProblem::Path { path, why }).into(),
        ArtifactError::FileAndDirectory { path } => {
            Rejection::InvalidBundle(BundleProblem::FileAndDirectory(path)).into()
        }
        ArtifactError::TooManyFiles { .. } | ArtifactError::TooLarge { .. } => {
            Rejection::BundleTooLarge(Oversize::Stored(e.to_string())).into()
        }
        e => ApiError::internal(format!("storing an uploaded bundle: {e}")),
    }
}

/// The local CID of an uploaded bundle: `ipfs://` and the CIDv1 (raw codec, sha2-256
/// multihash, base32) of the document its bundle digest hashes (the canonical JSON listing
/// of its files). A content address derived from the digest alone: it names the same bytes
/// an IPFS node would, so every check of the `ipfs://` form holds, and the digest stays what
/// launches check the files against.
pub(crate) fn local_cid(digest: &str) -> String {
    let hex = digest.strip_prefix("sha256:").unwrap_or(digest);
    let mut bytes = vec![0x01, 0x55, 0x12, 0x20];
    bytes.extend((0..hex.len() / 2).filter_map(|i| u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()));
    format!("ipfs://b{}", base32(&bytes))
}

/// RFC 4648 base32, lowercase, no padding (multibase `b`).
fn base32(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";
    let mut out = String::new();
    let (mut buffer, mut bits) = (0u32, 0u32);
    for &b in bytes {
        buffer = (buffer << 8) | u32::from(b);
        bits += 8;
        while bits >= 5 {
            bits -= 5;
            out.push(char::from(ALPHABET[((buffer >> bits) & 31) as usize]));
        }
    }
    if bits > 0 {
        out.push(char::from(ALPHABET[((buffer << (5 - bits)) & 31) as usize]));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_local_cid_is_a_cidv1_of_the_digest_in_the_ipfs_form() {
        // The CID of the empty listing's digest, as `ipfs cid format` would print it for a raw
        // block of that SHA-256.
        let digest = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
        let cid = local_cid(digest);
        assert_eq!(cid, "ipfs://bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku");
        assert!((crate::formats::IPFS_CID.check)(&cid), "{cid}");
        assert_ne!(local_cid(&digest.replace("e3b0", "e3b1")), cid);
    }

    #[test]
    fn bodies_over_the_bounds_or_not_base64_are_refused_naming_the_file() {
        let body = |files: serde_json::Value| serde_json::to_vec(&json!({ "files": files })).expect("json");
        let ok = decode(&body(json!({"main.js": "aGk="}))).expect("decoded");
        assert_eq!(ok.files["main.js"], b"hi");
        let e = decode(br#"{"files": {"a": ""}, "executable": ["b"]}"#).expect_err("not a file");
        assert_eq!((e.status, e.code), (400, "invalid_bundle"));
        let e = decode(&body(json!({"main.js": "not base64!"}))).expect_err("refused");
        assert_eq!((e.status, e.code), (400, "invalid_bundle"));
        assert!(e.message.contains("\"main.js\""), "{}", e.message);
        let big = base64::engine::general_purpose::STANDARD.encode(vec![0u8; BUNDLE_MAX_BYTES as usize / 2 + 1]);
        let e = decode(&body(json!({"a": big, "b": big}))).expect_err("refused");
        assert_eq!((e.status, e.code), (413, "bundle_too_large"));
        assert!(e.message.contains("\"b\""), "{}", e.message);
        let many: serde_json::Map<_, _> = (0..=BUNDLE_MAX_FILES).map(|i| (format!("f{i}"), json!(""))).collect();
        let e = decode(&body(serde_json::Value::Object(many))).expect_err("refused");
        assert_eq!((e.status, e.code), (413, "bundle_too_large"));
        let e = decode(&body(json!({}))).expect_err("empty");
        assert_eq!((e.status, e.code), (400, "invalid_bundle"));
        let e = decode(br#"{"files": {}, "x": 1}"#).expect_err("unknown field");
        assert_eq!((e.status, e.code), (400, "invalid_bundle"));
    }
}
