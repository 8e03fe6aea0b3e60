//! The ingress console (`svc relay serve`, `/console/`) in Chromium, on a relay where
//! `examples/node-demo` is live: signing in with the customer token, the deployments, the
//! deployment's page (state, timeline, logs updating in place), stopping it and refunding
//! what it did not serve; and another organization's deployment, not found.

use std::time::Duration;

use serde_json::json;
use svc_e2e::service::{TempDir, http};

use super::deploy::{Relay, admin};

#[path = "../console/webdriver.rs"]
mod webdriver;

use webdriver::Browser;

#[tokio::test(flavor = "multi_thread")]
async fn the_ingress_console_shows_a_live_deployment_its_logs_then_stops_and_refunds_it() {
    let dir = TempDir::new("ingress-console");
    let (relay, _config) = Relay::with_live_demo(dir.path(), &[]).await;
    let base = relay.api.trim_end_matches('/').to_owned();
    let token = relay.token.clone();
    let other = {
        admin(&relay.data, "invite", "other");
        admin(&relay.data, "token", "other")
    };
    let addr: std::net::SocketAddr = base.trim_start_matches("http://").parse().expect("the API's address");
    // The browser blocks: off the runtime's workers, which the relay's client calls use.
    tokio::task::spawn_blocking(move || {
        let browser = Browser::start("ingress-console");
        browser.goto(&format!("{base}/console/"));
        assert!(browser.url().ends_with("/console/sign-in"), "{}", browser.url());
        browser.type_into("#token", &token);
        browser.click_and_wait("button[type=submit]");
        assert!(browser.url().ends_with("/console/deployments"), "{}", browser.url());
        let list = browser.text("#deployments");
        assert!(list.contains("node-demo") && list.contains("live"), "{list}");
        browser.assert_accessible("deployments");
        browser.screenshot("ingress-deployments");

        browser.click_and_wait("#deployments a[href^='/console/deployments/dep_']");
        assert!(browser.text("#state").contains("live"), "{}", browser.text("#state"));
        assert!(browser.text("#timeline").contains("pending_funding"), "{}", browser.text("#timeline"));
        assert!(browser.text("#hostnames").contains("node-demo-acme"), "{}", browser.text("#hostnames"));
        browser.execute("window.stillTheSamePage = true;");
        browser.wait_until("the logs region refreshes in place", Duration::from_secs(15), |b| {
            b.text("#logs-status").starts_with("updated")
        });
        assert_eq!(browser.execute("return window.stillTheSamePage === true;"), json!(true), "no reload happened");
        assert!(!browser.text("#logs").is_empty());
        browser.screenshot("ingress-deployment");
        browser.assert_accessible("a deployment");

        // Another organization's deployment is not found, and not listed.
        let url = browser.url();
        let path = url.trim_start_matches(&base).to_owned();
        let theirs = http(addr, "GET", &path, &[("Cookie", &format!("svc_ingress_console={other}"))], None);
        assert_eq!(theirs.status, 404, "{}", String::from_utf8_lossy(&theirs.body));
        let listed =
            http(addr, "GET", "/console/deployments", &[("Cookie", &format!("svc_ingress_console={other}"))], None);
        assert!(!String::from_utf8_lossy(&listed.body).contains("node-demo"), "not listed for another organization");

        // Stop, then refund what the stopped period did not serve (issue 18, point 6).
        browser.click_and_wait("#stop");
        assert!(browser.text("#notice").contains("Stopped"), "{}", browser.source());
        assert!(browser.text("#state").contains("stopped"), "{}", browser.text("#state"));
        browser.click_and_wait("#sessions button.refund");
        assert!(browser.text("#notice").contains("Refunded"), "{}", browser.source());
        let ledger = browser.text("#ledger");
        assert!(ledger.contains("refund"), "{ledger}");
        assert!(browser.find("#sessions button.refund").is_none(), "refunded once: {}", browser.text("#sessions"));
        browser.assert_accessible("a stopped, refunded deployment");

        browser.click_and_wait("header form button");
        assert!(browser.url().ends_with("/console/sign-in"), "{}", browser.url());
    })
    .await
    .expect("the browser part");
}
