//! Moving bytes both ways between a public connection and its tunnel data connection.
//!
//! Each direction waits for readability holding nothing, then moves a *burst*: everything the
//! socket has until it would block, and lets go of what the burst needed. Idle connections
//! (most of them) hold no buffer and no pipe.
//!
//! On Linux bulk moves with `splice(2)` through a pipe ([`splice`]): the kernel passes the
//! socket's pages on to the other socket, so the bytes are never copied into or out of the
//! process. A direction creates its pipe when a read shows bulk (16 KiB or more waiting at
//! once) and closes it once it has been idle for a quarter of a second, so each busy direction
//! holds 2 more file descriptors (the pipe's ends) and each idle one none: size the descriptor
//! limit for 2 sockets per connection plus 2 per busy direction. Small bursts (requests, small
//! responses) are copied, which costs less than splicing them; so is everything off Linux,
//! when the kernel refuses to splice the sockets, or when no usable pipe can be had
//! (descriptor or pipe memory limits) ([`copy`]: a buffer held only for the burst).
//!
//! Half-closes propagate: when one side stops sending, the other side's write is shut and the
//! opposite direction goes on while it moves bytes. An error (a reset, say) ends both
//! directions and closes both sockets: the connection is beyond repair, and nothing waits on
//! an idle survivor. Nor does anything wait on a quiet one: after [`Timeouts::idle`] without
//! a byte either way, or [`Timeouts::linger`] without one after a side ended its sending, both
//! sockets are closed (`agent::idle`). Each write stamps the time; one timer per connection
//! checks it.

use std::io;
use std::net::Shutdown;

use relay_wire::idle::{Activity, Timeouts};
use socket2::SockRef;
use tokio::net::TcpStream;

mod copy;
#[cfg(target_os = "linux")]
mod splice;

/// How a direction moves its bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Mode {
    /// Read into a user-space buffer, write it out.
    #[cfg_attr(target_os = "linux", allow(dead_code, reason = "on Linux only the tests and the benchmark choose it"))]
    Copy,
    /// `splice(2)` through a pipe, no copy through user space.
    #[cfg(target_os = "linux")]
    Splice,
}

impl Mode {
    /// The fastest mode this platform has.
    #[cfg(target_os = "linux")]
    pub(super) const FASTEST: Mode = Mode::Splice;
    /// The fastest mode this platform has.
    #[cfg(not(target_os = "linux"))]
    pub(super) const FASTEST: Mode = Mode::Copy;
}

/// How a burst ended.
enum Burst {
    /// The source would block: the direction is idle again.
    Idle,
    /// The source has ended its sending.
    Ended,
    /// A large read: enough is flowing to be worth splicing.
    Plenty,
    /// The kernel cannot splice these sockets; nothing was lost, copying goes on.
    #[cfg(target_os = "linux")]
    Unsupported,
}

/// The bytes one direction has moved; each move also stamps the connection's activity.
struct Meter<'a> {
    total: u64,
    activity: &'a Activity,
}

impl Meter<'_> {
    /// `n` more bytes went out.
    fn moved(&mut self, n: usize) {
        self.total += n as u64;
        self.activity.touch();
    }
}

/// Relays until both directions have ended, either failed, or the connection stayed quiet
/// longer than `timeouts` allow; returns the bytes moved each way (a to b, b to a). Moves are
/// recorded in `activity`, through which the gateway sees how long the connection has been
/// idle and may close it ([`Activity::close`]) to make room.
pub(super) async fn both_ways(a: TcpStream, b: TcpStream, timeouts: Timeouts, activity: &Activity) -> (u64, u64) {
    relay(a, b, Mode::FASTEST, timeouts, activity).await
}

/// [`both_ways`] in a given mode, with an activity of its own (the tests and the benchmark
/// compare the modes).
#[cfg_attr(not(test), allow(dead_code, reason = "the tests and the benchmark choose a mode"))]
pub(super) async fn both_ways_with(a: TcpStream, b: TcpStream, mode: Mode, timeouts: Timeouts) -> (u64, u64) {
    relay(a, b, mode, timeouts, &Activity::new()).await
}

async fn relay(a: TcpStream, b: TcpStream, mode: Mode, timeouts: Timeouts, activity: &Activity) -> (u64, u64) {
    let mut ab = Meter { total: 0, activity };
    let mut ba = Meter { total: 0, activity };
    {
        // The first error drops the other direction; so does the deadline, or a close from
        // outside.
        let relay = async { tokio::try_join!(one_way(&a, &b, mode, &mut ab), one_way(&b, &a, mode, &mut ba)) };
        tokio::select! {
            _ = relay => {}
            () = activity.expired(timeouts) => {}
        }
    }
    // `a` and `b` close when this returns.
    (ab.total, ba.total)
}

/// Moves `from` to `to` until `from` ends or either fails, counting into `meter`; then shuts
/// `to`'s write side, so its peer learns that nothing more comes, and from then on the
/// connection's linger applies.
async fn one_way(from: &TcpStream, to: &TcpStream, mode: Mode, meter: &mut Meter<'_>) -> io::Result<()> {
    let result = match mode {
        Mode::Copy => copy::one_way(from, to, meter).await,
        #[cfg(target_os = "linux")]
        Mode::Splice => splice::one_way(from, to, meter).await,
    };
    // Fails only if `to` is already gone, which is what shutting it would achieve.
    let _ = SockRef::from(to).shutdown(Shutdown::Write);
    meter.activity.end();
    result
}

#[cfg(test)]
mod tests;
