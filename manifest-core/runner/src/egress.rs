//! The egress broker: an ingress job's agent lives in its job's network namespace, where
//! nothing of the host is reachable, yet it must reach the gateway's tunnel, the coordinator's
//! agent API and the ACME server. So the runner listens for it on a unix socket shown inside
//! the agent's sandbox ([`EGRESS_INSIDE`]) and connects for it, only to the destinations the
//! job's [`EgressPolicy`] allows, relaying the bytes both ways. The app cannot use it: the
//! socket is in the agent's sandbox only. Unix sockets are reached through the file system,
//! not the network, so the namespace does not stand in the way.
//!
//! The protocol, one request per connection: the agent sends `CONNECT host:port\n`; the broker
//! answers `OK\n` and from then on relays, or `ERR reason\n` and closes.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpStream, UnixListener, UnixStream};
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

/// Where the broker's socket appears inside the agent's sandbox.
pub const EGRESS_INSIDE: &str = "/run/svc/egress.sock";

/// The environment variable that tells the agent where the broker's socket is.
pub const EGRESS_ENV: &str = "SVC_AGENT_EGRESS";

/// The longest request line.
const REQUEST_LIMIT: u64 = 512;

/// How long the agent has to say where to, and the broker to connect there.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// Connections relayed for one job at once: one per client connection the agent serves, plus
/// its tunnels and API calls; beyond it new ones wait.
pub const CONNECTIONS_PER_JOB: usize = 4096;

/// Where a job's agent may connect.
pub trait EgressPolicy: Send + Sync + std::fmt::Debug {
    /// Whether `destination` (`host:port`, as the agent names it) is allowed now.
    fn allows(&self, destination: &str) -> bool;
}

/// A job's policy, as a job spec holds it: equal when it is the same policy.
#[derive(Debug, Clone)]
pub struct Egress(pub Arc<dyn EgressPolicy>);

impl PartialEq for Egress {
    fn eq(&self, other: &Egress) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for Egress {}

/// A fixed set of destinations.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Destinations(pub Vec<String>);

impl EgressPolicy for Destinations {
    fn allows(&self, destination: &str) -> bool {
        self.0.iter().any(|d| d == destination)
    }
}

/// A broker listening for one job. Stops (and removes its socket) when dropped.
#[derive(Debug)]
pub struct Broker {
    socket: PathBuf,
    task: JoinHandle<()>,
}

impl Broker {
    /// Listens on `socket` (a new path; its directory must exist), for connections checked
    /// against `policy`. Must be called within a tokio runtime.
    pub fn listen(socket: &Path, policy: Arc<dyn EgressPolicy>) -> io::Result<Broker> {
        let listener = UnixListener::bind(socket)?;
        let task = tokio::spawn(serve(listener, policy));
        Ok(Broker { socket: socket.to_owned(), task })
    }

    /// The socket's path on the host.
    pub fn socket(&self) -> &Path {
        &self.socket
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        // Relays under way end with the task's connections: the job is gone.
        self.task.abort();
        let _ = std::fs::remove_file(&self.socket);
    }
}

async fn serve(listener: UnixListener, policy: Arc<dyn EgressPolicy>) {
    let permits = Arc::new(Semaphore::new(CONNECTIONS_PER_JOB));
    let mut relays = tokio::task::JoinSet::new();
    loop {
        let Ok(permit) = permits.clone().acquire_owned().await else { return };
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let policy = policy.clone();
                    relays.spawn(async move {
                        relay(stream, policy.as_ref()).await;
                        drop(permit);
                    });
                }
                // Out of descriptors and the like: back off instead of spinning.
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            },
            // Reap finished relays so the set stays small.
            Some(_) = relays.join_next(), if !relays.is_empty() => {}
        }
    }
}

/// Serves one agent connection: reads where to, checks, connects, relays.
async fn relay(stream: UnixStream, policy: &dyn EgressPolicy) {
    let mut stream = BufReader::new(stream);
    let mut line = String::new();
    let read = tokio::time::timeout(REQUEST_TIMEOUT, (&mut stream).take(REQUEST_LIMIT).read_line(&mut line)).await;
    let answer = match read {
        Ok(Ok(_)) if line.ends_with('\n') => match line.trim_end().strip_prefix("CONNECT ") {
            Some(destination) if policy.allows(destination) => {
                match tokio::time::timeout(REQUEST_TIMEOUT, TcpStream::connect(destination)).await {
                    Ok(Ok(upstream)) => Ok((upstream, destination.to_owned())),
                    Ok(Err(e)) => Err(format!("cannot connect to {destination}: {e}")),
                    Err(_) => Err(format!("connecting to {destination} timed out")),
                }
            }
            Some(destination) => Err(format!("{destination} is not a destination this job may reach")),
            None => Err("expected CONNECT host:port".to_owned()),
        },
        _ => Err("expected one line: CONNECT host:port".to_owned()),
    };
    match answer {
        Ok((mut upstream, _)) => {
            let _ = upstream.set_nodelay(true);
            if stream.get_mut().write_all(b"OK\n").await.is_err() {
                return;
            }
            // Bytes the agent sent after its request line are in the reader's buffer.
            let buffered = stream.buffer().to_vec();
            if !buffered.is_empty() && upstream.write_all(&buffered).await.is_err() {
                return;
            }
            let mut agent = stream.into_inner();
            let _ = tokio::io::copy_bidirectional(&mut agent, &mut upstream).await;
        }
        Err(reason) => {
            let reason = reason.replace('\n', " ");
            let _ = stream.get_mut().write_all(format!("ERR {reason}\n").as_bytes()).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    async fn ask(socket: &Path, request: &str) -> (String, UnixStream) {
        let mut stream = UnixStream::connect(socket).await.expect("connect");
        stream.write_all(request.as_bytes()).await.expect("request");
        let mut answer = Vec::new();
        let mut byte = [0u8; 1];
        while stream.read(&mut byte).await.expect("answer") == 1 {
            answer.push(byte[0]);
            if byte[0] == b'\n' {
                break;
            }
        }
        (String::from_utf8_lossy(&answer).into_owned(), stream)
    }

    #[tokio::test]
    async fn the_broker_relays_to_allowed_destinations_only() {
        let upstream = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let allowed = upstream.local_addr().expect("addr").to_string();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = upstream.accept().await {
                let mut buf = [0u8; 5];
                if s.read_exact(&mut buf).await.is_ok() {
                    let _ = s.write_all(&buf).await;
                }
            }
        });
        let dir = tempfile::tempdir().expect("dir");
        let socket = dir.path().join("egress.sock");
        let broker = Broker::listen(&socket, Arc::new(Destinations(vec![allowed.clone()]))).expect("listen");

        let (answer, mut stream) = ask(&socket, &format!("CONNECT {allowed}\nhello")).await;
        assert_eq!(answer, "OK\n");
        let mut echoed = [0u8; 5];
        stream.read_exact(&mut echoed).await.expect("echo");
        assert_eq!(&echoed, b"hello", "bytes sent with the request line are relayed too");

        let (refused, _) = ask(&socket, "CONNECT 127.0.0.1:1\n").await;
        assert!(refused.starts_with("ERR 127.0.0.1:1 is not a destination"), "{refused}");
        let (garbage, _) = ask(&socket, "GET / HTTP/1.1\n").await;
        assert!(garbage.starts_with("ERR expected CONNECT"), "{garbage}");
        let (long, _) = ask(&socket, &format!("CONNECT {}\n", "a".repeat(1000))).await;
        assert!(long.starts_with("ERR expected one line"), "{long}");

        drop(broker);
        assert!(!socket.exists(), "the socket is removed with the broker");
    }
}
