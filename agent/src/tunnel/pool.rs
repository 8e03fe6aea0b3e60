//! Data connections dialed ahead (issue 44, point 4). A session's `Hello` offers to hold
//! [`OFFER`] of them; a gateway that knows pools hands tickets in `Pool` frames, and for each
//! the agent dials, presents the ticket, and waits reading nothing (no buffer: a task, a
//! socket) until the gateway's first byte says what the connection is for, then serves it as
//! a `Connect`ed one. An end, or [`HOLD_AT_MOST`] without a byte (the gateway replaces its
//! held connections sooner), closes it.
//!
//! The agent holds at most [`OFFER`] per session however many tickets come: a gateway cannot
//! make it dial more.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};

use crate::serve::Context;
use crate::wire::{self, POOL_ACME_ONLY, POOL_SERVE, PROXY_V2_FIXED, TICKET_LEN};

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
    let bound = match bound(&mut stream, proxy_protocol, HOLD_AT_MOST).await {
        Ok(bound) => bound,
        Err(Unbound::Kind(other)) => {
            tracing::debug!("svc agent: {address} sent {other} on a held data connection; closed");
            return;
        }
        Err(Unbound::Ended) => return,
    };
    drop(place);
    super::serve_data(ctx, bound.client, stream, bound.acme_only);
}

/// What the gateway's first bytes on a held connection say.
#[derive(Debug, PartialEq, Eq)]
struct Bound {
    /// It may do an ACME validation's handshake and nothing more.
    acme_only: bool,
    /// The client's address, from the PROXY header that follows when `proxy_protocol`.
    client: Option<SocketAddr>,
}

/// Why a held connection is not served.
#[derive(Debug, PartialEq, Eq)]
enum Unbound {
    /// It ended, failed, sent a bad PROXY header, or nothing within its time.
    Ended,
    /// Its first byte is neither [`POOL_SERVE`] nor [`POOL_ACME_ONLY`].
    Kind(u8),
}

/// Reads a held connection's first byte (within `hold`) and, when `proxy_protocol`, the
/// PROXY header after it (within 10 s more). The gateway writes them at once, so the byte and
/// the header's fixed part are taken in one read (issue 44, point 4: a syscall fewer per
/// client than reading them apart). Waiting in the read holds no buffer: a few bytes on the
/// task's stack.
async fn bound<R: AsyncRead + Unpin>(stream: &mut R, proxy_protocol: bool, hold: Duration) -> Result<Bound, Unbound> {
    let mut head = [0u8; 1 + PROXY_V2_FIXED];
    let head = if proxy_protocol { &mut head[..] } else { &mut head[..1] };
    let Ok(Ok(_)) = tokio::time::timeout(hold, stream.read_exact(head)).await else { return Err(Unbound::Ended) };
    let acme_only = match head[0] {
        POOL_SERVE => false,
        POOL_ACME_ONLY => true,
        other => return Err(Unbound::Kind(other)),
    };
    let client = match <&[u8; PROXY_V2_FIXED]>::try_from(&head[1..]) {
        Ok(fixed) => super::within_proxy_limit(wire::read_proxy_v2_after(fixed, stream)).await.ok_or(Unbound::Ended)?,
        Err(_) => None,
    };
    Ok(Bound { acme_only, client })
}

#[cfg(test)]
mod tests {
    use std::pin::Pin;
    use std::task::{Context, Poll};

    use tokio::io::ReadBuf;

    use super::*;

    /// Bytes read through as many reads as it is asked for.
    struct Counted<'a> {
        bytes: &'a [u8],
        reads: usize,
    }

    impl AsyncRead for Counted<'_> {
        fn poll_read(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<std::io::Result<()>> {
            self.reads += 1;
            let n = buf.remaining().min(self.bytes.len());
            buf.put_slice(&self.bytes[..n]);
            self.bytes = &self.bytes[n..];
            Poll::Ready(Ok(()))
        }
    }

    #[tokio::test]
    async fn the_first_byte_and_the_proxy_header_take_two_reads_and_leave_the_client_hello() {
        let client: SocketAddr = "203.0.113.7:50123".parse().expect("address");
        let local: SocketAddr = "127.0.0.1:8443".parse().expect("address");
        for (kind, acme_only) in [(POOL_SERVE, false), (POOL_ACME_ONLY, true)] {
            let mut sent = vec![kind];
            wire::write_proxy_v2_header(&mut sent, client, local);
            sent.extend_from_slice(b"\x16\x03\x01hello");
            let mut stream = Counted { bytes: &sent, reads: 0 };
            let got = bound(&mut stream, true, HOLD_AT_MOST).await;
            assert_eq!(got, Ok(Bound { acme_only, client: Some(client) }));
            assert_eq!(stream.reads, 2, "the byte with the header's fixed part, then its addresses");
            assert_eq!(stream.bytes, b"\x16\x03\x01hello", "the ClientHello is left for TLS");
        }
        let sent = [POOL_SERVE, 0x16, 0x03];
        let mut stream = Counted { bytes: &sent, reads: 0 };
        assert_eq!(bound(&mut stream, false, HOLD_AT_MOST).await, Ok(Bound { acme_only: false, client: None }));
        assert_eq!(stream.bytes, &[0x16, 0x03], "without a PROXY header only the byte is taken");
    }

    #[tokio::test]
    async fn a_held_connection_with_another_first_byte_or_a_bad_header_is_not_served() {
        let mut stream = Counted { bytes: &[7, 0x16], reads: 0 };
        assert_eq!(bound(&mut stream, false, HOLD_AT_MOST).await, Err(Unbound::Kind(7)));
        let mut sent = vec![POOL_SERVE];
        sent.extend_from_slice(&[0u8; 40]);
        let mut stream = Counted { bytes: &sent, reads: 0 };
        assert_eq!(bound(&mut stream, true, HOLD_AT_MOST).await, Err(Unbound::Ended), "not a PROXY header");
        let mut stream = Counted { bytes: &[], reads: 0 };
        assert_eq!(bound(&mut stream, false, HOLD_AT_MOST).await, Err(Unbound::Ended), "closed");
    }
}
