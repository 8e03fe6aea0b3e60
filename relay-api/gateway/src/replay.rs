//! A stream that first gives back bytes already read from it: the tunnel port reads a
//! connection's first four bytes to tell a data connection from a control connection, and a
//! control connection's TLS acceptor must still see them.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// `inner`, with `head` read back before it.
#[derive(Debug)]
pub(super) struct Replay<S> {
    head: Vec<u8>,
    /// How much of `head` has been read back.
    pos: usize,
    inner: S,
}

impl<S> Replay<S> {
    pub(super) fn new(head: &[u8], inner: S) -> Replay<S> {
        Replay { head: head.to_vec(), pos: 0, inner }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Replay<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        if self.pos < self.head.len() {
            let n = buf.remaining().min(self.head.len() - self.pos);
            let start = self.pos;
            buf.put_slice(&self.head[start..start + n]);
            self.pos += n;
            if self.pos == self.head.len() {
                self.head = Vec::new();
                self.pos = 0;
            }
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Replay<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::Replay;

    #[tokio::test]
    async fn the_head_comes_first_then_the_stream() {
        let (a, mut b) = tokio::io::duplex(64);
        b.write_all(b" world").await.expect("write");
        drop(b);
        let mut replay = Replay::new(b"hello", a);
        // A small buffer takes the head in pieces.
        let mut first = [0u8; 3];
        replay.read_exact(&mut first).await.expect("read");
        assert_eq!(&first, b"hel");
        let mut rest = Vec::new();
        replay.read_to_end(&mut rest).await.expect("read");
        assert_eq!(rest, b"lo world");
    }
}
