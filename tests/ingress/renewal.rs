//! Renewal of a 15-second development certificate (the demo's hidden `--cert-validity-secs`
//! takes 10 s and up): new handshakes get the new certificate after two thirds of the
//! lifetime, and a connection opened before goes on working.

use std::time::Duration;

use tokio::time::Instant;

use super::client::{Https, serial_and_spki};
use super::{Demo, HOST};

/// The certificate's lifetime, in seconds.
const VALIDITY: u64 = 15;

/// The agent renews 10 s after it installed the certificate; new handshakes must see it by
/// then, with some slack (the demo's start under load included).
const RENEWED_WITHIN: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread")]
async fn a_renewed_certificate_serves_new_handshakes_and_spares_open_connections() {
    let started = Instant::now();
    let demo = Demo::start("demo-renewal", &["--cert-validity-secs", &VALIDITY.to_string()]).await;
    let mut open = Https::connect(demo.public, HOST, &demo.ca(), None).await.expect("TLS");
    assert_eq!(open.get("/").await.expect("GET /").status, 200);
    let leaf = open.leaf();
    let (first, spki) = serial_and_spki(&leaf);
    let (_, cert) = x509_parser::parse_x509_certificate(&leaf).expect("X.509");
    let lifetime = cert.validity().not_after.timestamp() - cert.validity().not_before.timestamp();
    let lifetime = u64::try_from(lifetime).expect("a certificate that ends after it begins");
    // 15 s, and the CA back-dates a minute.
    assert!((VALIDITY..=VALIDITY + 60).contains(&lifetime), "a 15-second certificate: {lifetime} s");

    let renewed = loop {
        assert!(
            started.elapsed() < RENEWED_WITHIN,
            "no new certificate on new handshakes within {RENEWED_WITHIN:?}\n{}",
            demo.proc.output()
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
        let Ok(fresh) = Https::connect(demo.public, HOST, &demo.ca(), None).await else { continue };
        let (serial, fresh_spki) = serial_and_spki(&fresh.leaf());
        assert_eq!(fresh_spki, spki, "the same job key");
        if serial != first {
            break started.elapsed();
        }
    };
    // The certificate was installed after `started`, and is renewed two thirds of its
    // lifetime after that.
    let two_thirds = Duration::from_secs(VALIDITY * 2 / 3);
    assert!(renewed >= two_thirds, "renewed after two thirds of the lifetime, not at {renewed:?}");

    // The connection opened with the old certificate still answers.
    let again = open.get("/").await.expect("the open connection still works");
    assert_eq!(again.status, 200);
    let (still, _) = serial_and_spki(&open.leaf());
    assert_eq!(still, first, "the same connection, the same handshake");
}
