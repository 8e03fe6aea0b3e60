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

/// Why the client's side of the conversation ended: the stream broke where the next
/// message cannot be found.
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
    #[error("the client's stream ended in the middle of a message")]
    Truncated,
}

/// What one framed message turned out to be.
#[derive(Debug)]
pub(crate) enum Framed {
    /// A JSON-RPC message.
    Message(Message),
    /// A message over [`MAX_MESSAGE`], skipped unread: its length.
    TooLarge(usize),
    /// A body that is not a JSON-RPC message (not JSON, a batch, an `id` that is neither an
    /// integer nor a string): why.
    Invalid(String),
}

/// The method of the notification the reader sends the loop when it skipped a message, with
/// `{"message": why}`: the loop tells the client (`window/showMessage`).
pub(crate) const SKIPPED: &str = "$/svc/skipped";

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
    while let Some(read) = read(&mut input)? {
        let message = match read {
            Framed::Message(message) => message,
            // One bad message is skipped, not fatal: the framing still says where the next one
            // starts, and the documents open stay open.
            Framed::TooLarge(length) => skipped(format!(
                "svc lsp skipped a message of {length} bytes (the limit is {MAX_MESSAGE}); a document over 1 MiB \
                 is not checked"
            )),
            Framed::Invalid(why) => skipped(format!("svc lsp skipped a message that is not JSON-RPC: {why}")),
        };
        // `exit` ends the loop; the reader stops with it rather than wait for more input.
        let exit = matches!(&message, Message::Notification(n) if n.method == "exit");
        if to_loop.send(message).is_err() || exit {
            break;
        }
    }
    Ok(())
}

fn skipped(message: String) -> Message {
    Message::Notification(lsp_server::Notification::new(SKIPPED.into(), serde_json::json!({"message": message})))
}

fn write_all(mut output: impl Write, from_loop: &Receiver<Message>) -> Result<(), TransportError> {
    for message in from_loop {
        message.write(&mut output).map_err(TransportError::Write)?;
    }
    Ok(())
}

/// The next message, or `None` at a clean end of the stream (between messages). Blank lines
/// between messages are passed over, and `Content-Length:5` (no space) is read as clients
/// mean it.
pub(crate) fn read(input: &mut impl BufRead) -> Result<Option<Framed>, TransportError> {
    let mut length = None;
    let mut lines = 0;
    loop {
        let mut line = Vec::new();
        let n = input.by_ref().take(MAX_HEADER_LINE as u64 + 1).read_until(b'\n', &mut line);
        let n = n.map_err(TransportError::Read)?;
        if n == 0 {
            return if lines == 0 { Ok(None) } else { Err(TransportError::Truncated) };
        }
        if n > MAX_HEADER_LINE {
            return Err(TransportError::HeaderTooLong);
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end_matches(['\r', '\n']);
        if text.is_empty() {
            if lines == 0 {
                continue;
            }
            break;
        }
        lines += 1;
        if lines > MAX_HEADERS {
            return Err(TransportError::HeaderTooLong);
        }
        let Some((name, value)) = text.split_once(':') else {
            return Err(TransportError::BadHeader(text.to_owned()));
        };
        if name.trim().eq_ignore_ascii_case("Content-Length") {
            let value = value.trim().parse::<usize>().map_err(|_| TransportError::BadHeader(text.to_owned()))?;
            length = Some(value);
        }
    }
    let length = length.ok_or(TransportError::NoLength)?;
    let eof = |e: io::Error| match e.kind() {
        io::ErrorKind::UnexpectedEof => TransportError::Truncated,
        _ => TransportError::Read(e),
    };
    if length > MAX_MESSAGE {
        // Passed over in small reads: nothing of it is kept.
        let passed = io::copy(&mut input.by_ref().take(length as u64), &mut io::sink()).map_err(eof)?;
        if passed < length as u64 {
            return Err(TransportError::Truncated);
        }
        return Ok(Some(Framed::TooLarge(length)));
    }
    let mut body = vec![0; length];
    input.read_exact(&mut body).map_err(eof)?;
    Ok(Some(match serde_json::from_slice::<Message>(&body) {
        // `lsp_server` reads a request whose `id` is neither an integer nor a string as a
        // notification (its message is untagged): it would go unanswered.
        Ok(Message::Notification(_)) if has_id(&body) => {
            Framed::Invalid("a request's id is neither an integer nor a string".to_owned())
        }
        Ok(message) => Framed::Message(message),
        Err(e) => Framed::Invalid(e.to_string()),
    }))
}

/// Whether a JSON-RPC body has an `id` member (of any value).
fn has_id(body: &[u8]) -> bool {
    #[derive(serde::Deserialize)]
    struct Envelope {
        id: Option<serde::de::IgnoredAny>,
    }
    serde_json::from_slice::<Envelope>(body).is_ok_and(|e| e.id.is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn framed(body: &str) -> Vec<u8> {
        format!("Content-Length: {}\r\n\r\n{body}", body.len()).into_bytes()
    }

    fn message(read: Result<Option<Framed>, TransportError>) -> Message {
        match read {
            Ok(Some(Framed::Message(message))) => message,
            other => panic!("a message, not {other:?}"),
        }
    }

    #[test]
    fn messages_are_read_one_after_another_then_a_clean_end() {
        let mut bytes = framed(r#"{"jsonrpc":"2.0","method":"initialized","params":{}}"#);
        bytes.extend(b"\r\n");
        bytes.extend(framed(r#"{"jsonrpc":"2.0","id":1,"method":"shutdown"}"#).iter().filter(|&&b| b != b' '));
        let mut input = &bytes[..];
        assert!(matches!(message(read(&mut input)), Message::Notification(n) if n.method == "initialized"));
        assert!(
            matches!(message(read(&mut input)), Message::Request(r) if r.method == "shutdown"),
            "after a blank line, and with no space after the header's colon"
        );
        assert!(matches!(read(&mut input), Ok(None)));
    }

    #[test]
    fn a_message_too_large_or_not_json_rpc_is_skipped_and_the_next_one_read() {
        let mut bytes = format!("Content-Length: {}\r\n\r\n", MAX_MESSAGE + 1).into_bytes();
        bytes.extend(std::iter::repeat_n(b' ', MAX_MESSAGE + 1));
        bytes.extend(framed("{not json"));
        bytes.extend(framed(r#"[{"jsonrpc":"2.0","method":"initialized"}]"#));
        bytes.extend(framed(r#"{"jsonrpc":"2.0","id":1.5,"method":"shutdown"}"#));
        bytes.extend(framed(r#"{"jsonrpc":"2.0","method":"exit"}"#));
        let mut input = &bytes[..];
        assert!(matches!(read(&mut input), Ok(Some(Framed::TooLarge(n))) if n == MAX_MESSAGE + 1));
        for _ in 0..3 {
            assert!(matches!(read(&mut input), Ok(Some(Framed::Invalid(_)))));
        }
        assert!(matches!(message(read(&mut input)), Message::Notification(n) if n.method == "exit"));
    }

    #[test]
    fn a_broken_stream_is_the_end_without_allocating_what_it_announces() {
        let mut input = &b"Content-Length: 18446744073709551615\r\n\r\n{}"[..];
        assert!(matches!(read(&mut input), Err(TransportError::Truncated)), "passed over, then the end");
        let endless = vec![b'x'; 10 * MAX_HEADER_LINE];
        assert!(matches!(read(&mut &endless[..]), Err(TransportError::HeaderTooLong)));
        assert!(matches!(read(&mut &b"Content-Type: x\r\n\r\n"[..]), Err(TransportError::NoLength)));
        assert!(matches!(read(&mut &b"Content-Length: 10\r\n\r\n{}"[..]), Err(TransportError::Truncated)));
        assert!(matches!(read(&mut &b"garbage\r\n"[..]), Err(TransportError::BadHeader(_))));
        assert!(matches!(read(&mut &b"Content-Length: abc\r\n\r\n"[..]), Err(TransportError::BadHeader(_))));
    }
}
