//! The ingress console at `/console/` of `svc relay serve`. A customer signed in with their
//! token sees their deployments (stopped ones too), and each deployment's state, hints with
//! the exact DNS records to create, hostnames (added, checked and removed here), validations,
//! funds with refunds, the ledger, state timeline and live logs; a gateway operator signed in
//! with theirs sees their rewards and claims them ([`rewards`]); both see the relay's signed
//! catalog and whether it verifies ([`catalog`]). Server-rendered (`views`), with the layout,
//! assets, session cookie and CSRF checks of `svc-web`, the same as the publication console's;
//! every change is the relay's own operation (`super::operations`), the same as the API's,
//! its refusals shown with the API's status and message.

mod catalog;
mod hostnames;
mod rewards;
mod views;

use std::sync::Arc;

use axum::Router;
use axum::extract::rejection::FormRejection;
use axum::extract::{Extension, Form, Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use svc_web::console::{Console as Site, Refusal};
use svc_web::page::{Nav, Page, html_response, see_other};
use svc_web::session;

use super::Engine;
use super::http::{ApiError, member_of_token};
use super::operations::{self, OperationError};
use super::store::{Caller, ConsoleSession, StoreError, TokenRole};
use svc_http::ClientAddr;

/// This console: its name, its cookie, its home.
const CONSOLE: Site = Site {
    product: "svc ingress console",
    cookie: session::INGRESS,
    home: ("/console/", "Back to the console"),
    paste_token: "paste your customer or operator token",
    token_prefix: "rly_",
    attempts: &ATTEMPTS,
};

/// The ingress console's sign-in attempts (per process).
static ATTEMPTS: svc_web::attempts::Attempts = svc_web::attempts::Attempts::new();

/// Log lines the live region shows.
const LOG_LINES: u32 = 100;

/// Transitions the timeline shows, newest first (a page's work stays bounded however long a
/// deployment has lived).
const TIMELINE_ROWS: u32 = 50;

/// Ledger entries the page shows, newest first (`svc ingress ledger` lists them all).
const LEDGER_ROWS: u32 = 100;

/// What the console's handlers read: the engine (its store and the catalog's publisher).
#[derive(Clone)]
struct Console {
    engine: Arc<Engine>,
}

impl axum::extract::FromRef<Console> for Arc<Engine> {
    fn from_ref(console: &Console) -> Arc<Engine> {
        console.engine.clone()
    }
}

/// The console's routes, at `/console/`, merged into the relay's router.
pub(super) fn router(engine: Arc<Engine>) -> Router {
    let console = Router::new()
        .route("/", get(home))
        .route("/sign-in", get(sign_in_form).post(sign_in))
        .route("/sign-out", post(sign_out))
        .route("/deployments", get(deployments))
        .route("/deployments/{project}", get(deployment))
        .route("/deployments/{project}/logs/live", get(logs_live))
        .route("/deployments/{project}/stop", post(stop))
        .route("/deployments/{project}/fund", post(fund))
        .route("/deployments/{project}/sessions/{session}/refund", post(refund))
        .route("/deployments/{project}/hostnames", post(hostnames::add))
        .route("/deployments/{project}/hostnames/{hostname}/verify", post(hostnames::verify))
        .route("/deployments/{project}/hostnames/{hostname}/remove", post(hostnames::remove))
        .route("/rewards", get(rewards::page))
        .route("/rewards/claim", post(rewards::claim))
        .route("/catalog", get(catalog::page))
        .route("/assets/{name}", get(svc_web::assets::serve))
        // Ids in the path checked first, answered with a page (named as the API names them).
        .route_layer(axum::middleware::from_fn_with_state(
            svc_http::PathIds {
                answer: |p| error_page(StatusCode::BAD_REQUEST, &p.to_string()),
                ..super::http::PATH_IDS
            },
            svc_http::path_id_check,
        ))
        .fallback(|| async { error_page(StatusCode::NOT_FOUND, "no such page") })
        .layer(axum::middleware::map_response(svc_web::headers::secure))
        .with_state(Console { engine });
    Router::new()
        .nest("/console", console)
        // The console's own address, with its slash: `nest` serves `/console` only.
        .route("/console/", get(|| async { svc_web::page::see_other("/console") }))
}

/// A member signed in, and their session's CSRF token.
struct Member {
    caller: Caller,
    csrf: String,
}

impl Member {
    /// The member's landing page.
    fn home(&self) -> &'static str {
        match self.caller.role {
            TokenRole::Customer => "/console/deployments",
            TokenRole::Operator => "/console/rewards",
        }
    }

    /// Refused unless the member is a customer (deployments are customers').
    fn customer(self) -> Result<Member, Refusal> {
        match self.caller.role {
            TokenRole::Customer => Ok(self),
            TokenRole::Operator => Err(Refusal::page(error_page(
                StatusCode::FORBIDDEN,
                "an operator token sees its rewards and the catalog; deployments are a customer's",
            ))),
        }
    }

    /// What the member may go to, `current` marked.
    fn nav(&self, project: Option<&str>, current: &str) -> Vec<Nav> {
        let mut links = match self.caller.role {
            TokenRole::Customer => vec![Nav::new("/console/deployments", "Deployments", current == "deployments")],
            TokenRole::Operator => vec![Nav::new("/console/rewards", "Rewards", current == "rewards")],
        };
        if let Some(p) = project {
            links.push(Nav::new(format!("/console/deployments/{p}"), p.to_owned(), current == "deployment"));
        }
        links.push(Nav::new("/console/catalog", "Catalog", current == "catalog"));
        links
    }

    fn page(&self, title: impl Into<String>, nav: Vec<Nav>) -> Page {
        let who = match self.caller.role {
            TokenRole::Customer => format!("{} (organization {})", self.caller.token_name, self.caller.org_name),
            TokenRole::Operator => format!("{} (operator {})", self.caller.token_name, self.caller.org_name),
        };
        CONSOLE.member_page(title, nav, who, &self.csrf)
    }
}

impl From<ApiError> for Refusal {
    fn from(e: ApiError) -> Refusal {
        if e.status() == StatusCode::INTERNAL_SERVER_ERROR {
            return Refusal::page(e.into_response());
        }
        Refusal::page(error_page(e.status(), e.message()))
    }
}

impl From<OperationError> for Refusal {
    fn from(e: OperationError) -> Refusal {
        Refusal::from(ApiError::from(e))
    }
}

impl From<super::store::StoreError> for Refusal {
    fn from(e: super::store::StoreError) -> Refusal {
        Refusal::from(ApiError::from(e))
    }
}

fn answer(result: Result<Response, Refusal>) -> Response {
    CONSOLE.answer(result)
}

/// Store work off the async runtime.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
) -> Result<T, Refusal> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| Refusal::page(svc_http::internal_error(format!("a console task failed: {e}"))))?
        .map_err(Refusal::from)
}

/// The session the request's cookie names, if it is live: read on every request through its
/// token's row (a revoked token signs its sessions out at once), recorded used at most once a
/// `TOUCH_MS`. Its hash, and the session.
async fn session_of(engine: &Arc<Engine>, headers: &HeaderMap) -> Result<Option<(String, ConsoleSession)>, Refusal> {
    let Some(id) = session::INGRESS.session_id(headers) else { return Ok(None) };
    let hash = session::id_hash(&id);
    let engine = engine.clone();
    blocking(move || Ok(engine.store().console_session(&hash, session::now_ms())?.map(|s| (hash, s)))).await
}

/// The member behind the session cookie, read on every request: a customer's organization
/// must still hold its invitation, as the API asks of its token.
async fn member(engine: &Arc<Engine>, headers: &HeaderMap) -> Result<Member, Refusal> {
    let (_, found) = session_of(engine, headers).await?.ok_or(Refusal::SignIn)?;
    if found.caller.role == TokenRole::Customer && !found.caller.invited {
        return Err(Refusal::SignIn);
    }
    Ok(Member { caller: found.caller, csrf: found.csrf })
}

fn error_page(status: StatusCode, message: &str) -> Response {
    CONSOLE.error_page(status, message)
}

async fn home(State(engine): State<Arc<Engine>>, headers: HeaderMap) -> Response {
    match member(&engine, &headers).await {
        Ok(member) => see_other(member.home()),
        Err(refusal) => answer(Err(refusal)),
    }
}

fn sign_in_page(status: StatusCode, problem: Option<&str>) -> Response {
    CONSOLE.sign_in_page(status, views::sign_in(problem))
}

async fn sign_in_form() -> Response {
    sign_in_page(StatusCode::OK, None)
}

#[derive(Deserialize)]
struct SignInForm {
    token: String,
}

/// Signs in: the token exchanged for a new session (its row stored, a few expired ones
/// collected), the session's id in the cookie. A wrong token counts against the client's
/// address.
async fn sign_in(
    State(engine): State<Arc<Engine>>,
    client: Option<Extension<ClientAddr>>,
    headers: HeaderMap,
    form: Result<Form<SignInForm>, FormRejection>,
) -> Response {
    let client = client.map(|Extension(ClientAddr(ip))| ip);
    let (token, attempt) =
        match CONSOLE.sign_in_token(&headers, client, form.ok().map(|Form(f)| f.token), views::sign_in) {
            Ok(found) => found,
            Err(refused) => return refused,
        };
    let made = blocking(move || {
        let caller = member_of_token(&engine, &token)?;
        let new = session::NewSession::generate()
            .map_err(|e| StoreError::Backend(format!("no random numbers for a console session: {e}").into()))?;
        let token_hash = relay_wire::wire::sha256_hex(token.as_bytes());
        engine.store().start_console_session(&new.id_hash, &token_hash, &new.csrf, session::now_ms())?;
        Ok((caller, new))
    })
    .await;
    match made {
        Ok((caller, new)) => {
            let home = Member { caller, csrf: String::new() }.home();
            session::INGRESS.signed_in(&new, home, &headers)
        }
        Err(Refusal::Page(r)) if r.status() == StatusCode::INTERNAL_SERVER_ERROR => *r,
        Err(Refusal::Page(r)) if r.status() == StatusCode::FORBIDDEN => {
            sign_in_page(StatusCode::FORBIDDEN, Some("this organization has no invitation to the ingress add-on yet"))
        }
        Err(Refusal::Page(r)) if r.status() == StatusCode::SERVICE_UNAVAILABLE => *r,
        Err(_) => CONSOLE.wrong_token(
            attempt,
            sign_in_page(
                StatusCode::UNAUTHORIZED,
                Some("no customer or gateway operator has this token (it may have been revoked)"),
            ),
        ),
    }
}

#[derive(Deserialize)]
struct CsrfForm {
    csrf: String,
}

/// Signs out: the session's row deleted (its cookie is worthless from now on, wherever it
/// was copied), then the cookie cleared.
async fn sign_out(
    State(engine): State<Arc<Engine>>,
    headers: HeaderMap,
    form: Result<Form<CsrfForm>, FormRejection>,
) -> Response {
    let found = match session_of(&engine, &headers).await {
        Ok(found) => found,
        Err(refusal) => return answer(Err(refusal)),
    };
    let presented = form.ok().map(|Form(f)| f.csrf);
    let expected = found.as_ref().map(|(_, s)| s.csrf.as_str());
    if let Err(refused) = CONSOLE.sign_out_allowed(&headers, expected, presented.as_deref()) {
        return refused;
    }
    if let Some((hash, _)) = found
        && let Err(refusal) = blocking(move || Ok(engine.store().end_console_session(&hash)?)).await
    {
        return answer(Err(refusal));
    }
    session::INGRESS.signed_out(svc_web::console::SIGN_IN, &headers)
}

async fn deployments(State(engine): State<Arc<Engine>>, headers: HeaderMap) -> Response {
    answer(
        async {
            let member = member(&engine, &headers).await?.customer()?;
            let org = member.caller.org_id.clone();
            let reader = engine.clone();
            let list = blocking(move || {
                Ok(reader.store().deployments_of(&org)?.into_iter().map(|d| reader.with_url(d)).collect::<Vec<_>>())
            })
            .await?;
            let page = member.page("Deployments", member.nav(None, "deployments"));
            Ok(page.respond(StatusCode::OK, views::deployments(&member.caller.org_name, &list)))
        }
        .await,
    )
}

/// The deployment `project` names (a project's newest deployment, or a `dep_...` ID) in the
/// member's organization, with what its page shows.
/// What a redirect back to the deployment tells it to say.
#[derive(Deserialize)]
struct DoneQuery {
    done: Option<String>,
}

async fn deployment(
    State(engine): State<Arc<Engine>>,
    headers: HeaderMap,
    Path(project): Path<String>,
    query: Result<axum::extract::Query<DoneQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    answer(
        async {
            let member = member(&engine, &headers).await?.customer()?;
            let org = member.caller.org_id.clone();
            let reader = engine.clone();
            let name = project.clone();
            let view = blocking(move || {
                let store = reader.store();
                let Some(d) = store.deployment_of(&org, &name)? else { return Ok(None) };
                let d = reader.with_url(d);
                let config = reader.config();
                let fund_periods =
                    crate::project::read(&store.project_json(&d.id)?).map_or(1, |p| u64::from(p.spend.fund_periods));
                Ok(Some(views::DeploymentView {
                    balance: store.balance(&d.id)?,
                    funding: reader.funding(&d)?,
                    now: super::store::now_ms(),
                    price_micros: config.price_micros,
                    period_secs: config.period.as_secs(),
                    fund_periods,
                    hints: reader.hints(&d)?,
                    hostnames: store.hostnames(&d.id)?,
                    validations: store.latest_validations(&d.id)?,
                    transitions: store.recent_transitions(&d.id, TIMELINE_ROWS)?,
                    logs: store.recent_logs(&d.id, LOG_LINES)?,
                    sessions: store.sessions(&d.id)?,
                    ledger: store.recent_ledger(&d.id, LEDGER_ROWS)?,
                    adds_hostnames: reader.issues_customer_certificates(),
                    deployment: d,
                }))
            })
            .await?;
            let Some(view) = view else {
                return Ok(error_page(StatusCode::NOT_FOUND, "no such deployment in your organization"));
            };
            let page = member.page(view.deployment.project.clone(), member.nav(Some(&project), "deployment"));
            let done = match query.ok().and_then(|q| q.0.done).as_deref() {
                Some("stopped") => Some("Stopped. What its funds did not serve is refundable below."),
                Some("refunded") => Some("Refunded: the ledger has its refund entry."),
                Some("funded") => Some("Funded: the balance and when the funds run out include it."),
                Some("hostname_added") => {
                    Some("Added. Create the DNS records listed under What to fix, then check its DNS below.")
                }
                Some("hostname_checked") => Some("Checked its DNS: what it found is below."),
                Some("hostname_removed") => Some("Removed: the route no longer answers for it."),
                _ => None,
            };
            Ok(page.respond(StatusCode::OK, views::deployment(&view, done, &member.csrf)))
        }
        .await,
    )
}

/// The logs region alone, which the page's script swaps in every two seconds; 401 when
/// signed out, so the script goes to the sign-in page.
async fn logs_live(State(engine): State<Arc<Engine>>, headers: HeaderMap, Path(project): Path<String>) -> Response {
    let member = match member(&engine, &headers).await.and_then(Member::customer) {
        Ok(m) => m,
        Err(Refusal::SignIn) => return StatusCode::UNAUTHORIZED.into_response(),
        Err(Refusal::Page(r)) => return *r,
    };
    let org = member.caller.org_id.clone();
    let found = blocking(move || {
        let store = engine.store();
        match store.deployment_of(&org, &project)? {
            Some(d) => Ok(Some(store.recent_logs(&d.id, LOG_LINES)?)),
            None => Ok(None),
        }
    })
    .await;
    match found {
        Ok(Some(logs)) => {
            let mut response = html_response(StatusCode::OK, views::logs(&logs));
            response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            response
        }
        Ok(None) => error_page(StatusCode::NOT_FOUND, "no such deployment in your organization"),
        Err(refusal) => answer(Err(refusal)),
    }
}

/// A form that changes a deployment: its CSRF token.
#[derive(Deserialize)]
struct ActionForm {
    csrf: String,
}

/// The member behind a form that changes something: signed in, and the form from one of
/// this session's own pages (its `csrf`).
async fn acting_member(engine: &Arc<Engine>, headers: &HeaderMap, csrf: &str) -> Result<Member, Refusal> {
    let member = member(engine, headers).await?;
    CONSOLE.from_own_page(headers, &member.csrf, csrf)?;
    Ok(member)
}

/// Runs `change` on the member's deployment `project` after the form's checks (`csrf`), then
/// goes back to the deployment's page saying `done`.
async fn act(
    engine: Arc<Engine>,
    headers: HeaderMap,
    project: String,
    csrf: String,
    done: &'static str,
    change: impl FnOnce(&Engine, &super::model::Deployment, &Caller) -> Result<(), OperationError> + Send + 'static,
) -> Response {
    answer(
        async {
            let member = acting_member(&engine, &headers, &csrf).await?.customer()?;
            let caller = member.caller.clone();
            let name = project.clone();
            let changed = blocking(move || {
                let Some(d) = engine.store().deployment_of(&caller.org_id, &name)? else { return Ok(false) };
                change(&engine, &d, &caller)?;
                engine.wake();
                Ok(true)
            })
            .await?;
            if !changed {
                return Ok(error_page(StatusCode::NOT_FOUND, "no such deployment in your organization"));
            }
            Ok(see_other(&format!("/console/deployments/{project}?done={done}")))
        }
        .await,
    )
}

/// Stops the deployment, as `svc ingress stop` does.
async fn stop(
    State(engine): State<Arc<Engine>>,
    headers: HeaderMap,
    Path(project): Path<String>,
    form: Result<Form<ActionForm>, FormRejection>,
) -> Response {
    let csrf = form.ok().map(|Form(f)| f.csrf).unwrap_or_default();
    act(engine, headers, project, csrf, "stopped", |engine, d, caller| {
        operations::stop(engine, caller, d, &format!("stopped by {} (console)", caller.token_name))?;
        Ok(())
    })
    .await
}

/// The Fund form: its CSRF token, how many periods, and what the deployment had been funded
/// when the page was shown (micros), so that the same form sent again funds nothing.
#[derive(Deserialize)]
struct FundForm {
    csrf: String,
    periods: String,
    #[serde(default)]
    funded: String,
}

/// One console funding at a time in this process: the check that nothing was funded since the
/// page was shown and the funding are one step (a double click sends the form twice at once).
static FUNDING: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Quotes and funds more periods, as `svc ingress fund --periods N` does.
async fn fund(
    State(engine): State<Arc<Engine>>,
    headers: HeaderMap,
    Path(project): Path<String>,
    form: Result<Form<FundForm>, FormRejection>,
) -> Response {
    let (csrf, periods, shown) = form.ok().map(|Form(f)| (f.csrf, f.periods, f.funded)).unwrap_or_default();
    // Not a whole number: 0, which the quote refuses with the range it takes.
    let periods = periods.trim().parse::<u64>().unwrap_or(0);
    let shown = shown.trim().parse::<u64>().ok();
    act(engine, headers, project, csrf, "funded", move |engine, d, caller| {
        let _one = FUNDING.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        // The form sent again (a double click, a reload that resends it, a replay): the
        // deployment was funded since its page was shown, and is not funded twice.
        if shown != Some(engine.store().balance(&d.id)?.funded_micros) {
            return Err(super::store::StoreError::Refused {
                code: "funded_meanwhile",
                message: "the deployment was funded since this page was shown (this form was sent already?): \
                          reload the page to see its balance, and fund again if you mean to"
                    .to_owned(),
            }
            .into());
        }
        let entry = operations::quote_and_fund(engine, d, Some(periods))?;
        tracing::info!(deployment = %d.id, token = %caller.token_id, micros = entry.amount_micros, "funded (console)");
        Ok(())
    })
    .await
}

/// Refunds what a session has refundable, as `svc ingress refund` does.
async fn refund(
    State(engine): State<Arc<Engine>>,
    headers: HeaderMap,
    Path((project, session_id)): Path<(String, String)>,
    form: Result<Form<ActionForm>, FormRejection>,
) -> Response {
    let csrf = form.ok().map(|Form(f)| f.csrf).unwrap_or_default();
    let named = project.clone();
    act(engine, headers, project, csrf, "refunded", move |engine, _, caller| {
        operations::refund(engine, caller, &named, &session_id)?;
        Ok(())
    })
    .await
}
