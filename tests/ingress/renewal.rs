//! Renewal of a 5-minute development certificate: new handshakes get the new certificate
//! after two thirds of the lifetime, and a connection opened before goes on working.

use std::time::Duration;

use tokio::time::Instant;

use super::client::{Https, serial_and_spki};
use super::{Demo, HOST};

/// The agent renews after 200 s; new handshakes must see it by then, with some slack.
const RENEWED_WITHIN: Duration = Duration::from_secs(260);

#[tokio::test(flavor = "multi_thread")]
async fn a_renewed_certificate_serves_new_handshakes_and_spares_open_connections() {
    let started = Instant::now();
    let demo = Demo::start("demo-renewal", &["--cert-validity-secs", "300"]).await;
    let mut open = Https::connect(demo.public, HOST, &demo.ca(), None).await.expect("TLS");
    assert_eq!(open.get("/").await.expect("GET /").status, 200);
    let leaf = open.leaf();
    let (first, spki) = serial_and_spki(&leaf);
    let (_, cert) = x509_parser::parse_x509_certificate(&leaf).expect("X.509");
    let lifetime = cert.validity().not_after.timestamp() - cert.validity().not_before.timestamp();
    // 300 s, and the CA back-dates a minute.
    assert!((300..=360).contains(&lifetime), "a 5-minute certificate: {lifetime} s");

    let renewed = loop {
        assert!(
            started.elapsed() < RENEWED_WITHIN,
            "no new certificate on new handshakes within {RENEWED_WITHIN:?}\n{}",
            demo.proc.output()
        );
        tokio::time::sleep(Duration::from_secs(3)).await;
        let Ok(fresh) = Https::connect(demo.public, HOST, &demo.ca(), None).await else { continue };
        let (serial, fresh_spki) = serial_and_spki(&fresh.leaf());
        assert_eq!(fresh_spki, spki, "the same job key");
        if serial != first {
            break started.elapsed();
        }
    };
    assert!(renewed >= Duration::from_secs(150), "renewed after two thirds of the lifetime, not at {renewed:?}");

    // The connection opened with the old certificate still answers.
    let again = open.get("/").await.expect("the open connection still works");
    assert_eq!(again.status, 200);
    let (still, _) = serial_and_spki(&open.leaf());
    assert_eq!(still, first, "the same connection, the same handshake");
}
