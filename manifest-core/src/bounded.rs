//! Bounded answers: at most [`MAX_DIAGNOSTICS`] diagnostics per document, then one
//! `diagnostics_truncated` entry that counts the rest.
//!
//! The bound holds at the source: each stage of the pipeline (the reader, layer 1) collects
//! into a [`Bounded`] list that keeps the first problems it finds and only counts the others,
//! so a 1 MiB document of 180,000 repeated keys never holds more than a few thousand
//! diagnostics in memory, and every caller (the CLI's text and JSON, the publication service's
//! 422, the relay's project errors) gets the same bounded list.

use std::collections::HashSet;
use std::ops::Deref;

use crate::diagnostic::{Code, Diagnostic, Layer, Severity};

/// The most diagnostics a document's report lists; past it, one `diagnostics_truncated`
/// entry says how many more were found.
pub const MAX_DIAGNOSTICS: usize = 1000;

/// What a stage found past the cap: counted, not kept.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Omitted {
    /// How many.
    pub(crate) count: usize,
    /// Whether any of them is an error (the truncation entry is then an error too, so the
    /// verdict never depends on the cap).
    error: bool,
    /// The lowest layer among them.
    layer: Option<Layer>,
}

impl Omitted {
    fn add(&mut self, d: &Diagnostic) {
        self.count += 1;
        self.error |= d.is_error();
        self.layer = Some(self.layer.map_or(d.layer, |l| l.min(d.layer)));
    }

    /// Both stages' omissions together.
    pub(crate) fn and(self, other: Omitted) -> Omitted {
        let layer = match (self.layer, other.layer) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        Omitted { count: self.count + other.count, error: self.error || other.error, layer }
    }

    /// The one entry that stands for the omitted problems: pointer `""` (the whole document),
    /// no position, the lowest layer among them, an error if any of them is.
    fn entry(self) -> Diagnostic {
        let message = format!(
            "{} more problems not shown; only the first {MAX_DIAGNOSTICS} are listed: fix those and validate again",
            self.count
        );
        let layer = self.layer.unwrap_or(Layer::Schema);
        let severity = if self.error { Severity::Error } else { Severity::Warning };
        Diagnostic { severity, ..Diagnostic::error(layer, Code::DiagnosticsTruncated, "", message) }
    }
}

/// Diagnostics of one stage: the first [`MAX_DIAGNOSTICS`] kept, the rest counted. A stage
/// may also name pointers whose problems are already reported elsewhere (a YAML alias read as
/// a stand-in `null`); problems at or under them are dropped, not counted.
#[derive(Debug, Default)]
pub(crate) struct Bounded {
    kept: Vec<Diagnostic>,
    omitted: Omitted,
    /// Pointers at and under which problems are dropped.
    silenced: HashSet<String>,
}

impl Bounded {
    /// An empty list that drops problems at or under `silenced`.
    pub(crate) fn silencing(silenced: Vec<String>) -> Bounded {
        Bounded { silenced: silenced.into_iter().collect(), ..Bounded::default() }
    }

    /// Keeps `d` while there is room, counts it otherwise.
    pub(crate) fn push(&mut self, d: Diagnostic) {
        if !self.silenced.is_empty() && self.is_silenced(&d.pointer) {
            return;
        }
        if self.kept.len() < MAX_DIAGNOSTICS {
            self.kept.push(d);
        } else {
            self.omitted.add(&d);
        }
    }

    /// Whether some problems were only counted.
    pub(crate) fn overflowed(&self) -> bool {
        self.omitted.count > 0
    }

    /// The kept diagnostics and what was omitted.
    pub(crate) fn into_parts(self) -> (Vec<Diagnostic>, Omitted) {
        (self.kept, self.omitted)
    }

    /// The finished list: kept diagnostics, then the truncation entry if any were omitted.
    pub(crate) fn into_vec(self) -> Vec<Diagnostic> {
        let (mut kept, omitted) = self.into_parts();
        let _ = finish(&mut kept, omitted);
        kept
    }

    /// At or under a silenced pointer: the pointer itself, or a prefix ending before a `/`.
    /// At most one lookup per level (documents nest at most 64 levels).
    fn is_silenced(&self, pointer: &str) -> bool {
        self.silenced.contains(pointer)
            || pointer.match_indices('/').any(|(i, _)| i > 0 && self.silenced.contains(&pointer[..i]))
    }
}

impl Deref for Bounded {
    type Target = [Diagnostic];

    fn deref(&self) -> &[Diagnostic] {
        &self.kept
    }
}

impl IntoIterator for Bounded {
    type Item = Diagnostic;
    type IntoIter = std::vec::IntoIter<Diagnostic>;

    /// The kept diagnostics (without a truncation entry).
    fn into_iter(self) -> Self::IntoIter {
        self.kept.into_iter()
    }
}

/// Bounds a document's diagnostics, already in document order: the first [`MAX_DIAGNOSTICS`]
/// stay, the rest join `omitted`, and one `diagnostics_truncated` entry goes last when
/// anything was omitted. Returns how many were omitted.
pub(crate) fn finish(diagnostics: &mut Vec<Diagnostic>, mut omitted: Omitted) -> usize {
    if diagnostics.len() > MAX_DIAGNOSTICS {
        for d in diagnostics.drain(MAX_DIAGNOSTICS..) {
            omitted.add(&d);
        }
    }
    if omitted.count > 0 {
        diagnostics.push(omitted.entry());
    }
    omitted.count
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(pointer: &str) -> Diagnostic {
        Diagnostic::error(Layer::Semantic, Code::UnknownField, pointer, "x")
    }

    #[test]
    fn keeps_the_first_and_counts_the_rest() {
        let mut list = Bounded::default();
        for i in 0..MAX_DIAGNOSTICS + 5 {
            list.push(error(&format!("/k{i}")));
        }
        assert_eq!(list.len(), MAX_DIAGNOSTICS);
        assert!(list.overflowed());
        let all = list.into_vec();
        assert_eq!(all.len(), MAX_DIAGNOSTICS + 1);
        let last = &all[MAX_DIAGNOSTICS];
        assert_eq!((last.code, last.pointer.as_str(), last.layer), (Code::DiagnosticsTruncated, "", Layer::Semantic));
        assert!(last.is_error());
        assert!(last.message.starts_with("5 more problems not shown"), "{}", last.message);
    }

    #[test]
    fn a_list_within_the_cap_is_untouched() {
        let mut list = Bounded::default();
        (0..MAX_DIAGNOSTICS).for_each(|i| list.push(error(&format!("/k{i}"))));
        assert!(!list.overflowed());
        assert_eq!(list.into_vec().len(), MAX_DIAGNOSTICS);
    }

    #[test]
    fn finishing_cuts_a_long_list_and_merges_the_counts() {
        let mut all: Vec<Diagnostic> = (0..MAX_DIAGNOSTICS + 3).map(|i| error(&format!("/k{i}"))).collect();
        let earlier = Omitted { count: 10, error: false, layer: Some(Layer::Schema) };
        assert_eq!(finish(&mut all, earlier), 13);
        assert_eq!(all.len(), MAX_DIAGNOSTICS + 1);
        let last = &all[MAX_DIAGNOSTICS];
        assert!(last.message.starts_with("13 more problems"), "{}", last.message);
        assert_eq!(last.layer, Layer::Schema, "the lowest layer among the omitted");
        assert!(last.is_error());
    }

    #[test]
    fn only_warnings_omitted_give_a_warning() {
        let mut all: Vec<Diagnostic> = Vec::new();
        let warning = Diagnostic::warning(Layer::Schema, Code::DeprecatedManifestField, "/a", "w");
        all.extend(std::iter::repeat_n(warning, MAX_DIAGNOSTICS + 1));
        assert_eq!(finish(&mut all, Omitted::default()), 1);
        assert_eq!(all[MAX_DIAGNOSTICS].severity, Severity::Warning);
    }

    #[test]
    fn silenced_pointers_and_what_is_under_them_are_dropped_uncounted() {
        let mut list = Bounded::silencing(vec!["/a/b".to_owned()]);
        for p in ["/a/b", "/a/b/c", "/a/bc", "/a", "/x/a/b"] {
            list.push(error(p));
        }
        let kept: Vec<&str> = list.iter().map(|d| d.pointer.as_str()).collect();
        assert_eq!(kept, ["/a/bc", "/a", "/x/a/b"]);
        assert!(!list.overflowed());
    }
}
