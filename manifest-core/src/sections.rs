//! Reads typed sections of a checked document for layer 2.
//!
//! Layer 2 runs over every section that passed layer 1, so a layer-1 error in one section
//! does not hide a cross-field error in another: all independent errors come in one pass.

use std::borrow::Cow;

use serde::de::DeserializeOwned;

use crate::de::{ModelError, from_node};
use crate::diagnostic::{Code, Diagnostic, Layer};
use crate::notes::{Note, Notes};
use crate::tree::{Node, Value, same_key};

/// The top-level sections of a checked, defaulted document.
pub(crate) struct Sections<'a> {
    root: &'a Node<'a>,
    /// Where layer 1 found the nodes layer 2 reads.
    notes: Notes,
    /// Pointers of layer-1 errors.
    failed: Vec<String>,
}

impl<'a> Sections<'a> {
    /// The sections of `root`, which layer 1 walked, noting `notes` and reporting `diagnostics`.
    pub(crate) fn new(root: &'a Node<'a>, notes: Notes, diagnostics: &[Diagnostic]) -> Self {
        let failed = diagnostics.iter().filter(|d| d.is_error()).map(|d| d.pointer.clone()).collect();
        Sections { root, notes, failed }
    }

    /// The node layer 1 noted as `note`, for reading values under it: found at the positions
    /// layer 1 noted, not looked up by its pointer (which scanned the members of every object
    /// on the way, about 200 instructions per lookup, a dozen per document).
    pub(crate) fn under<'s>(&'s self, note: Note) -> Under<'s, 'a> {
        let pointer = note.pointer();
        let concern = self.concern([pointer, ""]);
        Under { sections: self, node: self.notes.node(self.root, note), pointer, concern }
    }

    /// Which layer-1 errors concern what is under the pointer `a` + `b`, sorted out once: most
    /// documents have none there, and then no value's pointer is spelled out to be compared.
    /// The pointer is compared in its two pieces, not spelled out.
    fn concern(&self, [a, b]: [&str; 2]) -> Concern {
        let len = a.len() + b.len();
        // Whether the pointer starts with `f` (`f` is the pointer or above it).
        let starts_with = |f: &str| match f.strip_prefix(a) {
            Some(rest) => b.starts_with(rest),
            None => a.starts_with(f),
        };
        let byte_at = |i: usize| if i < a.len() { a.as_bytes().get(i) } else { b.as_bytes().get(i - a.len()) };
        let mut concern = Concern::None;
        for f in &self.failed {
            if starts_with(f) && (f.len() == len || byte_at(f.len()) == Some(&b'/')) {
                return Concern::All;
            }
            // `f` is under the pointer.
            if f.strip_prefix(a).and_then(|rest| rest.strip_prefix(b)).is_some_and(|rest| rest.starts_with('/')) {
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
}

/// The node at `pointer` under `node`, if the whole pointer resolves: [`Node::resolve`] for
/// layer 2's pointers, which are field names from the tables. Those need no unescaping and
/// no index, so they are split and looked up directly: a general lookup costs about 200
/// instructions per token, and layer 2 makes about ten per document. Anything else (an index,
/// an escape) goes to `resolve`.
fn walk<'n, 'a>(node: &'n Node<'a>, pointer: &str) -> Option<&'n Node<'a>> {
    let mut node = node;
    let mut rest = pointer;
    while let Some(tail) = rest.strip_prefix('/') {
        // The token's end and whether it has an escape, in one pass over its few bytes (a
        // `contains('~')` was a `memchr` call per token, a quarter of the walk).
        let mut end = 0;
        let bytes = tail.as_bytes();
        while end < bytes.len() && bytes[end] != b'/' {
            if bytes[end] == b'~' {
                return general(node, rest);
            }
            end += 1;
        }
        let (token, next) = tail.split_at(end);
        let Value::Object(members) = &node.value else {
            return general(node, rest);
        };
        node = &members.iter().find(|m| same_key(&m.key, token))?.value;
        rest = next;
    }
    // The empty pointer is the node itself; one not starting with `/` is left to `resolve`.
    if rest.is_empty() { Some(node) } else { general(node, rest) }
}

/// [`walk`]'s way out: the rest of the pointer resolved in general.
#[cold]
fn general<'n, 'a>(node: &'n Node<'a>, rest: &str) -> Option<&'n Node<'a>> {
    let found = node.resolve(rest);
    found.complete.then_some(found.node)
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
    /// The node's pointer.
    pointer: &'static str,
    concern: Concern,
}

impl<'s, 'a> Under<'s, 'a> {
    /// The node at `rel`, if the whole pointer resolves.
    pub(crate) fn at(&self, rel: &str) -> Option<&'a Node<'a>> {
        walk(self.node?, rel)
    }

    /// The value at `rel`, if present and free of layer-1 errors at, under or above it.
    pub(crate) fn read<T: DeserializeOwned>(&self, rel: &str, out: &mut Vec<Diagnostic>) -> Option<T> {
        let pointer = self.pointer;
        self.read_node(self.at(rel), || format!("{pointer}{rel}"), out)
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

    /// `DOCUMENT` through layer 1 (as V4: it notes `/deployment`, its schedule and the
    /// configuration's variables), with the notes it took.
    fn checked() -> (Node<'static>, Notes) {
        let mut root = crate::json::parse(DOCUMENT).root.expect("the document reads");
        let notes = crate::check::check_document(&mut root, &crate::v4::MANIFEST, &mut Default::default());
        (root, notes)
    }

    /// What a value under a noted node reads as, given the layer-1 errors' pointers.
    fn start_delay(errors: &[&str]) -> Option<u64> {
        let (root, notes) = checked();
        let errors: Vec<Diagnostic> = errors.iter().map(|p| error(p)).collect();
        let sections = Sections::new(&root, notes, &errors);
        let schedule = sections.under(Note::Schedule);
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
    fn walking_finds_what_resolving_finds() {
        let text = r#"{"a": {"b~c": [1, {"d/e": 2}], "f": {"": 3}}, "g": 4}"#;
        let root = crate::json::parse(text).root.expect("the document reads");
        for pointer in [
            "",
            "/a",
            "/a/f",
            "/a/f/",
            "/g",
            "/a/b~0c",
            "/a/b~0c/1/d~1e",
            "/a/b~0c/0",
            "/a/b~0c/2",
            "/x",
            "/g/x",
            "/a/x/y",
            "a",
            "a/g",
            "/a/f//",
        ] {
            let found = root.resolve(pointer);
            let resolved = found.complete.then_some(found.node);
            assert_eq!(walk(&root, pointer).map(std::ptr::from_ref), resolved.map(std::ptr::from_ref), "{pointer}");
        }
    }

    #[test]
    fn what_concerns_a_pointer_in_two_pieces_is_what_concerns_it_whole() {
        let errors = ["", "/a", "/a/b", "/a/bc", "/a/b/c", "/ab", "/x"];
        for pointer in ["/a", "/a/b", "/a/b/c", "/ab", "/y"] {
            for cut in 0..=pointer.len() {
                let (a, b) = pointer.split_at(cut);
                for f in errors {
                    let failed = vec![f.to_owned()];
                    let root = Node { span: Default::default(), value: Value::Null };
                    let sections = Sections { root: &root, notes: Notes::default(), failed };
                    let whole = if f == pointer || (pointer.starts_with(f) && pointer[f.len()..].starts_with('/')) {
                        "all"
                    } else if f.starts_with(pointer) && f[pointer.len()..].starts_with('/') {
                        "some"
                    } else {
                        "none"
                    };
                    let pieces = match sections.concern([a, b]) {
                        Concern::All => "all",
                        Concern::Some => "some",
                        Concern::None => "none",
                    };
                    assert_eq!(pieces, whole, "{a:?} + {b:?} against {f:?}");
                }
            }
        }
    }

    #[test]
    fn a_string_is_borrowed_and_a_value_that_does_not_fit_is_an_internal_error() {
        let (root, notes) = checked();
        let sections = Sections::new(&root, notes, &[]);
        let variables = sections.under(Note::Variables);
        let mut out = Vec::new();
        let names: Vec<_> = (variables.items().iter())
            .map(|item| variables.text_node(item.get("name"), || unreachable!("no pointer is needed"), &mut out))
            .collect();
        assert_eq!(names, [Some(Cow::Borrowed("A")), Some(Cow::Borrowed("B"))]);
        let jobs = sections.under(Note::Deployment);
        assert_eq!(jobs.text_node(jobs.at("/jobs"), || "/deployment/jobs".to_owned(), &mut out), None);
        assert_eq!(out.len(), 1);
        assert_eq!((out[0].code, out[0].pointer.as_str()), (Code::InternalError, "/deployment/jobs"));
    }
}
