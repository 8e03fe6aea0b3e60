//! What both consoles do the same way around their views: which console a page belongs to
//! ([`Console`]: its name, its session cookie, its home page), a request refused before its
//! view ([`Refusal`]: to the sign-in page, or another page), the error page, the sign-in
//! page and its form's checks, signing out, and the check that a state-changing form came
//! from this session's own page. Each console keeps its views, its store and its roles.

use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use maud::{Markup, html};

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

    /// A page for a member signed in with `token` (`who` names them in the header).
    pub fn member_page(&self, title: impl Into<String>, nav: Vec<Nav>, who: String, token: &str) -> Page {
        self.page(title, nav, Some(SignedIn { who, csrf: session::csrf(token) }))
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

    /// The token a sign-in form sent, checked for its origin and its shape; or the page that
    /// refuses it (`form` renders the sign-in form with a problem).
    #[expect(clippy::result_large_err, reason = "the refusal is the response itself, made once per request")]
    pub fn sign_in_token(
        &self,
        headers: &HeaderMap,
        sent: Option<String>,
        form: impl Fn(Option<&str>) -> Markup,
    ) -> Result<String, Response> {
        if !session::same_origin(headers) {
            return Err(self.error_page(StatusCode::FORBIDDEN, "this form was sent from another site"));
        }
        let Some(sent) = sent else {
            return Err(self.sign_in_page(StatusCode::BAD_REQUEST, form(Some(self.paste_token))));
        };
        let token = sent.trim().to_owned();
        if !session::token_shape(&token) {
            let problem = format!("that is not a token: it starts with `{}`", self.token_prefix);
            return Err(self.sign_in_page(StatusCode::UNAUTHORIZED, form(Some(&problem))));
        }
        Ok(token)
    }

    /// Signs out, if the form came from one of this console's pages.
    pub fn sign_out(&self, headers: &HeaderMap, csrf: Option<&str>) -> Response {
        if !self.cookie.sign_out_allowed(headers, csrf) {
            return self.error_page(
                StatusCode::FORBIDDEN,
                "this form was sent from another site, or its page is stale: reload",
            );
        }
        self.cookie.signed_out(SIGN_IN)
    }

    /// Refused (403) unless a state-changing form came from one of this session's own pages:
    /// its `Origin` is this site and its `csrf` is the session's.
    pub fn from_own_page(&self, headers: &HeaderMap, token: &str, csrf: &str) -> Result<(), Refusal> {
        if session::from_own_page(headers, token, csrf) {
            return Ok(());
        }
        Err(Refusal::page(self.error_page(
            StatusCode::FORBIDDEN,
            "this form was sent from another site, or from a page of an earlier session: reload the page and try again",
        )))
    }
}
