//! The demo's `ready` URL in a real browser (issue 42, point 5): headless Chromium refuses it
//! while the development CA is not trusted, and opens the app's page once `svc ingress trust`
//! has added the CA to the user's NSS database (`$HOME/.pki/nssdb`, made by the command);
//! `--remove` takes it out again. Each browser runs with a `HOME` of its own.

use std::ffi::OsStr;
use std::path::Path;
use std::process::Command;

use svc_e2e::service::{TempDir, svc_binary};

use super::console::webdriver::Browser;
use super::{Demo, HOST};

/// Whether `name` is a program on PATH.
fn on_path(name: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(name).is_file()))
}

/// `svc ingress trust ARGS` with `HOME` set to `home`: (exit code, stdout, stderr).
fn trust(home: &Path, args: &[&OsStr]) -> (i32, String, String) {
    let out = Command::new(svc_binary()).args(["ingress", "trust"]).args(args).env("HOME", home).output().expect("svc");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code().unwrap_or(-1), text(&out.stdout), text(&out.stderr))
}

/// What the browser shows at `url` with `home` as its user's home: the page's heading, or why
/// it shows none.
fn open(name: &str, home: &Path, url: &str) -> Result<String, String> {
    let browser = Browser::start_with_env(name, &[("HOME", home.as_os_str())]);
    browser.try_goto(url)?;
    match browser.find("h1") {
        Some(_) => Ok(browser.text("h1")),
        None => Err(format!("no heading: {}", browser.source().chars().take(400).collect::<String>())),
    }
}

/// Whether the browser refused the page for its certificate: WebDriver's `insecure
/// certificate` error, or the interstitial Chromium shows instead of the page.
fn refused(seen: &Result<String, String>) -> bool {
    match seen {
        Ok(heading) => heading.contains("Your connection is not private"),
        Err(e) => e.contains("insecure certificate"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_ready_url_opens_in_chromium_once_the_development_ca_is_trusted() {
    if !on_path("chromium") || !on_path("chromedriver") || !on_path("certutil") {
        svc_test_require::skip(
            "chromium, chromedriver and certutil are needed: apt-get install chromium chromium-driver \
             libnss3-tools (as .ci/run does)",
        );
        return;
    }
    let demo = Demo::start("trust-chromium", &[]).await;
    let url = format!("https://{HOST}:{}/", demo.public.port());
    // The demo says how to trust its CA next to `ready`.
    let lines = demo.proc.lines();
    let ready = lines.iter().position(|l| l.starts_with("ready https://")).expect("ready");
    let hint = lines.get(ready + 1).cloned().unwrap_or_default();
    assert!(
        hint.contains("svc ingress trust --data-dir") && hint.contains("--cacert"),
        "the trust hint follows `ready`: {lines:#?}"
    );

    let homes = TempDir::new("trust-homes");
    let (trusted, untrusted) = (homes.path().join("trusted"), homes.path().join("untrusted"));
    std::fs::create_dir_all(&trusted).expect("mkdir");
    std::fs::create_dir_all(&untrusted).expect("mkdir");
    let data_dir = demo.dir.path().as_os_str().to_owned();
    let (code, out, err) = trust(&trusted, &[OsStr::new("--data-dir"), &data_dir]);
    assert_eq!(code, 0, "svc ingress trust: {err}\n{out}");
    assert!(trusted.join(".pki/nssdb/cert9.db").is_file(), "the NSS database was made: {out}");
    assert!(out.contains("curl --cacert ") && out.contains("SSL_CERT_FILE="), "the curl forms: {out}");
    // Again: the entry is replaced, not doubled.
    let (code, _, err) = trust(&trusted, &[OsStr::new("--data-dir"), &data_dir]);
    assert_eq!(code, 0, "svc ingress trust again: {err}");

    let page = tokio::task::spawn_blocking({
        let (trusted, untrusted, url) = (trusted.clone(), untrusted.clone(), url.clone());
        move || (open("trust-trusted", &trusted, &url), open("trust-untrusted", &untrusted, &url))
    })
    .await
    .expect("the browsers");
    assert_eq!(page.0, Ok("Hello from the svc Node.js demo".to_owned()), "trusted: the app's page at {url}");
    assert!(refused(&page.1), "untrusted: Chromium's certificate warning, not the page: {:?}", page.1);

    // Removed: refused again.
    let (code, out, err) = trust(&trusted, &[OsStr::new("--data-dir"), &data_dir, OsStr::new("--remove")]);
    assert_eq!(code, 0, "svc ingress trust --remove: {err}\n{out}");
    let again = tokio::task::spawn_blocking(move || open("trust-removed", &trusted, &url)).await.expect("the browser");
    assert!(refused(&again), "after --remove: the warning again, not the page: {again:?}");
}

#[test]
fn without_certutil_trust_prints_the_exact_commands_and_the_package() {
    let dir = TempDir::new("trust-no-certutil");
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n").expect("write");
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).expect("mkdir");
    let empty = dir.path().join("no-programs");
    std::fs::create_dir_all(&empty).expect("mkdir");
    let out = Command::new(svc_binary())
        .args(["ingress", "trust", "--ca"])
        .arg(&ca)
        .env("HOME", &home)
        .env("PATH", &empty)
        .output()
        .expect("svc");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "nothing was trusted: {text}");
    let db = home.join(".pki/nssdb");
    assert!(text.contains("sudo apt-get install libnss3-tools"), "{text}");
    assert!(text.contains(&format!("  certutil -N -d sql:{} --empty-password", db.display())), "{text}");
    let add = format!("  certutil -A -d sql:{} -n 'svc development CA ", db.display());
    assert!(text.contains(&add) && text.contains(&format!("-t C,, -i {}", ca.display())), "{text}");
    assert!(text.contains(&format!("curl --cacert {}", ca.display())), "{text}");
    assert!(!db.exists(), "nothing was made without certutil");
}
