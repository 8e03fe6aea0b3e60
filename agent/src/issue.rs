//! Getting the route's certificate from the configured source: the coordinator's
//! development CA (a CSR over its agent API) or an ACME CA ([`crate::acme`], TLS-ALPN-01
//! answered through the tunnel by [`CurrentCert`]).

use std::path::Path;
use std::time::Duration;

use rcgen::{CertificateParams, KeyPair};

use crate::cert::{CertError, CurrentCert};
use crate::config::{AgentConfig, CertificateSource};

/// Obtains a certificate for `hostnames` (the route's names, canonical first) from the
/// configured source; returns the chain PEM and how long it is valid. An ACME source answers
/// a TLS-ALPN-01 challenge per name through `current` (the tunnel must be up) and keeps its
/// account in `state_dir`.
pub(crate) async fn obtain(
    config: &AgentConfig,
    hostnames: &[String],
    key: &KeyPair,
    current: &CurrentCert,
    state_dir: &Path,
) -> Result<(String, Duration), CertError> {
    let csr = csr(hostnames, key)?;
    match &config.certificate {
        CertificateSource::Acme { directory_url, contact, directory_ca } => {
            let turn = crate::acme_turn::Turn::take(config).await?;
            let acme = crate::acme::AcmeSource { directory_url, contact, directory_ca: directory_ca.as_deref() };
            crate::acme::obtain(&acme, hostnames, csr.der(), current, state_dir, turn).await
        }
        CertificateSource::DevCa { url, validity_secs } => {
            let csr_pem = csr.pem().map_err(|e| CertError::Cert(e.into()))?;
            let body = serde_json::json!({
                "routeId": config.route_id, "credential": config.credential, "csr": csr_pem,
                "validitySecs": validity_secs,
            });
            let chain = crate::http::post_json(url, "/api/dev-ca/sign", &body)
                .await
                .map_err(|e| CertError::Issuer(e.into()))?;
            Ok((chain, Duration::from_secs(*validity_secs)))
        }
    }
}

/// One CSR naming every hostname, signed by the job's key.
pub(crate) fn csr(hostnames: &[String], key: &KeyPair) -> Result<rcgen::CertificateSigningRequest, CertError> {
    let params = CertificateParams::new(hostnames.to_vec()).map_err(|e| CertError::Cert(e.into()))?;
    params.serialize_request(key).map_err(|e| CertError::Cert(e.into()))
}
