//! What the agent's integration tests share: an agent serving HTTPS on loopback.

use std::net::SocketAddr;
use std::sync::Arc;

use agent::cert::CurrentCert;
use agent::hostnames::Hostnames;
use agent::serve::{self, Context};
use tokio::net::TcpListener;

/// The hostname the test agents serve.
pub(crate) const HOST: &str = "app.localhost";

/// An agent serving HTTPS for [`HOST`] on loopback in front of an app on `app_port`, with a
/// self-signed certificate: its address, the certificate to trust and its context.
pub(crate) async fn agent_on(app_port: u16) -> (SocketAddr, rustls::pki_types::CertificateDer<'static>, Arc<Context>) {
    let key = rcgen::KeyPair::generate().expect("a key");
    let cert = rcgen::CertificateParams::new(vec![HOST.to_owned()])
        .expect("parameters")
        .self_signed(&key)
        .expect("a certificate");
    let current = Arc::new(CurrentCert::default());
    current.install(&cert.pem(), &key).expect("installs");
    let config: agent::AgentConfig = serde_json::from_value(serde_json::json!({
        "routeId": "r1", "hostname": HOST, "credential": "c",
        "routeKey": agent::challenge::RouteKey::generate().expect("a key"),
        "gateway": "127.0.0.1:1", "gatewayName": "gateway.localhost", "gatewayCa": "/unused.pem",
        "appPort": app_port, "certificate": {"kind": "dev_ca", "url": "http://127.0.0.1:1", "validity_secs": 60},
    }))
    .expect("a configuration");
    let ctx = Context::new(config, current, Arc::new(Hostnames::new(HOST)));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("binds");
    let addr = listener.local_addr().expect("an address");
    tokio::spawn(serve::direct(ctx.clone(), listener));
    (addr, cert.der().clone(), ctx)
}
