//! The web consoles' shared parts. `svc serve` serves the publication console and `svc relay
//! serve` the ingress console, each at `/console/`, each from its own crate; what they share
//! is here:
//!
//! - [`console`]: what both consoles do alike around their views (the error page, signing in
//!   and out, refusals, the own-page check of a form);
//! - [`assets`]: the one stylesheet and the one script, embedded in the binary and served
//!   from `/console/assets/` (no CDN, no other origin, no build step);
//! - [`page`]: the page layout every view renders into, HTML written with `maud` (escaped by
//!   default);
//! - [`session`]: signing in: the token exchanged for a random session id in an HttpOnly,
//!   SameSite=Strict cookie (the store keeps its hash), idle and absolute expiry, and the
//!   session's CSRF token every state-changing form carries;
//! - [`attempts`]: sign-in attempts limited per client address;
//! - [`text`]: long identifiers shortened (the whole value on hover and copy), terminal texts'
//!   backtick spans as `<code>`, and rows alike folded into one with their count;
//! - [`headers`]: the Content-Security-Policy (no inline script, nothing from another origin)
//!   and the other headers every console response carries.

#![forbid(unsafe_code)]

pub mod assets;
pub mod attempts;
pub mod console;
pub mod headers;
pub mod page;
pub mod session;
pub mod text;

pub use maud::{Markup, PreEscaped, html};
pub use page::{Nav, Page};
