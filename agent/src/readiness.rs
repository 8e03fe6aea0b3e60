//! Whether the app is ready for new connections: the agent asks its health path every
//! second (each ask given 1 s) and tells every gateway with its next heartbeat, or at once
//! when the answer changes. A gateway takes a replica whose app is not ready out of rotation
//! (`relay-gateway`'s `replicas`), so with 1 s heartbeats an app that stops answering is
//! out within about 2 s, and back within a second of answering again.
//!
//! Until the first answer the app counts as not ready: a replica just started gets no
//! connection before its app listens. Nor before the agent has its certificate: a replica
//! waiting for its turn to order one from an ACME CA ([`crate::acme_turn`]) would fail every
//! handshake sent to it. An install is acted on at once.

use std::sync::Arc;
use std::time::Duration;

use crate::serve::{self, Context};

/// How often the app is asked.
pub const EVERY: Duration = Duration::from_secs(1);

/// How long one ask may take.
pub const TIMEOUT: Duration = Duration::from_secs(1);

/// Why the app is not ready (logged when the answer changes).
#[derive(Debug, thiserror::Error)]
enum NotReady {
    /// The agent has no certificate yet: every handshake would fail.
    #[error("no certificate yet")]
    NoCertificate,
    /// The app's health path did not answer 2xx in time.
    #[error(transparent)]
    App(serve::AppCheckError),
}

/// Marks the app not ready, then asks its health path every [`EVERY`] for ever, publishing
/// each answer in the context's readiness (tunnels started after this call never say
/// "not watched"). A change is logged.
pub fn start(ctx: &Arc<Context>) -> tokio::task::JoinHandle<()> {
    ctx.ready.send_replace(Some(false));
    tokio::spawn(watch(ctx.clone()))
}

async fn watch(ctx: Arc<Context>) {
    let mut ticker = tokio::time::interval(EVERY);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        // Asked again as soon as a certificate is installed, not at the next tick: until the
        // replica says it is ready, a gateway with no replica of the route ready yet may send
        // a handshake to its sibling without a certificate (AccessDenied, found in CI with two
        // replicas ordering from Pebble one after the other).
        tokio::select! {
            _ = ticker.tick() => {}
            () = ctx.cert.installed() => {}
        }
        let answer = if ctx.cert.is_ready() {
            serve::app_check(&ctx, TIMEOUT).await.map_err(NotReady::App)
        } else {
            Err(NotReady::NoCertificate)
        };
        let ready = answer.is_ok();
        let changed = ctx.ready.send_if_modified(|now| {
            let changed = *now != Some(ready);
            *now = Some(ready);
            changed
        });
        match answer {
            Ok(()) if changed => tracing::info!("svc agent: the app answers its health path; ready"),
            Err(e) if changed => tracing::warn!("svc agent: not ready: {e}"),
            _ => {}
        }
    }
}
