//! Moving bytes both ways between a public connection and its tunnel data connection.
//!
//! A buffer is held only while a direction has data: each direction waits for readability
//! with no buffer, then reads into a 64 KiB buffer until the socket would block, and lets it
//! go. Idle connections (most of them) cost no buffer at all, and busy ones move 64 KiB per
//! system call instead of `copy_bidirectional`'s fixed 8 KiB pair, allocated up front.

use std::io;

use bytes::BytesMut;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};

/// The read size while a direction is busy.
const CHUNK: usize = 256 * 1024;

/// Relays until both directions have ended; returns the bytes moved each way
/// (a to b, b to a).
pub(super) async fn both_ways(a: TcpStream, b: TcpStream) -> (u64, u64) {
    let (a_read, a_write) = a.into_split();
    let (b_read, b_write) = b.into_split();
    let (ab, ba) = tokio::join!(one_way(a_read, b_write), one_way(b_read, a_write));
    (ab.unwrap_or(0), ba.unwrap_or(0))
}

/// Copies `from` to `to` until `from` ends, then shuts `to`'s write side.
async fn one_way(from: OwnedReadHalf, mut to: OwnedWriteHalf) -> io::Result<u64> {
    let mut total = 0u64;
    loop {
        from.readable().await?;
        let mut buf = BytesMut::with_capacity(CHUNK);
        loop {
            buf.clear();
            match from.try_read_buf(&mut buf) {
                Ok(0) => {
                    let _ = to.shutdown().await;
                    return Ok(total);
                }
                Ok(n) => {
                    to.write_all(&buf).await?;
                    total += n as u64;
                }
                // Idle again: drop the buffer and wait.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => {
                    let _ = to.shutdown().await;
                    return Err(e);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    async fn pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (client, server) = tokio::join!(TcpStream::connect(addr), listener.accept());
        (client.expect("connect"), server.expect("accept").0)
    }

    #[tokio::test]
    async fn bytes_cross_both_ways_and_ends_propagate() {
        let (mut left, gw_left) = pair().await;
        let (gw_right, mut right) = pair().await;
        let relay = tokio::spawn(super::both_ways(gw_left, gw_right));
        let big: Vec<u8> = (0..1_000_000u32).map(|i| (i % 251) as u8).collect();
        let sent = big.clone();
        let writer = tokio::spawn(async move {
            left.write_all(&sent).await.expect("write");
            left.shutdown().await.expect("shutdown");
            let mut back = Vec::new();
            left.read_to_end(&mut back).await.expect("read back");
            back
        });
        let mut got = Vec::new();
        right.read_to_end(&mut got).await.expect("read");
        assert_eq!(got, big);
        right.write_all(b"reply").await.expect("reply");
        right.shutdown().await.expect("shutdown");
        assert_eq!(writer.await.expect("writer"), b"reply");
        assert_eq!(relay.await.expect("relay"), (1_000_000, 5));
    }
}
