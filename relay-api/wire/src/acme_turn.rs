//! The ACME turn the coordinator's agent API grants (`POST /api/agent/acme-turn`): one ACME
//! order at a time per route, so a route's replicas never answer each other's TLS-ALPN-01
//! validations. The coordinator grants and takes back the turn; the agent asks for it and
//! bounds its wait by the same lapse.

use std::time::Duration;

/// How long a turn not given back holds the route: the coordinator's rule, told to the
/// waiting side so it knows its bound.
pub const TURN_LAPSES: Duration = Duration::from_secs(120);
