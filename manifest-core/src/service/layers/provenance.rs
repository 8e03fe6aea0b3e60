//! Layer 4: artifact and builder provenance. A release resolves to evidence the service holds:
//! a V4 build release to an artifact version accepted from exactly the builder it names, a
//! pinned V4 artifact to a curated one, a V5 source release to the application's accepted
//! build evidence, a V5 pinned digest to its CID, kind and encryption, and a native image to
//! an exact catalog version and digest.

use super::{Reads, Unread};
use crate::diagnostic::{Code, Diagnostic, Layer};
use crate::policy::ArtifactVersion;
use crate::policy_v5::{EncryptionMode, ResolvedArtifact, ResolvedImage};
use crate::service::store::AcceptedArtifact;
use crate::v4::release::{BuildArtifact, Builder, EncryptionMode as V4Encryption, PinnedArtifact, Release};
use crate::v5::runtime::Runtime;
use crate::validate::Manifest;

/// What the release resolved to.
#[derive(Debug, Clone)]
pub(crate) enum Resolved {
    /// V4: the accepted version of a build release (`None` for a pinned release, which names
    /// its artifact itself).
    V4(Option<ArtifactVersion>),
    /// V5: the artifact evidence and, for a native image, the catalog version.
    V5 { artifact: ResolvedArtifact, image: Option<ResolvedImage> },
}

/// Resolves the release; `None` (with diagnostics) when it does not resolve.
pub(crate) fn resolve(
    manifest: &Manifest,
    tx: &mut dyn Reads,
    organization: i64,
    application_id: &str,
    out: &mut Vec<Diagnostic>,
) -> Result<Option<Resolved>, Unread> {
    match manifest {
        Manifest::V4(m) => Ok(match &m.release {
            Release::Build { artifact, builder } => {
                let accepted = tx.accepted(organization, application_id)?;
                build_v4(artifact, builder, &accepted, out).map(|v| Resolved::V4(Some(v)))
            }
            Release::Pinned { artifact } => pinned_v4(artifact, tx, out)?.then_some(Resolved::V4(None)),
        }),
        Manifest::V5(m) => {
            let artifact = match &m.release {
                crate::v5::release::Release::Source {} => {
                    let accepted = tx.accepted(organization, application_id)?;
                    let found = accepted.into_iter().next().map(|a| a.evidence);
                    if found.is_none() {
                        out.push(error(
                            Code::SourceEvidenceMissing,
                            "/release/mode",
                            format!(
                                "a source release builds from the application's accepted build evidence, and \"{application_id}\" has none yet; run its build workflow (or pin an artifact digest)"
                            ),
                        ));
                    }
                    found
                }
                crate::v5::release::Release::Pinned { artifact } => {
                    let mut found = tx.curated(&artifact.digest)?.into_iter().next();
                    if found.is_none() {
                        found = tx
                            .accepted(organization, application_id)?
                            .into_iter()
                            .map(|a| a.evidence)
                            .find(|e| e.digest == artifact.digest);
                    }
                    if found.is_none() {
                        out.push(error(
                            Code::ArtifactNotFound,
                            "/release/artifact/digest",
                            format!(
                                "no curated artifact and no accepted version of \"{application_id}\" has the digest {}; check the digest, or release from source",
                                artifact.digest
                            ),
                        ));
                    }
                    found
                }
            };
            let image = match &m.runtime {
                Runtime::NativeImage { image, .. } => {
                    resolve_image(tx, &image.catalog, &image.name, &image.version, out)?.map(Some)
                }
                Runtime::Javascript { .. } => Some(None),
            };
            Ok(match (artifact, image) {
                (Some(e), Some(image)) => Some(Resolved::V5 {
                    artifact: ResolvedArtifact {
                        kind: e.kind,
                        cid: e.cid,
                        digest: e.digest,
                        encryption: EncryptionMode { mode: e.encryption },
                    },
                    image,
                }),
                _ => None,
            })
        }
    }
}

fn error(code: Code, pointer: &str, message: String) -> Diagnostic {
    Diagnostic::error(Layer::Provenance, code, pointer, message)
}

fn encryption_name(mode: V4Encryption) -> &'static str {
    match mode {
        V4Encryption::None => "none",
        V4Encryption::Aes256Gcm => "aes256_gcm",
    }
}

/// The newest accepted version built exactly as the builder says; otherwise the first field
/// where the newest accepted version differs.
fn build_v4(
    artifact: &BuildArtifact,
    builder: &Builder,
    accepted: &[AcceptedArtifact],
    out: &mut Vec<Diagnostic>,
) -> Option<ArtifactVersion> {
    let (kind, encryption) = match artifact {
        BuildArtifact::IpfsBundle { encryption } => ("ipfs_bundle", Some(encryption_name(encryption.mode))),
        BuildArtifact::RuntimeImage {} => ("runtime_image", None),
    };
    let mismatch = |a: &AcceptedArtifact| -> Option<(&'static str, String)> {
        if a.repository != builder.repository {
            return Some(("/release/builder/repository", format!("was built from {}", a.repository)));
        }
        if !builder.allowed_refs.contains(&a.git_ref) {
            return Some(("/release/builder/allowedRefs", format!("was built at {}, which is not allowed", a.git_ref)));
        }
        if a.workflow_ref != builder.workflow_ref {
            return Some(("/release/builder/workflowRef", format!("was built by {}", a.workflow_ref)));
        }
        if a.manifest_path != builder.manifest_path {
            return Some((
                "/release/builder/manifestPath",
                format!("was built with the manifest at {}", a.manifest_path),
            ));
        }
        if a.evidence.kind != kind {
            return Some(("/release/artifact/kind", format!("is a {}", a.evidence.kind)));
        }
        if encryption.is_some_and(|e| e != a.evidence.encryption) {
            return Some((
                "/release/artifact/encryption/mode",
                format!("is encrypted with mode {}", a.evidence.encryption),
            ));
        }
        if kind == "runtime_image" && a.evidence.image_digest.is_none() {
            return Some(("/release/artifact/kind", "has no image digest".to_owned()));
        }
        None
    };
    if let Some(a) = accepted.iter().find(|a| mismatch(a).is_none()) {
        let e = &a.evidence;
        return Some(ArtifactVersion {
            cid: e.cid.clone(),
            digest: e.digest.clone(),
            image_digest: e.image_digest.clone(),
        });
    }
    match accepted.first() {
        None => out.push(error(
            Code::ArtifactNotAccepted,
            "/release",
            "no artifact version of this application has been accepted; run the build workflow named in `release.builder.workflowRef`".to_owned(),
        )),
        Some(newest) => {
            let (pointer, what) = mismatch(newest).unwrap_or(("/release", String::new()));
            out.push(error(
                Code::ArtifactEvidenceMismatch,
                pointer,
                format!(
                    "no accepted artifact version matches this builder: the newest ({}) {what}; fix the field or rebuild",
                    newest.evidence.digest
                ),
            ));
        }
    }
    None
}

fn pinned_v4(artifact: &PinnedArtifact, tx: &mut dyn Reads, out: &mut Vec<Diagnostic>) -> Result<bool, Unread> {
    let curated = match artifact {
        PinnedArtifact::IpfsBundle { cid, digest, encryption } => {
            let mode = encryption_name(encryption.mode);
            tx.curated(digest)?.iter().any(|e| e.cid == *cid && e.kind == "ipfs_bundle" && e.encryption == mode)
        }
        PinnedArtifact::RuntimeImage { image_digest, bootstrap_cid, bootstrap_digest } => {
            tx.curated(bootstrap_digest)?.iter().any(|e| {
                e.cid == *bootstrap_cid && e.kind == "runtime_image" && e.image_digest.as_ref() == Some(image_digest)
            })
        }
    };
    if !curated {
        out.push(error(
            Code::ArtifactNotCurated,
            "/release/artifact",
            "a pinned release runs only curated first-party artifacts, and this one is not curated; use a build release for your own code".to_owned(),
        ));
    }
    Ok(curated)
}

/// Catalog and image names: 1-63 lowercase letters, digits, hyphens.
fn is_image_name(s: &str) -> bool {
    (1..=63).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

fn parse_version(s: &str) -> Option<[u64; 3]> {
    let mut parts = [0u64; 3];
    let mut n = 0;
    for (i, p) in s.split('.').enumerate() {
        *parts.get_mut(i)? = p.parse().ok()?;
        n = i + 1;
    }
    (n >= 1).then_some(parts)
}

/// The highest catalog version at or above the floor with the floor's major version: a floor
/// is a minimum, and a new major version may break the program, so it is never chosen silently.
fn resolve_image(
    tx: &mut dyn Reads,
    catalog: &str,
    name: &str,
    floor: &str,
    out: &mut Vec<Diagnostic>,
) -> Result<Option<ResolvedImage>, Unread> {
    let mut valid = true;
    for (pointer, value, what) in
        [("/runtime/image/catalog", catalog, "catalog"), ("/runtime/image/name", name, "image name")]
    {
        if !is_image_name(value) {
            valid = false;
            out.push(error(
                Code::ImageNameInvalid,
                pointer,
                format!("\"{value}\" is not a valid {what}: use 1-63 lowercase letters, digits and hyphens"),
            ));
        }
    }
    if !valid {
        return Ok(None);
    }
    let images = tx.runtime_images(catalog, name)?;
    if images.is_empty() {
        out.push(error(
            Code::ImageNotFound,
            "/runtime/image/name",
            format!("the catalog \"{catalog}\" has no image \"{name}\""),
        ));
        return Ok(None);
    }
    let Some(want) = parse_version(floor) else { return Ok(None) };
    let best = images
        .iter()
        .filter_map(|i| parse_version(&i.version).map(|v| (v, i)))
        .filter(|(v, _)| v[0] == want[0] && *v >= want)
        .max_by_key(|(v, _)| *v);
    let Some((_, image)) = best else {
        let mut have: Vec<_> = images.iter().map(|i| i.version.as_str()).collect();
        have.sort();
        out.push(error(
            Code::ImageVersionUnresolved,
            "/runtime/image/version",
            format!(
                "no version of {catalog}/{name} is at or above {floor} within major version {}; the catalog has {}",
                want[0],
                have.join(", ")
            ),
        ));
        return Ok(None);
    };
    Ok(Some(ResolvedImage {
        catalog: catalog.to_owned(),
        name: name.to_owned(),
        version_floor: floor.to_owned(),
        version: image.version.clone(),
        digest: image.digest.clone(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_with_missing_parts_as_zero() {
        assert_eq!(parse_version("20"), Some([20, 0, 0]));
        assert_eq!(parse_version("20.1.3"), Some([20, 1, 3]));
        assert_eq!(parse_version("1.2.3.4"), None);
        assert_eq!(parse_version("x"), None);
    }

    #[test]
    fn image_names_are_short_lowercase_slugs() {
        assert!(is_image_name("svc-runtime-images"));
        assert!(!is_image_name("Node") && !is_image_name("") && !is_image_name(&"a".repeat(64)));
    }
}
