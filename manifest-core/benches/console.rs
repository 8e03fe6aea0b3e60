//! The publication console's views, timed in the server: with 1,000 applications and 10,000
//! executions in the store (issue 18, point 7: each view's p99 under 20 ms), against the API's
//! JSON answers over the same data in the same run (the peer).
//!
//! 1. Setup: a fresh store (a temporary directory) with one organization and `SVC_BENCH_APPS`
//!    (default 1,000) applications, each with version 1 published as the publish route
//!    writes it (2 continuous slots, 1 h windows), then version 2 (an immediate update);
//!    an `Executor` over a `SimulatedPool` (jobs ready at once) and a manual clock converges
//!    them, and the clock moves from one due time to the next (renewals a lead ahead of each
//!    window's end) until the store holds `SVC_BENCH_EXECUTIONS` (default 10,000) executions.
//! 2. The service's router (`service::router_over`: the API and the console, with its
//!    scheduler running over the same pool and clock) answers, in process, `SVC_BENCH_SAMPLES`
//!    (default 500) requests per view, each for another application, signed in with an owner's
//!    session cookie: the time from the request to the whole body, which is the server's work
//!    (routing, the session's token lookup, the store's reads, the rendering) without a network.
//!
//! Run with `cargo bench -p manifest-core --features service --bench console`
//! (`SVC_BENCH_APPS=100 SVC_BENCH_EXECUTIONS=1000 SVC_BENCH_SAMPLES=100` for a quick run;
//! `SVC_BENCH_TRACE=1` prints the setup's clock and launches as it goes).

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{Request, StatusCode};
use common::{Result, ms, percentile, policy_version, publish, publish_all, setting};
use manifest_core::service::auth::Role;
use manifest_core::service::executions::runner::{BATCH, Scheduler};
use manifest_core::service::store::{SqliteStore, Store};
use svc_execution::executor::{ExecutionStore, Executor};
use svc_execution::{Clock, ManualClock, Market, SimulatedPool};
use tower::ServiceExt;

/// What a view's page may weigh at most (issue 18, point 1).
const PAGE_LIMIT: usize = 200_000;

fn main() -> Result<()> {
    let apps = setting("SVC_BENCH_APPS", 1_000)?.max(2);
    let executions = setting("SVC_BENCH_EXECUTIONS", 10_000)?;
    let samples = setting("SVC_BENCH_SAMPLES", 500)?.max(1);
    let scratch = tempfile::Builder::new().prefix("svc-bench-console-").tempdir()?;
    let store = Arc::new(SqliteStore::open(scratch.path())?);
    let pool = Arc::new(SimulatedPool::new(20, 2_000, 1_000));
    pool.set_auto_ready(true);
    // Publications record their wakeups at the real time: the manual clock starts there and
    // then runs ahead of it.
    let t0 = svc_execution::SystemClock.now() + 60_000;
    let clock = ManualClock::at(t0);

    let started = Instant::now();
    let mut applications = publish_all(&store, apps)?;
    let executor = Executor::new(
        Arc::clone(&store) as Arc<dyn ExecutionStore>,
        Arc::clone(&pool) as Arc<dyn Market>,
        Arc::new(clock.clone()),
        BATCH,
    );
    settle(&executor)?;
    // Version 2 everywhere: two versions to compare, and an update rolled out.
    for chunk in applications.chunks_mut(500) {
        let mut tx = store.write()?;
        for app in chunk {
            let n: usize = app.application_id.trim_start_matches("app-").parse()?;
            publish(tx.as_mut(), app, policy_version(n, 2)?)?;
        }
        tx.commit()?;
    }
    settle(&executor)?;
    // Renewals, one due time after another, until the store holds enough executions.
    while pool.launches() < executions {
        let Some(due) = executor.next_due()? else { break };
        clock.set(due.max(clock.now()));
        settle(&executor)?;
        if std::env::var_os("SVC_BENCH_TRACE").is_some() {
            eprintln!("+{:.2} h: {} launches", (clock.now() - t0) as f64 / 3_600_000.0, pool.launches());
        }
    }
    println!(
        "console: {apps} applications, {} executions (clock at +{:.1} h), set up in {:.1} s; SQLite in {}",
        pool.launches(),
        (clock.now() - t0) as f64 / 3_600_000.0,
        started.elapsed().as_secs_f64(),
        scratch.path().display()
    );

    let token =
        manifest_core::service::admin::token_create(scratch.path(), "acme", Role::Owner, Some("bench"))?.plaintext;
    let scheduler = Scheduler::start(
        Arc::clone(&store) as Arc<dyn ExecutionStore>,
        Arc::clone(&pool) as Arc<dyn Market>,
        Arc::new(clock.clone()),
    )?;
    let router = manifest_core::service::router_over(store.clone(), scheduler);
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    // A console session, as the sign-in form makes it (the cookie holds its id, not the token).
    let sign_in = Request::post("/console/sign-in")
        .header("content-type", "application/x-www-form-urlencoded")
        .body(Body::from(format!("token={token}")))?;
    let signed_in = runtime.block_on(router.clone().oneshot(sign_in))?;
    let cookie = signed_in
        .headers()
        .get("set-cookie")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .ok_or("signing in to the console set no cookie")?
        .to_owned();

    // Each sample asks for another application's page (`{app}`), so no answer is a repeat.
    let views: [(&str, &str, bool); 12] = [
        ("applications list", "/console/apps", true),
        ("applications list, page 10", "/console/apps?page=10", true),
        ("overview", "/console/apps/{app}", true),
        ("executions", "/console/apps/{app}/executions", true),
        ("executions, live region", "/console/apps/{app}/executions/live", true),
        ("versions", "/console/apps/{app}/versions", true),
        ("version 2", "/console/apps/{app}/versions/2", true),
        ("diff of versions 1 and 2", "/console/apps/{app}/versions?a=1&b=2", true),
        ("publish form", "/console/apps/{app}/publish", true),
        ("peer: API applications list (JSON)", "/api/applications", false),
        ("peer: API executions (JSON)", "/api/applications/{app}/executions", false),
        ("peer: API application (JSON)", "/api/applications/{app}", false),
    ];
    println!();
    println!("| View ({samples} samples) | p50 | p99 | max | largest page |");
    println!("|---|---|---|---|---|");
    let mut p99s = Vec::new();
    for (name, path, console) in views {
        let mut times = Vec::with_capacity(samples);
        let mut largest = 0;
        for i in 0..samples {
            let app = format!("app-{}", (i * 7919) % apps);
            let uri = path.replace("{app}", &app);
            let mut request = Request::get(&uri);
            request = if console {
                request.header("cookie", &cookie)
            } else {
                request.header("authorization", format!("Bearer {token}"))
            };
            let request = request.body(Body::empty())?;
            let router = router.clone();
            let (status, bytes, took) = runtime.block_on(async move {
                let began = Instant::now();
                let response = router.oneshot(request).await?;
                let status = response.status();
                let bytes = axum::body::to_bytes(response.into_body(), usize::MAX).await?;
                Ok::<_, Box<dyn std::error::Error>>((status, bytes.len(), began.elapsed()))
            })?;
            if status != StatusCode::OK {
                return Err(format!("{uri}: {status}").into());
            }
            largest = largest.max(bytes);
            times.push(took);
        }
        if console && largest >= PAGE_LIMIT {
            return Err(format!("{name}: a page of {largest} bytes, over {PAGE_LIMIT}").into());
        }
        let p99 = percentile(&times, 0.99);
        println!(
            "| {name} | {:.2} ms | {:.2} ms | {:.2} ms | {:.1} KB |",
            ms(percentile(&times, 0.50)),
            ms(p99),
            ms(percentile(&times, 1.0)),
            largest as f64 / 1000.0
        );
        p99s.push((name, console, p99));
    }
    let worst = p99s.iter().filter(|(_, console, _)| *console).max_by_key(|(_, _, p)| *p);
    let peer = p99s.iter().find(|(name, _, _)| name.starts_with("peer: API executions")).map(|(_, _, p)| *p);
    let executions_view = p99s.iter().find(|(name, _, _)| *name == "executions").map(|(_, _, p)| *p);
    if let (Some((name, _, worst)), Some(peer), Some(view)) = (worst, peer, executions_view) {
        println!();
        println!("slowest console view at p99: {name}, {:.2} ms (goal: under 20 ms)", ms(*worst));
        println!(
            "executions view / the API's executions JSON, p99: {:.2} / {:.2} ms = {:.2}",
            ms(view),
            ms(peer),
            ms(view) / ms(peer).max(f64::MIN_POSITIVE)
        );
    }
    Ok(())
}

/// Steps the executor until nothing more is due now.
fn settle(executor: &Executor) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let report = executor.step()?;
        if !report.more && report.decided == 0 && report.recorded == 0 && report.launched == 0 {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err("the executor did not settle within 300 s".into());
        }
    }
}
