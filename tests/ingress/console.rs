//! The ingress console (`svc relay serve`, `/console/`) in Chromium, on a relay where
//! `examples/node-demo` is live: signing in with the customer token, the deployments, the
//! deployment's page (state, timeline, logs updating in place), the signed catalog and its
//! verification, stopping the deployment and refunding what it did not serve, then the
//! gateway operator claiming its reward; and another organization's deployment, not found.

use std::time::Duration;

use serde_json::json;
use svc_e2e::service::{TempDir, http};

use super::deploy::{ACME_CANONICAL, AcmeRelay, Relay, admin, admin_token};

#[path = "../console/webdriver.rs"]
pub(super) mod webdriver;

use webdriver::Browser;

#[tokio::test(flavor = "multi_thread")]
async fn the_ingress_console_shows_a_live_deployment_its_logs_then_stops_and_refunds_it() {
    let dir = TempDir::new("ingress-console");
    // Rewards are claimable as soon as their period settles.
    let (relay, _config) = Relay::with_live_demo(dir.path(), &["--settlement-delay-secs", "0"]).await;
    let base = relay.api.trim_end_matches('/').to_owned();
    let token = relay.token.clone();
    let other = {
        admin(&relay.data, "invite", "other");
        admin(&relay.data, "token", "other")
    };
    let operator = admin_token(&relay.data, "local", true);
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
        browser.assert_layout_holds("deployments");
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
        browser.assert_layout_holds("a deployment");
        // The development CA issues no certificate for a customer's own hostname: the page
        // says so instead of offering a form that would be refused.
        assert!(browser.find("#add-hostname").is_none());
        assert!(browser.text("#hostnames-acme").contains("--acme-directory"), "{}", browser.source());

        // The signed catalog, verified.
        let deployment_url = browser.url();
        browser.click_and_wait("nav a[href='/console/catalog']");
        let verdict = browser.text("#verdict");
        assert!(verdict.contains("The signature verifies against the catalog's signing key ed25519:"), "{verdict}");
        assert!(verdict.contains("Valid until"), "{verdict}");
        let pin = browser.text("#pin-command");
        assert!(pin.starts_with(&format!("svc ingress catalog verify --relay {base} --pin ed25519:")), "{pin}");
        assert!(browser.text("#validators").contains("route-validation/"), "{}", browser.text("#validators"));
        browser.screenshot("ingress-catalog");
        browser.assert_accessible("the catalog");
        browser.assert_layout_holds("the catalog");
        browser.goto(&deployment_url);

        // Another organization's deployment is not found, and not listed.
        let url = browser.url();
        let path = url.trim_start_matches(&base).to_owned();
        let theirs_session = sign_in_over_http(addr, &other, "/console/deployments").cookie;
        let theirs = http(addr, "GET", &path, &[("Cookie", &theirs_session)], None);
        assert_eq!(theirs.status, 404, "{}", String::from_utf8_lossy(&theirs.body));
        let listed = http(addr, "GET", "/console/deployments", &[("Cookie", &theirs_session)], None);
        assert!(!String::from_utf8_lossy(&listed.body).contains("node-demo"), "not listed for another organization");

        // The money in dollars (issue 42): the balance, the burn rate and when it runs out; then
        // the Fund form quotes and funds two more periods, and the balance rises by them.
        let before = dollars(&browser.text("#balance"));
        assert!(before > 0.0 && before <= 0.25, "one period of USD 0.25, started: {}", browser.text("#balance"));
        assert_eq!(browser.text("#burn-rate"), "USD 6.00 per day (USD 0.25 per hour)");
        let runs_out = browser.text("#runs-out");
        assert!(runs_out.starts_with("in ") && runs_out.contains("minutes ("), "{runs_out}");
        assert!(browser.text("#hints-none").contains("Nothing"), "no funds_low after funding: {}", browser.source());
        assert!(browser.text("#fund-help").contains("USD 0.25 per hour"), "{}", browser.text("#fund-help"));
        // The form as the page holds it, to send it again below.
        let page = browser.source();
        let field = |name: &str| {
            let at = page.find(&format!("name=\"{name}\" value=\"")).unwrap_or_else(|| panic!("{name}: {page}"));
            let value = &page[at + name.len() + 15..];
            value[..value.find('"').expect("a closing quote")].to_owned()
        };
        let sent_again = format!("csrf={}&funded={}&periods=2", field("csrf"), field("funded"));
        // The browser's session, as a copy of its cookie replays it.
        let browser_cookie = browser.cookie("svc_ingress_console").expect("the session cookie");
        let browser_cookie = format!("svc_ingress_console={}", browser_cookie["value"].as_str().expect("a value"));
        browser.clear("#periods");
        browser.type_into("#periods", "2");
        browser.click_and_wait("#fund-submit");
        assert!(browser.text("#notice").contains("Funded"), "{}", browser.source());
        let after = dollars(&browser.text("#balance"));
        // The same form sent again (a double click, a resend, a replay) funds nothing more.
        let replayed = http(
            addr,
            "POST",
            &format!("{}/fund", deployment_url.trim_start_matches(&base)),
            &[("Cookie", &browser_cookie), ("Content-Type", "application/x-www-form-urlencoded")],
            Some(sent_again.as_bytes()),
        );
        let said = String::from_utf8_lossy(&replayed.body);
        assert_eq!(replayed.status, 409, "{said}");
        assert!(said.contains("funded since this page was shown"), "{said}");
        browser.goto(&deployment_url);
        assert!(after >= before + 0.49 && after <= before + 0.50, "{before} + USD 0.50: {}", browser.text("#balance"));
        assert!(browser.text("#runs-out").starts_with("in 2 hours"), "{}", browser.text("#runs-out"));
        assert!(browser.text("#ledger").contains("USD 0.50"), "{}", browser.text("#ledger"));
        // A form from elsewhere (no CSRF token of this session) funds nothing.
        let cookie = browser_cookie.clone();
        let forged = http(
            addr,
            "POST",
            &format!("{}/fund", deployment_url.trim_start_matches(&base)),
            &[("Cookie", &cookie), ("Content-Type", "application/x-www-form-urlencoded")],
            Some(b"csrf=forged&periods=3"),
        );
        assert_eq!(forged.status, 403, "{}", String::from_utf8_lossy(&forged.body));
        browser.goto(&deployment_url);
        assert!(dollars(&browser.text("#balance")) <= after, "nothing funded: {}", browser.text("#balance"));

        // Stop, then refund what the stopped period did not serve (issue 18, point 6).
        browser.click_and_wait("#stop");
        assert!(browser.text("#notice").contains("Stopped"), "{}", browser.source());
        assert!(browser.text("#state").contains("stopped"), "{}", browser.text("#state"));
        // People by their token's name, never its ID (issue 42).
        assert!(browser.text("#timeline").contains("stopped by Ada (console)"), "{}", browser.text("#timeline"));
        assert!(browser.text("header").contains("signed in as Ada (organization acme)"), "{}", browser.text("header"));
        // The stopped period's unserved part, and the two periods funded above that never started.
        for _ in 0..3 {
            browser.click_and_wait("#sessions button.refund");
            assert!(browser.text("#notice").contains("Refunded"), "{}", browser.source());
        }
        let ledger = browser.text("#ledger");
        assert!(ledger.contains("refund"), "{ledger}");
        assert!(browser.find("#sessions button.refund").is_none(), "refunded once: {}", browser.text("#sessions"));
        browser.assert_accessible("a stopped, refunded deployment");
        browser.assert_layout_holds("a stopped, refunded deployment");

        browser.click_and_wait("header form button");
        assert!(browser.url().ends_with("/console/sign-in"), "{}", browser.url());

        // The gateway's operator: the stopped deployment's settled period earned it a reward.
        browser.type_into("#token", &operator);
        browser.click_and_wait("button[type=submit]");
        assert!(browser.url().ends_with("/console/rewards"), "{}", browser.url());
        assert!(browser.text("#rewards").contains("dep_"), "{}", browser.source());
        let claimable = browser.text("#claimable");
        assert!(claimable.starts_with("USD ") && claimable != "USD 0.00", "{claimable}");
        browser.assert_accessible("rewards");
        browser.assert_layout_holds("rewards");
        browser.screenshot("ingress-rewards");
        // An operator sees no deployment.
        let operator_session = sign_in_over_http(addr, &operator, "/console/rewards").cookie;
        let theirs = http(addr, "GET", "/console/deployments", &[("Cookie", &operator_session)], None);
        assert_eq!(theirs.status, 403, "{}", String::from_utf8_lossy(&theirs.body));
        browser.click_and_wait("#claim");
        assert!(browser.text("#notice").contains("Claimed: clm_"), "{}", browser.source());
        assert_eq!(browser.text("#claimable"), "USD 0.00");
        assert!(browser.find("#claim").is_none(), "claimed once");
        assert!(browser.text("#rewards").contains("claimed"), "{}", browser.text("#rewards"));
    })
    .await
    .expect("the browser part");
}

/// A console session made over plain HTTP: its `Cookie` header and its CSRF token.
struct HttpSession {
    cookie: String,
    csrf: String,
}

/// Signs in to the ingress console at `addr` with `token`, as the sign-in form does; `page`
/// is a page of the console that shows the sign-out form (for the CSRF token).
fn sign_in_over_http(addr: std::net::SocketAddr, token: &str, page: &str) -> HttpSession {
    let signed_in = http(
        addr,
        "POST",
        "/console/sign-in",
        &[("Content-Type", "application/x-www-form-urlencoded")],
        Some(format!("token={token}").as_bytes()),
    );
    assert_eq!(signed_in.status, 303, "{}", String::from_utf8_lossy(&signed_in.body));
    let set = signed_in.header("set-cookie").expect("a session cookie");
    let value = set.strip_prefix("svc_ingress_console=").and_then(|v| v.split(';').next()).expect("its value");
    assert!(!value.contains(token) && value.len() == 64, "a session id, not the token: {set}");
    let cookie = format!("svc_ingress_console={value}");
    let shown = http(addr, "GET", page, &[("Cookie", &cookie)], None);
    let body = String::from_utf8_lossy(&shown.body);
    let marker = "name=\"csrf\" value=\"";
    let at = body.find(marker).map(|i| i + marker.len()).unwrap_or_else(|| panic!("a CSRF field: {body}"));
    let csrf = body[at..].split('"').next().unwrap_or_default().to_owned();
    HttpSession { cookie, csrf }
}

/// Issue 40, point 3, on the ingress console: the cookie holds a random session id, never the
/// token; a copy of it is no API token; signing out makes it worthless wherever it was
/// copied; a form of the ended session signs nothing out; the 21st wrong token in a minute
/// is refused with when to try again, the right token as well.
#[tokio::test(flavor = "multi_thread")]
async fn ingress_sign_out_makes_a_copied_cookie_worthless_a_cookie_is_no_api_token_and_the_21st_wrong_token_waits() {
    let dir = TempDir::new("ingress-console-sessions");
    let relay = Relay::start(&dir.path().join("relay"), &[]).await;
    let base = relay.api.trim_end_matches('/').to_owned();
    let token = relay.token.clone();
    let addr: std::net::SocketAddr = base.trim_start_matches("http://").parse().expect("the API's address");
    tokio::task::spawn_blocking(move || {
        let browser = Browser::start("ingress-console-sessions");
        browser.goto(&format!("{base}/console/sign-in"));
        browser.type_into("#token", &token);
        browser.click_and_wait("button[type=submit]");
        assert!(browser.url().ends_with("/console/deployments"), "{}", browser.url());
        let cookie = browser.cookie("svc_ingress_console").expect("the session cookie");
        assert_eq!(cookie["httpOnly"], json!(true), "{cookie}");
        assert_eq!(cookie["sameSite"], json!("Strict"), "{cookie}");
        let value = cookie["value"].as_str().expect("a value").to_owned();
        assert!(value.len() == 64 && !value.contains(&token), "a session id, not the token: {value}");
        let stolen = format!("svc_ingress_console={value}");
        assert_eq!(http(addr, "GET", "/console/deployments", &[("Cookie", &stolen)], None).status, 200);

        // A stolen cookie is not an API token; nor is the token a session.
        let api = http(addr, "GET", "/api/ingress/deployments", &[("Authorization", &format!("Bearer {value}"))], None);
        assert_eq!(api.status, 401, "{}", String::from_utf8_lossy(&api.body));
        let as_cookie =
            http(addr, "GET", "/console/deployments", &[("Cookie", &format!("svc_ingress_console={token}"))], None);
        assert_eq!(as_cookie.status, 303);

        // A second session's sign-out form ends only that session.
        let second = sign_in_over_http(addr, &token, "/console/deployments");
        let form = format!("csrf={}", second.csrf);
        let ended = http(
            addr,
            "POST",
            "/console/sign-out",
            &[("Cookie", &second.cookie), ("Content-Type", "application/x-www-form-urlencoded")],
            Some(form.as_bytes()),
        );
        assert_eq!(ended.status, 303);
        assert_eq!(http(addr, "GET", "/console/deployments", &[("Cookie", &second.cookie)], None).status, 303);
        assert_eq!(http(addr, "GET", "/console/deployments", &[("Cookie", &stolen)], None).status, 200);

        // Signing out in the browser: the copy is worthless.
        browser.click_and_wait("header form button");
        assert!(browser.url().ends_with("/console/sign-in"), "{}", browser.url());
        let replayed = http(addr, "GET", "/console/deployments", &[("Cookie", &stolen)], None);
        assert_eq!(replayed.status, 303, "{}", String::from_utf8_lossy(&replayed.body));
        assert_eq!(replayed.header("location"), Some("/console/sign-in"));

        for i in 1..=20 {
            browser.type_into("#token", &format!("rly_wrong_{i}"));
            browser.click_and_wait("button[type=submit]");
            let said = browser.text("#sign-in-problem");
            assert!(said.contains("no customer or gateway operator has this token"), "attempt {i}: {said}");
        }
        browser.type_into("#token", "rly_wrong_21");
        browser.click_and_wait("button[type=submit]");
        let said = browser.text("#sign-in-problem");
        assert!(said.contains("too many wrong tokens") && said.contains("try again in"), "{said}");
        browser.assert_accessible("ingress sign-in, too many attempts");
        let refused = http(
            addr,
            "POST",
            "/console/sign-in",
            &[("Content-Type", "application/x-www-form-urlencoded")],
            Some(format!("token={token}").as_bytes()),
        );
        assert_eq!(refused.status, 429, "{}", String::from_utf8_lossy(&refused.body));
        let wait: u64 = refused.header("retry-after").and_then(|v| v.parse().ok()).expect("a Retry-After");
        assert!((1..=60).contains(&wait), "{wait}");
        assert!(refused.header("set-cookie").is_none());
    })
    .await
    .expect("the browser part");
}

/// The dollars a text begins with: `USD 1,234.50 left ...` is 1234.5.
fn dollars(text: &str) -> f64 {
    let amount = text.trim_start_matches("USD ").split(' ').next().unwrap_or("").replace(',', "");
    amount.parse().unwrap_or_else(|_| panic!("an amount in dollars: {text:?}"))
}

/// A customer's own hostname from the console, on a relay issuing certificates from a real
/// Pebble: added by its form, its exact DNS records listed with Copy buttons, checked while
/// they are missing (still pending, the missing record named), checked again once they exist
/// (verified), then removed (off the list).
#[tokio::test(flavor = "multi_thread")]
async fn the_ingress_console_adds_checks_and_removes_a_customer_hostname() {
    let Some((pebble_bin, dns_bin)) = super::pebble::programs() else { return };
    let dir = TempDir::new("ingress-console-hostnames");
    let AcmeRelay { relay, stack, config, .. } = AcmeRelay::deployed(dir.path(), &pebble_bin, &dns_bin).await;
    // Funded well past the test, so the route serves throughout.
    let funded = relay.json(&["fund", "--periods", "100", "--config", &config]).await;
    assert_eq!(funded["entry"]["kind"], "fund", "{funded:#}");
    let base = relay.api.trim_end_matches('/').to_owned();
    let token = relay.token.clone();
    tokio::task::spawn_blocking(move || {
        let host = "shop.example.test";
        let browser = Browser::start("ingress-console-hostnames");
        browser.goto(&format!("{base}/console/"));
        browser.type_into("#token", &token);
        browser.click_and_wait("button[type=submit]");
        browser.click_and_wait("#deployments a[href^='/console/deployments/dep_']");

        browser.type_into("#hostname", host);
        browser.click_and_wait("#add-hostname button[type=submit]");
        assert!(browser.text("#notice").contains("Added"), "{}", browser.source());
        let listed = browser.text("#hostnames");
        assert!(listed.contains(host) && listed.contains("pending_dns"), "{listed}");
        let records = browser.text("#records");
        assert!(records.contains(&format!("{host}. 300 IN CNAME {ACME_CANONICAL}.")), "{records}");
        assert!(records.contains(&format!("_svc-challenge.{host}. 300 IN TXT")), "{records}");
        assert!(browser.find("#records button[data-copy]").is_some(), "each record has a Copy button");

        // Checked before the records exist: still pending, and the page says which is missing.
        browser.click_and_wait("#hostnames button.verify");
        assert!(browser.text("#notice").contains("Checked"), "{}", browser.source());
        assert!(browser.text("#hostnames").contains("pending_dns"), "{}", browser.text("#hostnames"));
        assert!(browser.text("#hints").contains("dns_cname_missing"), "{}", browser.text("#hints"));
        browser.screenshot("ingress-hostnames");
        browser.assert_accessible("a deployment with a pending hostname");
        browser.assert_layout_holds("a deployment with a pending hostname");

        // The records created: verified.
        let proof = relay_token_of(&browser.text("#records"), host);
        stack.dns_set("/set-cname", json!({"host": format!("{host}."), "target": format!("{ACME_CANONICAL}.")}));
        stack.dns_set("/set-txt", json!({"host": format!("_svc-challenge.{host}."), "value": proof}));
        browser.click_and_wait("#hostnames button.verify");
        let listed = browser.text("#hostnames");
        assert!(listed.contains("verified") || listed.contains("live"), "{listed}");
        assert!(!browser.text("main").contains("dns_cname_missing"), "{}", browser.text("main"));
        assert!(browser.find("#records").is_none(), "nothing left to create");

        browser.click_and_wait("#hostnames button.remove");
        assert!(browser.text("#notice").contains("Removed"), "{}", browser.source());
        assert!(!browser.text("#hostnames").contains(host), "{}", browser.text("#hostnames"));
        assert!(browser.find("#hostnames button.verify").is_none(), "a removed hostname has no actions");
        drop(stack);
    })
    .await
    .expect("the browser part");
}

/// The TXT proof the page asks for `host`: the quoted value of its `_svc-challenge` record.
fn relay_token_of(records: &str, host: &str) -> String {
    let record = format!("_svc-challenge.{host}. 300 IN TXT \"");
    let start = records.find(&record).map(|i| i + record.len()).expect("the TXT record on the page");
    records[start..].split('"').next().unwrap_or_default().to_owned()
}
