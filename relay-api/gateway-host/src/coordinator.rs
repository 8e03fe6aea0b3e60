//! The coordinator's API as the gateway host uses it: `GET /api/relay/health` (reachability
//! and its clock), `POST /api/operators/register` (admission) and `GET /api/gateway/routes`
//! (the route feed, signed with the operator key). http or https; https trusts the system's
//! roots, or only the given CA file. Every answer is bounded ([`MAX_ANSWER_BYTES`]) and
//! every exchange timed out.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, SystemTime};

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Bytes;
use hyper::{Method, Request, Uri};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use relay_gateway::feed::FeedAnswer;
use relay_wire::admission::{Operator, RegisterRequest};
use relay_wire::feed::{
    FEED_WAIT_SECS, FeedSignature, LAST_ACCEPTED_FIELD, Presence, REPLAYED_CODE, Report, SIGNATURE_HEADER,
    feed_message, feed_path_reporting,
};

use crate::key::OperatorKey;

/// How long one request may take, connection included.
const TIMEOUT: Duration = Duration::from_secs(10);

/// The largest answer read: a route table of tens of thousands of routes.
pub const MAX_ANSWER_BYTES: usize = 8 << 20;

/// Why talking to the coordinator failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The URL is not usable.
    #[error("the coordinator URL \"{0}\" is not valid: use http://HOST:PORT or https://HOST")]
    BadUrl(String),
    /// The trust roots could not be loaded.
    #[error("cannot set up TLS for the coordinator: {0}")]
    Tls(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// Connecting or exchanging failed.
    #[error("cannot reach the coordinator at {url}: {reason}")]
    Unreachable {
        /// The coordinator.
        url: String,
        /// Why.
        reason: String,
    },
    /// The coordinator answered with its error envelope.
    #[error("the coordinator refused ({status} {code}): {message}")]
    Refused {
        /// The HTTP status.
        status: u16,
        /// The envelope's code (`admission_token_unknown`, ...).
        code: String,
        /// Its message (what to do).
        message: String,
    },
    /// Something else answered.
    #[error("the coordinator at {url} answered unexpectedly ({status}): {body}")]
    Unexpected {
        /// The coordinator.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The start of the body.
        body: String,
    },
}

/// The answer to the health request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Health {
    /// The HTTP status.
    pub status: u16,
    /// Whether it was 200 with `{"status": "ok"}`.
    pub ok: bool,
    /// The response's `Date` header: the coordinator's clock.
    pub date: Option<SystemTime>,
    /// The gateway operator whose hosts the coordinator routes its deployments through
    /// (`gatewayOperator`; `None` from a coordinator that does not say).
    pub gateway_operator: Option<String>,
}

/// A client of one coordinator.
#[derive(Debug, Clone)]
pub struct CoordinatorClient {
    base: String,
    uri: Uri,
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
    /// The latest time (Unix ms) a feed request was signed at, or the coordinator said it
    /// accepted one at: each request is signed later ([`next_signed_at`]), as the coordinator
    /// insists (a replay is refused). Shared by the client's clones.
    last_signed: Arc<AtomicI64>,
}

/// The time to sign the next feed request at: the clock's, or one ms after `last` (the
/// latest signed or accepted), whichever is later; recorded as the latest. Two requests in one
/// ms, and a clock stepped back, still get times after every earlier one.
fn next_signed_at(last: &AtomicI64, now_ms: i64) -> i64 {
    let previous =
        last.fetch_update(Ordering::AcqRel, Ordering::Acquire, |last| Some(now_ms.max(last.saturating_add(1))));
    let previous = previous.unwrap_or_else(|p| p);
    now_ms.max(previous.saturating_add(1))
}

struct Answer {
    status: u16,
    date: Option<SystemTime>,
    body: Vec<u8>,
}

impl CoordinatorClient {
    /// A client for the coordinator at `base` (`http://HOST:PORT` or `https://HOST`),
    /// trusting `ca` (a PEM file) or the system's roots for https.
    pub fn new(base: &str, ca: Option<&Path>) -> Result<CoordinatorClient, ClientError> {
        let trimmed = base.trim().trim_end_matches('/').to_owned();
        let uri: Uri = trimmed.parse().map_err(|_| ClientError::BadUrl(base.to_owned()))?;
        let https = match uri.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            _ => return Err(ClientError::BadUrl(base.to_owned())),
        };
        if uri.host().is_none() {
            return Err(ClientError::BadUrl(base.to_owned()));
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = hyper_rustls::HttpsConnectorBuilder::new();
        let builder = if https && ca.is_none() {
            builder.with_provider_and_native_roots(provider).map_err(|e| ClientError::Tls(e.into()))?
        } else {
            let mut roots = rustls::RootCertStore::empty();
            if let Some(ca) = ca {
                use rustls::pki_types::CertificateDer;
                use rustls::pki_types::pem::PemObject as _;
                let certs = CertificateDer::pem_file_iter(ca)
                    .and_then(|i| i.collect::<Result<Vec<_>, _>>())
                    .map_err(|e| ClientError::Tls(format!("{}: {e}", ca.display()).into()))?;
                for cert in certs {
                    roots.add(cert).map_err(|e| ClientError::Tls(format!("{}: {e}", ca.display()).into()))?;
                }
            }
            let config = rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .map_err(|e| ClientError::Tls(e.into()))?
                .with_root_certificates(roots)
                .with_no_client_auth();
            builder.with_tls_config(config)
        };
        let connector = builder.https_or_http().enable_http1().build();
        let client = Client::builder(TokioExecutor::new()).build(connector);
        Ok(CoordinatorClient { base: trimmed, uri, client, last_signed: Arc::new(AtomicI64::new(0)) })
    }

    /// The base URL.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// The coordinator's host and port (default 443 or 80).
    pub fn host_port(&self) -> Option<(String, u16)> {
        let host = self.uri.host()?.trim_start_matches('[').trim_end_matches(']').to_owned();
        let default = if self.uri.scheme_str() == Some("https") { 443 } else { 80 };
        Some((host, self.uri.port_u16().unwrap_or(default)))
    }

    fn unreachable(&self, reason: impl std::fmt::Display) -> ClientError {
        ClientError::Unreachable { url: self.base.clone(), reason: reason.to_string() }
    }

    async fn send(&self, method: Method, path: &str, body: Option<Vec<u8>>) -> Result<Answer, ClientError> {
        self.exchange(method, path, body, &[], TIMEOUT).await
    }

    /// One exchange, with `headers`, within `timeout`; the answer's body is bounded.
    async fn exchange(
        &self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
        headers: &[(&str, String)],
        timeout: Duration,
    ) -> Result<Answer, ClientError> {
        let mut request = Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base))
            .header(hyper::header::ACCEPT, "application/json")
            .header(hyper::header::USER_AGENT, concat!("svc-gateway-host/", env!("CARGO_PKG_VERSION")));
        if body.is_some() {
            request = request.header(hyper::header::CONTENT_TYPE, "application/json");
        }
        for (name, value) in headers {
            request = request.header(*name, value);
        }
        let request =
            request.body(Full::new(Bytes::from(body.unwrap_or_default()))).map_err(|e| self.unreachable(e))?;
        let exchange = async {
            let response = self.client.request(request).await.map_err(|e| self.unreachable(error_chain(&e)))?;
            let status = response.status().as_u16();
            let date = response
                .headers()
                .get(hyper::header::DATE)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| httpdate::parse_http_date(v).ok());
            let body = Limited::new(response.into_body(), MAX_ANSWER_BYTES)
                .collect()
                .await
                .map_err(|e| self.unreachable(format!("reading the answer (at most {MAX_ANSWER_BYTES} bytes): {e}")))?
                .to_bytes()
                .to_vec();
            Ok(Answer { status, date, body })
        };
        tokio::time::timeout(timeout, exchange)
            .await
            .unwrap_or_else(|_| Err(self.unreachable(format!("no answer within {} s", timeout.as_secs()))))
    }

    /// The coordinator's error envelope in `answer`, or what else it was.
    fn refusal(&self, answer: &Answer) -> ClientError {
        let json: serde_json::Value = serde_json::from_slice(&answer.body).unwrap_or(serde_json::Value::Null);
        match (json["error"]["code"].as_str(), json["error"]["message"].as_str()) {
            (Some(code), Some(message)) => {
                ClientError::Refused { status: answer.status, code: code.to_owned(), message: message.to_owned() }
            }
            _ => ClientError::Unexpected {
                url: self.base.clone(),
                status: answer.status,
                body: String::from_utf8_lossy(&answer.body).chars().take(200).collect(),
            },
        }
    }

    /// `GET /api/relay/health`.
    pub async fn health(&self) -> Result<Health, ClientError> {
        let answer = self.send(Method::GET, "/api/relay/health", None).await?;
        let json: serde_json::Value = serde_json::from_slice(&answer.body).unwrap_or(serde_json::Value::Null);
        let ok = answer.status == 200 && json["status"] == "ok";
        let gateway_operator = json["gatewayOperator"].as_str().map(|s| s.chars().take(64).collect());
        Ok(Health { status: answer.status, ok, date: answer.date, gateway_operator })
    }

    /// `POST /api/operators/register`: the recorded operator, or the coordinator's refusal.
    pub async fn register(&self, req: &RegisterRequest) -> Result<Operator, ClientError> {
        let body = serde_json::to_vec(req).map_err(|e| self.unreachable(e))?;
        let answer = self.send(Method::POST, "/api/operators/register", Some(body)).await?;
        if answer.status == 201
            && let Ok(operator) = serde_json::from_slice::<Operator>(&answer.body)
        {
            return Ok(operator);
        }
        Err(self.refusal(&answer))
    }

    /// `GET /api/gateway/routes`: the routes of operator `operator_id`'s gateways, the
    /// request signed with its `key`, announcing the gateway's `presence`. With `after` (the
    /// version the gateway serves), the coordinator answers once its table differs, or after
    /// [`FEED_WAIT_SECS`]. Each request is signed after the one before ([`next_signed_at`]);
    /// refused as a replay (this host restarted with its clock stepped back, say), it is
    /// signed again after the time the coordinator accepted last and sent once more.
    pub async fn routes(
        &self,
        key: &OperatorKey,
        operator_id: &str,
        after: Option<&str>,
        presence: Option<&Presence>,
        report: Option<&Report>,
    ) -> Result<FeedAnswer, ClientError> {
        let path = feed_path_reporting(after, presence, report);
        let mut again = true;
        loop {
            let now_ms = SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis());
            let at_ms = next_signed_at(&self.last_signed, i64::try_from(now_ms).unwrap_or(i64::MAX));
            let signature = FeedSignature {
                operator_id: operator_id.to_owned(),
                at_ms,
                signature: key.sign(&feed_message(operator_id, at_ms, &path)),
            };
            let headers = [(SIGNATURE_HEADER, signature.header_value())];
            let wait = Duration::from_secs(FEED_WAIT_SECS) + TIMEOUT;
            let answer = self.exchange(Method::GET, &path, None, &headers, wait).await?;
            if answer.status == 200 {
                return serde_json::from_slice(&answer.body).map_err(|e| ClientError::Unexpected {
                    url: self.base.clone(),
                    status: 200,
                    body: format!("not a route table: {e}"),
                });
            }
            let json: serde_json::Value = serde_json::from_slice(&answer.body).unwrap_or(serde_json::Value::Null);
            let accepted = json["error"][LAST_ACCEPTED_FIELD].as_i64();
            match accepted {
                Some(last) if json["error"]["code"] == REPLAYED_CODE => {
                    self.last_signed.fetch_max(last, Ordering::AcqRel);
                    if std::mem::take(&mut again) {
                        continue;
                    }
                }
                _ => {}
            }
            return Err(self.refusal(&answer));
        }
    }
}

/// An error and its causes, which hyper's client keeps apart (`client error (Connect)`
/// alone does not say the connection was refused).
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_request_is_signed_after_the_one_before_whatever_the_clock_says() {
        let last = AtomicI64::new(0);
        assert_eq!(next_signed_at(&last, 1_000), 1_000);
        assert_eq!(next_signed_at(&last, 1_000), 1_001, "two in one ms");
        assert_eq!(next_signed_at(&last, 1_000), 1_002);
        assert_eq!(next_signed_at(&last, 900), 1_003, "the clock stepped back");
        assert_eq!(next_signed_at(&last, 5_000), 5_000, "the clock again");
        last.fetch_max(7_000, Ordering::AcqRel);
        assert_eq!(next_signed_at(&last, 5_001), 7_001, "after what the coordinator accepted last");
    }

    #[test]
    fn urls_are_checked() {
        let c = CoordinatorClient::new("http://127.0.0.1:7300/", None).expect("http");
        assert_eq!(c.base(), "http://127.0.0.1:7300");
        assert_eq!(c.host_port(), Some(("127.0.0.1".into(), 7300)));
        let v6 = CoordinatorClient::new("http://[::1]:7300", None).expect("v6");
        assert_eq!(v6.host_port(), Some(("::1".into(), 7300)));
        assert!(matches!(CoordinatorClient::new("127.0.0.1:7300", None), Err(ClientError::BadUrl(_))));
        assert!(matches!(CoordinatorClient::new("ftp://x", None), Err(ClientError::BadUrl(_))));
        let missing = CoordinatorClient::new("https://c.example.test", Some(Path::new("/nonexistent/ca.pem")));
        assert!(matches!(missing, Err(ClientError::Tls(_))));
    }
}
