//! What a gateway host says to the coordinator.
//!
//! - [`key`]: the operator's Ed25519 key (`gateway-prep init` makes it; it signs the host's
//!   registration and every route feed request) and the tunnel port's certificate.
//! - [`coordinator`]: the coordinator's API as a gateway host calls it: health, registration,
//!   the route feed.
//! - [`follow`]: a gateway following the route feed (`svc gateway run` with a `coordinator`
//!   in its file): the coordinator's table applied as it changes, the last one kept while the
//!   coordinator cannot be reached, and the feed's state in the gateway's metrics.

#![forbid(unsafe_code)]

pub mod coordinator;
pub mod follow;
pub mod key;
