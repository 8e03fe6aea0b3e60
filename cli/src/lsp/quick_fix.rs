//! Quick fixes (`textDocument/codeAction`): one per diagnostic with a "did you mean".

use std::collections::HashMap;

use ls_types::{CodeAction, CodeActionKind, CodeActionOrCommand, Range, TextEdit, Uri, WorkspaceEdit};

use super::document::Document;
use super::position::Lines;

/// A quick fix for each diagnostic in `range` that has a "did you mean".
pub(crate) fn quick_fixes(uri: &Uri, document: &Document, range: Range) -> Vec<CodeActionOrCommand> {
    let lines = Lines::new(&document.text);
    let (start, end) = (lines.offset(range.start), lines.offset(range.end));
    let published = document.published();
    document
        .diagnostics()
        .iter()
        .zip(published)
        .filter_map(|(d, shown)| {
            let suggestion = d.suggestion.as_ref()?;
            let fix = document.fix_range(d)?;
            // The diagnostic's own span meets the asked range (a cursor is an empty range).
            let span = d.span?;
            if (span.end as usize) < start || (span.start as usize) > end {
                return None;
            }
            let edit = TextEdit { range: lines.range(fix.start, fix.end), new_text: suggestion.clone() };
            Some(CodeActionOrCommand::CodeAction(CodeAction {
                title: format!("Change to \"{suggestion}\""),
                kind: Some(CodeActionKind::QUICKFIX),
                diagnostics: Some(vec![shown]),
                edit: Some(WorkspaceEdit {
                    changes: Some(HashMap::from([(uri.clone(), vec![edit])])),
                    ..Default::default()
                }),
                is_preferred: Some(true),
                ..Default::default()
            }))
        })
        .collect()
}
