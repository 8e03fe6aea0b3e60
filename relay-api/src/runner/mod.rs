//! Where jobs run: the job runner is the `svc-runner` crate (re-exported here, so
//! `relay_api::runner::...` paths stay), which the publication service's local pool shares;
//! [`layout`] is the relay's own part, how an ingress job (the app and its agent) is laid out.

pub mod layout;

pub use layout::IngressJob;
pub use svc_runner::*;
