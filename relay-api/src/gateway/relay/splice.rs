//! Bursts moved by `splice(2)`: socket to pipe, pipe to socket, with no copy through the
//! process.
//!
//! The pipe lives for one burst: it is created when the direction becomes readable and closed
//! when the source would block again (creating one is a single cheap system call), so an idle
//! direction holds no descriptors and no pipe pages. The pipe is drained completely before the
//! next splice from the socket, so a splice that would block means the *socket* is empty, never
//! that the pipe is full: that is what lets the socket's readiness be trusted.

use std::io;
use std::os::fd::OwnedFd;

use rustix::io::Errno;
use rustix::pipe::{PipeFlags, SpliceFlags};
use tokio::io::Interest;
use tokio::net::TcpStream;

use super::{Burst, copy};

/// The pipe size asked for: bytes moved per pair of splices. Linux allows unprivileged
/// processes up to `/proc/sys/fs/pipe-max-size` (1 MiB by default); a refusal keeps the
/// default 64 KiB, which is slower but correct.
const PIPE_SIZE: usize = 1024 * 1024;

/// `SPLICE_F_MOVE` is a hint; `SPLICE_F_NONBLOCK` keeps the pipe side from blocking (the
/// sockets are non-blocking already).
const FLAGS: SpliceFlags = SpliceFlags::MOVE.union(SpliceFlags::NONBLOCK);

/// Splices `from` (which was just readable) to `to` until `from` would block or ends.
pub(super) async fn burst(from: &TcpStream, to: &TcpStream, total: &mut u64) -> io::Result<Burst> {
    let Ok(pipe) = Pipe::new() else {
        // Out of descriptors, most likely: copying needs none.
        return copy::burst(from, to, total).await;
    };
    loop {
        let filled = from
            .try_io(Interest::READABLE, || Ok(rustix::pipe::splice(from, None, &pipe.write, None, PIPE_SIZE, FLAGS)?));
        let mut pending = match filled {
            Ok(0) => return Ok(Burst::Ended),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(Burst::Idle),
            // The pipe is empty here, so falling back to copying loses nothing.
            Err(e) if unsupported(&e) => return Ok(Burst::Unsupported),
            Err(e) => return Err(e),
        };
        while pending > 0 {
            let drained =
                to.try_io(Interest::WRITABLE, || Ok(rustix::pipe::splice(&pipe.read, None, to, None, pending, FLAGS)?));
            match drained {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    pending -= n;
                    *total += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => to.writable().await?,
                Err(e) => return Err(e),
            }
        }
        // A long burst must not starve the runtime's other tasks.
        tokio::task::consume_budget().await;
    }
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
    fn new() -> io::Result<Pipe> {
        let (read, write) = rustix::pipe::pipe_with(PipeFlags::CLOEXEC | PipeFlags::NONBLOCK)?;
        // Refused past the system's or the user's pipe limits: the default size still works.
        let _ = rustix::pipe::fcntl_setpipe_size(&write, PIPE_SIZE);
        Ok(Pipe { read, write })
    }
}
