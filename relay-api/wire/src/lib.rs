//! What the relay's parts say to each other: the agents beside the jobs, the gateways, the
//! coordinator and the operator's tools. Nothing here serves or stores; each part builds on it.
//!
//! - [`wire`]: the tunnel protocol between an agent and a gateway (control frames, data
//!   connection tickets, the PROXY v2 header);
//! - [`challenge`]: the route key and the challenge proof route validation checks;
//! - [`alpn`]: ALPN names the gateway routes by;
//! - [`acme_turn`]: how long the coordinator's ACME turn for a route lapses;
//! - [`admission`]: a gateway host's registration with the coordinator;
//! - [`feed`]: the signed request a gateway host asks the coordinator for its routes with;
//! - [`idle`], [`accept`]: what every listener of the relay shares (idle and linger
//!   deadlines, accept backoff); the connection cap under the open-file limit is `svc-limits`,
//!   re-exported as [`limits`];
//! - [`files`]: private files and directories (0600/0700), replaced atomically;
//! - [`envelope`]: the one JSON error envelope every API and every `--format json` prints
//!   (`svc-envelope`, re-exported).

#![forbid(unsafe_code)]

pub mod accept;
pub mod acme_turn;
pub mod admission;
pub mod alpn;
pub mod challenge;
pub mod feed;
pub mod files;
mod hex;
pub mod idle;
pub mod wire;

// Below both services, each a crate of its own; here under their old paths too.
pub use svc_envelope as envelope;
pub use svc_limits as limits;
