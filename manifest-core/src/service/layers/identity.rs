//! Layer 3: import identity and source binding. The manifest must name the application it is
//! published to. (That the caller's organization owns the application is checked before: an
//! application of another organization is answered 404, so its existence does not leak.)

use crate::diagnostic::{Code, Diagnostic, Layer};
use crate::service::store::Application;
use crate::validate::Manifest;

pub(crate) fn check(manifest: &Manifest, target: &Application, out: &mut Vec<Diagnostic>) {
    let (id, uid) = match manifest {
        Manifest::V4(m) => (&m.application_id, m.application_uid.as_ref()),
        Manifest::V5(m) => (&m.application_id, None),
    };
    if *id != target.application_id {
        out.push(Diagnostic::error(
            Layer::ImportIdentity,
            Code::ApplicationIdMismatch,
            "/applicationId",
            format!(
                "the manifest is for application \"{id}\" but is published to \"{}\"; publish it to its own application or change `applicationId`",
                target.application_id
            ),
        ));
    }
    if let Some(uid) = uid
        && *uid != target.application_uid
    {
        out.push(Diagnostic::error(
            Layer::ImportIdentity,
            Code::ApplicationUidMismatch,
            "/applicationUid",
            format!(
                "`applicationUid` \"{uid}\" is not the target application's identity \"{}\"; remove it or copy it from `svc app show`",
                target.application_uid
            ),
        ));
    }
}
