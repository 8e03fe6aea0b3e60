//! The layout every console page renders into: a header with the console's name, the member
//! signed in and a sign-out form; a navigation list; the view's content in `<main>`. The
//! stylesheet and the script come from [`crate::assets`].

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use maud::{DOCTYPE, Markup, html};

/// One navigation link.
#[derive(Debug, Clone)]
pub struct Nav {
    /// Where it goes.
    pub href: String,
    /// What it says.
    pub label: String,
    /// Whether it is the page shown (`aria-current="page"`).
    pub current: bool,
}

impl Nav {
    /// A link.
    pub fn new(href: impl Into<String>, label: impl Into<String>, current: bool) -> Nav {
        Nav { href: href.into(), label: label.into(), current }
    }
}

/// The member signed in, as the header shows them.
#[derive(Debug, Clone)]
pub struct SignedIn {
    /// Who (the token's name and role).
    pub who: String,
    /// The session's CSRF token, for the sign-out form.
    pub csrf: String,
}

/// A page: its title and navigation, around a view's content.
#[derive(Debug, Clone)]
pub struct Page {
    /// The console's name (`svc console`).
    pub product: String,
    /// The page's title (also its `<h1>`).
    pub title: String,
    /// The navigation.
    pub nav: Vec<Nav>,
    /// The member signed in, if any.
    pub signed_in: Option<SignedIn>,
}

impl Page {
    /// The whole document.
    pub fn render(&self, content: Markup) -> Markup {
        html! {
            (DOCTYPE)
            html lang="en" {
                head {
                    meta charset="utf-8";
                    meta name="viewport" content="width=device-width, initial-scale=1";
                    title { (self.title) " · " (self.product) }
                    link rel="stylesheet" href="/console/assets/console.css";
                    script src="/console/assets/console.js" defer {}
                }
                body {
                    header.top {
                        span.brand { (self.product) }
                        @if let Some(member) = &self.signed_in {
                            span.muted { "signed in as " (member.who) }
                            form method="post" action="/console/sign-out" {
                                input type="hidden" name="csrf" value=(member.csrf);
                                button.plain type="submit" { "Sign out" }
                            }
                        }
                    }
                    @if !self.nav.is_empty() {
                        nav aria-label="Console" {
                            ul {
                                @for link in &self.nav {
                                    li {
                                        @if link.current {
                                            a href=(link.href) aria-current="page" { (link.label) }
                                        } @else {
                                            a href=(link.href) { (link.label) }
                                        }
                                    }
                                }
                            }
                        }
                    }
                    main {
                        h1 { (self.title) }
                        (content)
                    }
                }
            }
        }
    }

    /// The page as a response with `status`.
    pub fn respond(&self, status: StatusCode, content: Markup) -> Response {
        html_response(status, self.render(content))
    }
}

/// Markup (a page or a fragment) as a `text/html` response.
pub fn html_response(status: StatusCode, markup: Markup) -> Response {
    let mut response = (status, markup.into_string()).into_response();
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"));
    response
}

/// A redirect after a form (303: the browser follows with a GET).
pub fn see_other(location: &str) -> Response {
    let mut response = StatusCode::SEE_OTHER.into_response();
    if let Ok(v) = HeaderValue::from_str(location) {
        response.headers_mut().insert(header::LOCATION, v);
    }
    response
}

/// A state's badge: its word, styled by its class (`state-ready`, `state-blocked`, ...).
pub fn state(word: &str) -> Markup {
    let class = format!("state state-{}", word.replace(|c: char| !c.is_ascii_alphanumeric(), "-"));
    html! { span class=(class) { (word) } }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_page_shows_is_escaped() {
        let page = Page {
            product: "svc console".into(),
            title: "<script>alert(1)</script>".into(),
            nav: vec![Nav::new("/console/apps", "Applications", true)],
            signed_in: Some(SignedIn { who: "dev \"x\"".into(), csrf: "c0ffee".into() }),
        };
        let html = page.render(html! { p { "a & b" } }).into_string();
        assert!(!html.contains("<script>alert"), "{html}");
        assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(html.contains("a &amp; b"));
        assert!(html.contains(r#"aria-current="page""#));
        assert!(html.contains(r#"name="csrf" value="c0ffee""#));
        // One script element, the asset's: nothing inline (the title's is escaped above).
        assert_eq!(html.matches("<script").count(), 1, "only the asset script: {html}");
        assert!(html.contains(r#"<script src="/console/assets/console.js" defer></script>"#));
    }
}
