//! A certificate from an ACME CA (RFC 8555, with `instant-acme`), validated by TLS-ALPN-01
//! (RFC 8737) that the agent answers itself: the CA connects to the hostname on port 443,
//! which is the gateway's public port; the gateway routes the raw TLS by SNI through the
//! tunnel to the agent, whose resolver ([`crate::cert::CurrentCert`]) answers handshakes
//! offering only ALPN `acme-tls/1` with a self-signed certificate carrying the
//! acmeIdentifier extension. No port 80 is needed, and the job's key never leaves the job:
//! the order is finalized with a CSR signed by it.
//!
//! The ACME account key is created on first use and kept in `acme-account.json` (mode 0600)
//! in the state directory, with the directory URL it belongs to; a different directory URL
//! gets a new account.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use instant_acme::{
    Account, AccountCredentials, AuthorizationStatus, BodyWrapper, ChallengeType, Identifier, NewAccount, NewOrder,
    OrderStatus, RetryPolicy,
};
use rcgen::{CertificateParams, CustomExtension, KeyPair};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::CertifiedKey;
use serde::{Deserialize, Serialize};

use crate::cert::{CertError, CurrentCert};

/// The account file in the state directory.
pub const ACCOUNT_FILE: &str = "acme-account.json";

/// How long the CA may take to validate the challenge, and then to issue.
const POLL: RetryPolicy =
    RetryPolicy::new().initial_delay(Duration::from_millis(250)).backoff(1.5).timeout(Duration::from_secs(60));

/// The ACME settings of [`crate::config::CertificateSource::Acme`].
#[derive(Debug, Clone, Copy)]
pub struct AcmeSource<'a> {
    /// The directory URL.
    pub directory_url: &'a str,
    /// Contact URIs for a new account.
    pub contact: &'a [String],
    /// A PEM file of the CA that signs the ACME server's own HTTPS certificate, trusted
    /// instead of the system's roots.
    pub directory_ca: Option<&'a Path>,
}

/// How long the challenges may stay pending (the order placed, validated): well within a
/// turn's [`crate::acme_turn::TURN_LAPSES`], so no sibling's challenge is ever pending at the
/// same time.
const VALIDATION_BOUND: Duration = Duration::from_secs(90);

/// What `acme-account.json` holds.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct StoredAccount {
    directory_url: String,
    credentials: AccountCredentials,
}

fn acme_error<'a>(what: &'a str, url: &'a str) -> impl Fn(instant_acme::Error) -> CertError + 'a {
    move |e| CertError::Issuer(format!("ACME {what} at {url}: {}", describe(&e)).into())
}

/// An error with its sources, each distinct part once (wrappers often repeat their source's
/// text): hyper's own text is only the outermost layer.
pub fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut current = Some(e);
    while let Some(err) = current {
        let text = err.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        current = err.source();
    }
    parts.join(": ")
}

/// An error with its whole source chain: hyper's own text is only `client error (Connect)`,
/// and the certificate problem (`invalid peer certificate: UnknownIssuer`) sits several
/// sources down. A TLS trust failure also says which flag fixes it.
pub fn describe(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = error_chain(e);
    if out.contains("invalid peer certificate") || out.contains("UnknownIssuer") {
        out.push_str(
            "; the ACME server's HTTPS certificate is not trusted: pass --acme-directory-ca FILE with the CA that \
             signs it (the system's roots are used otherwise)",
        );
    }
    out
}

/// Orders one certificate for every name of `hostnames`, answers each name's TLS-ALPN-01
/// challenge through `current` (the CA dials each name through the gateway), finalizes with
/// `csr_der` (signed by the job's key, naming the same hostnames) and returns the chain PEM
/// and how long its leaf is still valid. `turn` is the route's ACME turn
/// ([`crate::acme_turn`]), given back as soon as validation is over.
pub async fn obtain(
    source: &AcmeSource<'_>,
    hostnames: &[String],
    csr_der: &[u8],
    current: &CurrentCert,
    state_dir: &Path,
    turn: crate::acme_turn::Turn,
) -> Result<(String, Duration), CertError> {
    let listed = hostnames.join(", ");
    let url = source.directory_url;
    let announce = if turn.shared() { crate::acme_turn::ANNOUNCE } else { Duration::ZERO };
    // The names whose challenge is pending: cleared however validation ends.
    let mut pending = Vec::new();
    let validated = tokio::time::timeout(VALIDATION_BOUND, async {
        let account = account(source, state_dir).await?;
        let identifiers: Vec<Identifier> = hostnames.iter().map(|h| Identifier::Dns(h.clone())).collect();
        let mut order = account.new_order(&NewOrder::new(&identifiers)).await.map_err(acme_error("new order", url))?;
        answer_challenges(&mut order, current, url, announce, &mut pending).await?;
        let status = order.poll_ready(&POLL).await.map_err(acme_error("validation", url))?;
        Ok::<_, CertError>((order, status))
    })
    .await;
    // Validation is over either way: stop answering `acme-tls/1`, and let a sibling order.
    for name in &pending {
        current.clear_challenge(name);
    }
    turn.give_back().await;
    let (mut order, status) = validated.map_err(|_| {
        CertError::Issuer(format!("ACME validation of {listed} took over {} s", VALIDATION_BOUND.as_secs()).into())
    })??;
    match status {
        OrderStatus::Ready => {}
        status => {
            let detail = order.state().error.as_ref().map(|p| format!(": {p}")).unwrap_or_default();
            return Err(CertError::Issuer(format!("ACME order for {listed} is {status:?}{detail}").into()));
        }
    }
    order.finalize_csr(csr_der).await.map_err(acme_error("finalize", source.directory_url))?;
    let chain = order.poll_certificate(&POLL).await.map_err(acme_error("certificate", source.directory_url))?;
    let lifetime = remaining_validity(&chain)?;
    Ok((chain, lifetime))
}

/// Installs a TLS-ALPN-01 certificate for every pending authorization (its name added to
/// `pending`) and tells the CA, the first time after `announce` (the gateways learn the
/// challenge is here).
async fn answer_challenges(
    order: &mut instant_acme::Order,
    current: &CurrentCert,
    url: &str,
    announce: Duration,
    pending: &mut Vec<String>,
) -> Result<(), CertError> {
    let mut announced = false;
    let mut authorizations = order.authorizations();
    while let Some(authorization) = authorizations.next().await {
        let mut authorization = authorization.map_err(acme_error("authorization", url))?;
        match authorization.status {
            AuthorizationStatus::Pending => {}
            AuthorizationStatus::Valid => continue,
            status => {
                let name = authorization.identifier().to_string();
                return Err(CertError::Issuer(format!("ACME authorization for {name} is {status:?}").into()));
            }
        }
        let mut challenge = authorization
            .challenge(ChallengeType::TlsAlpn01)
            .ok_or_else(|| CertError::Issuer("the ACME CA offers no tls-alpn-01 challenge".into()))?;
        let name = match challenge.identifier().identifier {
            Identifier::Dns(name) => name.clone(),
            other => return Err(CertError::Issuer(format!("unsupported ACME identifier {other:?}").into())),
        };
        let digest = challenge.key_authorization().digest();
        current.set_challenge(&name, challenge_certificate(&name, digest.as_ref())?);
        pending.push(name.clone());
        if !announced {
            tokio::time::sleep(announce).await;
            announced = true;
        }
        challenge.set_ready().await.map_err(acme_error("challenge", url))?;
    }
    Ok(())
}

/// The self-signed TLS-ALPN-01 certificate for `name` (RFC 8737 section 3): the name as its
/// only SAN and the critical acmeIdentifier extension holding SHA-256 of the key
/// authorization. Its key is made for it and thrown away with it.
pub fn challenge_certificate(name: &str, key_authorization_sha256: &[u8]) -> Result<Arc<CertifiedKey>, CertError> {
    let cert_error = |e: rcgen::Error| CertError::Cert(e.into());
    if key_authorization_sha256.len() != 32 {
        return Err(CertError::Cert("a key authorization digest is 32 bytes".into()));
    }
    let mut params = CertificateParams::new(vec![name.to_owned()]).map_err(cert_error)?;
    params.custom_extensions = vec![CustomExtension::new_acme_identifier(key_authorization_sha256)];
    let key = KeyPair::generate().map_err(cert_error)?;
    let cert = params.self_signed(&key).map_err(cert_error)?;
    let der = PrivateKeyDer::from_pem_slice(key.serialize_pem().as_bytes()).map_err(|e| CertError::Cert(e.into()))?;
    // Not `CertifiedKey::from_der`: its key check parses the certificate with webpki, which
    // rejects the critical acmeIdentifier extension it does not know.
    let signing_key = rustls::crypto::ring::default_provider()
        .key_provider
        .load_private_key(der)
        .map_err(|e| CertError::Cert(e.into()))?;
    Ok(Arc::new(CertifiedKey::new(vec![cert.der().clone()], signing_key)))
}

/// The stored account for this directory, or a new one (stored at once).
async fn account(source: &AcmeSource<'_>, state_dir: &Path) -> Result<Account, CertError> {
    let path = state_dir.join(ACCOUNT_FILE);
    let io = |e: std::io::Error| CertError::Io(e);
    if path.exists() {
        let text = fs_err::read(&path).map_err(io)?;
        let stored: StoredAccount = serde_json::from_slice(&text)
            .map_err(|e| CertError::Cert(format!("{}: not an ACME account file: {e}", path.display()).into()))?;
        if stored.directory_url == source.directory_url {
            return Account::builder_with_http(http_client(source.directory_ca)?)
                .from_credentials(stored.credentials)
                .await
                .map_err(acme_error("account", source.directory_url));
        }
        tracing::info!("svc agent: ACME directory changed to {}: creating a new account", source.directory_url);
    }
    let contact: Vec<&str> = source.contact.iter().map(String::as_str).collect();
    let new = NewAccount { contact: &contact, terms_of_service_agreed: true, only_return_existing: false };
    let (account, credentials) = Account::builder_with_http(http_client(source.directory_ca)?)
        .create(&new, source.directory_url.to_owned(), None)
        .await
        .map_err(acme_error("new account", source.directory_url))?;
    let stored = StoredAccount { directory_url: source.directory_url.to_owned(), credentials };
    let json = serde_json::to_vec_pretty(&stored).map_err(|e| CertError::Cert(e.into()))?;
    crate::files::write_private(&path, &json).map_err(io)?;
    tracing::info!("svc agent: ACME account {} created", account.id());
    Ok(account)
}

/// The ACME client's HTTPS client, on the ring provider, trusting `directory_ca` if given and
/// the system's roots otherwise.
fn http_client(directory_ca: Option<&Path>) -> Result<Box<dyn instant_acme::HttpClient>, CertError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = hyper_rustls::HttpsConnectorBuilder::new();
    let builder = match directory_ca {
        Some(path) => {
            let pem = fs_err::read(path).map_err(CertError::Io)?;
            let mut roots = rustls::RootCertStore::empty();
            for cert in CertificateDer::pem_slice_iter(&pem) {
                let cert = cert.map_err(|e| CertError::Cert(format!("{}: {e}", path.display()).into()))?;
                roots.add(cert).map_err(|e| CertError::Cert(format!("{}: {e}", path.display()).into()))?;
            }
            let config = rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .map_err(|e| CertError::Cert(e.into()))?
                .with_root_certificates(roots)
                .with_no_client_auth();
            builder.with_tls_config(config)
        }
        None => builder
            .with_provider_and_native_roots(provider)
            .map_err(|e| CertError::Cert(format!("the system's root certificates: {e}").into()))?,
    };
    // Through the process's way out (the egress broker, in a job).
    let connector = builder.https_only().enable_http1().enable_http2().wrap_connector(crate::dial::DialConnector);
    let client: Client<_, BodyWrapper<Bytes>> = Client::builder(TokioExecutor::new()).build(connector);
    Ok(Box::new(client))
}

/// How long the chain's leaf certificate is still valid.
fn remaining_validity(chain_pem: &str) -> Result<Duration, CertError> {
    let facts = crate::cert::chain_leaf_facts(chain_pem)?;
    Ok(facts.not_after.duration_since(std::time::SystemTime::now()).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::{AcmeSource, account, challenge_certificate};

    /// An ACME directory whose HTTPS certificate the agent does not trust used to fail with
    /// only `ACME new account: client error (Connect)`.
    #[tokio::test]
    async fn an_untrusted_acme_server_names_its_url_and_the_certificate_problem() {
        // A TLS server on loopback with a self-signed certificate.
        let key = rcgen::KeyPair::generate().expect("key");
        let params = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()]).expect("params");
        let cert = params.self_signed(&key).expect("certificate");
        let der_key = rustls::pki_types::PrivateKeyDer::try_from(key.serialize_der()).expect("key der");
        let config =
            rustls::ServerConfig::builder_with_provider(std::sync::Arc::new(rustls::crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()
                .expect("versions")
                .with_no_client_auth()
                .with_single_cert(vec![cert.der().clone()], der_key)
                .expect("server config");
        let acceptor = tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(config));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let _ = acceptor.accept(tcp).await;
            }
        });
        // The agent trusts another CA.
        let other_key = rcgen::KeyPair::generate().expect("key");
        let mut ca_params = rcgen::CertificateParams::new(Vec::new()).expect("params");
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca_params.distinguished_name.push(rcgen::DnType::CommonName, "another CA");
        let other_ca = ca_params.self_signed(&other_key).expect("ca");
        let scratch = tempfile::tempdir().expect("a scratch directory");
        let dir = scratch.path();
        let ca_file = dir.join("other-ca.pem");
        std::fs::write(&ca_file, other_ca.pem()).expect("write");

        let url = format!("https://{addr}/dir");
        let source = AcmeSource { directory_url: &url, contact: &[], directory_ca: Some(&ca_file) };
        let err = account(&source, dir).await.err().expect("refused").to_string();
        assert!(err.contains(&url), "names the URL: {err}");
        assert!(err.contains("invalid peer certificate"), "names the certificate problem: {err}");
        assert!(err.contains("UnknownIssuer"), "names the certificate problem: {err}");
        assert!(err.contains("--acme-directory-ca FILE"), "says what to pass: {err}");
    }

    #[test]
    fn the_challenge_certificate_carries_the_acme_identifier() {
        let digest = [7u8; 32];
        let certified = challenge_certificate("acme.example.test", &digest).expect("a certificate");
        let der = certified.cert.first().expect("one certificate");
        let (_, cert) = x509_parser::parse_x509_certificate(der).expect("parses");
        // id-pe-acmeIdentifier, 1.3.6.1.5.5.7.1.31, critical, an OCTET STRING of the digest.
        let ext = cert
            .extensions()
            .iter()
            .find(|e| e.oid.to_id_string() == "1.3.6.1.5.5.7.1.31")
            .expect("the acmeIdentifier extension");
        assert!(ext.critical);
        assert_eq!(ext.value, [&[0x04, 32][..], &digest[..]].concat());
        assert!(challenge_certificate("acme.example.test", &[0u8; 31]).is_err());
    }
}
