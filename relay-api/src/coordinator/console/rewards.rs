//! A gateway operator's rewards (signed in with their operator token): what its gateways
//! earned from settled periods, pending, claimable and claimed, and a Claim button; the relay
//! API's `GET /api/ingress/rewards` and `POST .../claim`.

use std::sync::Arc;

use axum::extract::rejection::FormRejection;
use axum::extract::{Form, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde::Deserialize;
use svc_execution::money::usd;
use svc_web::page::{see_other, state};
use svc_web::{Markup, html};

use super::{Engine, Member, Refusal, acting_member, answer, blocking, error_page, member};
use crate::coordinator::model::RewardsSummary;
use crate::coordinator::operations::claim_rewards;
use crate::coordinator::store::{TokenRole, now_ms};

/// Rewards the page lists, newest first (the totals count them all).
const REWARD_ROWS: u32 = 100;

impl Member {
    /// Refused unless the member is a gateway operator.
    fn operator(self) -> Result<Member, Refusal> {
        match self.caller.role {
            TokenRole::Operator => Ok(self),
            TokenRole::Customer => Err(Refusal::page(error_page(
                StatusCode::FORBIDDEN,
                "rewards are a gateway operator's: sign in with an operator token (`svc relay admin token --operator`)",
            ))),
        }
    }
}

/// What a redirect back says.
#[derive(Deserialize)]
pub(super) struct DoneQuery {
    claimed: Option<String>,
}

pub(super) async fn page(
    State(engine): State<Arc<Engine>>,
    headers: HeaderMap,
    query: Result<Query<DoneQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    answer(
        async {
            let member = member(&engine, &headers).await?.operator()?;
            let operator = member.caller.org_name.clone();
            let summary =
                blocking(move || Ok(engine.store().recent_rewards(&operator, now_ms(), REWARD_ROWS)?)).await?;
            let claimed = query.ok().and_then(|q| q.0.claimed);
            let page = member.page("Rewards", member.nav(None, "rewards"));
            Ok(page.respond(StatusCode::OK, view(&summary, claimed.as_deref(), &member.csrf)))
        }
        .await,
    )
}

#[derive(Deserialize)]
pub(super) struct ClaimForm {
    csrf: String,
}

/// Claims every claimable reward, once.
pub(super) async fn claim(
    State(engine): State<Arc<Engine>>,
    headers: HeaderMap,
    form: Result<Form<ClaimForm>, FormRejection>,
) -> Response {
    let csrf = form.ok().map(|Form(f)| f.csrf).unwrap_or_default();
    answer(
        async {
            let member = acting_member(&engine, &headers, &csrf).await?.operator()?;
            let claim = blocking(move || Ok(claim_rewards(&engine, &member.caller)?)).await?;
            Ok(see_other(&format!("/console/rewards?claimed={}", claim.claim_id)))
        }
        .await,
    )
}

fn view(summary: &RewardsSummary, claimed: Option<&str>, csrf: &str) -> Markup {
    let newest: Vec<_> = summary.rewards.iter().rev().collect();
    html! {
        @if let Some(claim) = claimed {
            p.notice role="status" #notice { "Claimed: " (svc_web::text::id(claim)) "." }
        }
        dl.facts #totals {
            dt { "Operator" } dd { (summary.operator) }
            dt { "Accrued" } dd { (usd(summary.accrued_micros)) }
            dt { "Pending" } dd { (usd(summary.pending_micros)) " " span.muted { "(within the settlement delay)" } }
            dt { "Claimable" } dd #claimable { (usd(summary.claimable_micros)) }
            dt { "Claimed" } dd { (usd(summary.claimed_micros)) }
        }
        @if summary.claimable_micros > 0 {
            form method="post" action="/console/rewards/claim" {
                input type="hidden" name="csrf" value=(csrf);
                button #claim type="submit" { "Claim " (usd(summary.claimable_micros)) }
            }
        } @else {
            p.muted #nothing-claimable { "Nothing is claimable now." }
        }
        h2 { "Rewards" span.muted { " (the newest " (REWARD_ROWS) "; " code { "svc ingress rewards" } " lists them all)" } }
        @if newest.is_empty() {
            p.muted { "None yet: a reward comes from each period a deployment on your gateway settles." }
        } @else {
            div.table-wrap {
                table #rewards {
                    thead { tr { th scope="col" { "Session" } th scope="col" { "Deployment" } th scope="col" { "Amount" } th scope="col" { "Claimable from" } th scope="col" { "State" } } }
                    tbody {
                        @for r in newest {
                            tr {
                                td { (svc_web::text::id(&r.session_id)) }
                                td { (svc_web::text::id(&r.deployment_id)) }
                                td { (usd(r.amount_micros)) }
                                td { (super::views::at(r.claimable_at)) }
                                td {
                                    @match &r.claim_id {
                                        Some(claim) => { (state("claimed")) " " (svc_web::text::id(claim)) }
                                        None => { @if r.claimable_at <= now_ms() { (state("claimable")) } @else { (state("pending")) } }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}
