//! The relay in every mode over real loopback sockets.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio::time::timeout;

use relay_wire::idle::{Activity, Timeouts};

use super::Mode;

/// Copy, and splice where the platform has it.
const MODES: &[Mode] = if cfg!(target_os = "linux") { &[Mode::Copy, Mode::FASTEST] } else { &[Mode::Copy] };

/// Long enough for a loaded CI machine, short enough that a hang fails the test.
const LIMIT: Duration = Duration::from_secs(30);

async fn pair() -> (TcpStream, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (client, server) = tokio::join!(TcpStream::connect(addr), listener.accept());
    (client.expect("connect"), server.expect("accept").0)
}

/// A client (`left`) and a server (`right`) with a relay between them.
async fn relayed(mode: Mode) -> (TcpStream, TcpStream, JoinHandle<(u64, u64)>) {
    relayed_with(mode, Timeouts::DEFAULT).await
}

/// [`relayed`] with other timeouts.
async fn relayed_with(mode: Mode, timeouts: Timeouts) -> (TcpStream, TcpStream, JoinHandle<(u64, u64)>) {
    let (left, gw_left) = pair().await;
    let (gw_right, right) = pair().await;
    (left, right, tokio::spawn(super::both_ways_with(gw_left, gw_right, mode, timeouts)))
}

/// Short timeouts for the tests of the deadlines.
const SHORT: Timeouts = Timeouts { idle: Duration::from_millis(600), linger: Duration::from_millis(200) };

fn pattern(len: usize, seed: u32) -> Vec<u8> {
    (0..len as u32).map(|i| (i.wrapping_mul(31).wrapping_add(seed) % 251) as u8).collect()
}

#[tokio::test]
async fn bytes_cross_both_ways_and_ends_propagate() {
    for &mode in MODES {
        let (mut left, mut right, relay) = relayed(mode).await;
        let big = pattern(1_000_000, 0);
        let sent = big.clone();
        let writer = tokio::spawn(async move {
            left.write_all(&sent).await.expect("write");
            left.shutdown().await.expect("shutdown");
            let mut back = Vec::new();
            left.read_to_end(&mut back).await.expect("read back");
            back
        });
        let mut got = Vec::new();
        right.read_to_end(&mut got).await.expect("read");
        assert!(got == big, "{mode:?}: the bytes differ");
        right.write_all(b"reply").await.expect("reply");
        right.shutdown().await.expect("shutdown");
        assert_eq!(writer.await.expect("writer"), b"reply", "{mode:?}");
        assert_eq!(relay.await.expect("relay"), (1_000_000, 5), "{mode:?}");
    }
}

#[tokio::test]
async fn large_transfers_both_ways_at_once_arrive_intact() {
    const LEN: usize = 8 * 1024 * 1024;
    for &mode in MODES {
        let (left, right, relay) = relayed(mode).await;
        let send_and_receive = |stream: TcpStream, seed: u32| async move {
            let (mut read, mut write) = stream.into_split();
            let writer = tokio::spawn(async move {
                write.write_all(&pattern(LEN, seed)).await.expect("write");
                write.shutdown().await.expect("shutdown");
            });
            let mut got = Vec::with_capacity(LEN);
            read.read_to_end(&mut got).await.expect("read");
            writer.await.expect("writer");
            got
        };
        let both = async { tokio::join!(send_and_receive(left, 1), send_and_receive(right, 2)) };
        let (at_left, at_right) = timeout(LIMIT, both).await.expect("transfers finish");
        assert!(at_right == pattern(LEN, 1), "{mode:?}: left to right differs ({} bytes)", at_right.len());
        assert!(at_left == pattern(LEN, 2), "{mode:?}: right to left differs ({} bytes)", at_left.len());
        assert_eq!(relay.await.expect("relay"), (LEN as u64, LEN as u64), "{mode:?}");
    }
}

#[tokio::test]
async fn a_half_close_leaves_the_other_direction_open() {
    const REPLY: usize = 3 * 1024 * 1024;
    for &mode in MODES {
        let (mut left, mut right, relay) = relayed(mode).await;
        left.write_all(b"request").await.expect("request");
        left.shutdown().await.expect("half-close");
        let mut request = Vec::new();
        timeout(LIMIT, right.read_to_end(&mut request)).await.expect("the end arrives").expect("read");
        assert_eq!(request, b"request", "{mode:?}");
        // The client's end has arrived; the server can still answer at length.
        let reply = pattern(REPLY, 7);
        let sent = reply.clone();
        let server = tokio::spawn(async move {
            right.write_all(&sent).await.expect("reply");
            right.shutdown().await.expect("shutdown");
        });
        let mut got = Vec::new();
        timeout(LIMIT, left.read_to_end(&mut got)).await.expect("the reply ends").expect("read reply");
        server.await.expect("server");
        assert!(got == reply, "{mode:?}: the reply differs ({} bytes)", got.len());
        assert_eq!(relay.await.expect("relay"), (7, REPLY as u64), "{mode:?}");
    }
}

#[tokio::test]
async fn a_peer_reset_ends_the_relay() {
    for &mode in MODES {
        let (mut left, mut right, relay) = relayed(mode).await;
        // The client keeps sending while the server resets.
        let sender = tokio::spawn(async move {
            let chunk = pattern(64 * 1024, 3);
            while left.write_all(&chunk).await.is_ok() {}
        });
        let mut first = [0u8; 1];
        timeout(LIMIT, right.read_exact(&mut first)).await.expect("data arrives").expect("read");
        right.set_zero_linger().expect("linger");
        drop(right);
        let (ab, ba) = timeout(LIMIT, relay).await.expect("the relay ends").expect("no panic");
        assert_eq!(ba, 0, "{mode:?}");
        assert!(ab > 0, "{mode:?}: some bytes crossed before the reset");
        // The relay closed the client's connection too, so the sender stops.
        timeout(LIMIT, sender).await.expect("the sender stops").expect("no panic");
    }
}

#[tokio::test]
async fn an_idle_survivor_does_not_hold_the_relay_after_a_reset() {
    for &mode in MODES {
        let (mut left, right, relay) = relayed(mode).await;
        right.set_zero_linger().expect("linger");
        drop(right);
        // The client sends nothing, yet the relay ends and the client sees its connection end.
        timeout(LIMIT, relay).await.expect("the relay ends").expect("no panic");
        let mut rest = Vec::new();
        let ended = timeout(LIMIT, left.read_to_end(&mut rest)).await.expect("the client's connection ends");
        assert!(rest.is_empty(), "{mode:?}: {ended:?}");
    }
}

#[tokio::test]
async fn a_quiet_connection_is_closed_after_the_idle_timeout() {
    for &mode in MODES {
        let (mut left, mut right, relay) = relayed_with(mode, SHORT).await;
        left.write_all(b"ping").await.expect("write");
        let mut got = [0u8; 4];
        right.read_exact(&mut got).await.expect("read");
        let start = std::time::Instant::now();
        assert_eq!(timeout(LIMIT, relay).await.expect("the relay ends").expect("no panic"), (4, 0), "{mode:?}");
        assert!(start.elapsed() >= SHORT.idle - Duration::from_millis(50), "{mode:?}: {:?}", start.elapsed());
        // Both sides see their connection end.
        let mut rest = Vec::new();
        assert!(matches!(timeout(LIMIT, left.read_to_end(&mut rest)).await, Ok(Ok(0)) | Ok(Err(_))));
        assert!(matches!(timeout(LIMIT, right.read_to_end(&mut rest)).await, Ok(Ok(0)) | Ok(Err(_))));
    }
}

#[tokio::test]
async fn a_half_closed_connection_whose_peer_stays_silent_is_closed_after_the_linger() {
    for &mode in MODES {
        // The client half-closes and waits; the server reads the end but never closes: the
        // client would sit in FIN-WAIT-2 and the relay's server side in CLOSE-WAIT for ever.
        let (mut left, mut right, relay) = relayed_with(mode, SHORT).await;
        left.shutdown().await.expect("half-close");
        let mut got = Vec::new();
        timeout(LIMIT, right.read_to_end(&mut got)).await.expect("the end arrives").expect("read");
        let start = std::time::Instant::now();
        timeout(LIMIT, relay).await.expect("the relay ends").expect("no panic");
        let waited = start.elapsed();
        let linger = SHORT.linger;
        assert!(waited < SHORT.idle, "{mode:?}: the linger ({linger:?}), not the idle timeout, ended it: {waited:?}");
        assert!(waited >= linger / 2, "{mode:?}: ended {waited:?} after the end, before the linger ({linger:?})");
        let mut rest = Vec::new();
        assert!(matches!(timeout(LIMIT, left.read_to_end(&mut rest)).await, Ok(Ok(0)) | Ok(Err(_))), "{mode:?}");
    }
}

#[tokio::test]
async fn a_reply_still_moving_after_a_half_close_outlives_the_linger() {
    for &mode in MODES {
        let (mut left, mut right, relay) = relayed_with(mode, SHORT).await;
        left.shutdown().await.expect("half-close");
        let mut got = Vec::new();
        timeout(LIMIT, right.read_to_end(&mut got)).await.expect("the end arrives").expect("read");
        // Ten pieces, one every half linger: five lingers long in all.
        let server = tokio::spawn(async move {
            for i in 0..10u8 {
                tokio::time::sleep(SHORT.linger / 2).await;
                right.write_all(&[i; 100]).await.expect("a piece");
            }
            right.shutdown().await.expect("shutdown");
        });
        let mut reply = Vec::new();
        timeout(LIMIT, left.read_to_end(&mut reply)).await.expect("the reply ends").expect("read");
        server.await.expect("server");
        assert_eq!(reply.len(), 1000, "{mode:?}");
        assert_eq!(timeout(LIMIT, relay).await.expect("the relay ends").expect("no panic"), (0, 1000), "{mode:?}");
    }
}

/// Open descriptors of this process.
#[cfg(target_os = "linux")]
fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").expect("/proc/self/fd").count()
}

#[cfg(target_os = "linux")]
/// The gateway closes a connection to make room through its activity: the relay ends at once
/// and both peers see the end, though neither closed and the timeouts are far off.
#[tokio::test]
async fn closing_the_activity_ends_the_relay_at_once() {
    let (mut left, gw_left) = pair().await;
    let (gw_right, mut right) = pair().await;
    let activity = std::sync::Arc::new(Activity::new());
    let relay = {
        let activity = activity.clone();
        tokio::spawn(async move { super::both_ways(gw_left, gw_right, Timeouts::DEFAULT, &activity).await })
    };
    left.write_all(b"hi").await.expect("write");
    let mut got = [0u8; 2];
    right.read_exact(&mut got).await.expect("relayed");
    let before = activity.last_move();
    assert!(before > tokio::time::Instant::now() - Duration::from_secs(1), "the move was recorded");
    activity.close();
    let moved = timeout(Duration::from_secs(2), relay).await.expect("the relay ends at once").expect("the relay");
    assert_eq!(moved, (2, 0));
    for peer in [&mut left, &mut right] {
        let mut rest = Vec::new();
        let read = timeout(Duration::from_secs(2), peer.read_to_end(&mut rest)).await.expect("the end arrives");
        assert!(rest.is_empty() && matches!(read, Ok(0) | Err(_)), "closed: {read:?}");
    }
}

#[tokio::test]
async fn many_short_connections_leak_no_descriptors() {
    const RELAYS: usize = 200;
    // Other tests run beside this one and open sockets too; a leak here is at least 2
    // descriptors per relay, far above their noise, and it never goes away.
    const NOISE: usize = 64;
    let before = open_fds();
    for round in 0..RELAYS {
        let mode = MODES[round % MODES.len()];
        let (mut left, mut right, relay) = relayed(mode).await;
        let data = pattern(100_000, round as u32);
        left.write_all(&data).await.expect("write");
        left.shutdown().await.expect("shutdown");
        let mut got = Vec::new();
        right.read_to_end(&mut got).await.expect("read");
        right.write_all(b"ok").await.expect("reply");
        drop(right);
        let mut reply = Vec::new();
        left.read_to_end(&mut reply).await.expect("read reply");
        assert!(got == data && reply == b"ok", "{mode:?}: round {round}");
        assert_eq!(timeout(LIMIT, relay).await.expect("relay ends").expect("relay"), (100_000, 2));
    }
    let mut after = open_fds();
    for _ in 0..50 {
        if after <= before + NOISE {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        after = after.min(open_fds());
    }
    assert!(after <= before + NOISE, "{before} descriptors before {RELAYS} relays, {after} after");
}
