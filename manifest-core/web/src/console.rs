//! What both consoles do the same way around their views: which console a page belongs to
//! ([`Console`]: its name, its session cookie, its home page), a request refused before its
//! view ([`Refusal`]: to the sign-in page, or another page), the error page, the sign-in
//! page and its form's checks, signing out, and the check that a state-changing form came
//! from this session's own page. Each console keeps its views, its store and its roles.

use std::net::IpAddr;
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use maud::{Markup, html};

use crate::attempts::{self, Attempt, Attempts};
use crate::page::{Nav, Page, SignedIn, see_other};
use crate::session::{self, Cookie};

/// One console.
#[derive(Debug, Clone, Copy)]
pub struct Console {
    /// Its name in every page's header (`svc console`).
    pub product: &'static str,
    /// Its session cookie.
    pub cookie: Cookie,
    /// The page an error page leads back to, and what its link says.
    pub home: (&'static str, &'static str),
    /// What the sign-in page says when the form arrived without a token.
    pub paste_token: &'static str,
    /// How its tokens begin (`svc_`, `rly_`): told when something else is pasted.
    pub token_prefix: &'static str,
    /// Its sign-in attempts, counted per client address.
    pub attempts: &'static Attempts,
}

/// Why a request was not answered with its view.
#[derive(Debug)]
pub enum Refusal {
    /// Not signed in (no session, or its token was revoked): to the sign-in page.
    SignIn,
    /// Answered with this page instead (not found, forbidden, a failure).
    Page(Box<Response>),
}

impl Refusal {
    /// Answered with `response` instead.
    pub fn page(response: Response) -> Refusal {
        Refusal::Page(Box::new(response))
    }
}

/// Where every console's sign-in page is.
pub const SIGN_IN: &str = "/console/sign-in";

impl Console {
    /// A page of this console.
    pub fn page(&self, title: impl Into<String>, nav: Vec<Nav>, signed_in: Option<SignedIn>) -> Page {
        Page { product: self.product.to_owned(), title: title.into(), nav, signed_in }
    }

    /// A page for a member signed in (`who` names them in the header), with their session's
    /// CSRF token for its sign-out form.
    pub fn member_page(&self, title: impl Into<String>, nav: Vec<Nav>, who: String, csrf: &str) -> Page {
        self.page(title, nav, Some(SignedIn { who, csrf: csrf.to_owned() }))
    }

    /// A page saying `message`, with a link back home.
    pub fn error_page(&self, status: StatusCode, message: &str) -> Response {
        let (home, label) = self.home;
        self.page("Not available", Vec::new(), None).respond(
            status,
            html! {
                p.notice.error role="alert" { (crate::text::prose(message)) }
                p { a href=(home) { (label) } }
            },
        )
    }

    /// The response to a request: its view, or what refused it.
    pub fn answer(&self, result: Result<Response, Refusal>) -> Response {
        match result {
            Ok(r) => r,
            Err(Refusal::Page(r)) => *r,
            Err(Refusal::SignIn) => see_other(SIGN_IN),
        }
    }

    /// The sign-in page: `form` (the console's own, saying what token to paste) under
    /// `problem`, if there is one.
    pub fn sign_in_page(&self, status: StatusCode, form: Markup) -> Response {
        self.page("Sign in", Vec::new(), None).respond(status, form)
    }

    /// The token a sign-in form sent, checked for its origin, the client's attempts and its
    /// shape; or the page that refuses it (`form` renders the sign-in form with a problem).
    /// The attempt is counted from here on: a token of the wrong shape stays counted, the
    /// console says of the others ([`Console::wrong_token`]); dropped, it is taken back.
    #[expect(clippy::result_large_err, reason = "the refusal is the response itself, made once per request")]
    pub fn sign_in_token(
        &self,
        headers: &HeaderMap,
        client: Option<IpAddr>,
        sent: Option<String>,
        form: impl Fn(Option<&str>) -> Markup,
    ) -> Result<(String, Attempt<'static>), Response> {
        if !session::same_origin(headers) {
            return Err(self.error_page(StatusCode::FORBIDDEN, "this form was sent from another site"));
        }
        let attempt = match self.attempts.begin(client, Instant::now()) {
            Ok(attempt) => attempt,
            Err(wait) => return Err(self.too_many_attempts(wait, &form)),
        };
        let Some(sent) = sent else {
            return Err(self.sign_in_page(StatusCode::BAD_REQUEST, form(Some(self.paste_token))));
        };
        let token = sent.trim().to_owned();
        if !session::token_shape(&token) {
            let problem = format!("that is not a token: it starts with `{}`", self.token_prefix);
            return Err(self.wrong_token(attempt, self.sign_in_page(StatusCode::UNAUTHORIZED, form(Some(&problem)))));
        }
        Ok((token, attempt))
    }

    /// The attempt's token was wrong: it stays counted; answers `page`.
    pub fn wrong_token(&self, attempt: Attempt<'_>, page: Response) -> Response {
        attempt.wrong();
        page
    }

    /// 429: the client sent too many wrong tokens; when to try again, in the page and in
    /// `Retry-After`.
    fn too_many_attempts(&self, wait: Duration, form: &impl Fn(Option<&str>) -> Markup) -> Response {
        let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
        let at = u64::try_from(session::now_ms()).unwrap_or(0) / 1000 + secs;
        let problem = format!(
            "too many wrong tokens from your address ({} in {} seconds): try again in {secs} seconds, at {:02}:{:02}:{:02} UTC",
            attempts::FAILURES_PER_WINDOW,
            attempts::WINDOW.as_secs(),
            at / 3600 % 24,
            at / 60 % 60,
            at % 60,
        );
        let mut response = self.sign_in_page(StatusCode::TOO_MANY_REQUESTS, form(Some(&problem)));
        response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(secs));
        response
    }

    /// Whether a sign-out form may end the session: it comes from the console's own origin
    /// with the session's CSRF token (`expected`; `presented`: the form's). Without a session
    /// there is nothing to end, and it may; otherwise the 403 page.
    #[expect(clippy::result_large_err, reason = "the refusal is the response itself, made once per request")]
    pub fn sign_out_allowed(
        &self,
        headers: &HeaderMap,
        expected: Option<&str>,
        presented: Option<&str>,
    ) -> Result<(), Response> {
        let allowed = match (expected, presented) {
            (None, _) => true,
            (Some(expected), Some(presented)) => session::from_own_page(headers, expected, presented),
            (Some(_), None) => false,
        };
        if allowed {
            return Ok(());
        }
        Err(self
            .error_page(StatusCode::FORBIDDEN, "this form was sent from another site, or its page is stale: reload"))
    }

    /// Refused (403) unless a state-changing form came from one of this session's own pages:
    /// its `Origin` is this site and its `presented` CSRF token is the session's (`expected`).
    pub fn from_own_page(&self, headers: &HeaderMap, expected: &str, presented: &str) -> Result<(), Refusal> {
        if session::from_own_page(headers, expected, presented) {
            return Ok(());
        }
        Err(Refusal::page(self.error_page(
            StatusCode::FORBIDDEN,
            "this form was sent from another site, or from a page of an earlier session: reload the page and try again",
        )))
    }
}
