//! A project's validator pins: the route validators its revisions may be checked by.

use super::{Missing, OperationError};
use crate::coordinator::Engine;
use crate::coordinator::api::{PinsResponse, ValidatorVersion};
use crate::coordinator::store::{Caller, now_ms};

/// The pins of the caller's `project`, and the validator current now.
pub(in crate::coordinator) fn pins_of(
    engine: &Engine,
    caller: &Caller,
    project: &str,
) -> Result<PinsResponse, OperationError> {
    let current = crate::validation::procedure::current();
    Ok(PinsResponse {
        pins: engine.store().pins(&caller.org_id, project)?,
        current: ValidatorVersion { version: current.version.to_owned(), digest: current.digest.clone() },
    })
}

/// Pins `digest` for the caller's `project`; its deployment is validated again at once.
pub(in crate::coordinator) fn pin(
    engine: &Engine,
    caller: &Caller,
    project: &str,
    digest: &str,
) -> Result<PinsResponse, OperationError> {
    check_digest(digest)?;
    engine.store().add_pin(&caller.org_id, project, digest, now_ms())?;
    validate_again(engine, caller, project);
    pins_of(engine, caller, project)
}

/// Removes the pin of `digest` from the caller's `project`.
pub(in crate::coordinator) fn unpin(
    engine: &Engine,
    caller: &Caller,
    project: &str,
    digest: &str,
) -> Result<PinsResponse, OperationError> {
    check_digest(digest)?;
    if !engine.store().remove_pin(&caller.org_id, project, digest)? {
        return Err(OperationError::NotFound(Missing::Pin { digest: digest.to_owned(), project: project.to_owned() }));
    }
    validate_again(engine, caller, project);
    pins_of(engine, caller, project)
}

/// The project's deployment, if it has one, is due for validation now.
fn validate_again(engine: &Engine, caller: &Caller, project: &str) {
    if let Ok(Some(d)) = engine.store().deployment_of(&caller.org_id, project) {
        engine.due_now(&d);
    }
}

fn check_digest(digest: &str) -> Result<(), OperationError> {
    let hex = digest.strip_prefix("sha256:").unwrap_or("");
    if hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
        Ok(())
    } else {
        Err(OperationError::InvalidDigest { digest: digest.to_owned() })
    }
}
