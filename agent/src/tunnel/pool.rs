//! Data connections dialed ahead (issue 44, point 4). A session's `Hello` offers to hold
//! [`OFFER`] of them; a gateway that knows pools hands tickets in `Pool` frames, and for each
//! the agent dials, presents the ticket, and waits reading nothing (no buffer: a task, a
//! socket) until the gateway's first byte says what the connection is for, then serves it as
//! a `Connect`ed one. An end, or [`HOLD_AT_MOST`] without a byte (the gateway replaces its
//! held connections sooner), closes it.
//!
//! The agent holds at most [`OFFER`] per session however many tickets come: a gateway cannot
//! make it dial more.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::io::AsyncReadExt;

use crate::serve::Context;
use crate::wire::{self, POOL_ACME_ONLY, POOL_SERVE, TICKET_LEN};

/// The most data connections a session holds dialed ahead.
pub(super) const OFFER: u8 = 2;

/// A held data connection without a byte from the gateway for this long is closed (the
/// gateway replaces its own after 10 minutes, and keeps them alive meanwhile: an idle route
/// costs no dial).
const HOLD_AT_MOST: Duration = Duration::from_secs(15 * 60);

/// A session's data connections dialed ahead and not yet bound to a client.
#[derive(Debug, Default)]
pub(super) struct Held(Arc<AtomicUsize>);

/// One place among a session's held connections, given back when dropped.
struct Place(Arc<AtomicUsize>);

impl Drop for Place {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Held {
    fn place(&self) -> Option<Place> {
        let most = usize::from(OFFER);
        self.0.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| (n < most).then_some(n + 1)).ok()?;
        Some(Place(self.0.clone()))
    }

    /// Dials one data connection ahead for each ticket (hex) of a `Pool` frame from the
    /// gateway at `address`, while the session holds fewer than [`OFFER`]; the rest are
    /// ignored (the gateway withdraws them unanswered).
    pub(super) fn dial_ahead(&self, tickets: &[String], ctx: &Arc<Context>, proxy_protocol: bool, address: &Arc<str>) {
        for ticket in tickets {
            let Some(ticket) = wire::unhex::<TICKET_LEN>(ticket) else { continue };
            let Some(place) = self.place() else {
                tracing::debug!("svc agent: {address} handed more pool tickets than offered; ignored");
                return;
            };
            tokio::spawn(held(place, ctx.clone(), proxy_protocol, address.clone(), ticket));
        }
    }
}

/// One data connection dialed ahead: held until the gateway's first byte, then served.
async fn held(place: Place, ctx: Arc<Context>, proxy_protocol: bool, address: Arc<str>, ticket: [u8; TICKET_LEN]) {
    let Some(mut stream) = super::present(&address, &ticket).await else { return };
    let mut kind = [0u8; 1];
    // Waiting in the read itself holds no buffer: one byte on the task's stack.
    let Ok(Ok(_)) = tokio::time::timeout(HOLD_AT_MOST, stream.read_exact(&mut kind)).await else { return };
    drop(place);
    let acme_only = match kind[0] {
        POOL_SERVE => false,
        POOL_ACME_ONLY => true,
        other => {
            tracing::debug!("svc agent: {address} sent {other} on a held data connection; closed");
            return;
        }
    };
    super::serve_data(ctx, proxy_protocol, stream, acme_only).await;
}
