//! Reads typed sections of a checked document for layer 2.
//!
//! Layer 2 runs over every section that passed layer 1, so a layer-1 error in one section
//! does not hide a cross-field error in another: all independent errors come in one pass.

use serde::de::DeserializeOwned;

use crate::de::from_node;
use crate::diagnostic::{Code, Diagnostic, Layer};
use crate::tree::Node;

/// The top-level sections of a checked, defaulted document.
pub(crate) struct Sections<'a> {
    root: &'a Node<'a>,
    /// Pointers of layer-1 errors.
    failed: Vec<String>,
}

impl<'a> Sections<'a> {
    pub(crate) fn new(root: &'a Node<'a>, diagnostics: &[Diagnostic]) -> Self {
        let failed = diagnostics.iter().filter(|d| d.is_error()).map(|d| d.pointer.clone()).collect();
        Sections { root, failed }
    }

    /// The value at `pointer`, if present and free of layer-1 errors at, under or above it.
    pub(crate) fn read<T: DeserializeOwned>(&self, pointer: &str, out: &mut Vec<Diagnostic>) -> Option<T> {
        if !self.clean(pointer) {
            return None;
        }
        let found = self.root.resolve(pointer);
        if !found.complete {
            return None;
        }
        model(found.node, pointer, out)
    }

    /// Whether no layer-1 error is at, under or above `pointer`.
    fn clean(&self, pointer: &str) -> bool {
        !self.failed.iter().any(|f| {
            f == pointer
                || (f.starts_with(pointer) && f[pointer.len()..].starts_with('/'))
                || (pointer.starts_with(f.as_str()) && pointer[f.len()..].starts_with('/'))
        })
    }

    /// The number of items of the array at `pointer` (0 if there is none).
    pub(crate) fn len(&self, pointer: &str) -> usize {
        let found = self.root.resolve(pointer);
        match (&found.node.value, found.complete) {
            (crate::tree::Value::Array(items), true) => items.len(),
            _ => 0,
        }
    }

    /// Whether a value is written (or defaulted) at `pointer`, whatever its validity.
    pub(crate) fn present(&self, pointer: &str) -> bool {
        self.root.resolve(pointer).complete
    }

    /// The string at `pointer` (a discriminator such as `/execution/mode`), whatever the
    /// validity of its siblings.
    pub(crate) fn tag(&self, pointer: &str) -> Option<&'a str> {
        let found = self.root.resolve(pointer);
        match (&found.node.value, found.complete) {
            (crate::tree::Value::String(s), true) => Some(s),
            _ => None,
        }
    }
}

/// Reads a model from a checked node. A failure means a shape table and a model struct
/// disagree: it is reported as `internal_error`, never a panic.
fn model<T: DeserializeOwned>(node: &Node<'_>, pointer: &str, out: &mut Vec<Diagnostic>) -> Option<T> {
    match from_node(node) {
        Ok(v) => Some(v),
        Err(e) => {
            out.push(Diagnostic::error(
                Layer::Schema,
                Code::InternalError,
                pointer,
                format!("internal error: the checked document does not fit the model ({e}); please report this"),
            ));
            None
        }
    }
}
