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
    root: &'a Node,
    /// Pointers of layer-1 errors.
    failed: Vec<String>,
}

impl<'a> Sections<'a> {
    pub(crate) fn new(root: &'a Node, diagnostics: &[Diagnostic]) -> Self {
        let failed = diagnostics
            .iter()
            .filter(|d| d.is_error())
            .map(|d| d.pointer.clone())
            .collect();
        Sections { root, failed }
    }

    /// Whether layer 1 found no error at all.
    pub(crate) fn all_clean(&self) -> bool {
        self.failed.is_empty()
    }

    /// The section `key`, if present and free of layer-1 errors.
    pub(crate) fn read<T: DeserializeOwned>(
        &self,
        key: &str,
        out: &mut Vec<Diagnostic>,
    ) -> Option<T> {
        let prefix = format!("/{key}");
        let dirty = self
            .failed
            .iter()
            .any(|p| p == &prefix || p.starts_with(&format!("{prefix}/")));
        if dirty {
            return None;
        }
        let node = self.root.get(key)?;
        model(node, &prefix, out)
    }
}

/// Reads a model from a checked node. A failure means a shape table and a model struct
/// disagree: it is reported as `internal_error`, never a panic.
pub(crate) fn model<T: DeserializeOwned>(
    node: &Node,
    pointer: &str,
    out: &mut Vec<Diagnostic>,
) -> Option<T> {
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
