//! Layer 7: deployment-time facts, reported as warnings at publication. The version is
//! committed; the deployment cannot start until they are fixed: required secrets must have a
//! provisioned value, and the organization's service-credit authority must cover the spend.

use std::collections::BTreeSet;

use crate::diagnostic::{Code, Diagnostic, Layer};
use crate::validate::Manifest;
use svc_execution::money::usd;

pub(crate) fn check(
    manifest: &Manifest,
    provisioned: &BTreeSet<String>,
    authority_micros: Option<u64>,
    out: &mut Vec<Diagnostic>,
) {
    let secrets: Vec<(&str, bool)> = match manifest {
        Manifest::V4(m) => m.configuration.secrets.iter().map(|s| (s.secret_id.as_str(), s.required)).collect(),
        Manifest::V5(m) => m.configuration.secrets.iter().map(|s| (s.secret_id.as_str(), s.required)).collect(),
    };
    for (i, (id, required)) in secrets.into_iter().enumerate() {
        if required && !provisioned.contains(id) {
            out.push(Diagnostic::warning(
                Layer::Deployment,
                Code::SecretNotProvisioned,
                format!("/configuration/secrets/{i}/secretId"),
                format!("the required secret \"{id}\" has no provisioned value; jobs will not start until it is set"),
            ));
        }
    }
    // The spend this manifest asks for, per job, in service-credit micros.
    let (spend, pointer) = match manifest {
        Manifest::V4(m) => (
            m.deployment.spend.max_service_credit_micros_per_generation.map(u128::from),
            "/deployment/spend/maxServiceCreditMicrosPerGeneration",
        ),
        Manifest::V5(m) => (m.deployment.spend.per_job.parse::<u128>().ok(), "/deployment/spend/perJob"),
    };
    let Some(spend) = spend else { return };
    match authority_micros {
        None => out.push(Diagnostic::warning(
            Layer::Deployment,
            Code::SpendAuthorityMissing,
            "/deployment/spend",
            "the organization has no service-credit spend authority; jobs will not be funded until an administrator sets one",
        )),
        Some(authority) if spend > u128::from(authority) => out.push(Diagnostic::warning(
            Layer::Deployment,
            Code::SpendExceedsAuthority,
            pointer,
            format!(
                "{} per job is above the organization's spend authority of {} per job; jobs will not be funded above it",
                usd(spend),
                usd(authority)
            ),
        )),
        Some(_) => {}
    }
}
