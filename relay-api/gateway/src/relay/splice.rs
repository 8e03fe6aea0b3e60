//! Bursts moved by `splice(2)`: socket to pipe, pipe to socket, with no copy through the
//! process.
//!
//! A pipe is worth it only for bulk: creating and closing one costs about 5 µs here, and a
//! pair of splices costs more than a read and a write of a few KiB. So a direction without a
//! pipe copies, as the copy relay does, until one read returns at least [`PLENTY`]; then it
//! creates its pipe, splices, and keeps the pipe across short pauses. Once the direction has
//! been idle for [`KEEP`], the pipe is closed, so idle connections hold no descriptors and no
//! pipe. The pipe is drained completely before the next splice from the socket, so a splice
//! that would block means the *socket* is empty, never that the pipe is full: that is what
//! lets the socket's readiness be trusted.

use std::io;
use std::os::fd::OwnedFd;
use std::time::Duration;

use rustix::io::Errno;
use rustix::pipe::{PipeFlags, SpliceFlags};
use tokio::io::Interest;
use tokio::net::TcpStream;

use super::{Burst, Meter, copy};

/// The pipe size asked for: bytes moved per pair of splices. Linux allows unprivileged
/// processes up to `/proc/sys/fs/pipe-max-size` (1 MiB by default).
const PIPE_SIZE: usize = 1024 * 1024;

/// A smaller pipe is not worth it. Linux's default is 64 KiB; an unprivileged user past
/// `/proc/sys/fs/pipe-user-pages-soft` (64 MiB of pipes by default) gets 8 KiB pipes, and
/// copying 256 KiB at a time beats splicing 8 KiB.
const PIPE_MIN: usize = 64 * 1024;

/// A read this large means bulk, worth a pipe: a full TLS record (16 KiB of plaintext) is
/// already that much, while requests and small responses stay below it.
const PLENTY: usize = 16 * 1024;

/// How long an idle direction keeps its pipe.
const KEEP: Duration = Duration::from_millis(250);

/// `SPLICE_F_MOVE` is a hint; `SPLICE_F_NONBLOCK` keeps the pipe side from blocking (the
/// sockets are non-blocking already).
const FLAGS: SpliceFlags = SpliceFlags::MOVE.union(SpliceFlags::NONBLOCK);

/// Moves `from` to `to` until `from` ends or either fails: splices bulk, copies small bursts,
/// copies while no usable pipe can be had, and for good if the kernel refuses to splice these
/// sockets.
pub(super) async fn one_way(from: &TcpStream, to: &TcpStream, meter: &mut Meter<'_>) -> io::Result<()> {
    let mut pipe = None;
    loop {
        readable(from, &mut pipe).await?;
        if pipe.is_none() {
            match copy::probe(from, to, meter, PLENTY).await? {
                Burst::Plenty => pipe = Pipe::new(),
                Burst::Ended => return Ok(()),
                // Idle again (a copy never reports `Unsupported`).
                _ => continue,
            }
        }
        let burst = match &pipe {
            Some(pipe) => pipe.burst(from, to, meter).await?,
            None => copy::burst(from, to, meter).await?,
        };
        match burst {
            Burst::Ended => return Ok(()),
            Burst::Unsupported => {
                drop(pipe);
                return copy::one_way(from, to, meter).await;
            }
            Burst::Idle | Burst::Plenty => {}
        }
    }
}

/// Waits until `from` is readable; closes the pipe if that takes longer than [`KEEP`].
async fn readable(from: &TcpStream, pipe: &mut Option<Pipe>) -> io::Result<()> {
    if pipe.is_some() {
        match tokio::time::timeout(KEEP, from.readable()).await {
            Ok(ready) => return ready,
            Err(_idle) => *pipe = None,
        }
    }
    from.readable().await
}

/// Whether the kernel refused to splice these descriptors at all.
fn unsupported(e: &io::Error) -> bool {
    matches!(Errno::from_io_error(e), Some(Errno::INVAL | Errno::NOSYS | Errno::OPNOTSUPP))
}

/// A non-blocking pipe, closed (both ends) when dropped.
struct Pipe {
    read: OwnedFd,
    write: OwnedFd,
}

impl Pipe {
    /// A pipe of at least [`PIPE_MIN`], or `None` if none can be had (descriptor limit, pipe
    /// memory limit).
    fn new() -> Option<Pipe> {
        let (read, write) = rustix::pipe::pipe_with(PipeFlags::CLOEXEC | PipeFlags::NONBLOCK).ok()?;
        // Refused past the system's or the user's pipe limits: the pipe keeps its size.
        let size = rustix::pipe::fcntl_setpipe_size(&write, PIPE_SIZE)
            .or_else(|_| rustix::pipe::fcntl_getpipe_size(&write))
            .ok()?;
        (size >= PIPE_MIN).then_some(Pipe { read, write })
    }

    /// Splices `from` (which was just readable) to `to` until `from` would block or ends.
    async fn burst(&self, from: &TcpStream, to: &TcpStream, meter: &mut Meter<'_>) -> io::Result<Burst> {
        loop {
            let filled = from.try_io(Interest::READABLE, || {
                Ok(rustix::pipe::splice(from, None, &self.write, None, PIPE_SIZE, FLAGS)?)
            });
            let mut pending = match filled {
                Ok(0) => return Ok(Burst::Ended),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(Burst::Idle),
                // The pipe is empty here, so copying instead loses nothing.
                Err(e) if unsupported(&e) => return Ok(Burst::Unsupported),
                Err(e) => return Err(e),
            };
            while pending > 0 {
                let drained = to.try_io(Interest::WRITABLE, || {
                    Ok(rustix::pipe::splice(&self.read, None, to, None, pending, FLAGS)?)
                });
                match drained {
                    Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                    Ok(n) => {
                        pending -= n;
                        meter.moved(n);
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => to.writable().await?,
                    Err(e) => return Err(e),
                }
            }
            // A long burst must not starve the runtime's other tasks.
            tokio::task::consume_budget().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use tokio::io::AsyncWriteExt;
    use tokio::net::{TcpListener, TcpStream};

    use super::{KEEP, Pipe, readable};

    async fn pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (client, server) = tokio::join!(TcpStream::connect(addr), listener.accept());
        (client.expect("connect"), server.expect("accept").0)
    }

    /// Waits, holding a pipe, for a byte sent after `delay`; returns the pipe if still held,
    /// and how long the wait took.
    async fn wait_with_pipe(delay: Duration) -> (Option<Pipe>, Duration) {
        let (mut client, server) = pair().await;
        // A new socket may report itself readable once with nothing to read; this clears it.
        assert!(server.try_read(&mut [0; 1]).is_err(), "nothing sent yet");
        let mut pipe = Pipe::new();
        assert!(pipe.is_some(), "a pipe of at least 64 KiB");
        let sender = tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            client.write_all(b"x").await.expect("write");
            client
        });
        let start = Instant::now();
        readable(&server, &mut pipe).await.expect("readable");
        let waited = start.elapsed();
        let _client = sender.await.expect("sender");
        (pipe, waited)
    }

    #[tokio::test]
    async fn a_short_pause_keeps_the_pipe() {
        let (pipe, _) = wait_with_pipe(Duration::from_millis(20)).await;
        assert!(pipe.is_some(), "kept across a pause shorter than {KEEP:?}");
    }

    #[tokio::test]
    async fn an_idle_direction_lets_its_pipe_go() {
        let (pipe, waited) = wait_with_pipe(KEEP * 2).await;
        assert!(waited >= KEEP, "waited for the data ({waited:?})");
        assert!(pipe.is_none(), "closed after {KEEP:?} idle");
    }
}
