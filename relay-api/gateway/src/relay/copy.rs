//! Bursts copied through a user-space buffer: the relay off Linux, and its fallback on Linux.

use std::io;

use bytes::BytesMut;
use tokio::net::TcpStream;

use super::{Burst, Meter};

/// The read size while a direction is busy.
const CHUNK: usize = 256 * 1024;

/// Copies `from` to `to` until `from` ends or either fails.
pub(super) async fn one_way(from: &TcpStream, to: &TcpStream, meter: &mut Meter<'_>) -> io::Result<()> {
    loop {
        from.readable().await?;
        if let Burst::Ended = burst(from, to, meter).await? {
            return Ok(());
        }
    }
}

/// Copies `from` (which was just readable) to `to` until `from` would block or ends; the
/// buffer lives only as long as the burst.
pub(super) async fn burst(from: &TcpStream, to: &TcpStream, meter: &mut Meter<'_>) -> io::Result<Burst> {
    copy(from, to, meter, usize::MAX).await
}

/// Like [`burst`], but stops with [`Burst::Plenty`] after a read of at least `plenty` bytes:
/// that much waiting at once means bulk, worth splicing.
#[cfg(target_os = "linux")]
pub(super) async fn probe(from: &TcpStream, to: &TcpStream, meter: &mut Meter<'_>, plenty: usize) -> io::Result<Burst> {
    copy(from, to, meter, plenty).await
}

async fn copy(from: &TcpStream, to: &TcpStream, meter: &mut Meter<'_>, plenty: usize) -> io::Result<Burst> {
    let mut buf = BytesMut::with_capacity(CHUNK);
    loop {
        buf.clear();
        match from.try_read_buf(&mut buf) {
            Ok(0) => return Ok(Burst::Ended),
            Ok(n) => {
                write_all(to, &buf, meter).await?;
                if n >= plenty {
                    return Ok(Burst::Plenty);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(Burst::Idle),
            Err(e) => return Err(e),
        }
        // A long burst must not starve the runtime's other tasks.
        tokio::task::consume_budget().await;
    }
}

/// Writes all of `buf` to `to`, waiting whenever its send buffer is full; counts what the
/// socket took into `meter`, even if a later write fails.
async fn write_all(to: &TcpStream, mut buf: &[u8], meter: &mut Meter<'_>) -> io::Result<()> {
    while !buf.is_empty() {
        match to.try_write(buf) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                buf = &buf[n..];
                meter.moved(n);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => to.writable().await?,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
