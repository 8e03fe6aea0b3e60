//! The protocol's framing on standard input and output (`Content-Length: N`, a blank line,
//! then N bytes of JSON), read on one thread and written on another, as `lsp_server`'s own
//! stdio transport does, but bounded: its reader allocates whatever length a peer announces,
//! and a header line without an end would grow without limit.

use std::io::{self, BufRead, Read, Write};
use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender, bounded};
use lsp_server::{Connection, Message};

/// The largest message accepted: a full 1 MiB document sent as a JSON string whose every
/// character needs a six-byte escape, with room to spare.
pub(crate) const MAX_MESSAGE: usize = 8 * 1024 * 1024;
/// The longest header line (`Content-Length: ...`, `Content-Type: ...`).
const MAX_HEADER_LINE: usize = 1024;
/// The most header lines in one message.
const MAX_HEADERS: usize = 16;

/// Why the client's side of the conversation ended badly.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TransportError {
    #[error("reading from the client: {0}")]
    Read(#[source] io::Error),
    #[error("writing to the client: {0}")]
    Write(#[source] io::Error),
    #[error("the client sent a message header over {MAX_HEADER_LINE} bytes or {MAX_HEADERS} lines")]
    HeaderTooLong,
    #[error("the client sent a header without a Content-Length")]
    NoLength,
    #[error("the client sent a bad header line: {0:?}")]
    BadHeader(String),
    #[error("the client announced a message of {0} bytes; the limit is {MAX_MESSAGE}")]
    TooLarge(usize),
    #[error("the client sent a message that is not JSON-RPC: {0}")]
    NotJsonRpc(#[source] serde_json::Error),
    #[error("the client's stream ended in the middle of a message")]
    Truncated,
}

/// The threads that move messages; joined after the loop ends, to learn how the stream ended.
pub(crate) struct Threads {
    reader: JoinHandle<Result<(), TransportError>>,
    writer: JoinHandle<Result<(), TransportError>>,
}

impl Threads {
    /// Waits for the writer to send what is queued, and for the reader when `reader_stopped`
    /// (a reader still waiting on the client is left to the process's end): the reader's
    /// error first, as it is usually the cause.
    pub(crate) fn join(self, reader_stopped: bool) -> Result<(), TransportError> {
        let write = self.writer.join().unwrap_or(Ok(()));
        if !reader_stopped {
            return write;
        }
        let read = self.reader.join().unwrap_or(Ok(()));
        read.and(write)
    }
}

/// A connection over `input` and `output`, each on its own thread.
pub(crate) fn connect<R, W>(input: R, output: W) -> io::Result<(Connection, Threads)>
where
    R: BufRead + Send + 'static,
    W: Write + Send + 'static,
{
    let (to_loop, receiver) = bounded::<Message>(0);
    let (sender, from_loop) = bounded::<Message>(0);
    let reader = std::thread::Builder::new().name("lsp-read".into()).spawn(move || read_all(input, &to_loop))?;
    let writer = std::thread::Builder::new().name("lsp-write".into()).spawn(move || write_all(output, &from_loop))?;
    Ok((Connection { sender, receiver }, Threads { reader, writer }))
}

fn read_all(mut input: impl BufRead, to_loop: &Sender<Message>) -> Result<(), TransportError> {
    while let Some(message) = read(&mut input)? {
        // `exit` ends the loop; the reader stops with it rather than wait for more input.
        let exit = matches!(&message, Message::Notification(n) if n.method == "exit");
        if to_loop.send(message).is_err() || exit {
            break;
        }
    }
    Ok(())
}

fn write_all(mut output: impl Write, from_loop: &Receiver<Message>) -> Result<(), TransportError> {
    for message in from_loop {
        message.write(&mut output).map_err(TransportError::Write)?;
    }
    Ok(())
}

/// One message, or `None` at a clean end of the stream (between messages).
pub(crate) fn read(input: &mut impl BufRead) -> Result<Option<Message>, TransportError> {
    let mut length = None;
    let mut lines = 0;
    loop {
        let mut line = Vec::new();
        let n = input.by_ref().take(MAX_HEADER_LINE as u64 + 1).read_until(b'\n', &mut line);
        let n = n.map_err(TransportError::Read)?;
        if n == 0 {
            return if lines == 0 { Ok(None) } else { Err(TransportError::Truncated) };
        }
        lines += 1;
        if n > MAX_HEADER_LINE || lines > MAX_HEADERS {
            return Err(TransportError::HeaderTooLong);
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end_matches(['\r', '\n']);
        if text.is_empty() {
            break;
        }
        let Some((name, value)) = text.split_once(": ") else {
            return Err(TransportError::BadHeader(text.to_owned()));
        };
        if name.eq_ignore_ascii_case("Content-Length") {
            let value = value.trim().parse::<usize>().map_err(|_| TransportError::BadHeader(text.to_owned()))?;
            length = Some(value);
        }
    }
    let length = length.ok_or(TransportError::NoLength)?;
    if length > MAX_MESSAGE {
        return Err(TransportError::TooLarge(length));
    }
    let mut body = vec![0; length];
    input.read_exact(&mut body).map_err(|e| match e.kind() {
        io::ErrorKind::UnexpectedEof => TransportError::Truncated,
        _ => TransportError::Read(e),
    })?;
    serde_json::from_slice(&body).map(Some).map_err(TransportError::NotJsonRpc)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn framed(body: &str) -> Vec<u8> {
        format!("Content-Length: {}\r\n\r\n{body}", body.len()).into_bytes()
    }

    #[test]
    fn messages_are_read_one_after_another_then_a_clean_end() {
        let mut bytes = framed(r#"{"jsonrpc":"2.0","method":"initialized","params":{}}"#);
        bytes.extend(framed(r#"{"jsonrpc":"2.0","id":1,"method":"shutdown"}"#));
        let mut input = &bytes[..];
        assert!(matches!(read(&mut input), Ok(Some(Message::Notification(n))) if n.method == "initialized"));
        assert!(matches!(read(&mut input), Ok(Some(Message::Request(r))) if r.method == "shutdown"));
        assert!(matches!(read(&mut input), Ok(None)));
    }

    #[test]
    fn a_huge_length_an_endless_header_and_garbage_are_refused_without_allocating() {
        let mut input = &b"Content-Length: 18446744073709551615\r\n\r\n"[..];
        assert!(matches!(read(&mut input), Err(TransportError::TooLarge(_))));
        let endless = vec![b'x'; 10 * MAX_HEADER_LINE];
        assert!(matches!(read(&mut &endless[..]), Err(TransportError::HeaderTooLong)));
        assert!(matches!(read(&mut &framed("{not json")[..]), Err(TransportError::NotJsonRpc(_))));
        assert!(matches!(read(&mut &b"Content-Type: x\r\n\r\n"[..]), Err(TransportError::NoLength)));
        assert!(matches!(read(&mut &b"Content-Length: 10\r\n\r\n{}"[..]), Err(TransportError::Truncated)));
        assert!(matches!(read(&mut &b"garbage\r\n"[..]), Err(TransportError::BadHeader(_))));
    }
}
