//! A deployment's `svc.execution-convergence.v1`, pinned byte for byte: every deployment
//! state, a successor rolling out, a replica down, a revision with no published policy, and
//! pages. The times are the store's clock, so each is written as what it stands for.

#[path = "support/replicas.rs"]
mod replicas;
#[path = "support/world.rs"]
mod world;

use manifest_core::projection::Convergence;
use relay_api::coordinator::executions::build;
use relay_api::coordinator::model::{Deployment, Successor, SuccessorState};
use relay_api::coordinator::state::DeploymentState;
use replicas::{job, live_two_jobs};
use world::*;

/// `answer` as its JSON text, the deployment's id written `<id>` and each time as what it
/// stands for: `<funded>` (where the route's funds reach), `<changedAt>` (a window that ended
/// when its execution last changed) or `<time>`.
fn pinned(w: &World, d: &Deployment, answer: &Convergence) -> String {
    let sessions = w.store.sessions(&d.id).expect("sessions");
    let running = sessions.iter().find_map(|s| s.ends_at).expect("a period under way");
    let funded = humantime::format_rfc3339_millis(
        std::time::UNIX_EPOCH + std::time::Duration::from_millis(u64::try_from(running + 3_600_000).expect("positive")),
    )
    .to_string();
    let time = |text: &mut String, changed: Option<&str>| {
        humantime::parse_rfc3339(text).expect("an RFC 3339 time");
        *text = if *text == funded {
            "<funded>".to_owned()
        } else if changed == Some(text.as_str()) {
            "<changedAt>".to_owned()
        } else {
            "<time>".to_owned()
        };
    };
    let mut answer = answer.clone();
    for slot in &mut answer.slots {
        slot.window_start.iter_mut().for_each(|t| time(t, None));
        slot.window_end.iter_mut().for_each(|t| time(t, None));
    }
    for e in &mut answer.recent {
        let changed = e.changed_at.clone();
        time(&mut e.window_start, None);
        time(&mut e.window_end, Some(&changed));
        time(&mut e.changed_at, None);
    }
    if let Some(next) = &mut answer.next {
        time(&mut next.at, None);
    }
    serde_json::to_string(&answer).expect("serializes").replace(&d.id, "<id>")
}

#[tokio::test]
async fn the_projection_of_each_deployment_state_is_pinned() {
    let w = world(FakeProbe::default());
    let d = live_two_jobs(&w).await;
    // Both replicas ready.
    for _ in 0..2 {
        w.engine.tick().await;
    }
    let live = w.deployment(&d.id);
    let mut seen = Vec::new();
    let mut show =
        |label: &str, d: &Deployment, successor: Option<&Successor>, cursor: Option<&str>, limit: Option<&str>| {
            let answer = build(&w.store, d, successor, cursor, limit).expect("built");
            seen.push(format!("{label}: {}", pinned(&w, d, &answer)));
            answer
        };
    show("live", &live, None, None, None);
    for state in DeploymentState::ALL {
        let mut d = live.clone();
        d.state = state;
        d.state_reason = format!("why {}", state.as_str());
        show(state.as_str(), &d, None, None, Some("1"));
    }
    let failed =
        Deployment { state: DeploymentState::Failed, failure_code: Some("out_of_memory".into()), ..live.clone() };
    show("failed with a code", &failed, None, None, Some("1"));
    let successor = |state| Successor {
        deployment_id: live.id.clone(),
        revision: 2,
        project_digest: "sha256:r2".into(),
        ceiling_micros: 5_000_000,
        route_id: "rt_shop_r2".into(),
        state,
        reason: String::new(),
        created_at: 0,
        updated_at: 0,
    };
    show("successor validating", &live, Some(&successor(SuccessorState::Validating)), None, Some("1"));
    show("successor failed", &live, Some(&successor(SuccessorState::Failed)), None, Some("1"));
    // A revision with no policy published: its manifest's digest stands for one, one slot.
    let unpublished = Deployment { revision: 7, ..live.clone() };
    show("revision without a policy", &unpublished, None, None, Some("1"));
    // A page of one, then the next.
    let first = show("page 1", &live, None, None, Some("1"));
    let cursor = first.next_cursor.clone().expect("an older page");
    show("page 2", &live, None, Some(&cursor), Some("1"));

    // One replica down: the route serves, and the slot says so.
    w.market.end(&job(&d, 1, 1), 3);
    w.engine.tick().await;
    show("replica down", &w.deployment(&d.id), None, None, None);
    let expected = EXPECTED.trim().lines().collect::<Vec<_>>();
    let got = seen.iter().map(String::as_str).collect::<Vec<_>>();
    assert_eq!(got, expected, "the answers changed:\n{}", seen.join("\n"));
}

const EXPECTED: &str = r#"
live: {"schema":"svc.execution-convergence.v1","applicationId":"shop","status":"active","desired":{"policyVersion":1,"policyDigest":"sha256:1426a256e4f8d930052e1ac3fd6d36b30bb3ce7d993954cc7c19a0d30c4751f9","slots":2,"execution":"continuous"},"convergence":{"state":"converged"},"slots":[{"slot":0,"generation":1,"policyVersion":1,"state":"ready","processorId":"fake-1","windowStart":"<time>","windowEnd":"<funded>","restarts":0},{"slot":1,"generation":1,"policyVersion":1,"state":"ready","processorId":"fake-1","windowStart":"<time>","windowEnd":"<funded>","restarts":0}],"recent":[{"executionId":"<id>/1/1/1","slot":1,"generation":1,"attempt":1,"policyVersion":1,"state":"ready","processorId":"fake-1","windowStart":"<time>","windowEnd":"<funded>","changedAt":"<time>","restarts":0,"chargedMicros":"0"},{"executionId":"<id>/0/1/1","slot":0,"generation":1,"attempt":1,"policyVersion":1,"state":"ready","processorId":"fake-1","windowStart":"<time>","windowEnd":"<funded>","changedAt":"<time>","restarts":0,"chargedMicros":"0"}]}
pending_funding: {"schema":"svc.execution-convergence.v1","applicationId":"shop","status":"paused","desired":{"policyVersion":1,"policyDigest":"sha256:1426a256e4f8d930052e1ac3fd6d36b30bb3ce7d993954cc7c19a0d30c4751f9","slots":2,"execution":"continuous"},"convergence":{"state":"blocked","reason":{"code":"quote_unfunded","message":"why pending_funding; fund a quote: `svc ingress fund`"}},"slots":[{"slot":0,"generation":1,"policyVersion":1,"state":"ready","processorId":"fake-1","windowStart":"<time>","windowEnd":"<funded>","restarts":0},{"slot":1,"generation":1,"policyVersion":1,"state":"ready","processorId":"fake-1","windowStart":"<time>","windowEnd":"<funded>","restarts":0}],"recent":[{"executionId":"<id>/1/1/1","slot":1,"generation":1,"attempt":1,"policyVersion":1,"state":"ready","processorId":"fake-1","windowStart":"<time>","windowEnd":"<funded>","changedAt":"<time>","restarts":0,"chargedMicros":"0"}],"nextCursor":"2"}
provisioning: {"schema":"svc.execution-convergence.v1","applicationId":"shop","status":"active","desired":{"policyVersion":1,"policyDigest":"sha256:1426a256e4f8d930052e1ac3fd6d36b30bb3ce7d993954cc7c19a0d30c4751f9","slots":2,"execution":"continuous"},"convergence":{"state":"converging","reason":{"code":"starting","message":"the job is launching, or its route is being validated through the public path"}},"slots":[{"slot":0,"generation":1,"policyVersion":1,"state":"ready","processorId":"fake-1","windowStart":"<time>","windowEnd":"<funded>","restarts":0},{"slot":1,"generation":1,"policyVersion":1,"state":"ready","processorId":"fake-1","windowStart":"<time>","windowEnd":"<funded>","restarts":0}],"recent":[{"executionId":"<id>/1/1/1","slot":1,"generation":1,"attempt":1,"policyVersion":1,"state":"ready","processorId":"fake-1","windowStart":"<time>","windowEnd":"<funded>","changedAt":"<time>","restarts":0,"chargedMicros":"0"}],"nextCursor":"2"}
validating: {"schema":"svc.execution-convergence.v1","applicationId":"shop","status":"active","desired":{"policyVersion":1,"policyDigest":"sha256:1426a256e4f8d930052e1ac3fd6d36b30bb3ce7d993954cc7c19a0d30c4751f9","slots":2,"execution":"continuous"},"convergence":{"state":"converging","reason":{"code":"starting","message":"the job is launching, or its route is being validated through the public path"}},"slots":[{"slot":0,"generation":1,"policyVersion":1,"state":"ready","processorId":"fake-1","windowStart":"<time>","windowEnd":"<funded>","restarts":0},{"slot":1,"generation":1,"policyVersion":1,"state":"ready","processorId":"fake-1","windowStart":"<time>","windowEnd":"<funded>","restarts":0}],"recent":[{"executionId":"<id>/1/1/1","slot":1,"generation":1,"attempt":1,"policyVersion":1,"state":"ready","processorId":"fake-1","windowStart":"<time>","windowEnd":"<funded>","changedAt":"<time>","restarts":0,"chargedMicros":"0"}],"nextCursor":"2"}
live: {"schema":"svc.execution-convergence.v1","applicationId":"shop","status":"active","desired":{"policyVersion":1,"policyDigest":"sha256:1426a256e4f8d930052e1ac3fd6d36b30bb3ce7d993954cc7c19a0d30c4751f9","slots":2,"execution":"continuous"},"convergence":{"state":"converged"},"slots":[{"slot":0,"generation":1,"policyVersion":1,"state":"ready","processorId":"fake-1","windowStart":"<time>","windowEnd":"<funded>","restarts":0},{"slot":1,"generation":1,"policyVersion":1,"state":"ready","processorId":"fake-1","windowStart":"<time>","windowEnd":"<funded>","restarts":0}],"recent":[{"executionId":"<id>/1/1/1","slot":1,"generation":1,"attempt":1,"policyVersion":1,"state":"ready","processorId":"fake-1","windowStart":"<time>","windowEnd":"<funded>","changedAt":"<time>","restarts":0,"chargedMicros":"0"}],"nextCursor":"2"}
degraded: {"schema":"svc.execution-convergence.v1","applicationId":"shop","status":"active","desired":{"policyVersion":1,"policyDigest":"sha256:1426a256e4f8d930052e1ac3fd6d36b30bb3ce7d993954cc7c19a0d30c4751f9","slots":2,"execution":"continuous"},"convergence":{"state":"blocked","reason":{"code":"route_degraded","message":"why degraded"}},"slots":[{"slot":0,"generation":1,"policyVersion":1,"state":"ready","processorId":"fake-1","windowStart":"<time>","windowEnd":"<funded>","restarts":0},{"slot":1,"generation":1,"policyVersion":1,"state":"ready","processorId":"fake-1","windowStart":"<time>","windowEnd":"<funded>","restarts":0}],"recent":[{"executionId":"<id>/1/1/1","slot":1,"generation":1,"attempt":1,"policyVersion":1,"state":"ready","processorId":"fake-1","windowStart":"<time>","windowEnd":"<funded>","changedAt":"<time>","restarts":0,"chargedMicros":"0"}],"nextCursor":"2"}
stopped: {"schema":"svc.execution-convergence.v1","applicationId":"shop","status":"disabled","desired":{"policyVersion":1,"policyDigest":"sha256:1426a256e4f8d930052e1ac3fd6d36b30bb3ce7d993954cc7c19a0d30c4751f9","slots":2,"execution":"continuous"},"convergence":{"state":"idle","reason":{"code":"stopped","message":"the deployment is stopped"}},"slots":[{"slot":0,"generation":1,"policyVersion":1,"state":"ready","processorId":"fake-1","windowStart":"<time>","windowEnd":"<funded>","restarts":0},{"slot":1,"generation":1,"policyVersion":1,"state":"ready","processorId":"fake-1","windowStart":"<time>","windowEnd":"<funded>","restarts":0}],"recent":[{"executionId":"<id>/1/1/1","slot":1,"generation":1,"attempt":1,"policyVersion":1,"state":"ready","processorId":"fake-1","windowStart":"<time>","windowEnd":"<funded>","changedAt":"<time>","restarts":0,"chargedMicros":"0"}],"nextCursor":"2"}
failed: {"schema":"svc.execution-convergence.v1","applicationId":"shop","status":"active","desired":{"policyVersion":1,"policyDigest":"sha256:1426a256e4f8d930052e1ac3fd6d36b30bb3ce7d993954cc7c19a0d30c4751f9","slots":2,"execution":"continuous"},"convergence":{"state":"blocked","reason":{"code":"job_failed","message":"why failed"}},"slots":[{"slot":0,"generation":1,"policyVersion":1,"state":"ready","processorId":"fake-1","windowStart":"<time>","windowEnd":"<funded>","restarts":0},{"slot":1,"generation":1,"policyVersion":1,"state":"ready","processorId":"fake-1","windowStart":"<time>","windowEnd":"<funded>","restarts":0}],"recent":[{"executionId":"<id>/1/1/1","slot":1,"generation":1,"attempt":1,"policyVersion":1,"state":"ready","processorId":"fake-1","windowStart":"<time>","windowEnd":"<funded>","changedAt":"<time>","restarts":0,"chargedMicros":"0"}],"nextCursor":"2"}
failed with a code: {"schema":"svc.execution-convergence.v1","applicationId":"shop","status":"active","desired":{"policyVersion":1,"policyDigest":"sha256:1426a256e4f8d930052e1ac3fd6d36b30bb3ce7d993954cc7c19a0d30c4751f9","slots":2,"execution":"continuous"},"convergence":{"state":"blocked","reason":{"code":"out_of_memory","message":"validated through the public path; the route is live"}},"slots":[{"slot":0,"generation":1,"policyVersion":1,"state":"ready","processorId":"fake-1","windowStart":"<time>","windowEnd":"<funded>","restarts":0},{"slot":1,"generation":1,"policyVersion":1,"state":"ready","processorId":"fake-1","windowStart":"<time>","windowEnd":"<funded>","restarts":0}],"recent":[{"executionId":"<id>/1/1/1","slot":1,"generation":1,"attempt":1,"policyVersion":1,"state":"ready","processorId":"fake-1","windowStart":"<time>","windowEnd":"<funded>","changedAt":"<time>","restarts":0,"chargedMicros":"0"}],"nextCursor":"2"}
successor validating: {"schema":"svc.execution-convergence.v1","applicationId":"shop","status":"active","desired":{"policyVersion":1,"policyDigest":"sha256:1426a256e4f8d930052e1ac3fd6d36b30bb3ce7d993954cc7c19a0d30c4751f9","slots":2,"execution":"continuous"},"convergence":{"state":"converging","reason":{"code":"rolling_out","message":"revision 2 runs beside revision 1 until it passes validation (stop_when_successor_ready)"}},"slots":[{"slot":0,"generation":1,"policyVersion":1,"state":"ready","processorId":"fake-1","windowStart":"<time>","windowEnd":"<funded>","restarts":0},{"slot":1,"generation":1,"policyVersion":1,"state":"ready","processorId":"fake-1","windowStart":"<time>","windowEnd":"<funded>","restarts":0}],"recent":[{"executionId":"<id>/1/1/1","slot":1,"generation":1,"attempt":1,"policyVersion":1,"state":"ready","processorId":"fake-1","windowStart":"<time>","windowEnd":"<funded>","changedAt":"<time>","restarts":0,"chargedMicros":"0"}],"nextCursor":"2"}
successor failed: {"schema":"svc.execution-convergence.v1","applicationId":"shop","status":"active","desired":{"policyVersion":1,"policyDigest":"sha256:1426a256e4f8d930052e1ac3fd6d36b30bb3ce7d993954cc7c19a0d30c4751f9","slots":2,"execution":"continuous"},"convergence":{"state":"converged"},"slots":[{"slot":0,"generation":1,"policyVersion":1,"state":"ready","processorId":"fake-1","windowStart":"<time>","windowEnd":"<funded>","restarts":0},{"slot":1,"generation":1,"policyVersion":1,"state":"ready","processorId":"fake-1","windowStart":"<time>","windowEnd":"<funded>","restarts":0}],"recent":[{"executionId":"<id>/1/1/1","slot":1,"generation":1,"attempt":1,"policyVersion":1,"state":"ready","processorId":"fake-1","windowStart":"<time>","windowEnd":"<funded>","changedAt":"<time>","restarts":0,"chargedMicros":"0"}],"nextCursor":"2"}
revision without a policy: {"schema":"svc.execution-convergence.v1","applicationId":"shop","status":"active","desired":{"policyVersion":7,"policyDigest":"sha256:m","slots":1,"execution":"continuous"},"convergence":{"state":"converging","reason":{"code":"rolling_out","message":"revision 7 serves; the revision it replaced stops once its connections end"}},"slots":[{"slot":0,"generation":0,"policyVersion":7,"state":"pending","restarts":0}],"recent":[{"executionId":"<id>/1/1/1","slot":1,"generation":1,"attempt":1,"policyVersion":1,"state":"ready","processorId":"fake-1","windowStart":"<time>","windowEnd":"<funded>","changedAt":"<time>","restarts":0,"chargedMicros":"0"}],"nextCursor":"2"}
page 1: {"schema":"svc.execution-convergence.v1","applicationId":"shop","status":"active","desired":{"policyVersion":1,"policyDigest":"sha256:1426a256e4f8d930052e1ac3fd6d36b30bb3ce7d993954cc7c19a0d30c4751f9","slots":2,"execution":"continuous"},"convergence":{"state":"converged"},"slots":[{"slot":0,"generation":1,"policyVersion":1,"state":"ready","processorId":"fake-1","windowStart":"<time>","windowEnd":"<funded>","restarts":0},{"slot":1,"generation":1,"policyVersion":1,"state":"ready","processorId":"fake-1","windowStart":"<time>","windowEnd":"<funded>","restarts":0}],"recent":[{"executionId":"<id>/1/1/1","slot":1,"generation":1,"attempt":1,"policyVersion":1,"state":"ready","processorId":"fake-1","windowStart":"<time>","windowEnd":"<funded>","changedAt":"<time>","restarts":0,"chargedMicros":"0"}],"nextCursor":"2"}
page 2: {"schema":"svc.execution-convergence.v1","applicationId":"shop","status":"active","desired":{"policyVersion":1,"policyDigest":"sha256:1426a256e4f8d930052e1ac3fd6d36b30bb3ce7d993954cc7c19a0d30c4751f9","slots":2,"execution":"continuous"},"convergence":{"state":"converged"},"slots":[{"slot":0,"generation":1,"policyVersion":1,"state":"ready","processorId":"fake-1","windowStart":"<time>","windowEnd":"<funded>","restarts":0},{"slot":1,"generation":1,"policyVersion":1,"state":"ready","processorId":"fake-1","windowStart":"<time>","windowEnd":"<funded>","restarts":0}],"recent":[{"executionId":"<id>/0/1/1","slot":0,"generation":1,"attempt":1,"policyVersion":1,"state":"ready","processorId":"fake-1","windowStart":"<time>","windowEnd":"<funded>","changedAt":"<time>","restarts":0,"chargedMicros":"0"}]}
replica down: {"schema":"svc.execution-convergence.v1","applicationId":"shop","status":"active","desired":{"policyVersion":1,"policyDigest":"sha256:1426a256e4f8d930052e1ac3fd6d36b30bb3ce7d993954cc7c19a0d30c4751f9","slots":2,"execution":"continuous"},"convergence":{"state":"converging","reason":{"code":"replica_down","message":"the route serves; slot 1 is failed"}},"slots":[{"slot":0,"generation":1,"policyVersion":1,"state":"ready","processorId":"fake-1","windowStart":"<time>","windowEnd":"<funded>","restarts":0},{"slot":1,"generation":1,"policyVersion":1,"state":"failed","processorId":"fake-1","windowStart":"<time>","windowEnd":"<time>","restarts":0}],"recent":[{"executionId":"<id>/1/1/1","slot":1,"generation":1,"attempt":1,"policyVersion":1,"state":"failed","processorId":"fake-1","windowStart":"<time>","windowEnd":"<changedAt>","changedAt":"<time>","restarts":0,"chargedMicros":"0","reason":{"code":"exited","message":"it exited with status 3"}},{"executionId":"<id>/0/1/1","slot":0,"generation":1,"attempt":1,"policyVersion":1,"state":"ready","processorId":"fake-1","windowStart":"<time>","windowEnd":"<funded>","changedAt":"<time>","restarts":0,"chargedMicros":"0"}]}
"#;
