//! The nodes layer 2 reads, noted by layer 1 as it passes them.
//!
//! Layer 2 reads about a dozen nodes per document (`/deployment`, `/deployment/schedule`,
//! `/configuration/variables`, ...). Looking each up by its pointer scanned the members of
//! every object on the way (the root has up to 12), about 200 instructions a lookup and a
//! twentieth of a JSON pass. Layer 1 already finds each of them: the shape tables mark their
//! fields ([`Field::noted`](crate::shape::Field)), and the walk notes where it found or filled
//! in each one. It notes positions (the member's index in its parent), not references: layer 1
//! appends defaults to the objects it walks, which may move them.
//!
//! A place is noted exactly when layer 1 matched its field in its parent, or filled it in as a
//! default. The parent of every noted place is an object (never a union, whose fields are not
//! walked when its tag is wrong), which layer 1 walks whole once it is found, and readers keep
//! no duplicate key: so a place that is not noted under a parent that was found is absent, as
//! a lookup by name would find. A test in this module checks the tables for that.

use crate::tree::{Member, Node, Value};

/// A node layer 2 reads, by its place in the document (either version).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Note {
    /// `/deployment`
    Deployment,
    /// `/deployment/schedule`
    Schedule,
    /// `/deployment/schedule/phasing` (V5)
    Phasing,
    /// `/deployment/lifecycle`
    Lifecycle,
    /// `/deployment/lifecycle/renewal`
    Renewal,
    /// `/deployment/placement` (V4)
    Placement,
    /// `/deployment/placement/groups` (V4)
    Groups,
    /// `/deployment/spend` (V5)
    Spend,
    /// `/ingress` (V4)
    Ingress,
    /// `/execution` (V5)
    Execution,
    /// `/access` (V5)
    Access,
    /// `/runtime` (V5)
    Runtime,
    /// `/configuration`
    Configuration,
    /// `/configuration/variables`
    Variables,
    /// `/configuration/secrets`
    Secrets,
}

/// Where each [`Note`] is: its parent's note (none: the root) and its pointer, in the order
/// of the enum.
const PLACES: [(Option<Note>, &str); COUNT] = [
    (None, "/deployment"),
    (Some(Note::Deployment), "/deployment/schedule"),
    (Some(Note::Schedule), "/deployment/schedule/phasing"),
    (Some(Note::Deployment), "/deployment/lifecycle"),
    (Some(Note::Lifecycle), "/deployment/lifecycle/renewal"),
    (Some(Note::Deployment), "/deployment/placement"),
    (Some(Note::Placement), "/deployment/placement/groups"),
    (Some(Note::Deployment), "/deployment/spend"),
    (None, "/ingress"),
    (None, "/execution"),
    (None, "/access"),
    (None, "/runtime"),
    (None, "/configuration"),
    (Some(Note::Configuration), "/configuration/variables"),
    (Some(Note::Configuration), "/configuration/secrets"),
];

const COUNT: usize = Note::Secrets as usize + 1;

/// Not noted.
const NONE: u32 = u32::MAX;

impl Note {
    /// The note's JSON pointer.
    pub(crate) fn pointer(self) -> &'static str {
        PLACES[self as usize].1
    }

    fn parent(self) -> Option<Note> {
        PLACES[self as usize].0
    }
}

/// Where layer 1 found each noted node: the index of its member in its parent's members.
#[derive(Debug, Clone)]
pub(crate) struct Notes {
    at: [u32; COUNT],
}

impl Default for Notes {
    fn default() -> Self {
        Notes { at: [NONE; COUNT] }
    }
}

impl Notes {
    /// Notes that `note`'s member is at `index` in its parent's members.
    #[inline]
    pub(crate) fn note(&mut self, note: Note, index: usize) {
        self.at[note as usize] = u32::try_from(index).unwrap_or(NONE);
    }

    /// The node at `note` in `root` (the document layer 1 walked with these notes), if
    /// present: what a lookup of its pointer finds.
    pub(crate) fn node<'n, 'a>(&self, root: &'n Node<'a>, note: Note) -> Option<&'n Node<'a>> {
        let parent = match note.parent() {
            None => root,
            Some(parent) => self.node(root, parent)?,
        };
        let Value::Object(members) = &parent.value else { return None };
        let member: &Member<'a> = members.get(usize::try_from(self.at[note as usize]).ok()?)?;
        debug_assert!(note.pointer().ends_with(&*member.key), "{} noted at {}", note.pointer(), member.key);
        Some(&member.value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shape::{ObjectShape, Shape};

    /// Every marked field of a manifest's tables, with the pointer of its place and whether its
    /// parent is an object (its parent note's place) or a union arm.
    fn marked(shape: &ObjectShape, pointer: &str, in_arm: bool, out: &mut Vec<(Note, String, bool)>, depth: usize) {
        if depth > 12 {
            return;
        }
        for field in shape.fields {
            let here = format!("{pointer}/{}", field.name);
            if let Some(note) = field.note {
                out.push((note, here.clone(), in_arm));
            }
            match &field.shape {
                Shape::Object(object) => marked(object, &here, false, out, depth + 1),
                Shape::Union(union) => {
                    for arm in union.arms {
                        marked(&arm.object, &here, true, out, depth + 1);
                    }
                }
                Shape::Array(array) => match &array.items {
                    Shape::Object(object) => marked(object, &format!("{here}/*"), false, out, depth + 1),
                    Shape::Union(union) => {
                        for arm in union.arms {
                            marked(&arm.object, &format!("{here}/*"), true, out, depth + 1);
                        }
                    }
                    _ => {}
                },
                _ => {}
            }
        }
    }

    #[test]
    fn each_note_marks_one_field_at_its_place_in_an_object() {
        for manifest in [&crate::v4::MANIFEST, &crate::v5::MANIFEST] {
            let mut found = Vec::new();
            marked(manifest, "", false, &mut found, 0);
            assert!(!found.is_empty());
            for (note, pointer, in_arm) in &found {
                assert_eq!(pointer, note.pointer(), "{note:?} marks a field elsewhere");
                assert!(!in_arm, "{note:?} is marked in a union arm, whose fields are not always walked");
                assert_eq!(found.iter().filter(|(n, ..)| n == note).count(), 1, "{note:?} marks two fields");
                // Its parent is noted too (or is the root), so the chain of positions holds.
                if let Some(parent) = note.parent() {
                    assert!(found.iter().any(|(n, ..)| *n == parent), "{note:?}'s parent {parent:?} is not marked");
                    assert!(pointer.starts_with(&format!("{}/", parent.pointer())));
                }
            }
        }
    }

    /// Every manifest of the conformance corpus and the golden files (valid or not): each node
    /// its version's tables mark is, if noted, the one its pointer resolves to after layer 1, and
    /// absent otherwise.
    #[test]
    fn a_noted_node_is_the_one_its_pointer_finds() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut files = Vec::new();
        let mut dirs = vec![root.join("tests/corpus"), root.join("tests/golden")];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).expect("a corpus directory").flatten() {
                let path = entry.path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path.extension().is_some_and(|e| e == "json" || e == "yaml") {
                    files.push(path);
                }
            }
        }
        let (mut checked, mut found) = (0, 0);
        for path in files {
            let bytes = std::fs::read(&path).expect("a corpus file");
            let Ok(text) = std::str::from_utf8(&bytes) else { continue };
            let parsed = match crate::source::Format::detect(text) {
                crate::source::Format::Json => crate::json::parse(text),
                crate::source::Format::Yaml => crate::yaml::parse(text),
            };
            let Some(mut document) = parsed.root else { continue };
            let table = match document.get("schemaVersion").map(|n| &n.value) {
                Some(Value::Number(crate::tree::Number::Integer(4))) => &crate::v4::MANIFEST,
                Some(Value::Number(crate::tree::Number::Integer(5))) => &crate::v5::MANIFEST,
                _ => continue,
            };
            if !matches!(document.value, Value::Object(_)) {
                continue;
            }
            let notes = crate::check::check_document(&mut document, table, &mut crate::bounded::Bounded::default());
            // A note the version's tables do not mark is never read for it.
            let mut marks = Vec::new();
            marked(table, "", false, &mut marks, 0);
            for (note, ..) in marks {
                let by_pointer = document.resolve(note.pointer());
                let by_pointer = by_pointer.complete.then_some(by_pointer.node).map(std::ptr::from_ref);
                let noted = notes.node(&document, note).map(std::ptr::from_ref);
                assert_eq!(noted, by_pointer, "{note:?} in {}", path.display());
                found += usize::from(noted.is_some());
            }
            checked += 1;
        }
        // The corpus holds hundreds of manifests, and most sections are present in them.
        assert!(checked > 500 && found > checked * 5, "{checked} documents, {found} nodes found");
    }
}
