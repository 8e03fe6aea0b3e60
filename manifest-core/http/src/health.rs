//! The health route both services answer (`GET /api/health` at the publication service,
//! `GET /api/relay/health` at the relay API): whether the process serves and whether its store
//! answers, for load balancers and operators. It names the backend and how long the check
//! took, never where the database is or why it failed (that goes to the log).

use std::time::Duration;

use tokio::time::Instant;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// How long the store may take to answer before the check says it is unreachable (a load
/// balancer's probe has a deadline of its own, often a few seconds).
pub const STORE_CHECK_WAIT: Duration = Duration::from_secs(3);

/// How long one check of the store answers every probe: a load balancer, a monitor and an
/// attacker asking many times a second share one read of the store, so probes can neither
/// take the pool's connections from requests nor load the database.
pub const STORE_CHECK_FRESH: Duration = Duration::from_secs(1);

/// The latest check of a service's store, shared by its probes (one per service).
#[derive(Debug, Default)]
pub struct StoreCheck {
    latest: tokio::sync::Mutex<Option<Checked>>,
}

#[derive(Debug, Clone, Copy)]
struct Checked {
    at: Instant,
    reachable: bool,
    took: Duration,
}

/// Checks the store with `ping` (run off the async workers: it blocks) and answers 200
/// `{"status": "ok", "store": {...}}`, or 503 `"unavailable"` when the store did not answer
/// within [`STORE_CHECK_WAIT`]. A successful check made less than [`STORE_CHECK_FRESH`] ago
/// answers instead, and probes that come during a check wait for it: at most one ping at a
/// time.
/// `who` names the service in the log line of a failure.
pub async fn store_health<E: std::fmt::Display + Send + 'static>(
    check: &StoreCheck,
    who: &'static str,
    backend: &'static str,
    ping: impl FnOnce() -> Result<(), E> + Send + 'static,
) -> Response {
    store_health_with(check, who, backend, ping, Vec::new()).await
}

/// [`store_health`] with fields of the service's own beside `status` and `store` (the
/// relay's: which coordinator runs the jobs).
pub async fn store_health_with<E: std::fmt::Display + Send + 'static>(
    check: &StoreCheck,
    who: &'static str,
    backend: &'static str,
    ping: impl FnOnce() -> Result<(), E> + Send + 'static,
    extra: Vec<(&'static str, serde_json::Value)>,
) -> Response {
    let mut latest = check.latest.lock().await;
    let checked = match *latest {
        // A failed check is not kept: the next probe looks again, so a store that is back
        // is seen at once.
        Some(checked) if checked.reachable && checked.at.elapsed() < STORE_CHECK_FRESH => checked,
        _ => {
            let checked = ping_store(who, ping).await;
            *latest = Some(checked);
            checked
        }
    };
    drop(latest);
    respond(backend, checked, extra)
}

async fn ping_store<E: std::fmt::Display + Send + 'static>(
    who: &'static str,
    ping: impl FnOnce() -> Result<(), E> + Send + 'static,
) -> Checked {
    let started = Instant::now();
    let checked = tokio::time::timeout(STORE_CHECK_WAIT, tokio::task::spawn_blocking(ping)).await;
    let reachable = match checked {
        Ok(Ok(Ok(()))) => true,
        Ok(Ok(Err(e))) => {
            tracing::warn!("{who}: health: the store does not answer: {e}");
            false
        }
        Ok(Err(e)) => {
            tracing::warn!("{who}: health: the store check failed: {e}");
            false
        }
        Err(_) => {
            tracing::warn!("{who}: health: the store did not answer within {STORE_CHECK_WAIT:?}");
            false
        }
    };
    Checked { at: Instant::now(), reachable, took: started.elapsed() }
}

fn respond(
    backend: &'static str,
    Checked { reachable, took, .. }: Checked,
    extra: Vec<(&'static str, serde_json::Value)>,
) -> Response {
    let mut body = json!({
        "status": if reachable { "ok" } else { "unavailable" },
        "store": {
            "backend": backend,
            "reachable": reachable,
            "checkedInMs": u64::try_from(took.as_millis()).unwrap_or(u64::MAX),
        },
    });
    if let Some(fields) = body.as_object_mut() {
        fields.extend(extra.into_iter().map(|(name, value)| (name.to_owned(), value)));
    }
    let status = if reachable { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    let bytes = serde_json::to_vec_pretty(&body).unwrap_or_default();
    let mut response = (status, bytes).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    // A probe's answer is about now: no cache keeps it.
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    fn counting(
        pings: &Arc<AtomicUsize>,
        answer: Result<(), &'static str>,
    ) -> impl FnOnce() -> Result<(), &'static str> + Send + use<> {
        let pings = Arc::clone(pings);
        move || {
            pings.fetch_add(1, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(20));
            answer
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_hundred_probes_at_once_share_one_ping_and_a_failed_one_is_not_kept() {
        let check = Arc::new(StoreCheck::default());
        let pings = Arc::new(AtomicUsize::new(0));
        let probes: Vec<_> = (0..100)
            .map(|_| {
                let (check, ping) = (Arc::clone(&check), counting(&pings, Ok(())));
                tokio::spawn(async move { store_health(&check, "test", "sqlite", ping).await.status() })
            })
            .collect();
        for probe in probes {
            assert_eq!(probe.await.expect("a probe"), StatusCode::OK);
        }
        assert_eq!(pings.load(Ordering::SeqCst), 1, "one ping answered every probe");

        // A failure is looked at again by the next probe, fresh or not.
        let check = StoreCheck::default();
        let pings = Arc::new(AtomicUsize::new(0));
        let down = store_health(&check, "test", "postgres", counting(&pings, Err("down"))).await;
        assert_eq!(down.status(), StatusCode::SERVICE_UNAVAILABLE);
        let back = store_health(&check, "test", "postgres", counting(&pings, Ok(()))).await;
        assert_eq!((back.status(), pings.load(Ordering::SeqCst)), (StatusCode::OK, 2));
    }

    #[tokio::test(start_paused = true)]
    async fn a_success_answers_for_a_second_then_the_store_is_pinged_again() {
        let check = StoreCheck::default();
        let pings = Arc::new(AtomicUsize::new(0));
        for _ in 0..3 {
            store_health(&check, "test", "sqlite", counting(&pings, Ok(()))).await;
        }
        assert_eq!(pings.load(Ordering::SeqCst), 1);
        tokio::time::advance(STORE_CHECK_FRESH).await;
        store_health(&check, "test", "sqlite", counting(&pings, Ok(()))).await;
        assert_eq!(pings.load(Ordering::SeqCst), 2);
    }
}
