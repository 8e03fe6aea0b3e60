//! One ACME order at a time per route. A tls-alpn-01 validation carries only the hostname,
//! so when a route has several replicas the gateway sends it to the replica whose heartbeat
//! says it has a challenge pending ([`crate::cert::CurrentCert::pending`]); two replicas
//! pending at once would each get some of the other's validations, and a failed validation
//! costs a CA's rate limit. So a replica asks the coordinator for the route's turn
//! (`POST /api/agent/acme-turn`) before it orders, waits while another holds it, and gives it
//! back as soon as validation is over; a turn not given back lapses after [`TURN_LAPSES`]
//! (the coordinator's side, `relay_api::local`). Turns are per canonical hostname, so a
//! redeploy's successor waits for the serving revision's replicas too. Every agent the
//! coordinator launches names its replica (`job-0` for a one-job route, which gets the turn
//! at once); an agent without a replica name orders without a turn, as before. A
//! coordinator that cannot be asked (an older one, or not reachable) does not stop an order:
//! it goes ahead without the turn, announced all the same. One that does not know the route
//! yet (403: a job can start a moment before its coordinator serves its route) is asked
//! again for [`NOT_KNOWN_YET`] first: ordering without the turn then would race a sibling.

use std::time::Duration;

use serde::Deserialize;

use crate::cert::CertError;
use crate::config::AgentConfig;

// How long a turn not given back holds the route: the coordinator's rule, in `relay-wire`.
pub use relay_wire::acme_turn::TURN_LAPSES;

/// How long a replica waits for the turn before it gives up this attempt (it is retried with
/// the certificate's backoff): longer than a turn can be held.
const WAIT_AT_MOST: Duration = Duration::from_secs(150);

/// How long a coordinator that answers "unknown route" is asked again before the order goes
/// ahead without the turn. Found in CI: the first replica's agent asked 50 ms before its
/// coordinator served the route, ordered without the turn beside its sibling, and the
/// sibling's validation reached it and failed.
const NOT_KNOWN_YET: Duration = Duration::from_secs(10);

/// How long a pending challenge is announced to the gateways before the CA is told to
/// validate: a heartbeat on a working link arrives well within it.
pub const ANNOUNCE: Duration = Duration::from_secs(1);

/// Why the coordinator gave no answer about the turn.
#[derive(Debug, thiserror::Error)]
enum TurnError {
    /// It does not know the route (or its credential) yet.
    #[error("{0}")]
    NotKnownYet(String),
    /// Anything else: not reachable, an older coordinator, an unreadable answer.
    #[error("{0}")]
    Other(String),
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TurnAnswer {
    granted: bool,
    #[serde(default)]
    retry_after_ms: u64,
}

/// The route's ACME turn, held by this replica until [`Turn::give_back`].
#[derive(Debug)]
pub struct Turn {
    /// The coordinator and the request's identity; `None`: no turn held.
    held: Option<(String, serde_json::Value)>,
    /// Whether the agent is one replica of several possible (it names its replica).
    shared: bool,
}

impl Turn {
    /// Takes the route's turn, waiting while another replica holds it. No turn is needed
    /// (and none asked for) by the route's one agent, or without a coordinator.
    pub async fn take(config: &AgentConfig) -> Result<Turn, CertError> {
        let (Some(replica), Some(base)) = (&config.replica, &config.coordinator) else {
            return Ok(Turn { held: None, shared: false });
        };
        let body = serde_json::json!({
            "routeId": config.route_id, "credential": config.credential, "replica": replica,
        });
        let started = tokio::time::Instant::now();
        loop {
            let answer = match crate::http::post_json(base, "/api/agent/acme-turn", &body).await {
                Ok(text) => serde_json::from_str::<TurnAnswer>(&text)
                    .map_err(|e| TurnError::Other(format!("unreadable answer: {e}"))),
                Err(e @ crate::http::CallError::Status { status: hyper::StatusCode::FORBIDDEN, .. }) => {
                    Err(TurnError::NotKnownYet(e.to_string()))
                }
                Err(e) => Err(TurnError::Other(e.to_string())),
            };
            let answer = match answer {
                Ok(answer) => answer,
                Err(TurnError::NotKnownYet(_)) if started.elapsed() < NOT_KNOWN_YET => {
                    tokio::time::sleep(Duration::from_millis(250)).await;
                    continue;
                }
                Err(e) => {
                    tracing::warn!("svc agent: the route's ACME turn: {e}; ordering without it");
                    return Ok(Turn { held: None, shared: true });
                }
            };
            if answer.granted {
                return Ok(Turn { held: Some((base.clone(), body)), shared: true });
            }
            if started.elapsed() > WAIT_AT_MOST {
                return Err(CertError::Issuer(
                    "another replica of the route has been ordering its certificate for too long; retrying later"
                        .into(),
                ));
            }
            let wait = Duration::from_millis(answer.retry_after_ms).clamp(Duration::from_millis(200), TURN_LAPSES);
            tokio::time::sleep(wait).await;
        }
    }

    /// Whether this replica shares its route with others (so its pending challenge must be
    /// announced before the CA is told).
    pub fn shared(&self) -> bool {
        self.shared
    }

    /// Gives the turn back (best effort: a turn not given back lapses).
    pub async fn give_back(self) {
        if let Some((base, mut body)) = self.held {
            body["release"] = serde_json::json!(true);
            if let Err(e) = crate::http::post_json(&base, "/api/agent/acme-turn", &body).await {
                tracing::debug!("svc agent: giving the ACME turn back: {e} (it lapses)");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// A coordinator on loopback that answers 403 to the first `unknown` requests, then
    /// grants the turn; and how many requests it has had.
    async fn coordinator(unknown: usize) -> (String, Arc<AtomicUsize>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("address"));
        let asked = Arc::new(AtomicUsize::new(0));
        let count = asked.clone();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let n = count.fetch_add(1, Ordering::SeqCst);
                let mut request = vec![0; 4096];
                let _ = stream.read(&mut request).await;
                let (status, body) = if n < unknown {
                    (
                        "403 Forbidden",
                        r#"{"error": {"code": "forbidden", "message": "unknown route or wrong credential"}}"#,
                    )
                } else {
                    ("200 OK", r#"{"granted": true}"#)
                };
                let answer = format!(
                    "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(answer.as_bytes()).await;
            }
        });
        (base, asked)
    }

    fn config(coordinator: &str) -> AgentConfig {
        serde_json::from_value(serde_json::json!({
            "routeId": "r", "hostname": "a.localhost", "credential": "c",
            "routeKey": crate::challenge::RouteKey::generate().expect("a key"),
            "gateway": "127.0.0.1:1", "gatewayName": "gateway.localhost", "gatewayCa": "/ca.pem",
            "appPort": 3000, "certificate": {"kind": "dev_ca", "url": "http://127.0.0.1:2", "validity_secs": 60},
            "coordinator": coordinator, "replica": "job-0",
        }))
        .expect("a configuration")
    }

    #[tokio::test]
    async fn a_coordinator_that_does_not_know_the_route_yet_is_asked_again_before_ordering_without_the_turn() {
        let (base, asked) = coordinator(3).await;
        let turn = Turn::take(&config(&base)).await.expect("a turn");
        assert!(turn.held.is_some(), "granted once the coordinator knew the route, not ordered without it");
        assert_eq!(asked.load(Ordering::SeqCst), 4);
    }
}
