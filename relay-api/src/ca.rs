//! The local development CA, like Caddy's internal issuer: a CA key and certificate kept in a
//! directory (`ca.pem`, and `ca-key.pem` with mode 0600), which signs certificate requests
//! for `.localhost` names. A job's key never leaves the job: the CA sees only its CSR.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, CertificateSigningRequestParams, DistinguishedName, DnType, IsCa, Issuer,
    KeyPair, KeyUsagePurpose, SanType,
};

/// Why the CA could not do something.
#[derive(Debug, thiserror::Error)]
pub enum CaError {
    /// A file could not be read or written.
    #[error("{0}")]
    Io(
        /// The cause, which names the file (`fs-err`).
        #[source]
        std::io::Error,
    ),
    /// Certificate generation or parsing failed.
    #[error("certificate: {0}")]
    Cert(#[from] rcgen::Error),
    /// The request asks for a name this CA does not sign.
    #[error("the development CA signs only names under .localhost; refused: {0}")]
    NameRefused(String),
}

/// A development CA loaded from, or created in, a directory.
pub struct DevCa {
    issuer: Issuer<'static, KeyPair>,
    cert_pem: String,
    /// `DIR/ca.pem`.
    pub cert_path: PathBuf,
}

impl std::fmt::Debug for DevCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DevCa").field("cert_path", &self.cert_path).finish_non_exhaustive()
    }
}

impl DevCa {
    /// Loads the CA from `dir`, or creates it there (the directory may hold other files).
    pub fn open(dir: &Path) -> Result<DevCa, CaError> {
        relay_wire::files::create_private_dir(dir).map_err(CaError::Io)?;
        let cert_path = dir.join("ca.pem");
        let key_path = dir.join("ca-key.pem");
        let (key, cert_pem) = if cert_path.exists() && key_path.exists() {
            let key_pem = fs_err::read_to_string(&key_path).map_err(CaError::Io)?;
            let cert_pem = fs_err::read_to_string(&cert_path).map_err(CaError::Io)?;
            (KeyPair::from_pem(&key_pem)?, cert_pem)
        } else {
            let key = KeyPair::generate()?;
            let mut params = CertificateParams::default();
            let mut name = DistinguishedName::new();
            name.push(DnType::CommonName, "svc local development CA");
            params.distinguished_name = name;
            params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
            params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
            params.not_before = rcgen::date_time_ymd(2025, 1, 1);
            params.not_after = rcgen::date_time_ymd(2035, 1, 1);
            let cert = params.self_signed(&key)?;
            relay_wire::files::write_private(&key_path, key.serialize_pem().as_bytes()).map_err(CaError::Io)?;
            // Written last: a present ca.pem means the CA is complete.
            relay_wire::files::write_private(&cert_path, cert.pem().as_bytes()).map_err(CaError::Io)?;
            (key, cert.pem())
        };
        let issuer = Issuer::from_ca_cert_pem(&cert_pem, key)?;
        Ok(DevCa { issuer, cert_pem, cert_path })
    }

    /// The CA certificate (PEM).
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// Signs a CSR (PEM) for `.localhost` names, valid for `validity` from now.
    /// Returns the leaf and the CA certificate, PEM.
    pub fn sign_csr(&self, csr_pem: &str, validity: Duration) -> Result<String, CaError> {
        let mut csr = CertificateSigningRequestParams::from_pem(csr_pem)?;
        for san in &csr.params.subject_alt_names {
            match san {
                SanType::DnsName(name) if is_local(name.as_str()) => {}
                other => return Err(CaError::NameRefused(format!("{other:?}"))),
            }
        }
        if csr.params.subject_alt_names.is_empty() {
            return Err(CaError::NameRefused("a request without names".into()));
        }
        let now = std::time::SystemTime::now();
        // Back-date a minute against clock skew.
        csr.params.not_before = (now - Duration::from_secs(60)).into();
        csr.params.not_after = (now + validity).into();
        csr.params.is_ca = IsCa::NoCa;
        csr.params.serial_number = Some(random_serial()?);
        let leaf = csr.signed_by(&self.issuer)?;
        Ok(format!("{}{}", leaf.pem(), self.cert_pem))
    }

    /// A key and certificate for a service of our own (the gateway's tunnel port), for
    /// `names` (DNS names or IP addresses). Returns (chain PEM, key PEM).
    pub fn issue(&self, names: &[String], validity: Duration) -> Result<(String, String), CaError> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(names.to_vec())?;
        let now = std::time::SystemTime::now();
        params.not_before = (now - Duration::from_secs(60)).into();
        params.not_after = (now + validity).into();
        params.serial_number = Some(random_serial()?);
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok((format!("{}{}", cert.pem(), self.cert_pem), key.serialize_pem()))
    }
}

fn is_local(name: &str) -> bool {
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    name == "localhost" || name.ends_with(".localhost")
}

fn random_serial() -> Result<rcgen::SerialNumber, CaError> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes)
        .map_err(|e| CaError::Io(std::io::Error::other(format!("no random serial number: {e}"))))?;
    bytes[0] &= 0x7f; // positive
    Ok(rcgen::SerialNumber::from_slice(&bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ca_persists_and_signs_only_local_names() {
        let scratch = tempfile::tempdir().expect("a scratch directory");
        let dir = scratch.path();
        let ca = DevCa::open(dir).expect("ca");
        let again = DevCa::open(dir).expect("reopen");
        assert_eq!(ca.cert_pem(), again.cert_pem());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.join("ca-key.pem")).expect("key").permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let key = KeyPair::generate().expect("key");
        let csr = CertificateParams::new(vec!["demo.localhost".into()])
            .expect("params")
            .serialize_request(&key)
            .expect("csr");
        let chain = ca.sign_csr(&csr.pem().expect("pem"), Duration::from_secs(300)).expect("signed");
        assert!(chain.matches("BEGIN CERTIFICATE").count() == 2);
        let bad =
            CertificateParams::new(vec!["example.com".into()]).expect("params").serialize_request(&key).expect("csr");
        assert!(matches!(
            ca.sign_csr(&bad.pem().expect("pem"), Duration::from_secs(300)),
            Err(CaError::NameRefused(_))
        ));
    }
}
