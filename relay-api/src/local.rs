//! The local coordinator of the embedded default: it knows the routes it created, tells each
//! route's agent its hostnames (`POST /api/agent/route`), and signs each route's certificate
//! requests with the development CA (`POST /api/dev-ca/sign`) after checking that the CSR
//! names only the route's hostnames. Both check the route's credential first. The full
//! coordinator (quotes, funding, validation, customer hostnames) builds on this.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};

use crate::ca::DevCa;
use crate::gateway::RouteConfig;
use relay_wire::wire;

/// Certificates are issued for at least 10 s (the demo's hidden `--cert-validity-secs`, for
/// tests) and at most 90 days.
const VALIDITY: std::ops::RangeInclusive<u64> = 10..=90 * 24 * 3600;

/// The coordinator's state.
#[derive(Debug)]
pub struct LocalCoordinator {
    ca: DevCa,
    routes: RwLock<Vec<AgentRoute>>,
    /// The gateway hosts serving each route, by route ID.
    /// The gateway hosts serving each route, and the signed catalog vouching for them: set
    /// together, so an answer never pairs hosts with a catalog from another moment.
    gateway_hosts: RwLock<GatewayHosts>,
    /// The ACME turns, by canonical hostname (a deployment's revisions share it, and a
    /// redeploy's successor orders for the same names as the serving revision): the route and
    /// replica ordering a certificate now, and since when ([`relay_wire::acme_turn`]).
    acme_turns: Mutex<HashMap<String, Turn>>,
}

/// A route as the agent API knows it: what the gateway serves, and how the API recognises
/// the route's agents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentRoute {
    /// The gateway's route.
    pub route: RouteConfig,
    /// SHA-256 (hex) of the route's credential for this API. No gateway is given it: a
    /// gateway checks an agent by its route key ([`RouteConfig::route_public_key`]).
    pub credential_sha256: String,
}

impl AgentRoute {
    /// `route`, whose agents hold `credential` for this API.
    pub fn new(route: RouteConfig, credential: &str) -> AgentRoute {
        AgentRoute { route, credential_sha256: wire::sha256_hex(credential.as_bytes()) }
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SignRequest {
    route_id: String,
    credential: String,
    csr: String,
    validity_secs: u64,
}

/// `POST /api/agent/route`: an agent asks for its route's hostnames.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RouteRequest {
    route_id: String,
    credential: String,
}

/// The answer: the route's hostnames, canonical first, and the gateway hosts serving it
/// (its agent tunnels to each, besides the coordinator's gateway).
#[derive(Debug, Serialize)]
struct RouteAnswer<'a> {
    hostnames: &'a [String],
    gateways: &'a [relay_agent_config::PinnedGateway],
    /// Sent with any gateway host: an agent launched with the catalog key takes only hosts
    /// the catalog lists.
    #[serde(skip_serializing_if = "Option::is_none")]
    catalog: Option<&'a crate::catalog::SignedCatalog>,
}

type Refusal = (StatusCode, String);

/// The gateway hosts of each route, by route ID (issue 20), with the relay's signed catalog,
/// which vouches for them to the agents, and when it was taken.
#[derive(Debug, Default, Clone)]
pub struct GatewayHosts {
    /// By route ID.
    pub by_route: HashMap<String, Vec<relay_agent_config::PinnedGateway>>,
    /// The catalog sent with them (none while no route has a host).
    pub catalog: Option<Arc<crate::catalog::SignedCatalog>>,
    /// When the catalog was signed or checked current.
    pub catalog_at: Option<Instant>,
}

/// Who holds an ACME turn, since when.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Turn {
    route_id: String,
    replica: String,
    since: Instant,
}

/// `POST /api/agent/acme-turn`: a replica asks for its route's ACME turn, or gives it back.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct TurnRequest {
    route_id: String,
    credential: String,
    replica: String,
    #[serde(default)]
    release: bool,
}

/// The agent API's requests are a route id, a credential and a CSR: a few KiB.
const AGENT_API_BODY_LIMIT: usize = 64 * 1024;

/// One connection per job's agent at a time, and few jobs per coordinator.
const AGENT_API_CONNECTIONS: usize = 256;

impl LocalCoordinator {
    /// A coordinator issuing from `ca`.
    pub fn new(ca: DevCa) -> Arc<LocalCoordinator> {
        Arc::new(LocalCoordinator {
            ca,
            routes: RwLock::default(),
            gateway_hosts: RwLock::default(),
            acme_turns: Mutex::default(),
        })
    }

    /// The routes it knows (and the gateway serves).
    pub fn set_routes(&self, routes: Vec<AgentRoute>) {
        if let Ok(mut r) = self.routes.write() {
            *r = routes;
        }
    }

    /// The gateway hosts serving each route, by route ID (issue 20).
    pub fn set_gateway_hosts(&self, hosts: GatewayHosts) {
        if let Ok(mut h) = self.gateway_hosts.write() {
            *h = hosts;
        }
    }

    /// The catalog set last and when it was taken, if it went with exactly `by_route` (compared
    /// in place: the engine asks every tick, and the map is not copied for it).
    pub fn catalog_sent_with(
        &self,
        by_route: &HashMap<String, Vec<relay_agent_config::PinnedGateway>>,
    ) -> (Option<Arc<crate::catalog::SignedCatalog>>, Option<Instant>, bool) {
        match self.gateway_hosts.read() {
            Ok(h) => (h.catalog.clone(), h.catalog_at, &h.by_route == by_route),
            Err(_) => (None, None, false),
        }
    }

    /// The development CA.
    pub fn ca(&self) -> &DevCa {
        &self.ca
    }

    /// The route `route_id`, if `credential` is its credential; 403 otherwise (the same
    /// answer for an unknown route and a wrong credential).
    fn authenticate(&self, route_id: &str, credential: &str) -> Result<RouteConfig, Refusal> {
        let presented = wire::sha256_hex(credential.as_bytes());
        self.routes
            .read()
            .ok()
            .and_then(|r| {
                let known = r.iter().find(|r| r.route.route_id == route_id && r.credential_sha256 == presented);
                known.map(|r| r.route.clone())
            })
            .ok_or((StatusCode::FORBIDDEN, "unknown route or wrong credential".to_owned()))
    }

    fn route_hostnames(&self, req: &RouteRequest) -> Result<String, Refusal> {
        let route = self.authenticate(&req.route_id, &req.credential)?;
        let (hosts, catalog) = self
            .gateway_hosts
            .read()
            .ok()
            .and_then(|h| h.by_route.get(&route.route_id).map(|hosts| (hosts.clone(), h.catalog.clone())))
            .unwrap_or_default();
        let catalog = if hosts.is_empty() { None } else { catalog };
        serde_json::to_string(&RouteAnswer {
            hostnames: &route.hostnames,
            gateways: &hosts,
            catalog: catalog.as_deref(),
        })
        .map_err(|e| (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))
    }

    /// Grants the ACME turn of route `req.route_id`'s names to its replica `req.replica`
    /// unless another holds it (then says how long to wait); gives it back on `release`. A
    /// turn lapses after [`relay_wire::acme_turn::TURN_LAPSES`], so a replica that died ordering
    /// holds no one up.
    fn acme_turn(&self, req: &TurnRequest) -> Result<String, Refusal> {
        self.acme_turn_at(req, Instant::now())
    }

    fn acme_turn_at(&self, req: &TurnRequest, now: Instant) -> Result<String, Refusal> {
        let route = self.authenticate(&req.route_id, &req.credential)?;
        if req.replica.is_empty() || !wire::valid_replica_name(&req.replica) {
            return Err((StatusCode::BAD_REQUEST, "`replica` must be the agent's replica name".to_owned()));
        }
        let Some(names) = route.hostnames.first().cloned() else {
            return Err((StatusCode::FORBIDDEN, "the route has no hostname".to_owned()));
        };
        let lapses = relay_wire::acme_turn::TURN_LAPSES;
        let mut turns = self.acme_turns.lock().map_err(|_| (StatusCode::INTERNAL_SERVER_ERROR, String::new()))?;
        turns.retain(|_, turn| now.saturating_duration_since(turn.since) < lapses);
        let asker = |t: &Turn| t.route_id == route.route_id && t.replica == req.replica;
        let holder = turns.get(&names).cloned();
        let answer = match holder {
            _ if req.release => {
                let released = holder.as_ref().is_some_and(asker);
                if released {
                    turns.remove(&names);
                }
                serde_json::json!({"granted": false, "released": released})
            }
            Some(turn) if !asker(&turn) => {
                let left = lapses.saturating_sub(now.saturating_duration_since(turn.since));
                let retry = left.min(Duration::from_secs(2)).as_millis().max(1);
                serde_json::json!({"granted": false, "holder": turn.replica, "retryAfterMs": retry})
            }
            // Free, or this replica's already (asked again, as a restarted agent does).
            _ => {
                let turn = Turn { route_id: route.route_id.clone(), replica: req.replica.clone(), since: now };
                turns.insert(names, turn);
                serde_json::json!({"granted": true})
            }
        };
        Ok(answer.to_string())
    }

    fn sign(&self, req: &SignRequest) -> Result<String, Refusal> {
        let route = self.authenticate(&req.route_id, &req.credential)?;
        if !VALIDITY.contains(&req.validity_secs) {
            return Err((StatusCode::BAD_REQUEST, format!("validitySecs must be within {VALIDITY:?}")));
        }
        let names = csr_names(&req.csr).map_err(|e| (StatusCode::BAD_REQUEST, e.to_string()))?;
        if let Some(other) = names.iter().find(|n| !route.hostnames.iter().any(|h| h.eq_ignore_ascii_case(n))) {
            return Err((StatusCode::FORBIDDEN, format!("{other} is not a hostname of route {}", route.route_id)));
        }
        self.ca
            .sign_csr(&req.csr, Duration::from_secs(req.validity_secs))
            .map_err(|e| (StatusCode::BAD_REQUEST, e.to_string()))
    }

    /// The coordinator's HTTP API, for serving on its own or merged into a larger router.
    pub fn router(self: Arc<Self>) -> axum::Router {
        axum::Router::new()
            .route(
                "/api/dev-ca/sign",
                axum::routing::post(|State(c): State<Arc<LocalCoordinator>>, body: axum::body::Bytes| async move {
                    let signed = parse::<SignRequest>(&body).and_then(|req| c.sign(&req));
                    // A certificate renewed: the agent's own log says so; here it is routine.
                    let mut response = reply(signed, "application/x-pem-file");
                    response.extensions_mut().insert(svc_http::Routine);
                    response
                }),
            )
            .route(
                "/api/agent/acme-turn",
                axum::routing::post(|State(c): State<Arc<LocalCoordinator>>, body: axum::body::Bytes| async move {
                    let answer = parse::<TurnRequest>(&body).and_then(|req| c.acme_turn(&req));
                    reply(answer, "application/json")
                }),
            )
            .route(
                "/api/agent/route",
                axum::routing::post(|State(c): State<Arc<LocalCoordinator>>, body: axum::body::Bytes| async move {
                    let answer = parse::<RouteRequest>(&body).and_then(|req| c.route_hostnames(&req));
                    // Each agent asks every 30 s: a routine refresh, logged at `debug`.
                    let mut response = reply(answer, "application/json");
                    response.extensions_mut().insert(svc_http::Routine);
                    response
                }),
            )
            .with_state(self)
    }

    /// Serves the coordinator's HTTP API on `listener` (loopback: it is only for local
    /// agents) until the task is dropped, which closes its connections.
    pub async fn serve(self: Arc<Self>, listener: tokio::net::TcpListener) {
        let settings = svc_http::Settings { max_connections: AGENT_API_CONNECTIONS, ..svc_http::Settings::default() };
        match svc_http::Server::from_listener("svc agent API", listener, None, settings) {
            Ok(server) => {
                let router = svc_http::limit_body(self.router(), AGENT_API_BODY_LIMIT);
                server.serve(router, std::future::pending()).await;
            }
            Err(e) => tracing::warn!("svc agent API: {e}"),
        }
    }
}

fn parse<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, Refusal> {
    serde_json::from_slice(body).map_err(|e| (StatusCode::BAD_REQUEST, format!("malformed request: {e}")))
}

fn reply(answer: Result<String, Refusal>, content_type: &'static str) -> axum::response::Response {
    use axum::response::IntoResponse;
    match answer {
        Ok(body) => ([(axum::http::header::CONTENT_TYPE, content_type)], body).into_response(),
        Err((status, message)) => (status, message).into_response(),
    }
}

/// Why a CSR is not signed.
#[derive(Debug, thiserror::Error)]
enum CsrError {
    /// Not a PEM CSR.
    #[error("not a CSR: {0}")]
    Unreadable(#[source] rcgen::Error),
    /// It names something other than a DNS name.
    #[error("only DNS names are signed, not {0}")]
    NotDnsName(String),
}

fn csr_names(csr_pem: &str) -> Result<Vec<String>, CsrError> {
    let csr = rcgen::CertificateSigningRequestParams::from_pem(csr_pem).map_err(CsrError::Unreadable)?;
    csr.params
        .subject_alt_names
        .iter()
        .map(|san| match san {
            rcgen::SanType::DnsName(name) => Ok(name.as_str().to_owned()),
            other => Err(CsrError::NotDnsName(format!("{other:?}"))),
        })
        .collect()
}

/// Binds a loopback listener on an ephemeral port.
pub async fn ephemeral() -> std::io::Result<(tokio::net::TcpListener, SocketAddr)> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    Ok((listener, addr))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(route_id: &str, credential: &str, standby: bool) -> AgentRoute {
        let route = RouteConfig {
            route_id: route_id.to_owned(),
            hostnames: vec!["app.localhost".to_owned()],
            route_public_key: relay_wire::challenge::RouteKey::generate().expect("a key").public_key(),
            proxy_protocol: false,
            max_connections: 8,
            standby,
            guards: crate::gateway::Guards::default(),
        };
        AgentRoute::new(route, credential)
    }

    /// A coordinator serving route `r1` and its successor `r2` on standby, both for
    /// `app.localhost`.
    fn coordinator() -> (Arc<LocalCoordinator>, tempfile::TempDir) {
        let dir = tempfile::tempdir().expect("scratch");
        let coordinator = LocalCoordinator::new(DevCa::open(dir.path()).expect("a CA"));
        coordinator.set_routes(vec![route("r1", "c", false), route("r2", "c2", true)]);
        (coordinator, dir)
    }

    fn request(route_id: &str, replica: &str, release: bool) -> TurnRequest {
        let credential = if route_id == "r1" { "c" } else { "c2" };
        TurnRequest { route_id: route_id.into(), credential: credential.into(), replica: replica.into(), release }
    }

    fn ask(c: &LocalCoordinator, replica: &str, release: bool) -> serde_json::Value {
        ask_as(c, "r1", replica, release)
    }

    fn ask_as(c: &LocalCoordinator, route_id: &str, replica: &str, release: bool) -> serde_json::Value {
        serde_json::from_str(&c.acme_turn(&request(route_id, replica, release)).expect("answered")).expect("JSON")
    }

    #[test]
    fn a_routes_acme_turn_is_one_replicas_at_a_time_until_given_back() {
        let (c, _dir) = coordinator();
        assert_eq!(ask(&c, "job-0", false)["granted"], true);
        assert_eq!(ask(&c, "job-0", false)["granted"], true, "its own again (a restarted agent)");
        let waiting = ask(&c, "job-1", false);
        assert_eq!((waiting["granted"].as_bool(), waiting["holder"].as_str()), (Some(false), Some("job-0")));
        assert!(waiting["retryAfterMs"].as_u64().is_some_and(|ms| (1..=2_000).contains(&ms)), "{waiting}");
        // Only the holder gives it back.
        assert_eq!(ask(&c, "job-1", true)["released"], false);
        assert_eq!(ask(&c, "job-1", false)["granted"], false);
        assert_eq!(ask(&c, "job-0", true)["released"], true);
        assert_eq!(ask(&c, "job-1", false)["granted"], true);
    }

    /// Review finding: a redeploy's successor orders for the same names as the serving
    /// revision, under another route ID, with the same replica names.
    #[test]
    fn a_successors_replicas_wait_for_the_serving_revisions_turn_on_the_same_names() {
        let (c, _dir) = coordinator();
        assert_eq!(ask_as(&c, "r1", "job-0", false)["granted"], true);
        assert_eq!(ask_as(&c, "r2", "job-0", false)["granted"], false, "job-0 of another revision");
        assert_eq!(ask_as(&c, "r2", "job-0", true)["released"], false, "nor can it give the turn back");
        ask_as(&c, "r1", "job-0", true);
        assert_eq!(ask_as(&c, "r2", "job-0", false)["granted"], true);
    }

    #[test]
    fn a_turn_not_given_back_lapses_and_strangers_get_nothing() {
        let (c, _dir) = coordinator();
        let now = Instant::now();
        let granted = |at| c.acme_turn_at(&request("r1", "job-1", false), at).expect("answered").contains("true");
        assert!(c.acme_turn_at(&request("r1", "job-0", false), now).expect("answered").contains("true"));
        assert!(!granted(now + relay_wire::acme_turn::TURN_LAPSES - Duration::from_millis(1)), "held");
        assert!(granted(now + relay_wire::acme_turn::TURN_LAPSES), "lapsed");
        let wrong = TurnRequest { credential: "x".into(), ..request("r1", "job-0", false) };
        assert_eq!(c.acme_turn(&wrong).expect_err("refused").0, StatusCode::FORBIDDEN);
        assert_eq!(c.acme_turn(&request("r1", "", false)).expect_err("refused").0, StatusCode::BAD_REQUEST);
    }
}
