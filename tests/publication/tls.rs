//! HTTPS for the publication service and the CLI: `svc serve --tls-cert/--tls-key` with a
//! certificate made here, `--dev-tls` with the development CA, the CLI's `--ca`, and the
//! refusals: plain HTTP off loopback, and a token over plain HTTP to a remote address.

use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use svc_e2e::service::{Server, TempDir, svc, token};

/// A CA and a server certificate for 127.0.0.1 and localhost, as PEM files in `dir`:
/// (ca.pem, cert.pem, key.pem).
fn certificates(dir: &TempDir) -> (String, String, String) {
    let ca_key = KeyPair::generate().expect("key");
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_cert = ca_params.self_signed(&ca_key).expect("ca");
    let issuer = Issuer::new(ca_params, ca_key);
    let key = KeyPair::generate().expect("key");
    let leaf = CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
        .expect("params")
        .signed_by(&key, &issuer)
        .expect("leaf");
    let write = |name: &str, pem: String| {
        let path = dir.path().join(name);
        std::fs::write(&path, pem).expect("write");
        path.to_string_lossy().into_owned()
    };
    (write("ca.pem", ca_cert.pem()), write("cert.pem", leaf.pem()), write("key.pem", key.serialize_pem()))
}

#[test]
fn https_end_to_end_with_a_given_certificate_and_the_cli_trusting_it_with_ca() {
    let dir = TempDir::new("https");
    let files = TempDir::new("https-files");
    let (ca, cert, key) = certificates(&files);
    let token = token(dir.str(), "acme", "developer");
    let server = Server::start(dir.path(), &["--tls-cert", &cert, "--tls-key", &key]);
    let url = server.url();
    assert!(url.starts_with("https://127.0.0.1:"), "{url}");
    let env = [("SVC_TOKEN", token.as_str()), ("SVC_CONFIG", "/nonexistent")];

    let created = svc(&["app", "create", "web", "--server", &url, "--ca", &ca], &env);
    assert!(created.status.success(), "{}", String::from_utf8_lossy(&created.stderr));
    // SVC_CA works as well.
    let shown = svc(&["app", "show", "web", "--server", &url, "--format", "json"], &[env[0], env[1], ("SVC_CA", &ca)]);
    assert!(shown.status.success(), "{}", String::from_utf8_lossy(&shown.stderr));
    assert!(String::from_utf8_lossy(&shown.stdout).contains("\"applicationId\": \"web\""));

    // Without the CA the certificate is not trusted, and the error says what to pass.
    let untrusted = svc(&["app", "show", "web", "--server", &url], &env);
    assert_eq!(untrusted.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&untrusted.stderr);
    assert!(stderr.contains("TLS with") && stderr.contains("--ca FILE"), "{stderr}");
    // It names the URL and the certificate problem, in text and in the JSON envelope.
    assert!(stderr.contains(&url) && stderr.contains("invalid peer certificate: UnknownIssuer"), "{stderr}");
    let untrusted = svc(&["app", "show", "web", "--server", &url, "--format", "json"], &env);
    let envelope: serde_json::Value = serde_json::from_slice(&untrusted.stdout).expect("one JSON envelope");
    assert_eq!(envelope["error"]["code"], "tls_failed", "{envelope:#}");
    assert!(envelope["error"]["message"].as_str().is_some_and(|m| m.contains("UnknownIssuer")), "{envelope:#}");
    // Plain HTTP to the TLS port gets no answer.
    let plain = svc(&["app", "show", "web", "--server", &url.replace("https://", "http://")], &env);
    assert!(!plain.status.success());
}

#[test]
fn dev_tls_serves_https_from_the_development_ca_in_the_data_directory() {
    let dir = TempDir::new("dev-tls");
    let token = token(dir.str(), "acme", "developer");
    let server = Server::start(dir.path(), &["--dev-tls"]);
    let ca = dir.path().join("dev-ca").join("ca.pem");
    assert!(server.stderr().contains(&format!("clients trust {}", ca.display())), "{}", server.stderr());
    let ca = ca.to_string_lossy().into_owned();
    let env = [("SVC_TOKEN", token.as_str()), ("SVC_CONFIG", "/nonexistent"), ("SVC_CA", &ca)];
    let created = svc(&["app", "create", "web", "--server", &server.url()], &env);
    assert!(created.status.success(), "{}", String::from_utf8_lossy(&created.stderr));
}

#[test]
fn plain_http_on_a_non_loopback_address_is_refused_at_start() {
    let dir = TempDir::new("plain-remote");
    let out = svc(&["serve", "--listen", "0.0.0.0:0", "--data-dir", dir.str()], &[]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("refusing to serve plain HTTP on 0.0.0.0:0"), "{stderr}");
    assert!(stderr.contains("--tls-cert FILE --tls-key FILE") && stderr.contains("--dev-tls"), "{stderr}");
}

#[test]
fn the_cli_refuses_a_token_over_plain_http_to_a_non_loopback_address() {
    // 192.0.2.0/24 is TEST-NET-1: nothing answers there, and nothing is sent.
    let env = [("SVC_TOKEN", "svc_secret"), ("SVC_CONFIG", "/nonexistent")];
    let out = svc(&["app", "show", "web", "--server", "http://192.0.2.1:8080"], &env);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("refusing to send the token") && stderr.contains("use https://"), "{stderr}");
    let relay = svc(
        &["ingress", "status", "--project", "p", "--relay", "http://192.0.2.1:7300"],
        &[("SVC_RELAY_TOKEN", "rly_x")],
    );
    assert_eq!(relay.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&relay.stderr).contains("refusing to send the token"));
}
