//! The V4 release as a V5 one: a build becomes `source`, a pinned bundle its digest, and
//! `--pin-artifact` pins the bundle given whatever the V4 release was (the way on for an
//! encrypted bundle or a runtime image).

use serde_json::{Map, Value, json};

use super::{Migrator, NoteKind};

pub(super) fn release(m: &mut Migrator<'_>, out: &mut Map<String, Value>) {
    if let Some(digest) = m.options.pin_artifact.clone() {
        pinned_by_flag(m, out, digest);
        return;
    }
    m.keep("/release/mode");
    match m.str("/release/mode") {
        Some("build") => {
            out.insert("release".into(), json!({"mode": "source"}));
            m.note(
                "/release/builder",
                NoteKind::Dropped,
                "a V5 `source` release takes its builder (repository, refs, workflow, manifest path) from the \
                 server's code-host evidence, not from the manifest",
                "register the repository and workflow with the service as the source of this application",
            );
            m.keep("/release/artifact/kind");
            if m.str("/release/artifact/kind") == Some("runtime_image") {
                m.note(
                    "/release/artifact/kind",
                    NoteKind::Blocking,
                    "V5 builds no runtime image",
                    "pin the JavaScript bundle the V5 document runs: `--pin-artifact sha256:<its digest>`",
                );
            }
            encryption(m);
        }
        _ => match m.str("/release/artifact/kind") {
            Some("ipfs_bundle") => {
                let digest = m.str("/release/artifact/digest").unwrap_or_default().to_owned();
                out.insert("release".into(), json!({"mode": "pinned", "artifact": {"digest": digest}}));
                m.keep("/release/artifact/kind");
                m.keep("/release/artifact/digest");
                m.note(
                    "/release/artifact/cid",
                    NoteKind::Dropped,
                    "a V5 pinned release names its artifact by digest; the CID is resolved evidence",
                    "nothing: the service resolves it from the digest",
                );
                encryption(m);
            }
            _ => m.note(
                "/release/artifact",
                NoteKind::Blocking,
                "a pinned runtime image has no V5 form",
                "pin the JavaScript bundle the V5 document runs: `--pin-artifact sha256:<its digest>`",
            ),
        },
    }
}

/// `--pin-artifact`: the V5 document pins that artifact, whatever the V4 release was.
fn pinned_by_flag(m: &mut Migrator<'_>, out: &mut Map<String, Value>, digest: String) {
    out.insert("release".into(), json!({"mode": "pinned", "artifact": {"digest": digest}}));
    let given = format!("the V5 document pins {digest}, given with --pin-artifact");
    m.keep("/release/mode");
    if m.str("/release/mode") == Some("build") {
        m.note(
            "/release/mode",
            NoteKind::Changed,
            "V5 builds this release no more: it runs the artifact given with --pin-artifact",
            format!("{given}; publish that bundle before the V5 document"),
        );
        m.note(
            "/release/builder",
            NoteKind::Dropped,
            "a pinned release has no builder",
            "nothing: to build from source again, use `release: {mode: source}` and register the repository",
        );
    }
    m.keep("/release/artifact/kind");
    if m.str("/release/artifact/kind") == Some("runtime_image") {
        m.note(
            "/release/artifact",
            NoteKind::Changed,
            "V5 runs no runtime image: the V5 document runs the JavaScript bundle given with --pin-artifact",
            format!("{given}; check that it holds the program the image ran"),
        );
        return;
    }
    match m.str("/release/artifact/digest") {
        Some(v4) if v4 == digest => m.keep("/release/artifact/digest"),
        Some(v4) => {
            let v4 = v4.to_owned();
            m.note("/release/artifact/digest", NoteKind::Changed, format!("the V4 document pins {v4}"), given.clone());
        }
        None => {}
    }
    m.note_if(
        "/release/artifact/cid",
        NoteKind::Dropped,
        "a V5 pinned release names its artifact by digest; the CID is resolved evidence",
        "nothing: the service resolves it from the digest",
    );
    match m.str("/release/artifact/encryption/mode") {
        Some("aes256_gcm") => m.note(
            "/release/artifact/encryption",
            NoteKind::Changed,
            "an encrypted bundle has no supported V5 path: the V5 document pins the bundle given with --pin-artifact",
            format!("{given}: it must be the bundle unencrypted; keep secrets in `configuration.secrets`"),
        ),
        _ => m.note_if(
            "/release/artifact/encryption",
            NoteKind::Dropped,
            "V5 resolves the artifact's encryption mode as evidence",
            "nothing",
        ),
    }
}

fn encryption(m: &mut Migrator<'_>) {
    match m.str("/release/artifact/encryption/mode") {
        Some("aes256_gcm") => m.note(
            "/release/artifact/encryption",
            NoteKind::Blocking,
            "V5 resolves the artifact's encryption as evidence; an encrypted bundle has no supported V5 path",
            "publish the bundle unencrypted, pin it with `--pin-artifact sha256:<its digest>`, and keep secrets in \
             `configuration.secrets`",
        ),
        _ => m.note_if(
            "/release/artifact/encryption",
            NoteKind::Dropped,
            "V5 resolves the artifact's encryption mode as evidence",
            "nothing",
        ),
    }
}
