//! The customer-hostname DNS checks against a real DNS server on loopback: Debian's
//! `pebble-challtestsrv` (from the `pebble` package, which `.ci/run` installs), whose records
//! are set through its management API. It answers NOERROR with no records for a name it has
//! no record of (A and AAAA excepted: 127.0.0.1 and ::1), follows a CNAME for CAA and TXT
//! queries as a recursive resolver does, and serves every CAA property with flags 0.
//!
//! Without the binary the tests skip, saying so; under SVC_REQUIRE_ALL they fail.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, UdpSocket};
use std::time::{Duration, Instant};

use relay_api::dns::{Check, DnsChecker, DnsConfig, DnsError, HostnameVerdict};
use relay_api::hint::{Hint, Stage};

const HOST: &str = "shop.example.test";
const CANONICAL: &str = "node-demo-acme.relay.test";
const TOKEN: &str = "svc-token-3f9a1c";

fn le() -> Vec<String> {
    vec!["letsencrypt.org".to_owned()]
}

#[path = "support/mock_dns.rs"]
mod mock_dns;
use mock_dns::MockDns;

impl MockDns {
    fn checker(&self) -> DnsChecker {
        DnsChecker::new(&self.config()).expect("checker")
    }

    async fn cname(&self, host: &str, target: &str) {
        self.post("/set-cname", serde_json::json!({"host": host, "target": format!("{target}.")})).await;
    }

    async fn txt(&self, host: &str, value: &str) {
        // The server stores TXT owners as given, so they must be fully qualified.
        self.post("/set-txt", serde_json::json!({"host": format!("{host}."), "value": value})).await;
    }

    async fn clear_txt(&self, host: &str) {
        self.post("/clear-txt", serde_json::json!({"host": format!("{host}.")})).await;
    }

    async fn caa(&self, host: &str, issue: &[&str]) {
        let policies: Vec<_> = issue.iter().map(|v| serde_json::json!({"tag": "issue", "value": v})).collect();
        self.post("/add-caa", serde_json::json!({"host": host, "policies": policies})).await;
    }

    async fn clear_caa(&self, host: &str) {
        self.post("/clear-caa", serde_json::json!({"host": host})).await;
    }

    /// The records of a verified hostname.
    async fn all_fixed(&self) {
        self.cname(HOST, CANONICAL).await;
        self.txt(&format!("_svc-challenge.{HOST}"), TOKEN).await;
    }
}

async fn verify(checker: &DnsChecker) -> HostnameVerdict {
    checker.verify_hostname(HOST, CANONICAL, TOKEN, &le()).await.expect("valid inputs")
}

fn failed(check: &Check) -> &Hint {
    check.hint().unwrap_or_else(|| panic!("expected a failed check, got {check:?}"))
}

#[tokio::test]
async fn no_records_at_all_fails_cname_and_txt_with_the_records_to_add() {
    let Some(dns) = MockDns::start().await else { return };
    let verdict = verify(&dns.checker()).await;
    let cname = failed(&verdict.cname);
    assert_eq!(cname.code, "dns_cname_missing");
    assert_eq!(cname.stage, Stage::Dns);
    assert_eq!(cname.hostname.as_deref(), Some(HOST));
    let record = cname.record.as_ref().expect("record");
    assert_eq!(record.zone_line(), "shop.example.test. 300 IN CNAME node-demo-acme.relay.test.");
    let txt = failed(&verdict.txt);
    assert_eq!(txt.code, "dns_txt_missing");
    let record = txt.record.as_ref().expect("record");
    assert_eq!(record.zone_line(), format!("_svc-challenge.shop.example.test. 300 IN TXT \"{TOKEN}\""));
    // No CAA record anywhere on the climb: every CA may issue.
    assert_eq!(verdict.caa, Check::Passed);
    assert_eq!(verdict.hints().len(), 2);
    assert!(!verdict.is_verified());
}

#[tokio::test]
async fn a_cname_elsewhere_is_wrong_and_says_where_it_points() {
    let Some(dns) = MockDns::start().await else { return };
    dns.cname(HOST, "old-host.example.net").await;
    let verdict = verify(&dns.checker()).await;
    let hint = failed(&verdict.cname);
    assert_eq!(hint.code, "dns_cname_wrong");
    assert!(hint.problem.contains("CNAME to old-host.example.net."), "{}", hint.problem);
    assert!(hint.problem.contains("must point to node-demo-acme.relay.test"), "{}", hint.problem);
    assert_eq!(hint.record.as_ref().expect("record").value, "node-demo-acme.relay.test.");
    // Fixed: the next check sees it (no cache in between).
    dns.cname(HOST, CANONICAL).await;
    assert_eq!(verify(&dns.checker()).await.cname, Check::Passed);
}

#[tokio::test]
async fn the_txt_token_missing_wrong_then_right() {
    let Some(dns) = MockDns::start().await else { return };
    let checker = dns.checker();
    let challenge = format!("_svc-challenge.{HOST}");
    assert_eq!(failed(&verify(&checker).await.txt).code, "dns_txt_missing");

    dns.txt(&challenge, "an-old-token").await;
    let verdict = verify(&checker).await;
    let hint = failed(&verdict.txt);
    assert_eq!(hint.code, "dns_txt_wrong");
    assert!(hint.problem.contains("\"an-old-token\""), "{}", hint.problem);
    assert_eq!(hint.record.as_ref().expect("record").value, format!("\"{TOKEN}\""));

    // The same checker, right after the fix: one of several TXT records matches.
    dns.txt(&challenge, TOKEN).await;
    assert_eq!(verify(&checker).await.txt, Check::Passed);
    dns.clear_txt(&challenge).await;
    assert_eq!(failed(&verify(&checker).await.txt).code, "dns_txt_missing");
}

#[tokio::test]
async fn caa_at_the_parent_forbidding_our_ca_names_the_parent_and_the_record() {
    let Some(dns) = MockDns::start().await else { return };
    dns.all_fixed().await;
    dns.caa("example.test", &["other-ca.example"]).await;
    let verdict = verify(&dns.checker()).await;
    assert_eq!(verdict.cname, Check::Passed);
    assert_eq!(verdict.txt, Check::Passed);
    let hint = failed(&verdict.caa);
    assert_eq!(hint.code, "caa_forbids_ca");
    assert_eq!(hint.stage, Stage::Caa);
    assert!(hint.problem.contains("at example.test, the closest to shop.example.test"), "{}", hint.problem);
    assert!(hint.problem.contains("allow only other-ca.example, not letsencrypt.org"), "{}", hint.problem);
    assert_eq!(
        hint.record.as_ref().expect("record").zone_line(),
        "example.test. 300 IN CAA 0 issue \"letsencrypt.org\""
    );
    assert_eq!(verdict.hints().len(), 1);

    // Adding our CA next to the other one permits (properties are additive).
    dns.caa("example.test", &["letsencrypt.org"]).await;
    let verdict = verify(&dns.checker()).await;
    assert_eq!(verdict.caa, Check::Passed);
    assert!(verdict.is_verified());
}

#[tokio::test]
async fn caa_issue_semicolon_forbids_every_ca() {
    let Some(dns) = MockDns::start().await else { return };
    dns.caa("example.test", &[";"]).await;
    let hint = verify(&dns.checker()).await.caa;
    let hint = failed(&hint);
    assert_eq!(hint.code, "caa_forbids_ca");
    assert!(hint.problem.contains("allow no CA at all"), "{}", hint.problem);
}

#[tokio::test]
async fn the_closest_caa_rrset_overrides_its_parents() {
    let Some(dns) = MockDns::start().await else { return };
    let checker = dns.checker();
    // The hostname's own RRset permits; the parent's forbidding one is never reached.
    dns.caa("test", &["other-ca.example"]).await;
    dns.caa("example.test", &[";"]).await;
    dns.caa(HOST, &["letsencrypt.org"]).await;
    assert_eq!(verify(&checker).await.caa, Check::Passed);

    // The other way round: the parent permits, the hostname's own RRset forbids.
    dns.clear_caa(HOST).await;
    dns.clear_caa("example.test").await;
    dns.caa("example.test", &["letsencrypt.org"]).await;
    dns.caa(HOST, &["other-ca.example"]).await;
    let verdict = verify(&checker).await;
    let hint = failed(&verdict.caa);
    assert!(
        hint.problem.starts_with("The CAA records at shop.example.test allow only other-ca.example"),
        "{}",
        hint.problem
    );
    assert_eq!(hint.record.as_ref().expect("record").name, HOST);

    // Only the top-level label has an RRset: it is found at the end of the climb.
    dns.clear_caa(HOST).await;
    dns.clear_caa("example.test").await;
    let hint = verify(&checker).await.caa;
    assert!(failed(&hint).problem.contains("at test, the closest"), "{}", failed(&hint).problem);
}

#[tokio::test]
async fn an_alias_uses_its_targets_caa_but_climbs_its_own_parents() {
    let Some(dns) = MockDns::start().await else { return };
    let checker = dns.checker();
    dns.all_fixed().await;
    // RFC 6844 would have climbed the target's parents (relay.test); RFC 8659 does not.
    dns.caa("relay.test", &["other-ca.example"]).await;
    assert_eq!(verify(&checker).await.caa, Check::Passed);

    // The target's own RRset is what the CAA query for the alias returns.
    dns.caa(CANONICAL, &["other-ca.example"]).await;
    dns.caa("example.test", &["letsencrypt.org"]).await;
    let verdict = verify(&checker).await;
    let hint = failed(&verdict.caa);
    assert!(
        hint.problem.contains("at node-demo-acme.relay.test (the CNAME target of shop.example.test)"),
        "{}",
        hint.problem
    );
    assert_eq!(hint.record.as_ref().expect("record").name, CANONICAL);
}

#[tokio::test]
async fn all_records_fixed_verifies_the_hostname() {
    let Some(dns) = MockDns::start().await else { return };
    dns.all_fixed().await;
    dns.caa("example.test", &["letsencrypt.org"]).await;
    let verdict = verify(&dns.checker()).await;
    assert!(verdict.is_verified(), "{:?}", verdict.hints());
    assert!(verdict.hints().is_empty());
    // Another CA identity list that excludes the one in the RRset is refused.
    let other = vec!["pki.goog".to_owned()];
    let verdict = dns.checker().verify_hostname(HOST, CANONICAL, TOKEN, &other).await.expect("valid");
    assert_eq!(failed(&verdict.caa).code, "caa_forbids_ca");
}

#[tokio::test]
async fn lookup_ips_answers_a_and_aaaa_from_the_server() {
    let Some(dns) = MockDns::start().await else { return };
    let checker = dns.checker();
    dns.post("/add-a", serde_json::json!({"host": "api.example.test", "addresses": ["127.0.0.7"]})).await;
    let ips = checker.lookup_ips("api.example.test").await.expect("lookup");
    assert!(ips.contains(&IpAddr::V4(Ipv4Addr::new(127, 0, 0, 7))), "{ips:?}");
    // The server's default AAAA answer.
    assert!(ips.contains(&IpAddr::V6(Ipv6Addr::LOCALHOST)), "{ips:?}");
    // Through a CNAME, the target's addresses.
    dns.cname(HOST, "api.example.test").await;
    let ips = checker.lookup_ips(HOST).await.expect("lookup");
    assert!(ips.contains(&IpAddr::V4(Ipv4Addr::new(127, 0, 0, 7))), "{ips:?}");
}

#[tokio::test]
async fn a_server_that_never_answers_gives_lookup_failed_hints() {
    // A loopback DNS "server" that takes the queries and answers none (no pebble needed).
    // A TCP port whose UDP twin is free too (another process may hold that one).
    let (_tcp, _udp, port) = loop {
        let tcp = std::net::TcpListener::bind("127.0.0.1:0").expect("tcp");
        let port = tcp.local_addr().expect("addr").port();
        if let Ok(udp) = UdpSocket::bind(("127.0.0.1", port)) {
            break (tcp, udp, port);
        }
    };
    let config = DnsConfig { nameservers: vec![([127, 0, 0, 1], port).into()], timeout: Duration::from_millis(300) };
    let checker = DnsChecker::new(&config).expect("checker");
    let started = Instant::now();
    let verdict = verify(&checker).await;
    assert!(started.elapsed() < Duration::from_secs(10), "checks run concurrently and time out");
    for (check, stage, query) in [
        (&verdict.cname, Stage::Dns, "CNAME shop.example.test"),
        (&verdict.txt, Stage::Dns, "TXT _svc-challenge.shop.example.test"),
        (&verdict.caa, Stage::Caa, "CAA shop.example.test"),
    ] {
        let hint = failed(check);
        assert_eq!(hint.code, "dns_lookup_failed");
        assert_eq!(hint.stage, stage);
        assert!(hint.problem.contains(&format!("query for {query} failed")), "{}", hint.problem);
        assert!(hint.fix.contains("retried automatically"), "{}", hint.fix);
    }
    let err = checker.lookup_ips("api.example.test").await.expect_err("no answer");
    assert!(matches!(err, DnsError::Lookup { .. }), "{err:?}");
}

#[tokio::test]
async fn invalid_inputs_are_clear_errors() {
    let config = DnsConfig { nameservers: vec![([127, 0, 0, 1], 9).into()], timeout: Duration::from_millis(100) };
    let checker = DnsChecker::new(&config).expect("checker");
    let err = checker.verify_hostname("Shop.Example.test", CANONICAL, TOKEN, &le()).await.expect_err("uppercase");
    assert_eq!(err.to_string(), "invalid hostname `Shop.Example.test`: use lowercase letters (`shop.example.test`)");
    let err = checker.verify_hostname("192.0.2.1", CANONICAL, TOKEN, &le()).await.expect_err("an IP");
    assert!(err.to_string().contains("is an IP address"), "{err}");
    let err = checker.verify_hostname(HOST, "relay", TOKEN, &le()).await.expect_err("one label");
    assert!(err.to_string().starts_with("invalid canonical hostname `relay`"), "{err}");
    let err = checker.verify_hostname(HOST, CANONICAL, "a b", &le()).await.expect_err("a space");
    assert!(matches!(err, DnsError::InvalidToken { .. }), "{err:?}");
    let err = checker.verify_hostname(HOST, CANONICAL, TOKEN, &[]).await.expect_err("no CA");
    assert_eq!(err, DnsError::NoCaIdentities);
}
