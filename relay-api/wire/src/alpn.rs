//! ALPN protocol names the relay routes by (a ClientHello's ALPN list is sent in the clear,
//! so the gateway reads it without terminating TLS).

/// An ACME server's tls-alpn-01 validation offers this protocol alone (RFC 8737).
pub const ACME_TLS_ALPN: &[u8] = b"acme-tls/1";

/// The ALPN protocol a client offers to reach one route by its ID, `svc-route/<route ID>`:
/// the coordinator validates a redeploy's successor this way before any client is sent to it.
pub const ROUTE_ALPN_PREFIX: &[u8] = b"svc-route/";
