//! Issue 41, "a stale quote traps a deploy": a deploy refused with `spend_ceiling_exceeded`,
//! then deployed with the ceiling raised, handed back the old quote (bound to the project it
//! replaced): `deploy` failed `quote_stale`, and so did `fund` and `fund --periods 1`. And a
//! deploy of a changed project to a deployment serving nothing said its revision 1 served.
//! `deploy` and `fund` fund a quote for the project the deployment runs next, whatever the
//! periods asked, and say nothing serves when nothing does.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use svc_e2e::service::TempDir;

use super::deploy::{Relay, node_demo_project};

/// Below one period (250,000 micros at the default price): funding is refused.
const LOW_CEILING: u64 = 100_000;
/// The demo's own ceiling.
const RAISED_CEILING: u64 = 5_000_000;

/// Rewrites the project file at `config` with `edit` applied to its JSON.
fn edit(config: &str, edit: impl FnOnce(&mut Value)) {
    let mut project: Value = serde_json::from_str(&std::fs::read_to_string(config).expect("read")).expect("json");
    edit(&mut project);
    std::fs::write(config, serde_json::to_vec_pretty(&project).expect("json")).expect("write");
}

/// A copy of the demo's project named `name` in `dir/name`, with a spend ceiling of `ceiling`.
fn project(dir: &Path, name: &str, ceiling: u64) -> String {
    let config = node_demo_project(&dir.join(name)).to_string_lossy().into_owned();
    edit(&config, |p| {
        p["name"] = name.into();
        p["spend"]["ceilingMicros"] = ceiling.into();
    });
    config
}

/// The quote IDs (`quo_...`) in `text`.
fn quotes_in(text: &str) -> Vec<&str> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).filter(|w| w.starts_with("quo_")).collect()
}

/// Nothing in `out` claims a revision serves or starts while nothing serves.
fn assert_no_false_claim(out: &str) {
    assert!(!out.contains("serves until it is validated"), "nothing served: {out}");
    assert!(!out.contains("is starting"), "nothing starts before it is funded: {out}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_deploy_refused_for_its_ceiling_then_raised_gets_a_fresh_quote_from_deploy_and_from_fund_whatever_the_periods()
 {
    let dir = TempDir::new("stale-quote");
    let relay = Relay::start(&dir.path().join("relay"), &["--public".into(), "127.0.0.1:0".into()]).await;
    // Three projects, each refused for its ceiling, then raised in its file.
    let mut refused = Vec::new();
    for name in ["node-demo", "node-demo-b", "node-demo-c"] {
        let config = project(dir.path(), name, LOW_CEILING);
        let (code, out, err) = relay.svc(&["deploy", "--config", &config]).await;
        assert_eq!(code, 1, "{out}\n{err}");
        assert!(err.contains("spend_ceiling_exceeded"), "{err}");
        let old = quotes_in(&out);
        assert_eq!(old.len(), 1, "one quote shown: {out}");
        let old = old[0].to_owned();
        edit(&config, |p| p["spend"]["ceilingMicros"] = RAISED_CEILING.into());
        refused.push((config, old));
    }

    // `deploy`: a fresh quote, funded, and live; nothing said to serve before.
    let (config, old) = &refused[0];
    let (code, out, err) = relay.svc(&["deploy", "--config", config]).await;
    assert_eq!(code, 0, "{out}\n{err}\n{}", relay.proc.output());
    assert!(!quotes_in(&out).contains(&old.as_str()), "the stale quote is not offered: {out}");
    assert!(out.contains("so nothing serves: revision 2 replaces revision 1 and starts once funded"), "{out}");
    assert_no_false_claim(&out);
    assert!(out.contains("funded USD 0.25 (ledger entry"), "{out}");
    assert!(out.lines().last().is_some_and(|l| l.starts_with("live https://")), "{out}");

    // `fund` after `deploy --no-fund`, with no periods, with 1 and with 2: each funds a quote
    // for the project that runs now (revision 2's), never the stale one.
    for ((config, old), periods) in refused[1..].iter().zip([&[][..], &["--periods", "1"][..]]) {
        let sent = relay.json(&["deploy", "--no-fund", "--config", config]).await;
        assert_ne!(sent["quote"]["id"].as_str(), Some(old.as_str()), "{sent:#}");
        let mut args = vec!["fund", "--config", config];
        args.extend(periods);
        let funded = relay.json(&args).await;
        assert_ne!(funded["quote"]["id"].as_str(), Some(old.as_str()), "{funded:#}");
        assert_eq!(funded["quote"]["id"], sent["quote"]["id"], "the quote deploy showed: {funded:#}");
        assert_eq!(funded["entry"]["amountMicros"], 250_000, "{funded:#}");
        let (status, _) = relay
            .wait_status(Path::new(config), Duration::from_secs(10), "revision 2 took over", |s| {
                s["deployment"]["revision"] == 2
            })
            .await;
        assert_eq!(funded["quote"]["projectDigest"], status["deployment"]["projectDigest"], "{status:#}");
        let again = relay.json(&["fund", "--periods", "2", "--config", config]).await;
        assert_eq!(again["entry"]["amountMicros"], 500_000, "{again:#}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn deploy_no_fund_of_a_changed_project_never_returns_a_stale_quote_or_says_a_revision_serves_that_never_did() {
    let dir = TempDir::new("stale-quote-no-fund");
    let relay = Relay::start(&dir.path().join("relay"), &["--public".into(), "127.0.0.1:0".into()]).await;
    let config = node_demo_project(dir.path()).to_string_lossy().into_owned();
    let server = Path::new(&config).with_file_name("server.js");
    let first = relay.json(&["deploy", "--no-fund", "--config", &config]).await;
    let old = first["quote"]["id"].as_str().expect("a quote").to_owned();

    // A changed project (its app file), deployed without funds: revision 1 never served.
    let text = std::fs::read_to_string(&server).expect("server.js");
    std::fs::write(&server, text.replace("Hello from the svc Node.js demo", "Hello from change 1")).expect("edit");
    let (code, out, err) = relay.svc(&["deploy", "--no-fund", "--config", &config]).await;
    assert_eq!(code, 0, "{out}\n{err}");
    assert_no_false_claim(&out);
    assert!(out.contains("so nothing serves: revision 2 replaces revision 1 and starts once funded"), "{out}");
    let shown = quotes_in(&out);
    assert_eq!(shown.len(), 1, "one quote shown: {out}");
    assert_ne!(shown[0], old, "not the quote of the project it replaced: {out}");

    // Again, as JSON: the quote binds the successor's project, is open, and is the one funded.
    std::fs::write(&server, text.replace("Hello from the svc Node.js demo", "Hello from change 2")).expect("edit");
    let sent = relay.json(&["deploy", "--no-fund", "--config", &config]).await;
    assert_eq!(sent["quote"]["projectDigest"], sent["successor"]["projectDigest"], "{sent:#}");
    assert_eq!(sent["quote"]["fundedAt"], Value::Null, "{sent:#}");
    assert_ne!(sent["quote"]["id"].as_str(), Some(old.as_str()), "{sent:#}");
    let funded = relay.json(&["fund", "--config", &config]).await;
    assert_eq!(funded["quote"]["id"], sent["quote"]["id"], "the quote deploy showed: {funded:#}");
    let (status, _) = relay
        .wait_status(Path::new(&config), Duration::from_secs(60), "revision 3 live", |s| {
            s["deployment"]["revision"] == 3 && s["deployment"]["state"] == "live"
        })
        .await;
    assert_eq!(status["balance"]["fundedMicros"], 250_000, "funded once: {status:#}");
}
