//! Reads typed sections of a checked document for layer 2.
//!
//! Layer 2 runs over every section that passed layer 1, so a layer-1 error in one section
//! does not hide a cross-field error in another: all independent errors come in one pass.

use std::borrow::Cow;

use serde::de::DeserializeOwned;

use crate::de::{ModelError, from_node};
use crate::diagnostic::{Code, Diagnostic, Layer};
use crate::tree::{Node, Value};

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

    /// The node at `pointer`, looked up once for reading several values under it: each lookup
    /// from the root scans the root's members and splits every token again, and layer 2 reads
    /// about ten values per document under three or four nodes.
    pub(crate) fn under<'s>(&'s self, pointer: &'s str) -> Under<'s, 'a> {
        let found = self.root.resolve(pointer);
        let concern = self.concern(pointer);
        Under { sections: self, node: found.complete.then_some(found.node), pointer: [pointer, ""], concern }
    }

    /// Which layer-1 errors concern what is under `pointer`, sorted out once: most documents
    /// have none there, and then no value's pointer is spelled out to be compared.
    fn concern(&self, pointer: &str) -> Concern {
        let mut concern = Concern::None;
        for f in &self.failed {
            if f == pointer || (pointer.starts_with(f.as_str()) && pointer[f.len()..].starts_with('/')) {
                return Concern::All;
            }
            if f.starts_with(pointer) && f[pointer.len()..].starts_with('/') {
                concern = Concern::Some;
            }
        }
        concern
    }

    /// Whether no layer-1 error is at, under or above `pointer`.
    fn clean(&self, pointer: &str) -> bool {
        !self.failed.iter().any(|f| {
            f == pointer
                || (f.starts_with(pointer) && f[pointer.len()..].starts_with('/'))
                || (pointer.starts_with(f.as_str()) && pointer[f.len()..].starts_with('/'))
        })
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
            (Value::String(s), true) => Some(s),
            _ => None,
        }
    }
}

/// A checked node that does not fit its model means a shape table and a model struct
/// disagree: it is reported as `internal_error`, never a panic.
fn internal_error(pointer: String, e: &ModelError) -> Diagnostic {
    Diagnostic::error(
        Layer::Schema,
        Code::InternalError,
        pointer,
        format!("internal error: the checked document does not fit the model ({e}); please report this"),
    )
}

/// Which layer-1 errors concern the values under a node.
#[derive(Debug, Clone, Copy)]
enum Concern {
    /// None: every value under it is clean.
    None,
    /// One at or above the node: no value under it is.
    All,
    /// Some under it: each value's pointer is compared.
    Some,
}

/// A node of the document looked up once ([`Sections::under`]); `rel` below is a pointer
/// relative to it (`/schedule/startDelayMs`), and each method answers for the whole pointer.
pub(crate) struct Under<'s, 'a> {
    sections: &'s Sections<'a>,
    node: Option<&'a Node<'a>>,
    /// The node's pointer, in two pieces: a section's, and one relative to it.
    pointer: [&'s str; 2],
    concern: Concern,
}

impl<'s, 'a> Under<'s, 'a> {
    /// The node at `rel` under a node looked up from the root (one level of this only: the
    /// pointer is kept in two pieces so that it is spelled out only for a message).
    pub(crate) fn under(&self, rel: &'s str) -> Under<'s, 'a> {
        debug_assert!(self.pointer[1].is_empty(), "one level of Under::under");
        let concern = match self.concern {
            Concern::Some => self.sections.concern(&format!("{}{rel}", self.pointer[0])),
            other => other,
        };
        Under { sections: self.sections, node: self.at(rel), pointer: [self.pointer[0], rel], concern }
    }

    /// The node at `rel`, if the whole pointer resolves.
    pub(crate) fn at(&self, rel: &str) -> Option<&'a Node<'a>> {
        let found = self.node?.resolve(rel);
        found.complete.then_some(found.node)
    }

    /// The value at `rel`, if present and free of layer-1 errors at, under or above it.
    pub(crate) fn read<T: DeserializeOwned>(&self, rel: &str, out: &mut Vec<Diagnostic>) -> Option<T> {
        let [section, under] = self.pointer;
        self.read_node(self.at(rel), || format!("{section}{under}{rel}"), out)
    }

    /// The value of a node under this one, already looked up (`None`: not there), if free of
    /// layer-1 errors at, under or above its pointer. The pointer is spelled out only when a
    /// layer-1 error under this node could concern it, or the model does not fit.
    pub(crate) fn read_node<T: DeserializeOwned>(
        &self,
        node: Option<&'a Node<'a>>,
        pointer: impl Fn() -> String,
        out: &mut Vec<Diagnostic>,
    ) -> Option<T> {
        if !self.clean(&pointer) {
            return None;
        }
        match from_node(node?) {
            Ok(v) => Some(v),
            Err(e) => {
                out.push(internal_error(pointer(), &e));
                None
            }
        }
    }

    /// [`Under::read_node`] of a string, borrowed from the tree (an owned copy only if the
    /// node is no string: then the model decides, and reports the mismatch).
    pub(crate) fn text_node(
        &self,
        node: Option<&'a Node<'a>>,
        pointer: impl Fn() -> String,
        out: &mut Vec<Diagnostic>,
    ) -> Option<Cow<'a, str>> {
        match node {
            Some(Node { value: Value::String(s), .. }) => self.clean(&pointer).then_some(Cow::Borrowed(s.as_ref())),
            _ => self.read_node::<String>(node, pointer, out).map(Cow::Owned),
        }
    }

    fn clean(&self, pointer: &impl Fn() -> String) -> bool {
        match self.concern {
            Concern::None => true,
            Concern::All => false,
            Concern::Some => self.sections.clean(&pointer()),
        }
    }

    /// The string at `rel` (a discriminator), whatever the validity of its siblings.
    pub(crate) fn tag(&self, rel: &str) -> Option<&'a str> {
        match self.at(rel) {
            Some(Node { value: Value::String(s), .. }) => Some(s),
            _ => None,
        }
    }

    /// Whether a value is written (or defaulted) at `rel`, whatever its validity.
    pub(crate) fn present(&self, rel: &str) -> bool {
        self.at(rel).is_some()
    }

    /// The items of the array this is (none if it is no array).
    pub(crate) fn items(&self) -> &'a [Node<'a>] {
        match self.node {
            Some(Node { value: Value::Array(items), .. }) => items,
            _ => &[],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOCUMENT: &str = r#"{"deployment": {"schedule": {"startDelayMs": 5, "durationMs": 7}, "jobs": 3},
        "configuration": {"variables": [{"name": "A"}, {"name": "B"}]}}"#;

    fn error(pointer: &str) -> Diagnostic {
        Diagnostic::error(Layer::Schema, Code::InvalidValue, pointer, "wrong")
    }

    /// What a value under a node looked up once reads as, given the layer-1 errors' pointers.
    fn start_delay(errors: &[&str]) -> Option<u64> {
        let root = crate::json::parse(DOCUMENT).root.expect("the document reads");
        let errors: Vec<Diagnostic> = errors.iter().map(|p| error(p)).collect();
        let sections = Sections::new(&root, &errors);
        let schedule = sections.under("/deployment").under("/schedule");
        schedule.read("/startDelayMs", &mut Vec::new())
    }

    #[test]
    fn a_value_under_a_node_is_hidden_by_an_error_at_above_or_under_it_only() {
        assert_eq!(start_delay(&[]), Some(5));
        // Elsewhere, or beside it: the value is read.
        assert_eq!(start_delay(&["/configuration/variables/0/name", "/deployment/jobs"]), Some(5));
        assert_eq!(start_delay(&["/deployment/schedule/durationMs", "/deployment/schedule/startDelay"]), Some(5));
        // At it, above it (above the node too) or under it: hidden.
        for at in ["/deployment/schedule/startDelayMs", "/deployment/schedule", "/deployment", ""] {
            assert_eq!(start_delay(&[at]), None, "{at}");
        }
        assert_eq!(start_delay(&["/deployment/schedule/startDelayMs/x"]), None);
    }

    #[test]
    fn a_string_is_borrowed_and_a_value_that_does_not_fit_is_an_internal_error() {
        let root = crate::json::parse(DOCUMENT).root.expect("the document reads");
        let sections = Sections::new(&root, &[]);
        let variables = sections.under("/configuration").under("/variables");
        let mut out = Vec::new();
        let names: Vec<_> = (variables.items().iter())
            .map(|item| variables.text_node(item.get("name"), || unreachable!("no pointer is needed"), &mut out))
            .collect();
        assert_eq!(names, [Some(Cow::Borrowed("A")), Some(Cow::Borrowed("B"))]);
        let jobs = sections.under("/deployment");
        assert_eq!(jobs.text_node(jobs.at("/jobs"), || "/deployment/jobs".to_owned(), &mut out), None);
        assert_eq!(out.len(), 1);
        assert_eq!((out[0].code, out[0].pointer.as_str()), (Code::InternalError, "/deployment/jobs"));
    }
}
