//! Request bodies with a deadline, and response bodies that end their request.
//!
//! A request body must arrive whole within the body timeout of its head: reading past the
//! deadline fails, and the server answers 408 in place of whatever the handler made of that
//! failure. A response body holds the request's guard, so the connection counts as handling
//! a request until hyper has written the response and dropped it.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, ready};

use axum::BoxError;
use axum::body::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use tokio::time::{Instant, Sleep};

use crate::conn::{Conn, RequestGuard};

/// The body did not arrive within the body timeout.
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive within the body timeout")]
pub(crate) struct BodyTimeout;

/// A request body that fails once its deadline passes.
pub(crate) struct TimedBody<B> {
    inner: B,
    deadline: Instant,
    sleep: Option<Pin<Box<Sleep>>>,
    timed_out: Arc<AtomicBool>,
    conn: Arc<Conn>,
    done: bool,
}

impl<B> TimedBody<B> {
    /// `timed_out` is set if the deadline passes while the body is read.
    pub(crate) fn new(inner: B, deadline: Instant, timed_out: Arc<AtomicBool>, conn: Arc<Conn>) -> TimedBody<B> {
        TimedBody { inner, deadline, sleep: None, timed_out, conn, done: false }
    }

    fn finish(&mut self) {
        self.done = true;
        self.sleep = None;
        self.conn.body_done();
    }
}

impl<B> Body for TimedBody<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        if this.done {
            return Poll::Ready(None);
        }
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(None) => {
                this.finish();
                Poll::Ready(None)
            }
            Poll::Ready(Some(Ok(frame))) => {
                if this.inner.is_end_stream() {
                    this.finish();
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => {
                this.done = true;
                Poll::Ready(Some(Err(e.into())))
            }
            Poll::Pending => {
                let deadline = this.deadline;
                let sleep = this.sleep.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
                ready!(sleep.as_mut().poll(cx));
                this.timed_out.store(true, Ordering::Release);
                this.done = true;
                this.sleep = None;
                Poll::Ready(Some(Err(BodyTimeout.into())))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// A response body that ends its request when dropped.
pub(crate) struct TrackedBody {
    inner: axum::body::Body,
    _request: RequestGuard,
}

impl TrackedBody {
    pub(crate) fn new(inner: axum::body::Body, request: RequestGuard) -> TrackedBody {
        TrackedBody { inner, _request: request }
    }
}

impl Body for TrackedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
