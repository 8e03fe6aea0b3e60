//! How the agent connects out. In a job, its network namespace holds nothing of the host: the
//! runner's egress broker connects for it, over the unix socket named by `SVC_AGENT_EGRESS`
//! (`CONNECT host:port`, answered `OK` or `ERR reason`), to the destinations its job may reach
//! (the gateways' tunnels, the agent API, the ACME server). Run anywhere else (a test, a
//! benchmark, by hand), it connects directly.

use std::io;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::OnceLock;
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::Uri;
use hyper_util::client::legacy::connect::{Connected, Connection};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpStream, UnixStream};

/// The environment variable naming the broker's socket (the runner sets it).
pub const EGRESS_ENV: &str = "SVC_AGENT_EGRESS";

/// The longest answer line the broker sends.
const ANSWER_LIMIT: usize = 1024;

/// How the agent connects out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dial {
    /// Directly.
    Direct,
    /// Through the egress broker listening on this socket.
    Broker(PathBuf),
}

impl Dial {
    /// Through the broker when `SVC_AGENT_EGRESS` names one, else directly.
    pub fn from_env() -> Dial {
        match std::env::var_os(EGRESS_ENV) {
            Some(socket) if !socket.is_empty() => Dial::Broker(socket.into()),
            _ => Dial::Direct,
        }
    }

    /// This process's way out, read from the environment once.
    pub fn process() -> &'static Dial {
        static DIAL: OnceLock<Dial> = OnceLock::new();
        DIAL.get_or_init(Dial::from_env)
    }

    /// A connection to `destination` (`host:port`).
    pub async fn connect(&self, destination: &str) -> io::Result<Conn> {
        match self {
            Dial::Direct => {
                let tcp = TcpStream::connect(destination).await?;
                let _ = tcp.set_nodelay(true);
                Ok(Conn::Tcp(tcp))
            }
            Dial::Broker(socket) => {
                let mut stream = UnixStream::connect(socket)
                    .await
                    .map_err(|e| io::Error::new(e.kind(), format!("the egress broker at {}: {e}", socket.display())))?;
                stream.write_all(format!("CONNECT {destination}\n").as_bytes()).await?;
                // Read byte by byte up to the newline: nothing after it may be taken.
                let mut answer = Vec::with_capacity(64);
                let mut byte = [0u8; 1];
                while answer.last() != Some(&b'\n') {
                    if answer.len() >= ANSWER_LIMIT || stream.read(&mut byte).await? == 0 {
                        return Err(io::Error::new(
                            io::ErrorKind::ConnectionAborted,
                            format!("the egress broker gave no answer for {destination}"),
                        ));
                    }
                    answer.push(byte[0]);
                }
                let answer = String::from_utf8_lossy(&answer);
                match answer.trim_end().strip_prefix("ERR ") {
                    None if answer.trim_end() == "OK" => Ok(Conn::Relayed(stream)),
                    Some(reason) => Err(io::Error::new(io::ErrorKind::ConnectionRefused, reason.to_owned())),
                    None => Err(io::Error::other(format!("the egress broker answered {:?}", answer.trim_end()))),
                }
            }
        }
    }

    /// [`Dial::connect`] within `limit`.
    pub async fn connect_within(&self, destination: &str, limit: Duration) -> io::Result<Conn> {
        tokio::time::timeout(limit, self.connect(destination))
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, format!("connecting to {destination} timed out")))?
    }
}

/// A connection out: a TCP stream, or a stream relayed by the broker.
#[derive(Debug)]
pub enum Conn {
    /// Direct.
    Tcp(TcpStream),
    /// Through the egress broker.
    Relayed(UnixStream),
}

impl AsyncRead for Conn {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Tcp(s) => Pin::new(s).poll_read(cx, buf),
            Conn::Relayed(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Conn {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Conn::Tcp(s) => Pin::new(s).poll_write(cx, buf),
            Conn::Relayed(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Tcp(s) => Pin::new(s).poll_flush(cx),
            Conn::Relayed(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Tcp(s) => Pin::new(s).poll_shutdown(cx),
            Conn::Relayed(s) => Pin::new(s).poll_shutdown(cx),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Conn::Tcp(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Conn::Relayed(s) => Pin::new(s).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Conn::Tcp(s) => s.is_write_vectored(),
            Conn::Relayed(s) => s.is_write_vectored(),
        }
    }
}

/// A [`Conn`] as hyper's client takes it.
#[derive(Debug)]
pub struct DialIo(TokioIo<Conn>);

impl hyper::rt::Read for DialIo {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_read(cx, buf)
    }
}

impl hyper::rt::Write for DialIo {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().0).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_shutdown(cx)
    }
}

impl Connection for DialIo {
    fn connected(&self) -> Connected {
        Connected::new()
    }
}

/// hyper's connector over the process's [`Dial`] (the ACME client's HTTPS wraps it).
#[derive(Debug, Clone, Copy, Default)]
pub struct DialConnector;

impl tower_service::Service<Uri> for DialConnector {
    type Response = DialIo;
    type Error = io::Error;
    type Future = Pin<Box<dyn std::future::Future<Output = io::Result<DialIo>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        Box::pin(async move {
            let host = uri.host().ok_or_else(|| io::Error::other(format!("no host in {uri}")))?;
            let port = uri.port_u16().unwrap_or(if uri.scheme_str() == Some("http") { 80 } else { 443 });
            let destination = format!("{host}:{port}");
            let conn = Dial::process().connect_within(&destination, Duration::from_secs(10)).await?;
            Ok(DialIo(TokioIo::new(conn)))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_broker_refusal_is_an_error_naming_why() {
        let dir = tempfile::tempdir().expect("dir");
        let socket = dir.path().join("egress.sock");
        let listener = tokio::net::UnixListener::bind(&socket).expect("bind");
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                let mut line = [0u8; 64];
                let n = s.read(&mut line).await.unwrap_or(0);
                let ok = String::from_utf8_lossy(&line[..n]).contains("allowed:1");
                let _ = s.write_all(if ok { b"OK\nhi" } else { b"ERR not for you\n" as &[u8] }).await;
            }
        });
        let dial = Dial::Broker(socket);
        let refused = dial.connect("denied:1").await.expect_err("refused");
        assert_eq!(refused.kind(), io::ErrorKind::ConnectionRefused);
        assert_eq!(refused.to_string(), "not for you");
        let mut conn = dial.connect("allowed:1").await.expect("relayed");
        let mut after = [0u8; 2];
        conn.read_exact(&mut after).await.expect("read");
        assert_eq!(&after, b"hi", "what follows the answer is the destination's");
    }
}
