//! A command's failure, said once, at the top (as ripgrep's `main` does): each command returns
//! its typed error (its causes kept as `#[source]`) up to [`crate::run`], which hands it to
//! [`report`]; that is the one place an error becomes text. The text goes to standard error
//! and, with `--format json`, the shared envelope to standard output; the error chooses the
//! exit code.

use std::process::ExitCode;

use svc_http::ErrorBody;

/// What a command's error tells the one place that shows it.
pub(crate) trait Failure: std::error::Error {
    /// The process's exit code: 1 refused or failed, 2 usage, configuration or connection
    /// trouble, as each command documents.
    fn exit_code(&self) -> u8;

    /// The envelope `--format json` prints on standard output.
    fn envelope(&self) -> ErrorBody;

    /// What `--format json` prints instead of the envelope, for a command whose failure is an
    /// answer of its own (`svc ingress catalog`'s verdict `{"verified": false, ...}`).
    fn json_answer(&self) -> Option<serde_json::Value> {
        None
    }

    /// What standard error says, line ends included: `WHO: message` unless the error says
    /// more (a refusal's diagnostics and hints).
    fn text(&self) -> String;
}

/// The [`Failure`] of a command whose every error is one line, `WHO: message`, with one
/// envelope code and one exit code: `one_line_failure!(ServeCommandError, exit 2, "serve_failed", "svc serve");`.
macro_rules! one_line_failure {
    ($error:ty, exit $exit:expr, $code:literal, $who:literal) => {
        impl crate::failure::Failure for $error {
            fn exit_code(&self) -> u8 {
                $exit
            }

            fn envelope(&self) -> svc_http::ErrorBody {
                svc_http::ErrorBody::new($code, self.to_string())
            }

            fn text(&self) -> String {
                crate::failure::line($who, self)
            }
        }
    };
}
pub(crate) use one_line_failure;

/// `who: message\n`, the one line most failures print.
pub(crate) fn line(who: &str, message: &impl std::fmt::Display) -> String {
    format!("{who}: {message}\n")
}

/// Shows a command's outcome: its exit code, or its error (envelope, then text) and the
/// error's exit code.
pub(crate) fn report<E: Failure>(outcome: Result<ExitCode, E>) -> ExitCode {
    match outcome {
        Ok(code) => code,
        Err(e) => show(&e),
    }
}

/// Shows `e` and returns its exit code.
pub(crate) fn show(e: &dyn Failure) -> ExitCode {
    if crate::output::json() {
        match e.json_answer() {
            Some(answer) => crate::output::print_json(&answer),
            None => crate::output::print_json(&e.envelope()),
        }
    }
    eprint!("{}", e.text());
    ExitCode::from(e.exit_code())
}
