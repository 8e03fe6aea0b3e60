//! The publication console (`svc serve`, `/console/`) as a member uses it: signing in with a
//! token, the applications list, an application's overview, its executions updating without
//! a reload, signing out; and as an attacker: another organization's application, a form from
//! another site, a stale CSRF token.

use std::time::Duration;

use serde_json::{Value, json};
use svc_e2e::service::{Server, TempDir, accept_build, admin, http, token};

use super::webdriver::Browser;

/// A V5 manifest that publishes (build evidence accepted) and is held: the organization has
/// no spend authority, so its executions are `blocked` and no job runs.
fn held_manifest(app: &str) -> Value {
    json!({
        "schema": "svc.application-manifest", "schemaVersion": 5, "applicationId": app,
        "release": {"mode": "source"},
        "runtime": {"kind": "javascript", "entrypoint": {"file": "server.js"}},
        "execution": {"mode": "continuous"},
        "deployment": {"schedule": {"duration": "1h"},
            "spend": {"unit": "service_credit_micros", "perJob": "1000000", "rate": {"amount": "100000000"}}},
        "state": {"mode": "off"}
    })
}

fn create(server: &Server, token: &str, app: &str) {
    let r = server.request("POST", "/api/applications", Some(token), Some(&json!({"applicationId": app})));
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
}

#[test]
fn the_publication_console_signs_in_lists_applications_and_updates_executions_without_a_reload() {
    let dir = TempDir::new("console-publication");
    let developer = token(dir.str(), "acme", "developer");
    let server = Server::start(dir.path(), &[]);
    let base = server.url();
    create(&server, &developer, "web");
    accept_build(dir.str(), "acme", "web");

    let browser = Browser::start("publication-console");
    // Signed out, the console is its sign-in page.
    browser.goto(&format!("{base}/console/"));
    assert!(browser.url().ends_with("/console/sign-in"), "{}", browser.url());
    browser.type_into("#token", "svc_not_a_member");
    browser.click_and_wait("button[type=submit]");
    assert!(browser.text("#sign-in-problem").contains("no member has this token"), "{}", browser.source());
    browser.assert_accessible("sign-in, refused");
    browser.type_into("#token", &developer);
    browser.click_and_wait("button[type=submit]");
    assert!(browser.url().ends_with("/console/apps"), "{}", browser.url());
    browser.assert_accessible("applications");
    browser.screenshot("publication-applications");
    let list = browser.text("main");
    assert!(list.contains("web") && list.contains("disabled") && list.contains("idle"), "{list}");
    // The token stays out of the page's reach (HttpOnly), and no script is inline.
    assert_eq!(browser.execute("return document.cookie;"), json!(""), "the session cookie is HttpOnly");
    let source = browser.source();
    assert_eq!(source.matches("<script").count(), 1, "one script, the console's file: {source}");

    // The overview, through the list's link.
    browser.click_and_wait("a[href='/console/apps/web']");
    assert!(browser.text("#status").contains("disabled"));
    assert!(browser.text("#convergence").contains("idle"));
    browser.assert_accessible("overview");
    browser.screenshot("publication-overview");

    // Executions: the region updates in place when a version is published elsewhere.
    browser.goto(&format!("{base}/console/apps/web/executions"));
    assert!(browser.text("#verdict").contains("idle"), "{}", browser.source());
    browser.execute("window.stillTheSamePage = true;");
    let r = server.request(
        "POST",
        "/api/applications/web/policy-versions",
        Some(&developer),
        Some(&json!({"manifest": held_manifest("web")})),
    );
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    browser.wait_until("the executions region shows the published version", Duration::from_secs(15), |b| {
        b.text("#verdict").contains("blocked")
    });
    assert!(browser.text("#verdict").contains("spend_authority_missing"), "{}", browser.text("#verdict"));
    assert_eq!(browser.execute("return window.stillTheSamePage === true;"), json!(true), "no reload happened");
    browser.screenshot("publication-executions");
    browser.assert_accessible("executions");

    // Issue 42, point 7: with spend authority, each launch of an artifact the store lacks is
    // refused alike, again and again: one row with its count and its first and last time, the
    // execution's long ID shortened (whole in its title), the refusal's terminal text without
    // backticks, and the page holds at 360 and 1280 px.
    admin(&["spend-authority", "set", "--data-dir", dir.str(), "--org", "acme", "--micros", "1000000000"]);
    let count = |b: &Browser| {
        let script = "const r = document.querySelector('#recent abbr.repeat'); return r ? r.textContent : '';";
        b.execute(script).as_str().and_then(|t| t.strip_prefix('×')).and_then(|n| n.parse::<u32>().ok()).unwrap_or(0)
    };
    browser.wait_until("refusals alike folded into one row", Duration::from_secs(90), |b| count(b) >= 3);
    let recent = browser.text("#recent");
    assert!(recent.contains("artifact_refused") && recent.contains("svc app deploy DIR"), "{recent}");
    let rows = browser.execute("return document.querySelectorAll('#recent tbody tr').length;");
    assert!(
        rows.as_u64().unwrap_or(0) < u64::from(count(&browser)),
        "{} rows for {} refusals: {recent}",
        rows,
        count(&browser)
    );
    let backticks = browser.execute("return document.querySelector('#recent').innerHTML.includes('`');");
    assert_eq!(backticks, json!(false), "the refusal's `code` spans are <code>: {}", browser.source());
    let title = browser.execute("return document.querySelector('#recent code.id').title;");
    let title = title.as_str().unwrap_or_default().to_owned();
    let (uid, attempt) = title.split_once('/').unwrap_or_default();
    assert!(
        uid.starts_with("app_") && uid.len() == 36 && attempt.split('/').count() == 3,
        "the whole execution ID: {title}"
    );
    browser.assert_layout_holds("executions, refused alike");
    browser.screenshot("publication-refusals");
    browser.resize(360, 800);
    browser
        .execute("document.querySelector('#recent').closest('.table-wrap').previousElementSibling.scrollIntoView();");
    browser.screenshot("publication-refusals-360");
    browser.resize(1280, 900);
    browser.goto(&format!("{base}/console/apps/web"));
    browser.assert_layout_holds("overview, with its digests");

    // Signing out ends the session: the console asks to sign in again.
    browser.click_and_wait("header form button");
    assert!(browser.url().ends_with("/console/sign-in"), "{}", browser.url());
    browser.goto(&format!("{base}/console/apps"));
    assert!(browser.url().ends_with("/console/sign-in"), "{}", browser.url());
}

/// Attack pass: another organization's application is not found; a form posted from another
/// site, or with another session's CSRF token, changes nothing; every page carries the
/// Content-Security-Policy.
#[test]
fn the_publication_console_refuses_other_organizations_other_sites_and_stale_forms() {
    let dir = TempDir::new("console-attacks");
    let acme = token(dir.str(), "acme", "developer");
    let other = token(dir.str(), "other", "viewer");
    let server = Server::start(dir.path(), &[]);
    create(&server, &acme, "web");
    let acme_session = session(&server, &acme);
    let other_session = session(&server, &other);
    let cookie = |t: &str| {
        if t == acme {
            acme_session.cookie.clone()
        } else if t == other {
            other_session.cookie.clone()
        } else {
            session(&server, t).cookie
        }
    };

    let mine = http(server.addr, "GET", "/console/apps/web", &[("Cookie", &cookie(&acme))], None);
    assert_eq!(mine.status, 200);
    let csp = mine.header("content-security-policy").expect("a Content-Security-Policy");
    assert!(csp.contains("script-src 'self'") && csp.contains("frame-ancestors 'none'"), "{csp}");
    // The member by the token's name (issue 42), never its ID.
    let ada =
        admin(&["token", "create", "--data-dir", dir.str(), "--org", "acme", "--role", "viewer", "--name", "Ada"]);
    let page = http(server.addr, "GET", "/console/apps", &[("Cookie", &cookie(&ada))], None);
    let page = String::from_utf8_lossy(&page.body);
    assert!(page.contains("signed in as Ada (viewer, organization acme)"), "{page}");
    assert!(!page.contains("tok_"), "no token ID: {page}");
    let theirs = http(server.addr, "GET", "/console/apps/web", &[("Cookie", &cookie(&other))], None);
    assert_eq!(theirs.status, 404, "another organization's application is not found");
    let listed = http(server.addr, "GET", "/console/apps", &[("Cookie", &cookie(&other))], None);
    assert!(!String::from_utf8_lossy(&listed.body).contains("/console/apps/web"), "and not listed");

    let form = |csrf: &str| format!("csrf={csrf}").into_bytes();
    let stale = http(
        server.addr,
        "POST",
        "/console/sign-out",
        &[("Cookie", &cookie(&acme)), ("Content-Type", "application/x-www-form-urlencoded")],
        Some(&form(&other_session.csrf)),
    );
    assert_eq!(stale.status, 403, "another session's CSRF token");
    assert!(stale.header("set-cookie").is_none(), "the session stays");
    let sign_in = http(
        server.addr,
        "POST",
        "/console/sign-in",
        &[("Origin", "http://evil.example"), ("Content-Type", "application/x-www-form-urlencoded")],
        Some(format!("token={acme}").as_bytes()),
    );
    assert_eq!(sign_in.status, 403, "a sign-in form posted from another site");
    assert!(sign_in.header("set-cookie").is_none());
    // The same forms from the console's own pages do what they say.
    let own = http(
        server.addr,
        "POST",
        "/console/sign-in",
        &[("Content-Type", "application/x-www-form-urlencoded")],
        Some(format!("token={acme}").as_bytes()),
    );
    assert_eq!(own.status, 303, "{}", String::from_utf8_lossy(&own.body));
    assert!(own.header("set-cookie").is_some_and(|c| c.contains("HttpOnly") && c.contains("SameSite=Strict")));
    let signed_out = http(
        server.addr,
        "POST",
        "/console/sign-out",
        &[("Cookie", &cookie(&acme)), ("Content-Type", "application/x-www-form-urlencoded")],
        Some(&form(&acme_session.csrf)),
    );
    assert_eq!(signed_out.status, 303);
    assert!(signed_out.header("set-cookie").is_some_and(|c| c.contains("Max-Age=0")), "signed out");
    let live = http(server.addr, "GET", "/console/apps/web/executions/live", &[], None);
    assert_eq!(live.status, 401, "the live region says signed out, for its script");

    // Review finding: a one-line manifest of 1,200 unknown keys with long values made 1,000
    // diagnostics, each echoing the whole line (900 MB of page). Now at most 100 rows of at
    // most 160 characters each, and the page stays under 200 KB.
    let keys: String = (0..200).map(|i| format!(",\"k{i}\":\"{}\"", "a".repeat(300))).collect();
    let manifest = format!("{{\"schema\":\"svc.application-manifest\",\"schemaVersion\":5{keys}}}");
    let encoded = |text: &str| -> String {
        text.bytes()
            .map(|b| if b.is_ascii_alphanumeric() { (b as char).to_string() } else { format!("%{b:02X}") })
            .collect()
    };
    let acme_session = session(&server, &acme);
    let csrf = acme_session.csrf.clone();
    let form_post = |body: String| {
        http(
            server.addr,
            "POST",
            "/console/apps/web/publish",
            &[("Cookie", &acme_session.cookie), ("Content-Type", "application/x-www-form-urlencoded")],
            Some(body.as_bytes()),
        )
    };
    let refused = form_post(format!("csrf={csrf}&action=preview&manifest={}", encoded(&manifest)));
    assert_eq!(refused.status, 422, "{}", String::from_utf8_lossy(&refused.body[..refused.body.len().min(2000)]));
    let page = String::from_utf8_lossy(&refused.body);
    assert_eq!(page.matches("<pre class=\"source\">").count(), 100, "at most 100 rows");
    assert!(page.contains("The first 100 of 2"), "and says how many there are");
    assert!(refused.body.len() < 200_000, "{} bytes for a {} byte manifest", refused.body.len(), manifest.len());
    // A manifest too large to carry back in a page under 200 KB: refused with where to
    // publish it instead, and not echoed.
    let huge =
        format!("{{\"schema\":\"svc.application-manifest\",\"schemaVersion\":5,\"x\":\"{}\"}}", "\\\"".repeat(20_000));
    let too_large = form_post(format!("csrf={csrf}&action=preview&manifest={}", encoded(&huge)));
    assert_eq!(too_large.status, 413, "{}", String::from_utf8_lossy(&too_large.body[..too_large.body.len().min(2000)]));
    assert!(too_large.body.len() < 20_000, "not echoed: {} bytes", too_large.body.len());
    assert!(String::from_utf8_lossy(&too_large.body).contains("svc policy publish --app web --file FILE"));

    // Review finding: confirm publishes what the preview showed, or nothing.
    accept_build(dir.str(), "acme", "web");
    let valid = serde_json::to_string(&held_manifest("web")).expect("JSON");
    let valid = encoded(&valid);
    let other = format!("sha256:{}", "0".repeat(64));
    let stale = form_post(format!("csrf={csrf}&action=confirm&expected=0&reviewed={other}&manifest={valid}"));
    assert_eq!(stale.status, 409, "{}", String::from_utf8_lossy(&stale.body));
    assert!(String::from_utf8_lossy(&stale.body).contains("not the one previewed"));
    let versions = server.request("GET", "/api/applications/web/policy-versions", Some(&acme), None).json();
    assert_eq!(versions["policyVersions"].as_array().map(Vec::len), Some(0), "nothing was published");
}

/// A console session made over plain HTTP: its `Cookie` header and its CSRF token (read from
/// a page, as a form would carry it).
pub(crate) struct HttpSession {
    pub(crate) cookie: String,
    pub(crate) csrf: String,
}

/// Signs in to the console at `addr` (cookie `name`) with `token`, as the sign-in form does;
/// `page` is a page of the console that shows the sign-out form.
pub(crate) fn sign_in_over_http(addr: std::net::SocketAddr, name: &str, token: &str, page: &str) -> HttpSession {
    let signed_in = http(
        addr,
        "POST",
        "/console/sign-in",
        &[("Content-Type", "application/x-www-form-urlencoded")],
        Some(format!("token={token}").as_bytes()),
    );
    assert_eq!(signed_in.status, 303, "{}", String::from_utf8_lossy(&signed_in.body));
    let set = signed_in.header("set-cookie").expect("a session cookie");
    let value = set.strip_prefix(&format!("{name}=")).and_then(|v| v.split(';').next()).expect("the cookie's value");
    assert!(!value.contains(token) && value.len() == 64, "a session id, not the token: {set}");
    let cookie = format!("{name}={value}");
    let shown = http(addr, "GET", page, &[("Cookie", &cookie)], None);
    let body = String::from_utf8_lossy(&shown.body);
    let marker = "name=\"csrf\" value=\"";
    let at = body.find(marker).map(|i| i + marker.len()).unwrap_or_else(|| panic!("a CSRF field: {body}"));
    let csrf = body[at..].split('"').next().unwrap_or_default().to_owned();
    HttpSession { cookie, csrf }
}

fn session(server: &Server, token: &str) -> HttpSession {
    sign_in_over_http(server.addr, "svc_console", token, "/console/apps")
}

/// Signs `browser` in with `token` through the sign-in page.
fn sign_in(browser: &Browser, base: &str, token: &str) {
    browser.goto(&format!("{base}/console/sign-in"));
    browser.type_into("#token", token);
    browser.click_and_wait("button[type=submit]");
    assert!(browser.url().ends_with("/console/apps"), "{}", browser.url());
}

/// The manifest text the tests type: YAML, as a person would paste it.
const HELD_YAML: &str = "schema: svc.application-manifest
schemaVersion: 5
applicationId: web
release:
  mode: source
runtime:
  kind: javascript
  entrypoint:
    file: server.js
execution:
  mode: continuous
deployment:
  schedule:
    duration: 1h
  spend:
    unit: service_credit_micros
    perJob: \"1000000\"
    rate:
      amount: \"100000000\"
state:
  mode: off
";

/// Issue 18: publish with a preview, then confirm on the same fence; a stale fence from a
/// second tab shows the conflict and a fresh review; a publication that pauses, then resume;
/// a viewer sees no publish form and is refused if it posts anyway.
#[test]
fn publishing_previews_then_confirms_on_its_fence_and_a_stale_fence_offers_a_fresh_review() {
    let dir = TempDir::new("console-publish");
    let developer = token(dir.str(), "acme", "developer");
    let viewer = token(dir.str(), "acme", "viewer");
    let server = Server::start(dir.path(), &[]);
    let base = server.url();
    create(&server, &developer, "web");
    accept_build(dir.str(), "acme", "web");
    let browser = Browser::start("publication-publish");
    sign_in(&browser, &base, &developer);

    // A manifest with a mistake: every diagnostic at its line, the text kept.
    browser.goto(&format!("{base}/console/apps/web/publish"));
    let mistaken = "schema: svc.application-manifest\nschemaVersion: 5\nbogus: 1\n";
    browser.type_into("#manifest", mistaken);
    browser.click_and_wait("#preview");
    let problems = browser.text("#diagnostics");
    assert!(problems.contains("bogus: 1") && problems.contains("/bogus"), "{problems}");
    // The editor of the refused page holds the manifest as typed (the diagnostics table also
    // shows its lines, so the page's source would hold them either way).
    assert_eq!(browser.value("#manifest"), mistaken, "the text is kept");
    browser.assert_accessible("publish, refused");

    // A valid one: the preview says what would commit, fenced on the active version (none).
    browser.clear("#manifest");
    browser.type_into("#manifest", HELD_YAML);
    browser.click_and_wait("#preview");
    assert_eq!(browser.text("#preview-version"), "1");
    assert!(browser.text("#preview-fence").contains("none"), "{}", browser.text("#preview-fence"));
    browser.screenshot("publication-preview");
    browser.assert_accessible("publish preview");
    let first = browser.tab();

    // A second tab publishes first...
    browser.new_tab();
    browser.goto(&format!("{base}/console/apps/web/publish"));
    browser.type_into("#manifest", HELD_YAML);
    browser.click_and_wait("#preview");
    browser.click_and_wait("#confirm");
    assert!(browser.url().contains("/console/apps/web?published=1"), "{}", browser.url());
    assert!(browser.text("#notice").contains("Published version 1"));

    // ...so the first tab's confirm meets a moved fence: the conflict, and a fresh review.
    browser.switch_to(&first);
    browser.click_and_wait("#confirm");
    let conflict = browser.text("#publish-problem");
    assert!(conflict.contains("review it again") && conflict.contains("now 1"), "{conflict}");
    browser.clear("#manifest");
    browser.type_into("#manifest", &HELD_YAML.replace("duration: 1h", "duration: 2h"));
    browser.click("#pause");
    browser.type_into("#reason", "db migration");
    browser.click_and_wait("#preview");
    assert_eq!(browser.text("#preview-version"), "2");
    assert!(browser.text("#preview-fence").contains("version 1"));
    assert!(browser.text("#preview-summary").contains("paused"), "{}", browser.text("#preview-summary"));
    browser.click_and_wait("#confirm");
    assert!(browser.text("#status").contains("paused"));
    assert!(browser.text("main").contains("db migration"), "the pause reason is shown");
    browser.assert_accessible("overview, paused, with its resume form");

    // Resume, with a reason.
    browser.type_into("#resume-reason", "migration done");
    browser.click_and_wait("#resume");
    assert!(browser.text("#notice").contains("Resumed"));
    assert!(browser.text("#status").contains("active"));

    // The versions, and what changed between them, field by field.
    browser.goto(&format!("{base}/console/apps/web/versions"));
    assert!(browser.text("#versions").contains("active"));
    browser.click_and_wait("#compare");
    assert!(browser.text("#diff-title").contains("1 field differ"), "{}", browser.text("#diff-title"));
    let changed = browser.text("#diff");
    assert!(changed.contains("/deployment/schedule/duration") && changed.contains("\"2h\""), "{changed}");
    browser.screenshot("publication-versions");
    browser.assert_accessible("versions and a diff");
    browser.goto(&format!("{base}/console/apps/web/versions/2"));
    assert!(browser.text("#authored").contains("\"2h\""), "{}", browser.text("#authored"));
    browser.assert_accessible("a version");

    // A viewer: no Publish link, no form, and a post is refused.
    browser.click_and_wait("header form button");
    sign_in(&browser, &base, &viewer);
    browser.goto(&format!("{base}/console/apps/web"));
    assert!(browser.find("nav a[href='/console/apps/web/publish']").is_none(), "no Publish link for a viewer");
    browser.goto(&format!("{base}/console/apps/web/publish"));
    assert!(browser.find("#manifest").is_none(), "no form for a viewer");
    assert!(browser.text("main").contains("cannot publish"));
    let viewer_session = session(&server, &viewer);
    let body = format!(
        "csrf={}&action=confirm&expected=2&manifest={}",
        viewer_session.csrf,
        HELD_YAML.replace('\n', "%0A").replace(' ', "+").replace(':', "%3A").replace('"', "%22")
    );
    let refused = http(
        server.addr,
        "POST",
        "/console/apps/web/publish",
        &[("Cookie", &viewer_session.cookie), ("Content-Type", "application/x-www-form-urlencoded")],
        Some(body.as_bytes()),
    );
    assert_eq!(refused.status, 403, "{}", String::from_utf8_lossy(&refused.body));
    let versions = server.request("GET", "/api/applications/web/policy-versions", Some(&developer), None).json();
    assert_eq!(versions["policyVersions"].as_array().map(Vec::len), Some(2), "the viewer published nothing");
}

/// The applications list reads each listed application's convergence, so it is paged: 50 a
/// page, whatever the organization holds (issue 18, point 7: a view's work is bounded).
#[test]
fn the_applications_list_shows_fifty_a_page() {
    let dir = TempDir::new("console-pages");
    let developer = token(dir.str(), "acme", "developer");
    let server = Server::start(dir.path(), &[]);
    for i in 0..51 {
        create(&server, &developer, &format!("app-{i:02}"));
    }
    let cookie = session(&server, &developer).cookie;
    let page = |n: usize| {
        let r = http(server.addr, "GET", &format!("/console/apps?page={n}"), &[("Cookie", &cookie)], None);
        assert_eq!(r.status, 200);
        String::from_utf8_lossy(&r.body).into_owned()
    };
    let first = page(1);
    assert_eq!(first.matches("<a href=\"/console/apps/app-").count(), 50, "{first}");
    assert!(first.contains("51 applications") && first.contains("id=\"next-page\""));
    let second = page(2);
    assert_eq!(second.matches("<a href=\"/console/apps/app-").count(), 1);
    assert!(second.contains("Previous page") && !second.contains("id=\"next-page\""));
    assert!(page(9).contains("No application on this page"));
}

/// Issue 42, point 2: the executions page shows each execution's newest output lines, updated
/// with the live region (no reload): escaped (a job's markup is text), a long line wrapped,
/// whole, never cut off, at 360 and 1280 px.
#[test]
fn the_executions_page_shows_each_executions_newest_output_escaped_and_wrapped_as_it_comes() {
    let dir = TempDir::new("console-output");
    let developer = token(dir.str(), "acme", "developer");
    let server = Server::start(dir.path(), &[]);
    let base = server.url();
    create(&server, &developer, "web");
    admin(&["spend-authority", "set", "--data-dir", dir.str(), "--org", "acme", "--micros", "1000000000"]);
    let bundle = dir.path().join("bundle");
    std::fs::create_dir_all(&bundle).expect("bundle dir");
    let long = "w".repeat(3000);
    let script = format!(
        "console.log('<b>hello</b> & \"world\"');\nconsole.log('{long}');\n\
         let n = 0;\nsetInterval(() => console.log(`tick ${{++n}}`), 300);\n"
    );
    std::fs::write(bundle.join("server.js"), script).expect("server.js");
    let digest = admin(&["artifact", "store", "--data-dir", dir.str(), "--bundle", bundle.to_str().expect("UTF-8")]);
    svc_e2e::service::accept_build_of(dir.str(), "acme", "web", &digest);

    let browser = Browser::start("publication-console-output");
    sign_in(&browser, &base, &developer);
    browser.goto(&format!("{base}/console/apps/web/executions"));
    assert!(browser.text("#output-empty").contains("No execution printed anything yet"), "{}", browser.source());
    browser.execute("window.stillTheSamePage = true;");
    let r = server.request(
        "POST",
        "/api/applications/web/policy-versions",
        Some(&developer),
        Some(&json!({"manifest": held_manifest("web")})),
    );
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let shown = "#output-0-1-1 pre.output";
    browser.wait_until("the job's first lines on the page", Duration::from_secs(30), |b| {
        b.find(shown).is_some() && b.text(shown).contains("tick 2")
    });
    let text = browser.text(shown);
    assert!(text.contains("[program] <b>hello</b> & \"world\""), "the job's markup is text: {text}");
    assert_eq!(
        browser.execute("return document.querySelector('pre.output b');"),
        Value::Null,
        "no element of the job's"
    );
    assert!(text.contains(&long), "the long line whole");
    assert!(browser.text("#output-0-1-1 h3").contains("web/0/1/1"), "{}", browser.text("#output-0-1-1"));
    // Wrapped, not cut: the box is no wider than its text's room.
    let fits =
        browser.execute("const p = document.querySelector('pre.output'); return p.scrollWidth <= p.clientWidth;");
    assert_eq!(fits, json!(true), "long lines wrap");
    browser.assert_layout_holds("executions, with a long line");
    // It goes on updating in place: a later tick, the page not reloaded; at most 20 lines.
    browser.wait_until("a later tick", Duration::from_secs(30), |b| b.text(shown).contains("tick 25"));
    assert_eq!(browser.execute("return window.stillTheSamePage === true;"), json!(true), "no reload happened");
    let lines = browser.execute("return document.querySelector('pre.output').textContent.split('\\n').length - 1;");
    assert_eq!(lines, json!(20), "the newest 20 lines");
    assert!(!browser.text(shown).contains("<b>hello</b>"), "older lines gave way to the newest");
    assert!(browser.text("#output-0-1-1").contains("kept in all"), "{}", browser.text("#output-0-1-1"));
    browser.assert_layout_holds("executions, with output");
    browser.assert_accessible("executions, with output");
}

/// Issue 40, point 3: a console session is the server's. The cookie holds a random session
/// id, never the token; a copy of it is no API token; signing out makes it worthless
/// wherever it was copied; and wrong tokens are limited per address: the 21st in a minute is
/// refused with when to try again, the right token as well.
#[test]
fn sign_out_makes_a_copied_cookie_worthless_a_cookie_is_no_api_token_and_the_21st_wrong_token_waits() {
    let dir = TempDir::new("console-sessions");
    let developer = token(dir.str(), "acme", "developer");
    let server = Server::start(dir.path(), &[]);
    let base = server.url();
    create(&server, &developer, "web");
    let browser = Browser::start("publication-sessions");
    sign_in(&browser, &base, &developer);
    let cookie = browser.cookie("svc_console").expect("the session cookie");
    assert_eq!(cookie["httpOnly"], json!(true), "{cookie}");
    assert_eq!(cookie["sameSite"], json!("Strict"), "{cookie}");
    assert_eq!(cookie["path"], json!("/console"), "{cookie}");
    let value = cookie["value"].as_str().expect("a value").to_owned();
    assert!(value.len() == 64 && !value.contains(&developer), "a session id, not the token: {value}");
    let stolen = format!("svc_console={value}");
    let page = http(server.addr, "GET", "/console/apps/web", &[("Cookie", &stolen)], None);
    assert_eq!(page.status, 200, "the copy is the browser's session while it lasts");

    // A stolen cookie is not an API token.
    let api = http(server.addr, "GET", "/api/applications", &[("Authorization", &format!("Bearer {value}"))], None);
    assert_eq!(api.status, 401, "{}", String::from_utf8_lossy(&api.body));
    // Nor is the token a session.
    let token_as_cookie =
        http(server.addr, "GET", "/console/apps", &[("Cookie", &format!("svc_console={developer}"))], None);
    assert_eq!(token_as_cookie.status, 303);

    // Signing out in the browser ends the session for the copy too.
    browser.click_and_wait("header form button");
    assert!(browser.url().ends_with("/console/sign-in"), "{}", browser.url());
    let replayed = http(server.addr, "GET", "/console/apps/web", &[("Cookie", &stolen)], None);
    assert_eq!(replayed.status, 303, "{}", String::from_utf8_lossy(&replayed.body));
    assert_eq!(replayed.header("location"), Some("/console/sign-in"));
    let live = http(server.addr, "GET", "/console/apps/web/executions/live", &[("Cookie", &stolen)], None);
    assert_eq!(live.status, 401, "the live region says signed out");
    // Signing in again makes another session.
    sign_in(&browser, &base, &developer);
    let again = browser.cookie("svc_console").expect("a new session cookie");
    assert_ne!(again["value"], json!(value), "a new session id");

    // Twenty wrong tokens in a minute are each answered; the 21st is refused, saying when to
    // try again.
    browser.click_and_wait("header form button");
    for i in 1..=20 {
        browser.type_into("#token", &format!("svc_wrong_{i}"));
        browser.click_and_wait("button[type=submit]");
        let said = browser.text("#sign-in-problem");
        assert!(said.contains("no member has this token"), "attempt {i}: {said}");
    }
    browser.type_into("#token", "svc_wrong_21");
    browser.click_and_wait("button[type=submit]");
    let said = browser.text("#sign-in-problem");
    assert!(said.contains("too many wrong tokens") && said.contains("try again in"), "{said}");
    browser.assert_accessible("sign-in, too many attempts");
    browser.screenshot("publication-sign-in-limited");
    // The right token from the same address waits too (429, Retry-After), and makes no session.
    let refused = http(
        server.addr,
        "POST",
        "/console/sign-in",
        &[("Content-Type", "application/x-www-form-urlencoded")],
        Some(format!("token={developer}").as_bytes()),
    );
    assert_eq!(refused.status, 429, "{}", String::from_utf8_lossy(&refused.body));
    let wait: u64 = refused.header("retry-after").and_then(|v| v.parse().ok()).expect("a Retry-After in seconds");
    assert!((1..=60).contains(&wait), "{wait}");
    assert!(refused.header("set-cookie").is_none());
    assert!(String::from_utf8_lossy(&refused.body).contains(&format!("try again in {wait} seconds")));
}
