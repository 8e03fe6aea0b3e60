//! The ingress relay: the public gateway that routes TLS by SNI to jobs through their
//! agents' outbound tunnels ([`gateway`]; the wire protocol is `relay_wire::wire`), and the relay
//! coordinator ([`coordinator`]): deployments of `ingress.json` projects ([`project`]), quotes
//! and funding, customer hostnames checked in DNS ([`dns`]), route validation through the
//! public path ([`validation`]), status, logs and recovery hints ([`hint`]). Beside them: the
//! development CA ([`ca`]) and the agent-facing API that signs with it ([`local`]), the job
//! runner ([`runner`]). The coordinator publishes a signed service catalog ([`catalog`]).
//! `svc ingress demo` (in the CLI) runs a coordinator and deploys to it.

#![forbid(unsafe_code)]

pub mod ca;
pub use relay_catalog as catalog;
pub mod coordinator;
pub mod invariants;
pub mod local;
pub mod project;
pub mod runner;
pub mod validation;

/// DNS checks and hints, their own crate (`relay-dns`): here under their old names.
pub use relay_dns::{self as dns, hint};
/// The data plane, its own crate (`relay-gateway`): here under its old name.
pub use relay_gateway as gateway;
