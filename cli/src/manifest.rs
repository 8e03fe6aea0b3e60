//! `svc manifest validate`.

use std::io::Read;
use std::path::Path;
use std::process::ExitCode;

use manifest_core::{MAX_INPUT_BYTES, render_json, render_text, validate as validate_document};

use crate::args::OutputFormat;

/// Validates the manifest at `path` (`-` for standard input) and prints the result.
pub(crate) fn validate(path: &Path, format: OutputFormat) -> ExitCode {
    let (name, bytes) = match read_input(path) {
        Ok(input) => input,
        Err(message) => {
            eprintln!("svc: {message}");
            return ExitCode::from(2);
        }
    };
    let report = validate_document(&bytes);
    let output = match format {
        OutputFormat::Json => render_json(&report) + "\n",
        OutputFormat::Text => render_text(&report, &name, &bytes),
    };
    print!("{output}");
    if report.is_valid() { ExitCode::SUCCESS } else { ExitCode::from(1) }
}

/// Reads at most one byte past the input limit, so an oversized input is reported as
/// `input_too_large` without being read whole.
fn read_input(path: &Path) -> Result<(String, Vec<u8>), String> {
    let limit = (MAX_INPUT_BYTES + 1) as u64;
    let mut bytes = Vec::new();
    if path == Path::new("-") {
        std::io::stdin()
            .lock()
            .take(limit)
            .read_to_end(&mut bytes)
            .map_err(|e| format!("cannot read standard input: {e}"))?;
        return Ok(("<stdin>".to_owned(), bytes));
    }
    let file = std::fs::File::open(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if file.metadata().is_ok_and(|m| m.is_dir()) {
        return Err(format!("cannot read {}: it is a directory", path.display()));
    }
    file.take(limit).read_to_end(&mut bytes).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    Ok((path.display().to_string(), bytes))
}
