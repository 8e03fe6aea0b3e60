//! Which keys the host keeps and which it gets: the operator key on the host (which must be
//! the registered one) or a new one, and the tunnel certificate and key on the host when they
//! make a TLS identity, or a new self-signed pair. New keys are made in memory; nothing is
//! written here.

use std::path::Path;

use crate::Root;
use crate::init::error::InitError;
use crate::init::record::Registration;
use crate::key::{OperatorKey, check_tls_identity, tunnel_cert};
use crate::layout;

/// The host file `path` as text, if it can be read.
fn read_existing(root: &Root, path: &Path) -> Option<String> {
    std::fs::read_to_string(root.path(path)).ok()
}

/// The operator key and its PEM: the one on the host, which must be the key `record`
/// registered (a conflict otherwise, `--force` or not: the key is never replaced), or a new
/// one when there is neither key nor record. A record without its key is a conflict.
pub fn operator_key(root: &Root, record: Option<&Registration>) -> Result<(OperatorKey, String), InitError> {
    let host = layout::config_file(layout::OPERATOR_KEY);
    match (read_existing(root, &host), record) {
        (Some(text), record) => {
            let key = OperatorKey::from_pem(&text).map_err(|e| {
                InitError::Conflict(format!(
                    "{} is not an operator key ({e}); restore it from a backup, or remove it{} and run init again",
                    host.display(),
                    if record.is_some() {
                        " and operator.json (registering again needs a new admission token)"
                    } else {
                        ""
                    }
                ))
            })?;
            if let Some(record) = record
                && key.public_key() != record.operator.public_key
            {
                return Err(InitError::Conflict(format!(
                    "{} is not the key registered for gateway {}; restore the registered key, or remove it and \
                     operator.json and register again with a new admission token",
                    host.display(),
                    record.operator.hostname
                )));
            }
            Ok((key, text))
        }
        (None, Some(record)) => Err(InitError::Conflict(format!(
            "the operator key {} registered for gateway {} is missing; restore it from a backup, or remove \
             operator.json and register again with a new admission token",
            host.display(),
            record.operator.hostname
        ))),
        (None, None) => {
            let key = OperatorKey::generate()?;
            let pem = key.pem().to_owned();
            Ok((key, pem))
        }
    }
}

/// The tunnel certificate and key (PEM): the pair on the host when it is a usable TLS
/// identity, else a new self-signed pair for `hostname`.
pub fn tunnel_pair(root: &Root, hostname: &str) -> Result<(String, String), InitError> {
    let cert = read_existing(root, &layout::config_file(layout::TUNNEL_CERT));
    let key = read_existing(root, &layout::config_file(layout::TUNNEL_KEY));
    if let (Some(cert), Some(key)) = (&cert, &key)
        && check_tls_identity(cert, key).is_ok()
    {
        return Ok((cert.clone(), key.clone()));
    }
    let pair = tunnel_cert(hostname)?;
    Ok((pair.cert_pem, pair.key_pem))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use relay_wire::admission::Operator;

    use super::*;

    fn put(root: &Root, name: &str, text: &str) {
        let path = root.path(layout::config_file(name));
        fs_err::create_dir_all(path.parent().expect("a parent")).expect("dirs");
        fs_err::write(path, text).expect("write");
    }

    fn record(public_key: String) -> Registration {
        let operator = Operator {
            id: "op_1".into(),
            name: "north".into(),
            public_key,
            hostname: "gw1.example.test".into(),
            admitted_at: 0,
        };
        Registration {
            version: crate::init::record::VERSION,
            coordinator: "http://c".into(),
            operator,
            files: BTreeMap::new(),
        }
    }

    #[test]
    fn the_operator_key_is_kept_made_or_refused() {
        let scratch = tempfile::tempdir().expect("a scratch root");
        let root = Root::new(scratch.path());
        let (made, pem) = operator_key(&root, None).expect("a new key");
        assert_eq!(pem, made.pem());
        let registered = record(made.public_key());
        let e = operator_key(&root, Some(&registered)).expect_err("registered, but missing");
        assert!(e.to_string().contains("is missing; restore it from a backup"), "{e}");

        put(&root, layout::OPERATOR_KEY, &pem);
        let (kept, text) = operator_key(&root, Some(&registered)).expect("the registered key");
        assert_eq!((kept.public_key(), text), (made.public_key(), pem));
        let other = record(OperatorKey::generate().expect("a key").public_key());
        let e = operator_key(&root, Some(&other)).expect_err("another key");
        assert!(matches!(&e, InitError::Conflict(m) if m.contains("is not the key registered for gateway gw1")), "{e}");

        put(&root, layout::OPERATOR_KEY, "not a key");
        let e = operator_key(&root, None).expect_err("not a key");
        assert!(e.to_string().contains("is not an operator key") && !e.to_string().contains("operator.json"), "{e}");
        let e = operator_key(&root, Some(&registered)).expect_err("not a key");
        assert!(e.to_string().contains("and operator.json (registering again"), "{e}");
    }

    #[test]
    fn a_usable_tunnel_pair_is_kept_and_anything_else_replaced() {
        let scratch = tempfile::tempdir().expect("a scratch root");
        let root = Root::new(scratch.path());
        let (cert, key) = tunnel_pair(&root, "gw1.example.test").expect("a new pair");
        check_tls_identity(&cert, &key).expect("a TLS identity");
        put(&root, layout::TUNNEL_CERT, &cert);
        put(&root, layout::TUNNEL_KEY, &key);
        assert_eq!(tunnel_pair(&root, "gw1.example.test").expect("kept"), (cert.clone(), key));
        put(&root, layout::TUNNEL_KEY, "not a key");
        let (new_cert, _) = tunnel_pair(&root, "gw1.example.test").expect("replaced");
        assert_ne!(new_cert, cert);
    }
}
