//! The local coordinator of the embedded default: it knows the routes it created and signs
//! each route's certificate requests with the development CA (`POST /api/dev-ca/sign`),
//! after checking the route's credential and that the CSR names only the route's hostnames.
//! The full coordinator (quotes, funding, validation, customer hostnames) builds on this.

use std::net::SocketAddr;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;

use crate::ca::DevCa;
use crate::gateway::RouteConfig;
use agent::wire;

/// Certificates are issued for at least a minute and at most 90 days.
const VALIDITY: std::ops::RangeInclusive<u64> = 60..=90 * 24 * 3600;

/// The coordinator's state.
#[derive(Debug)]
pub struct LocalCoordinator {
    ca: DevCa,
    routes: RwLock<Vec<RouteConfig>>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SignRequest {
    route_id: String,
    credential: String,
    csr: String,
    validity_secs: u64,
}

impl LocalCoordinator {
    /// A coordinator issuing from `ca`.
    pub fn new(ca: DevCa) -> Arc<LocalCoordinator> {
        Arc::new(LocalCoordinator { ca, routes: RwLock::default() })
    }

    /// The routes it knows (and the gateway serves).
    pub fn set_routes(&self, routes: Vec<RouteConfig>) {
        if let Ok(mut r) = self.routes.write() {
            *r = routes;
        }
    }

    /// The development CA.
    pub fn ca(&self) -> &DevCa {
        &self.ca
    }

    fn sign(&self, req: &SignRequest) -> Result<String, (StatusCode, String)> {
        let presented = wire::sha256_hex(req.credential.as_bytes());
        let route = self
            .routes
            .read()
            .ok()
            .and_then(|r| r.iter().find(|r| r.route_id == req.route_id && r.credential_sha256 == presented).cloned())
            .ok_or((StatusCode::FORBIDDEN, "unknown route or wrong credential".to_owned()))?;
        if !VALIDITY.contains(&req.validity_secs) {
            return Err((StatusCode::BAD_REQUEST, format!("validitySecs must be within {VALIDITY:?}")));
        }
        let names = csr_names(&req.csr).map_err(|e| (StatusCode::BAD_REQUEST, e))?;
        if let Some(other) = names.iter().find(|n| !route.hostnames.iter().any(|h| h.eq_ignore_ascii_case(n))) {
            return Err((StatusCode::FORBIDDEN, format!("{other} is not a hostname of route {}", route.route_id)));
        }
        self.ca
            .sign_csr(&req.csr, Duration::from_secs(req.validity_secs))
            .map_err(|e| (StatusCode::BAD_REQUEST, e.to_string()))
    }

    /// Serves the coordinator's HTTP API on `listener` until the task is dropped.
    pub async fn serve(self: Arc<Self>, listener: tokio::net::TcpListener) {
        let app = axum::Router::new()
            .route(
                "/api/dev-ca/sign",
                axum::routing::post(|State(c): State<Arc<LocalCoordinator>>, body: axum::body::Bytes| async move {
                    let signed = serde_json::from_slice::<SignRequest>(&body)
                        .map_err(|e| (StatusCode::BAD_REQUEST, format!("malformed request: {e}")))
                        .and_then(|req| c.sign(&req));
                    match signed {
                        Ok(chain) => (StatusCode::OK, chain),
                        Err((status, message)) => (status, message),
                    }
                }),
            )
            .with_state(self);
        let _ = axum::serve(listener, app).await;
    }
}

fn csr_names(csr_pem: &str) -> Result<Vec<String>, String> {
    let csr = rcgen::CertificateSigningRequestParams::from_pem(csr_pem).map_err(|e| format!("not a CSR: {e}"))?;
    csr.params
        .subject_alt_names
        .iter()
        .map(|san| match san {
            rcgen::SanType::DnsName(name) => Ok(name.as_str().to_owned()),
            other => Err(format!("only DNS names are signed, not {other:?}")),
        })
        .collect()
}

/// Binds a loopback listener on an ephemeral port.
pub async fn ephemeral() -> std::io::Result<(tokio::net::TcpListener, SocketAddr)> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    Ok((listener, addr))
}
