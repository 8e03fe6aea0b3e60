//! Idle HTTP/1.1 keep-alive connections hold no HTTP state: once a connection has had no
//! request in flight and no byte moving for [`HIBERNATE_AFTER`], the agent takes the stream
//! back from hyper (which holds two 8 KiB buffers and its request slot per connection), waits
//! for the client's next bytes without a buffer, and serves them on a new hyper connection.
//!
//! hyper's server ends a keep-alive connection gracefully, writing nothing, when its stream
//! ends between requests; [`Hibernating`] gives it that end, only when it has been asked to
//! and the stream has nothing to read. Any byte that arrives meanwhile goes up to hyper and
//! cancels the request. A request hyper had begun to read is handed to the next connection
//! (its bytes replayed), a connection that switched protocols (a WebSocket) never hibernates,
//! and what hyper had not yet written is flushed before waiting.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::body::{Bytes, Frame, Incoming, SizeHint};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};

use super::tls::Tls;
use super::{Body, Readable};
use crate::idle::{Activity, Watched};

/// How long a keep-alive connection stays quiet, no request in flight, before it hibernates.
/// Long enough that a connection in use (a page loading its parts, a client polling every
/// second) keeps its hyper connection; short against the 5-minute idle timeout.
pub(crate) const HIBERNATE_AFTER: Duration = Duration::from_secs(2);

/// One connection's requests, as its service and its stream see them.
#[derive(Debug, Default)]
pub(crate) struct Requests {
    /// Requests taken and not yet answered to the end of their body.
    in_flight: AtomicUsize,
    /// A response switched protocols: the connection is not HTTP any more.
    upgraded: AtomicBool,
    /// The connection's loop asks the stream to end hyper's connection at its next idle read.
    hibernate: AtomicBool,
}

impl Requests {
    /// A request taken: counted until the [`Busy`] is dropped (with its response's body).
    pub(crate) fn busy(self: &Arc<Self>) -> Busy {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        self.hibernate.store(false, Ordering::Relaxed);
        Busy(self.clone())
    }

    fn may_hibernate(&self) -> bool {
        self.in_flight.load(Ordering::Relaxed) == 0 && !self.upgraded.load(Ordering::Relaxed)
    }
}

/// Keeps one request counted in flight while it lives.
#[derive(Debug)]
pub(crate) struct Busy(Arc<Requests>);

impl Busy {
    /// The response switches protocols.
    pub(crate) fn upgraded(&self) {
        self.0.upgraded.store(true, Ordering::Relaxed);
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A response's body that keeps its request in flight until hyper has sent it all (or the
/// connection is gone): hyper drops a body once its end is written.
#[derive(Debug)]
pub(crate) struct Answered {
    body: Body,
    _busy: Busy,
}

impl Answered {
    /// `response`, its request counted by `busy` until its body is done.
    pub(crate) fn response(response: Response<Body>, busy: Busy) -> Response<Answered> {
        response.map(|body| Answered { body, _busy: busy })
    }
}

impl hyper::body::Body for Answered {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// The stream hyper serves: ends (reads 0 bytes) when asked to hibernate and nothing is there
/// to read; replays the bytes the previous hyper connection had read and not used.
pub(crate) struct Hibernating<T> {
    inner: T,
    requests: Arc<Requests>,
    replay: Bytes,
    /// This stream told hyper it ended (the client did not).
    ended: bool,
    /// hyper's last write or flush could not go out yet.
    write_blocked: bool,
}

impl<T> Hibernating<T> {
    fn ready_to_end(&self) -> bool {
        self.requests.hibernate.load(Ordering::Relaxed) && self.requests.may_hibernate() && !self.write_blocked
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Hibernating<T> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if !this.replay.is_empty() {
            let n = this.replay.len().min(buf.remaining());
            buf.put_slice(&this.replay.split_to(n));
            return Poll::Ready(Ok(()));
        }
        if this.ended {
            return Poll::Ready(Ok(()));
        }
        let before = buf.filled().len();
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            // Nothing to read: TLS holds no plaintext and the socket no byte.
            Poll::Pending if this.ready_to_end() => {
                this.ended = true;
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Ok(())) if buf.filled().len() > before => {
                this.requests.hibernate.store(false, Ordering::Relaxed);
                Poll::Ready(Ok(()))
            }
            polled => polled,
        }
    }
}

impl<T: AsyncWrite + Unpin> Hibernating<T> {
    fn note<R>(&mut self, polled: Poll<R>) -> Poll<R> {
        self.write_blocked = polled.is_pending();
        polled
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Hibernating<T> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.note(polled)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.note(polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let polled = Pin::new(&mut self.inner).poll_flush(cx);
        self.note(polled)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // The end hyper saw was ours: the connection goes on.
        if self.ended {
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Counts the hyper connections alive while it lives.
struct Live<'a>(&'a AtomicUsize);

impl<'a> Live<'a> {
    fn new(count: &'a AtomicUsize) -> Live<'a> {
        count.fetch_add(1, Ordering::Relaxed);
        Live(count)
    }
}

impl Drop for Live<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Serves HTTP/1.1 (with upgrades) on `tls` until the client leaves, hibernating while idle.
/// `live` counts the hyper connections held. The TLS stream is boxed: the future moves it in
/// and out of hyper's connection, and keeps room for it at each move.
pub(crate) async fn serve<S, F, Fut>(
    tls: Box<Tls<Watched<S>>>,
    requests: Arc<Requests>,
    activity: &Activity,
    live: &AtomicUsize,
    service: F,
) where
    S: Readable,
    F: Fn(Request<Incoming>) -> Fut + Clone + Send + Unpin + 'static,
    Fut: Future<Output = Result<Response<Answered>, std::convert::Infallible>> + Send + 'static,
{
    let mut io = Hibernating {
        inner: tls,
        requests: requests.clone(),
        replay: Bytes::new(),
        ended: false,
        write_blocked: false,
    };
    loop {
        let held = Live::new(live);
        let service = hyper::service::service_fn(service.clone());
        let mut conn = Box::new(
            hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(io), service).with_upgrades(),
        );
        // When to look whether the connection is quiet enough to hibernate: once nothing has
        // moved for `HIBERNATE_AFTER`, then every `HIBERNATE_AFTER` while a request is in
        // flight (a long poll) or hyper has not yet taken its end.
        let mut look_at = activity.last_move() + HIBERNATE_AFTER;
        loop {
            tokio::select! {
                // Done, or failed: either way the stream comes back below.
                _ = &mut *conn => break,
                () = tokio::time::sleep_until(look_at) => {
                    let now = tokio::time::Instant::now();
                    let quiet_until = activity.last_move() + HIBERNATE_AFTER;
                    if quiet_until > now {
                        look_at = quiet_until;
                    } else {
                        if requests.may_hibernate() {
                            requests.hibernate.store(true, Ordering::Relaxed);
                        }
                        look_at = now + HIBERNATE_AFTER;
                    }
                }
            }
        }
        // `None`: hyper handed the stream to the upgrade, which serves it from now on.
        let Some(hyper::server::conn::http1::Parts { io: back, read_buf, .. }) = conn.into_parts() else { return };
        drop(held);
        io = back.into_inner();
        requests.hibernate.store(false, Ordering::Relaxed);
        if !io.ended {
            // hyper ended the connection itself (the client left, `Connection: close`, an
            // error): over.
            return;
        }
        io.ended = false;
        if !read_buf.is_empty() {
            // A request had begun: straight back to hyper with its bytes.
            io.replay = read_buf;
            continue;
        }
        // The unused rest of hyper's read buffer goes with it.
        drop(read_buf);
        // Hibernating: what TLS still holds goes out, then no HTTP state until the client
        // sends (the idle and linger timeouts around this still hold).
        if io.inner.flush().await.is_err() {
            return;
        }
        if std::future::poll_fn(|cx| io.inner.get_ref().get_ref().poll_readable(cx)).await.is_err() {
            return;
        }
    }
}
