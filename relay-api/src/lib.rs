//! The ingress relay: the public gateway that routes TLS by SNI to jobs through their
//! agents' outbound tunnels ([`gateway`]; the wire protocol is `agent::wire`), the local
//! development CA ([`ca`]), the local coordinator that signs route certificates ([`local`]),
//! the job runner ([`runner`]), the one-command demo ([`demo`]) and route validation through
//! the public path ([`validation`]). The full coordinator (quotes and funding, hostnames,
//! status) follows in the control-plane work.

#![forbid(unsafe_code)]

pub mod ca;
pub mod demo;
pub mod dns;
pub mod gateway;
pub mod hint;
pub mod local;
pub mod project;
pub mod runner;
pub mod validation;
