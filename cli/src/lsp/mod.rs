//! `svc lsp`: a language server for manifests (V4 and V5, JSON and YAML) and ingress project
//! files, over standard input and output.
//!
//! - live diagnostics: what `svc manifest validate` (and, for a project, `svc ingress
//!   deploy`) reports, with the same codes, layers (in `data`) and positions;
//! - hover: each field's contract from the shape tables;
//! - completion: field names, and values (closed sets, defaults, durations and sizes from
//!   their formats' examples);
//! - document symbols: the outline, nested as the document is;
//! - a quick fix for each "did you mean";
//!
//! in JSON, block YAML and flow YAML (`{a: 1, b: [x, y]}`). One module per feature.
//!
//! One synchronous loop on `lsp_server`'s channels ([`transport`] frames the messages).
//! Changes come as ranged edits ([`sync`]); a burst of changes is checked once, when the
//! queue is empty.

mod completion;
mod contract;
mod cursor;
mod document;
mod hover;
mod position;
mod quick_fix;
mod symbols;
mod sync;
mod transport;

use std::collections::{BTreeSet, HashMap};
use std::io::{self, BufReader};
use std::process::ExitCode;

use crossbeam_channel::TryRecvError;
use ls_types::{
    CodeActionKind, CodeActionOptions, CodeActionProviderCapability, CompletionOptions, DocumentSymbolResponse,
    HoverProviderCapability, InitializeResult, OneOf, PositionEncodingKind, PublishDiagnosticsParams,
    ServerCapabilities, ServerInfo, TextDocumentSyncCapability, TextDocumentSyncKind, Uri,
};
use lsp_server::{Connection, ErrorCode, Message, Notification, Request, RequestId, Response};
use serde::de::DeserializeOwned;

use document::Document;

/// Runs the server on standard input and output until the client says `exit`. Exit 0 after
/// `shutdown` then `exit`; 1 otherwise (an `exit` without `shutdown`, the client's stream
/// ending or breaking the protocol), with the reason on standard error.
pub(crate) fn run() -> Result<ExitCode, LspError> {
    let (connection, threads) =
        transport::connect(BufReader::new(io::stdin()), io::stdout()).map_err(LspError::Threads)?;
    let ended = Server::default().serve(&connection);
    drop(connection);
    // The reader has stopped (at the end of the stream, an error, or after `exit`) unless the
    // loop stopped because the writer could not write; then it may still wait on the client.
    let transport = threads.join(!matches!(ended, Ended::CannotWrite));
    match (ended, transport) {
        (Ended::Exit { after_shutdown: true }, _) => Ok(ExitCode::SUCCESS),
        (Ended::Exit { after_shutdown: false }, _) => Err(LspError::ExitWithoutShutdown),
        (Ended::ClientGone | Ended::CannotWrite, Err(e)) => Err(LspError::Protocol(e)),
        (Ended::ClientGone | Ended::CannotWrite, Ok(())) => Err(LspError::ClosedWithoutExit),
    }
}

/// How `svc lsp` ended other than after `shutdown` then `exit`: said once, by
/// [`crate::failure::report`], as `svc lsp: ...` (exit 1).
#[derive(Debug, thiserror::Error)]
pub(crate) enum LspError {
    /// Its reader and writer threads would not start.
    #[error("cannot start its threads: {0}")]
    Threads(#[source] io::Error),
    /// `exit` came before `shutdown`.
    #[error("the client said exit without shutdown first")]
    ExitWithoutShutdown,
    /// The client broke the protocol or the stream failed.
    #[error(transparent)]
    Protocol(transport::TransportError),
    /// The client's stream ended before `exit`.
    #[error("the client closed the connection without exit")]
    ClosedWithoutExit,
}

impl crate::failure::Failure for LspError {
    fn exit_code(&self) -> u8 {
        1
    }

    fn envelope(&self) -> svc_http::ErrorBody {
        let code = match self {
            LspError::Threads(_) => "io",
            _ => "protocol",
        };
        svc_http::ErrorBody::new(code, self.to_string())
    }

    fn text(&self) -> String {
        crate::failure::line("svc lsp", self)
    }
}

/// The client's side is gone: nothing more can be written.
struct CannotWrite;

/// How the loop ended.
enum Ended {
    Exit {
        after_shutdown: bool,
    },
    /// The client's stream ended, or broke the framing.
    ClientGone,
    /// The client stopped reading.
    CannotWrite,
}

#[derive(Default)]
struct Server {
    initialized: bool,
    shutting_down: bool,
    /// Open documents by URI.
    documents: HashMap<String, (Uri, Document)>,
    /// Documents changed since their diagnostics were last sent.
    dirty: BTreeSet<String>,
    /// Documents closed since: each is sent an empty list, so it shows none.
    closed: Vec<Uri>,
    /// What to tell the user with the next diagnostics (a document no longer followed).
    warnings: Vec<String>,
}

/// An open document that hover, completion, symbols and quick fixes read
/// ([`Document::readable`]).
fn readable<'a>(documents: &'a HashMap<String, (Uri, Document)>, uri: &str) -> Option<&'a Document> {
    documents.get(uri).map(|(_, d)| d).filter(|d| d.readable())
}

impl Server {
    fn serve(&mut self, connection: &Connection) -> Ended {
        loop {
            let Ok(message) = connection.receiver.recv() else { return Ended::ClientGone };
            let mut next = Some(message);
            while let Some(message) = next.take() {
                if let Some(ended) = self.handle(connection, message) {
                    return ended;
                }
                next = match connection.receiver.try_recv() {
                    Ok(message) => Some(message),
                    Err(TryRecvError::Empty) => None,
                    Err(TryRecvError::Disconnected) => return Ended::ClientGone,
                };
            }
            if self.publish(connection).is_err() {
                return Ended::CannotWrite;
            }
        }
    }

    /// Handles one message; `Some` when the loop ends.
    fn handle(&mut self, connection: &Connection, message: Message) -> Option<Ended> {
        match message {
            Message::Request(request) => {
                let response = self.request(request);
                connection.sender.send(response.into()).err().map(|_| Ended::CannotWrite)
            }
            Message::Notification(n) if n.method == "exit" => Some(Ended::Exit { after_shutdown: self.shutting_down }),
            Message::Notification(n) if n.method == transport::SKIPPED => {
                let message = n.params["message"].as_str().unwrap_or("svc lsp skipped a message").to_owned();
                eprintln!("{message}");
                // The protocol lets a server speak only once it has answered `initialize`.
                let warning = ls_types::ShowMessageParams { typ: ls_types::MessageType::WARNING, message };
                let note = Notification::new("window/showMessage".into(), warning);
                (self.initialized && connection.sender.send(note.into()).is_err()).then_some(Ended::CannotWrite)
            }
            // After `shutdown` only `exit` counts.
            Message::Notification(n) if self.initialized && !self.shutting_down => {
                self.notification(n);
                None
            }
            // Before `initialize` notifications are dropped, as the protocol says; responses
            // answer nothing this server asked.
            Message::Notification(_) | Message::Response(_) => None,
        }
    }

    fn request(&mut self, request: Request) -> Response {
        let id = request.id.clone();
        if !self.initialized {
            if request.method != "initialize" {
                let message = format!("{} before initialize", request.method);
                return Response::new_err(id, ErrorCode::ServerNotInitialized as i32, message);
            }
            self.initialized = true;
            return Response::new_ok(id, initialize_result());
        }
        if self.shutting_down {
            let message = format!("{} after shutdown", request.method);
            return Response::new_err(id, ErrorCode::InvalidRequest as i32, message);
        }
        match request.method.as_str() {
            "initialize" => Response::new_err(id, ErrorCode::InvalidRequest as i32, "initialize sent twice".into()),
            "shutdown" => {
                self.shutting_down = true;
                Response::new_ok(id, ())
            }
            "textDocument/hover" => self.answer(id, request.params, |documents, p: ls_types::HoverParams| {
                let at = p.text_document_position_params;
                readable(documents, at.text_document.uri.as_str()).and_then(|d| hover::hover(d, at.position))
            }),
            "textDocument/completion" => self.answer(id, request.params, |documents, p: ls_types::CompletionParams| {
                let at = p.text_document_position;
                let items =
                    readable(documents, at.text_document.uri.as_str()).map(|d| completion::complete(d, at.position));
                items.map(|items| {
                    ls_types::CompletionResponse::List(ls_types::CompletionList { is_incomplete: false, items })
                })
            }),
            "textDocument/codeAction" => self.answer(id, request.params, |documents, p: ls_types::CodeActionParams| {
                let uri = p.text_document.uri;
                readable(documents, uri.as_str()).map(|d| quick_fix::quick_fixes(&uri, d, p.range))
            }),
            "textDocument/documentSymbol" => {
                self.answer(id, request.params, |documents, p: ls_types::DocumentSymbolParams| {
                    let document = readable(documents, p.text_document.uri.as_str());
                    document.map(|d| DocumentSymbolResponse::Nested(symbols::outline(d)))
                })
            }
            method => Response::new_err(id, ErrorCode::MethodNotFound as i32, format!("{method} is not supported")),
        }
    }

    /// Answers a request whose parameters are `P` with what `f` finds.
    fn answer<P: DeserializeOwned, R: serde::Serialize>(
        &self,
        id: RequestId,
        params: serde_json::Value,
        f: impl FnOnce(&HashMap<String, (Uri, Document)>, P) -> R,
    ) -> Response {
        match serde_json::from_value::<P>(params) {
            Ok(params) => Response::new_ok(id, f(&self.documents, params)),
            Err(e) => Response::new_err(id, ErrorCode::InvalidParams as i32, format!("bad parameters: {e}")),
        }
    }

    fn notification(&mut self, n: Notification) {
        match n.method.as_str() {
            "textDocument/didOpen" => {
                if let Ok(p) = serde_json::from_value::<ls_types::DidOpenTextDocumentParams>(n.params) {
                    let d = p.text_document;
                    self.open(d.uri, d.text, d.version);
                }
            }
            "textDocument/didChange" => {
                if let Ok(p) = serde_json::from_value::<ls_types::DidChangeTextDocumentParams>(n.params) {
                    self.change(p);
                }
            }
            "textDocument/didClose" => {
                if let Ok(p) = serde_json::from_value::<ls_types::DidCloseTextDocumentParams>(n.params) {
                    let key = p.text_document.uri.as_str();
                    if let Some((uri, _)) = self.documents.remove(key) {
                        self.dirty.remove(key);
                        self.closed.push(uri);
                    }
                }
            }
            // `initialized`, `$/cancelRequest` (requests are answered at once), settings.
            _ => {}
        }
    }

    fn open(&mut self, uri: Uri, text: String, version: i32) {
        let name = uri.path().as_str().rsplit('/').next().unwrap_or("").to_owned();
        let key = uri.as_str().to_owned();
        let previous = self.documents.get(&key).and_then(|(_, d)| d.kind);
        self.documents.insert(key.clone(), (uri, Document::new(&name, text, version, previous)));
        self.dirty.insert(key);
    }

    /// Applies a change to an open document: ranged edits in order, or whole texts
    /// ([`sync::apply`]). A change older than the document, or to a document not open, is a
    /// client's mistake and is dropped.
    fn change(&mut self, p: ls_types::DidChangeTextDocumentParams) {
        let Some((_, document)) = self.documents.get(p.text_document.uri.as_str()) else { return };
        if p.text_document.version < document.version {
            return;
        }
        let text = sync::apply(document.text.clone(), p.content_changes);
        // No message can open a document this large, and edits could grow one without
        // bound: it is no longer followed (the editor may open it again), and the user is told.
        if text.len() > transport::MAX_MESSAGE {
            let key = p.text_document.uri.as_str();
            self.documents.remove(key);
            self.dirty.remove(key);
            self.warnings.push(format!(
                "svc lsp stopped following {key}: it has grown over {} bytes (a manifest's limit is {} bytes); \
                 close and reopen it once it is smaller",
                transport::MAX_MESSAGE,
                manifest_core::MAX_INPUT_BYTES
            ));
            self.closed.push(p.text_document.uri);
            return;
        }
        self.open(p.text_document.uri, text, p.text_document.version);
    }

    /// Sends the diagnostics of every document changed since they were last sent, and an
    /// empty list for each document closed.
    fn publish(&mut self, connection: &Connection) -> Result<(), CannotWrite> {
        for message in std::mem::take(&mut self.warnings) {
            eprintln!("{message}");
            let warning = ls_types::ShowMessageParams { typ: ls_types::MessageType::WARNING, message };
            let note = Notification::new("window/showMessage".into(), warning);
            connection.sender.send(note.into()).map_err(|_| CannotWrite)?;
        }
        let closed = std::mem::take(&mut self.closed).into_iter().map(|uri| PublishDiagnosticsParams {
            uri,
            diagnostics: Vec::new(),
            version: None,
        });
        let changed = std::mem::take(&mut self.dirty).into_iter().filter_map(|key| {
            let (uri, document) = self.documents.get(&key)?;
            Some(PublishDiagnosticsParams {
                uri: uri.clone(),
                diagnostics: document.published(),
                version: Some(document.version),
            })
        });
        for params in closed.chain(changed).collect::<Vec<_>>() {
            let note = Notification::new("textDocument/publishDiagnostics".into(), params);
            connection.sender.send(note.into()).map_err(|_| CannotWrite)?;
        }
        Ok(())
    }
}

fn initialize_result() -> InitializeResult {
    InitializeResult {
        capabilities: ServerCapabilities {
            position_encoding: Some(PositionEncodingKind::UTF16),
            // Ranged edits: a keystroke is a few bytes, not the document.
            text_document_sync: Some(TextDocumentSyncCapability::Kind(TextDocumentSyncKind::INCREMENTAL)),
            hover_provider: Some(HoverProviderCapability::Simple(true)),
            document_symbol_provider: Some(OneOf::Left(true)),
            completion_provider: Some(CompletionOptions {
                // `,`, `{` and `[` open a place in flow YAML (and JSON).
                trigger_characters: Some(vec!["\"".into(), ":".into(), ",".into(), "{".into(), "[".into()]),
                ..Default::default()
            }),
            code_action_provider: Some(CodeActionProviderCapability::Options(CodeActionOptions {
                code_action_kinds: Some(vec![CodeActionKind::QUICKFIX]),
                ..Default::default()
            })),
            ..Default::default()
        },
        server_info: Some(ServerInfo { name: "svc lsp".into(), version: Some(env!("CARGO_PKG_VERSION").into()) }),
        offset_encoding: None,
    }
}

#[cfg(test)]
mod tests {
    use ls_types::{DidChangeTextDocumentParams, TextDocumentContentChangeEvent, VersionedTextDocumentIdentifier};

    use super::*;

    fn grow(server: &mut Server, uri: &Uri, version: i32, bytes: usize) {
        let change = TextDocumentContentChangeEvent {
            range: Some(ls_types::Range::default()),
            range_length: None,
            text: format!("#{}\n", "y".repeat(bytes)),
        };
        server.change(DidChangeTextDocumentParams {
            text_document: VersionedTextDocumentIdentifier { uri: uri.clone(), version },
            content_changes: vec![change],
        });
    }

    #[test]
    fn a_document_grown_past_the_largest_message_is_no_longer_followed_and_the_user_told() {
        // Edits of 4 MiB each grew the text without bound (and read all of it each time).
        let uri: Uri = "file:///w/manifest.yaml".parse().expect("uri");
        let mut server = Server::default();
        server.open(uri.clone(), "schemaVersion: 5\n".into(), 1);
        grow(&mut server, &uri, 2, 4 << 20);
        assert!(server.documents.contains_key(uri.as_str()) && server.warnings.is_empty());
        let (_, document) = &server.documents[uri.as_str()];
        assert_eq!(document.kind, Some(document::Kind::Manifest), "kept, not read again");
        assert!(!document.readable() && readable(&server.documents, uri.as_str()).is_none());
        grow(&mut server, &uri, 3, 4 << 20);
        assert!(!server.documents.contains_key(uri.as_str()));
        assert_eq!(server.closed, std::slice::from_ref(&uri), "its diagnostics are cleared");
        assert!(server.warnings[0].contains("stopped following file:///w/manifest.yaml"), "{:?}", server.warnings);
    }
}
