//! Socket options set once on a listening socket instead of on each connection it accepts
//! (issue 44, point 4: a new connection's own work). Linux copies a listener's `TCP_NODELAY`
//! and its keepalive settings to every socket it accepts (and starts the keepalive timer), so
//! setting them on each connection cost a syscall each: one for a public connection, five for
//! a data connection dialed ahead. Where a platform does not copy them, or the listener
//! refused them, the first accepted connection shows it, and from then on each connection is
//! given them itself, as before. Likewise a listener bound to one address gives every
//! connection that local address, which a PROXY header names without asking each socket.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU8, Ordering};

use socket2::{SockRef, TcpKeepalive};
use tokio::net::{TcpListener, TcpStream};

/// Not known yet whether accepted connections have the options.
const UNKNOWN: u8 = 0;
/// Accepted connections have them from the listener.
const INHERITED: u8 = 1;
/// Each accepted connection is given them.
const EACH: u8 = 2;

/// The options every connection of one listener gets: `TCP_NODELAY` (the relay writes what
/// it has at once), and keepalive if given.
#[derive(Debug)]
pub(super) struct Options {
    keepalive: Option<Keepalive>,
    state: AtomicU8,
}

/// Keepalive settings: probes after `idle` without a byte, then every `interval`; `probes`
/// unanswered end the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Keepalive {
    pub(super) idle: std::time::Duration,
    pub(super) interval: std::time::Duration,
    pub(super) probes: u32,
}

impl Keepalive {
    fn tcp(self) -> TcpKeepalive {
        TcpKeepalive::new().with_time(self.idle).with_interval(self.interval).with_retries(self.probes)
    }

    /// Whether `socket` has these settings on.
    fn on(self, socket: &SockRef<'_>) -> bool {
        socket.keepalive().unwrap_or(false)
            && socket.tcp_keepalive_time().is_ok_and(|t| t == self.idle)
            && socket.tcp_keepalive_interval().is_ok_and(|t| t == self.interval)
            && socket.tcp_keepalive_retries().is_ok_and(|n| n == self.probes)
    }
}

impl Options {
    /// `TCP_NODELAY`, and keepalive if `keepalive` is given.
    pub(super) fn new(keepalive: Option<Keepalive>) -> Options {
        Options { keepalive, state: AtomicU8::new(UNKNOWN) }
    }

    /// Sets the options on `listener`, for the connections it accepts to copy. If it refuses
    /// one, each connection is given them instead.
    pub(super) fn listen(&self, listener: &TcpListener) {
        if self.set(&SockRef::from(listener)).is_err() {
            self.state.store(EACH, Ordering::Relaxed);
        }
    }

    fn set(&self, socket: &SockRef<'_>) -> std::io::Result<()> {
        socket.set_tcp_nodelay(true)?;
        if let Some(keepalive) = self.keepalive {
            socket.set_tcp_keepalive(&keepalive.tcp())?;
        }
        Ok(())
    }

    /// A connection accepted from the listener: given the options unless it has them from the
    /// listener (looked at on the first connection only). Best effort: a connection without
    /// them still works.
    pub(super) fn accepted(&self, stream: &TcpStream) {
        match self.state.load(Ordering::Relaxed) {
            INHERITED => {}
            EACH => {
                let _ = self.set(&SockRef::from(stream));
            }
            _ => {
                let socket = SockRef::from(stream);
                let has = socket.tcp_nodelay().unwrap_or(false) && self.keepalive.is_none_or(|k| k.on(&socket));
                if has {
                    self.state.store(INHERITED, Ordering::Relaxed);
                } else {
                    self.state.store(EACH, Ordering::Relaxed);
                    let _ = self.set(&socket);
                }
            }
        }
    }

    /// Whether connections have the options from their listener (known after the first).
    #[cfg(test)]
    fn inherited(&self) -> bool {
        self.state.load(Ordering::Relaxed) == INHERITED
    }
}

/// The local address of every connection accepted by a listener bound to `bound`: that
/// address, unless it is unspecified (`0.0.0.0`, `::`: each connection's own, asked of its
/// socket, a syscall).
pub(super) fn fixed_local_address(bound: SocketAddr) -> Option<SocketAddr> {
    (!bound.ip().is_unspecified()).then_some(bound)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    const KEEPALIVE: Keepalive =
        Keepalive { idle: Duration::from_secs(30), interval: Duration::from_secs(10), probes: 3 };

    async fn accept(listener: &TcpListener) -> (TcpStream, TcpStream) {
        let peer = TcpStream::connect(listener.local_addr().expect("bound")).await.expect("connect");
        let (ours, _) = listener.accept().await.expect("accept");
        (peer, ours)
    }

    fn has(stream: &TcpStream, keepalive: Option<Keepalive>) -> bool {
        let socket = SockRef::from(stream);
        socket.tcp_nodelay().expect("TCP_NODELAY") && keepalive.is_none_or(|k| k.on(&socket))
    }

    /// Every accepted connection has `TCP_NODELAY` and the keepalive settings, set once on
    /// the listener (on Linux) or else on each connection.
    #[tokio::test]
    async fn accepted_connections_have_the_listeners_options() {
        for keepalive in [None, Some(KEEPALIVE)] {
            let options = Options::new(keepalive);
            let listener = TcpListener::bind("127.0.0.1:0").await.expect("a port");
            options.listen(&listener);
            for _ in 0..2 {
                let (_peer, ours) = accept(&listener).await;
                options.accepted(&ours);
                assert!(has(&ours, keepalive), "{keepalive:?}");
            }
            #[cfg(target_os = "linux")]
            assert!(options.inherited(), "Linux copies them: no syscall per connection");
        }
    }

    /// A connection's local address is its listener's, unless that listener is bound to every
    /// address; then it is asked of the socket.
    #[tokio::test]
    async fn the_local_address_is_known_unless_the_listener_is_bound_to_every_address() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("a port");
        let bound = listener.local_addr().expect("bound");
        let (_peer, ours) = accept(&listener).await;
        assert_eq!(fixed_local_address(bound), Some(ours.local_addr().expect("local")));
        for any in ["0.0.0.0:8443", "[::]:8443"] {
            assert_eq!(fixed_local_address(any.parse().expect("address")), None, "{any}");
        }
    }

    /// A listener without the options (one that refused them, or a platform that does not
    /// copy them): each connection is given them.
    #[tokio::test]
    async fn connections_of_a_listener_without_them_are_given_them_each() {
        let options = Options::new(Some(KEEPALIVE));
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("a port");
        for _ in 0..2 {
            let (_peer, ours) = accept(&listener).await;
            assert!(!has(&ours, Some(KEEPALIVE)), "a plain listener's connection");
            options.accepted(&ours);
            assert!(has(&ours, Some(KEEPALIVE)));
        }
        assert!(!options.inherited());
    }
}
