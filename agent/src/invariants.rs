//! Properties of the tunnel's wire protocol that must hold for any bytes a peer can send. The
//! `tunnel_wire` fuzz target in `fuzz/` calls [`tunnel_wire`], and a normal test replays the
//! committed fuzz corpus through it, so a crash found once stays fixed.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use crate::wire::{self, Control, TICKET_LEN, WireError};

/// The largest control frame the reader takes (`wire`'s limit).
const MAX_FRAME: usize = 64 * 1024;

/// Runs a future over in-memory IO to completion: reading a byte slice and writing a `Vec`
/// never wait, so one poll is enough.
fn now<T>(future: impl Future<Output = T>) -> T {
    match pin!(future).poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(value) => value,
        Poll::Pending => panic!("in-memory IO never waits"),
    }
}

fn encode(message: &Control) -> Vec<u8> {
    let mut out = Vec::new();
    now(wire::write_frame(&mut out, message)).expect("a control message always encodes");
    out
}

/// `bytes` read as a control frame, as a PROXY v2 header and as a ticket: never a panic, no
/// allocation beyond the declared limits, and whatever is read encodes back to what reads the
/// same (frames: `write_frame` of what `read_frame` returned reads back equal, and encodes to
/// the same bytes again; PROXY: the header written for the address read gives that address;
/// tickets: hex of what `unhex` read is the text, lower-cased).
pub fn tunnel_wire(bytes: &[u8]) {
    control_frame(bytes);
    proxy_header(bytes);
    ticket(bytes);
}

fn control_frame(bytes: &[u8]) {
    let mut input = bytes;
    let read = now(wire::read_frame(&mut input));
    let declared = bytes.get(..4).map(|l| u32::from_be_bytes([l[0], l[1], l[2], l[3]]) as usize);
    if let Some(len) = declared.filter(|&len| len > MAX_FRAME) {
        // Refused on the length alone: nothing past the prefix is read or allocated.
        assert!(matches!(read, Err(WireError::Malformed(_))), "a {len}-byte frame was not refused");
        assert_eq!(input.len(), bytes.len() - 4);
        return;
    }
    let Ok(message) = read else { return };
    let consumed = bytes.len() - input.len();
    assert!(consumed <= 4 + MAX_FRAME);
    let encoded = encode(&message);
    // Reading it back also proves it is within the limit: a peer can take what we send.
    let mut again = encoded.as_slice();
    let reread = now(wire::read_frame(&mut again)).expect("an encoded frame reads back");
    assert_eq!(reread, message);
    assert!(again.is_empty(), "one frame, nothing after it");
    assert_eq!(encode(&reread), encoded, "encoding is canonical");
    if let Control::Connect { ticket, .. } = &message {
        // The agent dials only for a ticket that reads as 32 bytes of hex.
        if let Some(t) = wire::unhex::<TICKET_LEN>(ticket) {
            assert_eq!(wire::hex(&t), ticket.to_ascii_lowercase());
        }
    }
}

fn proxy_header(bytes: &[u8]) {
    let mut input = bytes;
    let Ok(Some(client)) = now(wire::read_proxy_v2(&mut input)) else { return };
    // A header is 16 bytes and a length of at most 65,535: never more is read.
    assert!(bytes.len() - input.len() <= 16 + usize::from(u16::MAX));
    for local in ["127.0.0.1:8443", "[::1]:8443"] {
        let local: SocketAddr = local.parse().expect("address");
        let header = wire::proxy_v2_header(client, local);
        let mut reader = header.as_slice();
        assert_eq!(now(wire::read_proxy_v2(&mut reader)).ok(), Some(Some(client)), "{header:?}");
        assert!(reader.is_empty());
    }
}

fn ticket(bytes: &[u8]) {
    let Ok(text) = std::str::from_utf8(bytes) else { return };
    if let Some(t) = wire::unhex::<TICKET_LEN>(text) {
        assert_eq!(wire::hex(&t), text.to_ascii_lowercase(), "a ticket has one spelling per case");
    }
    if let Some(t) = wire::unhex::<4>(text) {
        assert_eq!(wire::hex(&t), text.to_ascii_lowercase());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_message_holds_the_property() {
        let messages = [
            Control::Hello { route_id: "r1".into(), proof: "p".into(), replica: "job-1".into(), pool: 2 },
            Control::Pool { tickets: vec![wire::hex(&[0xcd; TICKET_LEN]); 2] },
            Control::Welcome { heartbeat_secs: u64::MAX },
            Control::Refused { reason: "\u{0}é\"\\".into() },
            Control::Connect { ticket: wire::hex(&[0xab; TICKET_LEN]), acme_only: true },
            Control::Ping { seq: 0, ready: Some(true), acme: false },
            Control::Pong { seq: 7 },
        ];
        for m in &messages {
            tunnel_wire(&encode(m));
        }
        let header = wire::proxy_v2_header("203.0.113.7:1".parse().expect("a"), "127.0.0.1:2".parse().expect("a"));
        tunnel_wire(&header);
        tunnel_wire(wire::hex(&[1; TICKET_LEN]).to_uppercase().as_bytes());
    }

    #[test]
    fn an_oversized_length_is_refused_before_reading() {
        let mut frame = u32::MAX.to_be_bytes().to_vec();
        frame.extend_from_slice(b"{}");
        tunnel_wire(&frame);
    }
}
