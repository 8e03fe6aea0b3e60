//! A small WebDriver client for the console tests: Debian's `chromedriver` started on a free
//! loopback port, one headless Chromium session, and the dozen W3C WebDriver commands the
//! tests use, each a JSON request over a plain HTTP/1.1 connection. (fantoccini would bring
//! Mozilla's `webdriver` crate and the ICU segmenter stack, 300 lockfile lines, for these.)
//! A test that fails leaves a screenshot of the page in `target/console-screenshots/`.

// Included by two test binaries (`console`, and `ingress` by path); each uses part of it.
#![allow(dead_code)]
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{Value, json};
use svc_e2e::service::{Response, parse_response};

/// The W3C key of an element reference.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// One headless Chromium, driven over WebDriver.
pub(crate) struct Browser {
    driver: Child,
    addr: SocketAddr,
    session: String,
    /// Named after the test: its failure screenshot's file name.
    name: String,
    _profile: tempfile::TempDir,
}

/// One request to chromedriver, read up to its `Content-Length` (chromedriver keeps the
/// connection open whatever `Connection: close` says, so reading to the end would wait).
fn http(addr: SocketAddr, method: &str, path: &str, body: Option<&[u8]>) -> Response {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).expect("connect to chromedriver");
    stream.set_read_timeout(Some(Duration::from_secs(60))).expect("a read timeout");
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    if let Some(b) = body {
        head += &format!("Content-Type: application/json\r\nContent-Length: {}\r\n", b.len());
    }
    head += "\r\n";
    stream.write_all(head.as_bytes()).expect("write");
    if let Some(b) = body {
        stream.write_all(b).expect("write");
    }
    let mut raw = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    loop {
        if let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&raw[..end]).to_ascii_lowercase();
            let length = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            if raw.len() >= end + 4 + length {
                break;
            }
        }
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => raw.extend_from_slice(&chunk[..n]),
        }
    }
    parse_response(&raw)
}

/// axe-core's script, from `tests/console/axe` (`npm ci` there the first time: `.ci/run` does).
fn axe_source() -> String {
    let dir = svc_e2e::workspace().join("tests/console/axe");
    let script = dir.join("node_modules/axe-core/axe.min.js");
    if !script.is_file() {
        let status = Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund", "--silent", "--prefix"])
            .arg(&dir)
            .status()
            .expect("npm runs (axe-core audits the console's pages)");
        assert!(status.success(), "npm ci --prefix {} failed", dir.display());
    }
    std::fs::read_to_string(&script).unwrap_or_else(|e| panic!("{}: {e}", script.display()))
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free port")
}

impl Browser {
    /// Starts chromedriver and a session (headless, no sandbox: tests run as root; no
    /// background networking: nothing but the pages under test).
    pub(crate) fn start(name: &str) -> Browser {
        Browser::start_with_env(name, &[])
    }

    /// [`Browser::start`] with variables set for chromedriver and the browser it starts
    /// (`HOME`: the user's NSS database, `$HOME/.pki/nssdb`, which Chromium trusts CAs from).
    pub(crate) fn start_with_env(name: &str, env: &[(&str, &std::ffi::OsStr)]) -> Browser {
        let port = free_port();
        let driver = Command::new("chromedriver")
            .envs(env.iter().copied())
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver runs (apt-get install chromium chromium-driver; .ci/run installs them)");
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if std::net::TcpStream::connect(addr).is_ok() && http(addr, "GET", "/status", None).status == 200 {
                break;
            }
            assert!(Instant::now() < deadline, "chromedriver did not answer on {addr}");
            std::thread::sleep(Duration::from_millis(50));
        }
        let profile = tempfile::tempdir().expect("a browser profile directory");
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": "/usr/bin/chromium",
                "args": [
                    "--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                    "--disable-quic", "--no-first-run", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync", "--window-size=1280,900",
                    format!("--user-data-dir={}", profile.path().display()),
                ],
            },
        }}});
        let mut browser = Browser { driver, addr, session: String::new(), name: name.to_owned(), _profile: profile };
        let answer = browser.command("POST", "/session", Some(capabilities));
        browser.session = answer["sessionId"].as_str().expect("a session id").to_owned();
        browser
    }

    /// One WebDriver command: its `value`, or a panic naming the command and the error.
    fn command(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        // A POST always has a JSON body (`{}` for none); GET and DELETE have none.
        let bytes = (method == "POST").then(|| serde_json::to_vec(&body.unwrap_or_else(|| json!({}))).expect("JSON"));
        let r = http(self.addr, method, path, bytes.as_deref());
        let answer: Value = serde_json::from_slice(&r.body).unwrap_or(Value::Null);
        assert!(r.status == 200, "WebDriver {method} {path}: {} {answer}", r.status);
        answer["value"].clone()
    }

    fn session_command(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        self.command(method, &format!("/session/{}{path}", self.session), body)
    }

    /// Opens a URL and waits for its document.
    pub(crate) fn goto(&self, url: &str) {
        self.session_command("POST", "/url", Some(json!({"url": url})));
    }

    /// Opens a URL; the WebDriver error when the browser refuses it (`insecure certificate`
    /// for a certificate it does not trust).
    pub(crate) fn try_goto(&self, url: &str) -> Result<(), String> {
        let body = serde_json::to_vec(&json!({"url": url})).expect("JSON");
        let r = http(self.addr, "POST", &format!("/session/{}/url", self.session), Some(&body));
        let answer: Value = serde_json::from_slice(&r.body).unwrap_or(Value::Null);
        if r.status == 200 {
            return Ok(());
        }
        Err(format!("{} {}", answer["value"]["error"].as_str().unwrap_or("error"), answer["value"]["message"]))
    }

    /// The browser's cookie `name` for the page's site, as WebDriver sees it (an HttpOnly one
    /// too): `name`, `value`, `path`, `httpOnly`, `secure`, `sameSite`, ...; `None` if unset.
    pub(crate) fn cookie(&self, name: &str) -> Option<Value> {
        let r = http(self.addr, "GET", &format!("/session/{}/cookie/{name}", self.session), None);
        let answer: Value = serde_json::from_slice(&r.body).unwrap_or(Value::Null);
        (r.status == 200).then(|| answer["value"].clone())
    }

    /// The page's URL.
    pub(crate) fn url(&self) -> String {
        self.session_command("GET", "/url", None).as_str().unwrap_or_default().to_owned()
    }

    /// The page's HTML as the browser has it now.
    pub(crate) fn source(&self) -> String {
        self.session_command("GET", "/source", None).as_str().unwrap_or_default().to_owned()
    }

    /// The element a CSS selector finds first, if any.
    pub(crate) fn find(&self, css: &str) -> Option<String> {
        let path = format!("/session/{}/element", self.session);
        let body = serde_json::to_vec(&json!({"using": "css selector", "value": css})).expect("JSON");
        let r = http(self.addr, "POST", &path, Some(&body));
        let answer: Value = serde_json::from_slice(&r.body).unwrap_or(Value::Null);
        (r.status == 200).then(|| answer["value"][ELEMENT].as_str().unwrap_or_default().to_owned())
    }

    fn element(&self, css: &str) -> String {
        self.find(css).unwrap_or_else(|| panic!("no element {css} on {}:\n{}", self.url(), self.source()))
    }

    /// The visible text of the first element `css` finds, read in one step in the page (a
    /// region the console refreshes may be replaced between a find and a read).
    pub(crate) fn text(&self, css: &str) -> String {
        let script = "const e = document.querySelector(arguments[0]); return e ? e.innerText : null;";
        let value = self.session_command("POST", "/execute/sync", Some(json!({"script": script, "args": [css]})));
        match value.as_str() {
            Some(text) => text.to_owned(),
            None => panic!("no element {css} on {}:\n{}", self.url(), self.source()),
        }
    }

    /// The current value of the first form field `css` finds (what a textarea holds now, not
    /// the text it was served with).
    pub(crate) fn value(&self, css: &str) -> String {
        let script = "const e = document.querySelector(arguments[0]); return e ? e.value : null;";
        let value = self.session_command("POST", "/execute/sync", Some(json!({"script": script, "args": [css]})));
        match value.as_str() {
            Some(text) => text.to_owned(),
            None => panic!("no field {css} on {}:\n{}", self.url(), self.source()),
        }
    }

    /// Types `text` into the first element `css` finds.
    pub(crate) fn type_into(&self, css: &str, text: &str) {
        let id = self.element(css);
        self.session_command("POST", &format!("/element/{id}/value"), Some(json!({"text": text})));
    }

    /// Empties the first field `css` finds.
    pub(crate) fn clear(&self, css: &str) {
        let id = self.element(css);
        self.session_command("POST", &format!("/element/{id}/clear"), Some(json!({})));
    }

    /// The current tab's handle.
    pub(crate) fn tab(&self) -> String {
        self.session_command("GET", "/window", None).as_str().unwrap_or_default().to_owned()
    }

    /// Opens a new tab (same cookies: the same browser) and switches to it; its handle.
    pub(crate) fn new_tab(&self) -> String {
        let handle = self.session_command("POST", "/window/new", Some(json!({"type": "tab"})))["handle"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        self.switch_to(&handle);
        handle
    }

    /// Switches to a tab.
    pub(crate) fn switch_to(&self, handle: &str) {
        self.session_command("POST", "/window", Some(json!({"handle": handle})));
    }

    /// Clicks the first element `css` finds.
    pub(crate) fn click(&self, css: &str) {
        let id = self.element(css);
        self.session_command("POST", &format!("/element/{id}/click"), Some(json!({})));
    }

    /// Clicks what `css` finds and waits (at most 15 s) until the page it leads to has loaded:
    /// a click on a submit button or a link returns before the next page is there.
    pub(crate) fn click_and_wait(&self, css: &str) {
        self.execute("window.svcTestOldPage = true;");
        self.click(css);
        self.wait_until("the next page", Duration::from_secs(15), |b| {
            b.execute("return window.svcTestOldPage !== true && document.readyState === 'complete';") == json!(true)
        });
    }

    /// Runs a script in the page (WebDriver's own channel: the page's CSP does not apply).
    pub(crate) fn execute(&self, script: &str) -> Value {
        self.session_command("POST", "/execute/sync", Some(json!({"script": script, "args": []})))
    }

    /// What keeps the page from being usable by everyone: axe-core's serious and critical
    /// violations (injected from `tests/console/axe`, installed with `npm ci` on first use),
    /// and, at 360 px wide, content wider than the screen. Empty when none.
    pub(crate) fn accessibility_problems(&self) -> Vec<String> {
        let axe = axe_source();
        self.session_command("POST", "/execute/sync", Some(json!({"script": axe, "args": []})));
        let run = "const done = arguments[arguments.length - 1];
            axe.run(document, {resultTypes: ['violations']}).then(
              (r) => done(r.violations.map((v) => ({id: v.id, impact: v.impact, help: v.help,
                nodes: v.nodes.map((n) => n.target.join(' ')).slice(0, 3)}))),
              (e) => done([{id: 'axe-failed', impact: 'critical', help: String(e), nodes: []}]));";
        let violations = self.session_command("POST", "/execute/async", Some(json!({"script": run, "args": []})));
        let mut problems: Vec<String> = violations
            .as_array()
            .into_iter()
            .flatten()
            .filter(|v| matches!(v["impact"].as_str(), Some("serious" | "critical")))
            .map(|v| format!("{} ({}): {} at {}", v["id"], v["impact"], v["help"], v["nodes"]))
            .collect();
        let narrow = json!({"width": 360, "height": 800});
        self.session_command("POST", "/window/rect", Some(narrow));
        let overflow = self.execute("return document.documentElement.scrollWidth - window.innerWidth;");
        if overflow.as_i64().unwrap_or(0) > 0 {
            // Which elements stick out, outermost first, so the fix is findable.
            let culprits = self.execute(
                "return [...document.querySelectorAll('body *')]
                   .filter((e) => e.scrollWidth > e.clientWidth + 1
                     && getComputedStyle(e).overflowX === 'visible'
                     && !(e.parentElement && e.parentElement.closest('.table-wrap, pre')))
                   .slice(-4).map((e) => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '')
                     + (e.className ? '.' + String(e.className).trim().replace(/ +/g, '.') : ''));",
            );
            problems.push(format!("at 360 px the page is {overflow} px wider than the screen: {culprits}"));
        }
        self.session_command("POST", "/window/rect", Some(json!({"width": 1280, "height": 900})));
        problems
    }

    /// Sets the window's size (the tests' screenshots are 1280 by 900).
    pub(crate) fn resize(&self, width: u32, height: u32) {
        self.session_command("POST", "/window/rect", Some(json!({"width": width, "height": height})));
    }

    /// Issue 42, point 7: the page holds at 360 and at 1280 px wide (the document no wider
    /// than the window: a wide table scrolls in its own box, long words wrap); no text shows a
    /// literal backtick (terminal texts' `code` spans are `<code>`); every shortened ID has its
    /// whole value in its `title` and its text, hides the middle, and a click selects the
    /// whole value (what Ctrl-C copies). The window is back at 1280 by 900 afterwards.
    pub(crate) fn assert_layout_holds(&self, page: &str) {
        for width in [360, 1280] {
            self.session_command("POST", "/window/rect", Some(json!({"width": width, "height": 800})));
            let overflow = self.execute("return document.documentElement.scrollWidth - window.innerWidth;");
            let culprits = self.execute(
                "return [...document.querySelectorAll('body *')]
                   .filter((e) => e.getBoundingClientRect().right > window.innerWidth + 1
                     && !(e.parentElement && e.parentElement.closest('.table-wrap, pre')))
                   .slice(-4).map((e) => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '')
                     + (e.className ? '.' + String(e.className).trim().replace(/ +/g, '.') : ''));",
            );
            assert!(
                overflow.as_i64().unwrap_or(1) <= 0,
                "{page}: at {width} px the page is {overflow} px wider than the window: {culprits}"
            );
        }
        self.session_command("POST", "/window/rect", Some(json!({"width": 1280, "height": 900})));
        let text = self.execute("return document.body.innerText;");
        let text = text.as_str().unwrap_or_default();
        assert!(!text.contains('`'), "{page} shows a literal backtick:\n{text}");
        let ids = self.execute(
            "return [...document.querySelectorAll('code.id.short')].map((e) => ({
               title: e.title, text: e.textContent,
               cut: e.querySelector('.id-cut').getBoundingClientRect().width,
               shown: e.getBoundingClientRect().width,
               whole: e.textContent.length}));",
        );
        for id in ids.as_array().into_iter().flatten() {
            assert_eq!(id["title"], id["text"], "{page}: a shortened ID's title is its whole value: {id}");
            assert!(id["cut"].as_f64().is_some_and(|w| w <= 1.0), "{page}: a shortened ID hides its middle: {id}");
        }
        if ids.as_array().is_some_and(|a| !a.is_empty()) {
            // A click selects the whole value, the part the screen hides included.
            let first = self.element("code.id.short");
            self.session_command("POST", &format!("/element/{first}/click"), Some(json!({})));
            let selected = self.execute("return window.getSelection().toString();");
            assert_eq!(selected, ids[0]["title"], "{page}: a click on a shortened ID selects all of it");
            self.execute("window.getSelection().removeAllRanges();");
        }
    }

    /// Every request the page made (its resources, fetches included) to another origin than
    /// its own, from the browser's resource timing. Empty when none.
    pub(crate) fn other_origin_requests(&self) -> Vec<String> {
        let script = "return performance.getEntriesByType('resource').map((e) => e.name)
            .filter((url) => new URL(url).origin !== location.origin);";
        let urls = self.execute(script);
        urls.as_array().into_iter().flatten().filter_map(|u| u.as_str().map(str::to_owned)).collect()
    }

    /// Asserts the page asked nothing of another origin, has no serious or critical
    /// accessibility violation, and reads at 360 px wide (issue 18, points 1, 5 and 6).
    pub(crate) fn assert_accessible(&self, page: &str) {
        let elsewhere = self.other_origin_requests();
        assert!(elsewhere.is_empty(), "{page} requested another origin: {elsewhere:?}");
        let problems = self.accessibility_problems();
        assert!(problems.is_empty(), "{page}: {problems:#?}");
    }

    /// Waits (at most `limit`) until `done` holds; panics naming `what` otherwise.
    pub(crate) fn wait_until(&self, what: &str, limit: Duration, done: impl Fn(&Browser) -> bool) {
        let deadline = Instant::now() + limit;
        while !done(self) {
            assert!(Instant::now() < deadline, "{what}: not within {limit:?} on {}:\n{}", self.url(), self.source());
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// A PNG of the viewport, written to `target/console-screenshots/<name>.png` and, so that
    /// docs/console.md shows the console as the tests last saw it, to `docs/console/<name>.png`
    /// (or the folder `SVC_CONSOLE_SCREENSHOTS` names; `SVC_CONSOLE_SCREENSHOTS=off` writes
    /// none there). A failure's screenshot goes to `target/` only.
    pub(crate) fn screenshot(&self, name: &str) -> PathBuf {
        let path = self.screenshot_to_target(name);
        let docs = match std::env::var_os("SVC_CONSOLE_SCREENSHOTS") {
            Some(v) if v == "off" => None,
            Some(v) => Some(PathBuf::from(v)),
            None => Some(svc_e2e::workspace().join("docs").join("console")),
        };
        if let Some(docs) = docs {
            let _ = std::fs::copy(&path, docs.join(format!("{name}.png")));
        }
        path
    }

    /// A PNG of the viewport, written to `target/console-screenshots/<name>.png`.
    fn screenshot_to_target(&self, name: &str) -> PathBuf {
        let data = self.session_command("GET", "/screenshot", None);
        let png =
            base64::engine::general_purpose::STANDARD.decode(data.as_str().unwrap_or_default()).unwrap_or_default();
        let dir = svc_e2e::workspace().join("target").join("console-screenshots");
        let _ = std::fs::create_dir_all(&dir);
        let path = dir.join(format!("{name}.png"));
        let _ = std::fs::write(&path, &png);
        path
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if std::thread::panicking() && !self.session.is_empty() {
            let name = format!("{}-failed", self.name);
            let path = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.screenshot_to_target(&name)));
            if let Ok(path) = path {
                eprintln!("the page when the test failed: {}", path.display());
            }
        }
        if !self.session.is_empty() {
            let path = format!("/session/{}", self.session);
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| http(self.addr, "DELETE", &path, None)));
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}
