//! `svc ingress sessions|refund|rewards|claim|pins`: the money and the trust of a route, as
//! the customer and the gateway operator check them.

use std::process::ExitCode;

use hyper::Method;
use serde_json::json;

use relay_api::coordinator::api::{ClaimResponse, PinsResponse, SessionsResponse};
use relay_api::coordinator::model::{LedgerEntry, RewardsSummary};

use svc_execution::money::usd;

use crate::args::{OutputFormat, PinsCommand, ProjectTarget, RelayTarget};
use crate::deploy::{IngressError, call, client, path, print_json, target};

/// `svc ingress sessions`
pub(crate) fn sessions(t: &ProjectTarget) -> Result<ExitCode, IngressError> {
    let (client, name) = target(t)?;
    let r: SessionsResponse = call(&client, Method::GET, &path(&name, "/sessions"), None)?;
    if t.format == OutputFormat::Json {
        print_json(&r);
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{:<21} {:<8} {:>6} {:>14} {:>14} {:>14} {:>14}",
        "session", "state", "period", "funded", "spent", "refundable", "refunded"
    );
    for s in &r.sessions {
        let period = s.period_index.map_or_else(|| "-".to_owned(), |i| i.to_string());
        println!(
            "{:<21} {:<8} {:>6} {:>14} {:>14} {:>14} {:>14}",
            s.id,
            s.state.as_str(),
            period,
            usd(s.price_micros),
            usd(s.spent_micros),
            usd(s.refundable_micros),
            usd(s.refunded_micros)
        );
    }
    let b = &r.balance;
    println!(
        "funded {} = spent {} + refundable {} + refunded {}",
        usd(b.funded_micros),
        usd(b.spent_micros),
        usd(b.refundable_micros),
        usd(b.refunded_micros)
    );
    Ok(ExitCode::SUCCESS)
}

/// `svc ingress refund SESSION`
pub(crate) fn refund(t: &ProjectTarget, session: &str) -> Result<ExitCode, IngressError> {
    let (client, name) = target(t)?;
    let entry: LedgerEntry = call(&client, Method::POST, &path(&name, &format!("/sessions/{session}/refund")), None)?;
    if t.format == OutputFormat::Json {
        print_json(&entry);
    } else {
        println!("refunded {} of session {session} (ledger entry {})", usd(entry.amount_micros), entry.seq);
    }
    Ok(ExitCode::SUCCESS)
}

fn print_rewards(r: &RewardsSummary) {
    println!(
        "operator {}: accrued {} = pending {} + claimable {} + claimed {}",
        r.operator,
        usd(r.accrued_micros),
        usd(r.pending_micros),
        usd(r.claimable_micros),
        usd(r.claimed_micros)
    );
    for reward in &r.rewards {
        let status = match &reward.claim_id {
            Some(id) => format!("claimed ({id})"),
            None => format!("claimable from {}", crate::output::rfc3339_ms(reward.claimable_at)),
        };
        println!("  {} {}, {status}", reward.session_id, usd(reward.amount_micros));
    }
}

/// `svc ingress rewards`
pub(crate) fn rewards(t: &RelayTarget) -> Result<ExitCode, IngressError> {
    let client = client(&t.relay, &t.trust)?;
    let r: RewardsSummary = call(&client, Method::GET, "/api/ingress/rewards", None)?;
    if t.format == OutputFormat::Json {
        print_json(&r);
    } else {
        print_rewards(&r);
    }
    Ok(ExitCode::SUCCESS)
}

/// `svc ingress claim`
pub(crate) fn claim(t: &RelayTarget) -> Result<ExitCode, IngressError> {
    let client = client(&t.relay, &t.trust)?;
    let r: ClaimResponse = call(&client, Method::POST, "/api/ingress/rewards/claim", None)?;
    if t.format == OutputFormat::Json {
        print_json(&r);
    } else {
        println!("claimed {} ({})", usd(r.amount_micros), r.claim_id);
        print_rewards(&r.rewards);
    }
    Ok(ExitCode::SUCCESS)
}

/// `svc ingress pins list|add|remove`
pub(crate) fn pins(command: &PinsCommand) -> Result<ExitCode, IngressError> {
    let (t, method, suffix, body) = match command {
        PinsCommand::List { target } => (target, Method::GET, String::new(), None),
        PinsCommand::Add { digest, target } => (target, Method::POST, String::new(), Some(json!({"digest": digest}))),
        PinsCommand::Remove { digest, target } => (target, Method::DELETE, format!("/{digest}"), None),
    };
    let (client, name) = target(t)?;
    let r: PinsResponse = call(&client, method, &path(&name, &format!("/pins{suffix}")), body)?;
    if t.format == OutputFormat::Json {
        print_json(&r);
        return Ok(ExitCode::SUCCESS);
    }
    println!("current validator: {} {}", r.current.version, r.current.digest);
    if r.pins.is_empty() {
        println!("no pins: project {name} accepts any validator version");
    }
    for pin in &r.pins {
        let mark = if *pin == r.current.digest { " (current)" } else { "" };
        println!("pinned {pin}{mark}");
    }
    Ok(ExitCode::SUCCESS)
}
