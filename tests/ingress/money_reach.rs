//! Nothing strands: every deployment of an organization is listed (stopped ones too), and
//! `--deployment ID` reaches an older deployment's sessions, refunds and ledger after the
//! project was deployed again; `fund` funds the quote it was shown.

use serde_json::Value;
use svc_e2e::service::TempDir;

use super::deploy::{Relay, admin, refundable};

fn id_of(status: &Value) -> String {
    status["deployment"]["id"].as_str().expect("a deployment id").to_owned()
}

/// After stop and a new deploy of the same project, the old deployment's unspent money was
/// out of reach (404): 1,750,000 micros in one run.
#[tokio::test(flavor = "multi_thread")]
async fn a_stopped_deployments_money_is_refundable_after_the_project_is_deployed_again() {
    let dir = TempDir::new("stranded");
    let (relay, config) = Relay::with_live_demo(dir.path(), &[]).await;
    relay.json(&["fund", "--periods", "3", "--config", &config]).await;
    let first = id_of(&relay.json(&["status", "--config", &config]).await);
    relay.json(&["stop", "--config", &config]).await;
    let (code, out, err) = relay.svc(&["deploy", "--config", &config]).await;
    assert_eq!(code, 0, "the second deploy: {err}\n{out}");
    let second = id_of(&relay.json(&["status", "--config", &config]).await);
    assert_ne!(first, second, "stop, then deploy, makes a new deployment");

    let list = relay.json(&["list"]).await;
    let rows: Vec<(&str, &str)> = list["deployments"]
        .as_array()
        .expect("deployments")
        .iter()
        .map(|d| (d["id"].as_str().unwrap_or(""), d["state"].as_str().unwrap_or("")))
        .collect();
    assert_eq!(rows.first().map(|r| r.0), Some(second.as_str()), "newest first: {list:#}");
    assert!(rows.contains(&(first.as_str(), "stopped")), "the stopped one is listed: {list:#}");

    // The project's newest deployment is the second: the first's money is reached by its ID.
    let sessions = relay.json(&["sessions", "--deployment", &first]).await;
    let refundable = refundable(&sessions);
    assert!(refundable.len() >= 3, "three unstarted periods and the cut one: {sessions:#}");
    let total: u64 = refundable.iter().map(|(_, m)| m).sum();
    for (id, amount) in &refundable {
        let entry = relay.json(&["refund", id, "--deployment", &first]).await;
        assert_eq!(entry["amountMicros"].as_u64(), Some(*amount), "{entry:#}");
    }
    let ledger = relay.json(&["ledger", "--deployment", &first]).await;
    assert_eq!(ledger["balance"]["refundedMicros"].as_u64(), Some(total), "{ledger:#}");
    assert_eq!(ledger["balance"]["availableMicros"].as_u64(), Some(0), "{ledger:#}");

    // Another organization cannot reach it, and a malformed ID is a usage error.
    admin(&relay.data, "invite", "other");
    let other = admin(&relay.data, "token", "other");
    let (code, _, err) = relay.svc_as(&other, &["sessions", "--deployment", &first]).await;
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("no deployment") && err.contains(&first), "{err}");
    let (code, _, err) = relay.svc(&["sessions", "--deployment", "dep_../../x"]).await;
    assert_eq!(code, 2, "{err}");
}

/// `fund` after `deploy --no-fund` funds the quote deploy showed, not a new one.
#[tokio::test(flavor = "multi_thread")]
async fn fund_after_deploy_no_fund_funds_the_quote_that_was_shown() {
    let dir = TempDir::new("fund-shown");
    let relay = Relay::start(&dir.path().join("relay"), &["--public".into(), "127.0.0.1:0".into()]).await;
    let config = super::deploy::node_demo_project(dir.path()).to_string_lossy().into_owned();
    let shown = relay.json(&["deploy", "--no-fund", "--config", &config]).await;
    let quote = shown["quote"]["id"].as_str().expect("a quote").to_owned();
    let funded = relay.json(&["fund", "--config", &config]).await;
    assert_eq!(funded["quote"]["id"].as_str(), Some(quote.as_str()), "{funded:#}");
    let status = relay.json(&["status", "--config", &config]).await;
    assert_eq!(status["balance"]["fundedMicros"], funded["entry"]["amountMicros"], "funded once: {status:#}");
}
