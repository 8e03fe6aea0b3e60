//! A deployment's customer hostnames from its console page: add one (its DNS records then
//! appear under What to fix, each with a Copy button), check its DNS now, remove it. Each is
//! the relay's own operation, the API's too (`POST .../hostnames`, `.../verify`, `DELETE`).

use std::sync::Arc;

use axum::extract::rejection::FormRejection;
use axum::extract::{Form, Path, State};
use axum::http::HeaderMap;
use axum::response::Response;
use serde::Deserialize;
use svc_web::page::see_other;

use super::{Engine, act, acting_member, answer};
use crate::coordinator::operations::{add_hostname_to, remove_hostname_of, verify_hostname_of};

/// The add form: the hostname, and the CSRF token.
#[derive(Deserialize)]
pub(super) struct AddForm {
    csrf: String,
    hostname: String,
}

/// Adds a customer hostname, as `svc ingress hostname add` does.
pub(super) async fn add(
    State(engine): State<Arc<Engine>>,
    headers: HeaderMap,
    Path(project): Path<String>,
    form: Result<Form<AddForm>, FormRejection>,
) -> Response {
    let (csrf, hostname) = form.ok().map(|Form(f)| (f.csrf, f.hostname)).unwrap_or_default();
    act(engine, headers, project, csrf, "hostname_added", move |engine, d, caller| {
        add_hostname_to(engine, caller, &d.id, &hostname).map(|_| ())
    })
    .await
}

/// Removes a customer hostname, as `svc ingress hostname remove` does.
pub(super) async fn remove(
    State(engine): State<Arc<Engine>>,
    headers: HeaderMap,
    Path((project, hostname)): Path<(String, String)>,
    form: Result<Form<super::ActionForm>, FormRejection>,
) -> Response {
    let csrf = form.ok().map(|Form(f)| f.csrf).unwrap_or_default();
    act(engine, headers, project, csrf, "hostname_removed", move |engine, d, caller| {
        remove_hostname_of(engine, caller, &d.id, &hostname).map(|_| ())
    })
    .await
}

/// Checks a customer hostname's DNS now, as `svc ingress hostname verify` does: missing or
/// wrong records stay listed under What to fix.
pub(super) async fn verify(
    State(engine): State<Arc<Engine>>,
    headers: HeaderMap,
    Path((project, hostname)): Path<(String, String)>,
    form: Result<Form<super::ActionForm>, FormRejection>,
) -> Response {
    let csrf = form.ok().map(|Form(f)| f.csrf).unwrap_or_default();
    answer(
        async {
            let member = acting_member(&engine, &headers, &csrf).await?.customer()?;
            // The forms name the deployment by its ID: the page this goes back to is the one
            // the form was on.
            verify_hostname_of(engine, member.caller, project.clone(), hostname).await?;
            Ok(see_other(&format!("/console/deployments/{project}?done=hostname_checked")))
        }
        .await,
    )
}
