//! A public connection's path: its ClientHello, its route and the route's guards, a slot,
//! a data connection from the route's agents (one dialed ahead from a pool, or one asked for
//! over a control connection by ticket), the PROXY header, then the relay.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::sync::oneshot;

use super::accounting::{Admitted, Refusal};
use super::client::Client;
use super::pending::PendingSlot;
use super::{Gateway, ProbeKey, RouteConfig, pool, relay, replicas, sni};
use relay_wire::wire::{self, TICKET_LEN};

impl Gateway {
    /// A public connection from `peer`, to `local` if every connection of the public port
    /// has that address (else it is asked of the socket when a PROXY header needs it).
    pub(super) async fn public_connection(
        self: Arc<Self>,
        mut stream: TcpStream,
        peer: SocketAddr,
        local: Option<SocketAddr>,
        mut pending: PendingSlot,
    ) {
        self.public_sockets.accepted(&stream);
        let (max, timeout) = (self.config.client_hello_max, self.config.client_hello_timeout);
        let hello = tokio::select! {
            hello = sni::read_client_hello(&mut stream, max, timeout) => hello,
            _ = pending.evicted() => return self.metrics.outcome("evicted"),
        };
        drop(pending);
        let hello = match hello {
            Ok(hello) => hello,
            Err(e) => return self.metrics.outcome(e.label()),
        };
        let Some(route) = self.route_for_hello(&hello) else {
            return self.metrics.outcome("unknown_sni");
        };
        let probe = hello.probe.is_some() && shows_probe_token(&hello, &route, &self.probe_keys());
        if !route.guards.is_open()
            && !probe
            && let Err(refused) = self.guards.admit(&route.route_id, &route.guards, peer.ip(), hello.acme_tls)
        {
            return self.metrics.outcome(refused.label());
        }
        // An ACME validation past a guarded route's allow-list may do its handshake only.
        let acme_only = hello.acme_tls && !route.guards.is_open();
        // The coordinator validating one replica (with a probe token) reaches that one alone;
        // an ACME validation, the replica whose order it checks.
        let replica = if probe {
            hello.replica.clone()
        } else if hello.acme_tls {
            self.replicas.with_acme_pending(&route.route_id)
        } else {
            None
        };
        let share = self.config.client_share(route.max_connections);
        // The slot goes back to this route ID's count when the connection ends, however the
        // routes change meanwhile.
        let client = Client::of(peer.ip());
        let slot = match self.accounting.acquire(&route.route_id, client, route.max_connections, share) {
            Ok((slot, Admitted::Free)) => slot,
            Ok((slot, Admitted::Evicted)) => {
                self.metrics.evicted("route_full");
                slot
            }
            Err(Refusal::RouteFull) => return self.metrics.outcome("route_limit"),
            Err(Refusal::ClientShare) => return self.metrics.outcome("client_limit"),
        };
        // Closed to make room while waiting for its data connection: its slot is gone already.
        let data = tokio::select! {
            data = self.data_connection(&route.route_id, acme_only, replica.as_deref()) => data,
            () = slot.activity().closed() => return self.metrics.outcome("evicted"),
        };
        let Some(Data { stream: mut data, held: _replica, refill }) = data else {
            return self.metrics.outcome("no_tunnel");
        };
        self.metrics.outcome("routed");
        slot.routed();
        // A pre-dialed connection learns first what it is for; then what any gets. Written at
        // once (one segment: the agent takes the first byte and the header in one read).
        let mut head = Vec::with_capacity(1 + wire::PROXY_V2_MAX + hello.bytes.len());
        if refill.is_some() {
            head.push(if acme_only { wire::POOL_ACME_ONLY } else { wire::POOL_SERVE });
        }
        if route.proxy_protocol {
            let local = local.unwrap_or_else(|| stream.local_addr().unwrap_or(self.config.public));
            wire::write_proxy_v2_header(&mut head, peer, local);
        }
        head.extend_from_slice(&hello.bytes);
        let sent = tokio::time::timeout(self.config.data_connect_timeout, data.write_all(&head)).await;
        let sent = matches!(sent, Ok(Ok(())));
        // The ClientHello is forwarded: do not hold it, or the route's configuration, for the
        // connection's life.
        drop((head, hello, route));
        if sent {
            if let Some(refill) = refill {
                // The connection taken from the pool is replaced once the agent has answered
                // (its dial and our accept would compete with its handshake on the cores),
                // or either side has sent or ended, or the connection is closed, or at most
                // [`REFILL_AFTER_AT_MOST`]. Waiting here costs the relay nothing: it starts
                // with the same readiness, which the runtime keeps.
                let answered = async {
                    tokio::select! {
                        _ = data.readable() => {}
                        _ = stream.readable() => {}
                        () = slot.activity().closed() => {}
                    }
                };
                let _ = tokio::time::timeout(REFILL_AFTER_AT_MOST, answered).await;
                drop(refill);
            }
            relay::both_ways(stream, data, self.config.timeouts, slot.activity()).await;
        }
        drop(slot);
    }

    /// A data connection from a replica of the route: one it dialed ahead ([`pool`]) if the
    /// replica picked holds a live one; else one asked for now, waited for, a replica that
    /// does not answer within `replica_answer_timeout` out of rotation and the next asked,
    /// all within `data_connect_timeout`. The connection, and its place in its replica's open
    /// count. Cancel-safe: each ticket is withdrawn however its wait ends. `only`: the
    /// replica of that name is asked (its own pool first), and no other.
    async fn data_connection(&self, route_id: &str, acme_only: bool, only: Option<&str>) -> Option<Data> {
        let deadline = tokio::time::Instant::now() + self.config.data_connect_timeout;
        // The sessions asked, on the stack: nothing allocated for a pool's hit.
        let mut asked = [0u64; MAX_ASKS];
        for n in 0..MAX_ASKS {
            let tried = &asked[..n];
            let replicas::Choice { replica, others } = match only {
                Some(name) => self.replicas.named(route_id, name, tried)?,
                None => self.replicas.pick(route_id, tried, replicas::entropy())?,
            };
            asked[n] = replica.session;
            if let Some((stream, refill)) = self.take_pooled(&replica) {
                self.replicas.routed(route_id, &replica);
                return Some(Data { stream, held: replica.hold(), refill: Some(refill) });
            }
            // Drawn from the system only when a ticket is sent (a syscall each).
            let ticket = wire::new_ticket().ok()?;
            let (tx, rx) = oneshot::channel();
            self.tickets.lock().ok()?.insert(ticket, tx);
            let _withdraw = Withdraw { tickets: &self.tickets, ticket };
            if !replica.ask(replicas::Ask { ticket, acme_only }) {
                // Its session is gone, or has 256 requests queued: it is not keeping up.
                self.metrics.tunnel("replica_unanswered");
                self.replicas.unanswered(&replica);
                continue;
            }
            let until = if others {
                deadline.min(tokio::time::Instant::now() + self.config.replica_answer_timeout)
            } else {
                deadline
            };
            match tokio::time::timeout_at(until, rx).await {
                Ok(Ok(stream)) => {
                    self.replicas.routed(route_id, &replica);
                    return Some(Data { stream, held: replica.hold(), refill: None });
                }
                // Withdrawn by its session as it ended, the request never passed on.
                Ok(Err(_)) => continue,
                Err(_) if until >= deadline => return None,
                Err(_) => {
                    self.metrics.tunnel("replica_unanswered");
                    self.replicas.unanswered(&replica);
                }
            }
        }
        None
    }

    /// A live pre-dialed data connection of `replica`, if it holds one, and its replacement to
    /// ask for (counted: a hit, a miss, and any found dead on the way).
    fn take_pooled(&self, replica: &replicas::Replica) -> Option<(TcpStream, pool::Refill)> {
        if !replica.pool.offered() {
            return None;
        }
        let taken = replica.pool.take();
        self.metrics.pool_dead(taken.dead);
        self.metrics.pool(if taken.stream.is_some() { "hit" } else { "miss" });
        taken.stream
    }

    /// Withdraws the wait for `ticket`: its connection stops waiting and asks elsewhere.
    pub(super) fn withdraw(&self, ticket: &[u8; TICKET_LEN]) {
        if let Ok(mut tickets) = self.tickets.lock() {
            tickets.remove(ticket);
        }
    }
}

/// A public connection's data connection.
struct Data {
    stream: TcpStream,
    /// Its place in its replica's open count.
    held: replicas::Held,
    /// Dialed ahead (it is told what it is for by its first byte): its pool's refill, asked
    /// for when this is dropped.
    refill: Option<pool::Refill>,
}

/// The longest a connection taken from a pool defers its replacement, waiting for its
/// agent's answer.
const REFILL_AFTER_AT_MOST: Duration = Duration::from_millis(250);

/// The most replicas one new connection asks for its data connection.
const MAX_ASKS: usize = 4;

/// Whether the ClientHello shows a current probe token of the route for its server name,
/// signed by a coordinator's probe key among `keys` (the coordinator's validation), which
/// passes the route's guards unchecked.
pub(super) fn shows_probe_token(hello: &sni::Hello, route: &RouteConfig, keys: &[ProbeKey]) -> bool {
    let Some(token) = &hello.probe else { return false };
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let probe = relay_wire::alpn::ProbeFor { route_id: &route.route_id, server_name: &hello.server_name };
    relay_wire::alpn::probe_valid(token, probe, keys, now)
}

/// Withdraws a ticket when its wait ends.
struct Withdraw<'a> {
    tickets: &'a Mutex<HashMap<[u8; TICKET_LEN], oneshot::Sender<TcpStream>>>,
    ticket: [u8; TICKET_LEN],
}

impl Drop for Withdraw<'_> {
    fn drop(&mut self) {
        if let Ok(mut t) = self.tickets.lock() {
            t.remove(&self.ticket);
        }
    }
}
