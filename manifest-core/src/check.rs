//! Layer 1, the strict schema: walks a document tree against the shape tables, reports every
//! problem (unknown fields with near-miss suggestions, closed unions, types, bounds, formats)
//! and fills in defaults, so the tree that comes out is the fully defaulted document.

use std::collections::HashSet;

use crate::bounded::Bounded;
use crate::diagnostic::{Code, Diagnostic, Layer};
use crate::notes::Notes;
use crate::shape::{
    ArrayShape, DefaultValue, Field, IntShape, MapShape, ObjectShape, Presence, Shape, StrFormat, StrShape, UnionShape,
};
use crate::tree::{Member, Node, Number, PointerBuf, Span, Text, Value, same_key};

/// Checks `root` against `shape`, appending problems to `out` (bounded: past the cap they are
/// only counted) and filling defaults in place. Returns where it found the nodes layer 2 reads.
pub(crate) fn check_document<'a>(root: &mut Node<'a>, shape: &'static ObjectShape, out: &mut Bounded) -> Notes {
    let mut walker = Walker { out, path: Vec::with_capacity(16), notes: Notes::default() };
    walker.object(root, shape);
    walker.notes
}

/// One step of the path from the root to the value being checked.
enum Step<'a> {
    Key(Text<'a>),
    Index(usize),
}

struct Walker<'d, 'a> {
    out: &'d mut Bounded,
    /// Where the walk is. Most values are fine, so the path is kept as steps (borrowed from the
    /// tree or the tables) and spelled out as a pointer only for a diagnostic.
    path: Vec<Step<'a>>,
    /// Where the fields the tables mark for layer 2 were found or filled in.
    notes: Notes,
}

impl<'a> Walker<'_, 'a> {
    fn value(&mut self, node: &mut Node<'a>, shape: &Shape) {
        match shape {
            Shape::Bool => match &node.value {
                Value::Bool(_) => {}
                // YAML 1.1 booleans are strings in YAML 1.2; say so.
                Value::String(s) if ["yes", "no", "on", "off", "y", "n"].contains(&s.to_ascii_lowercase().as_str()) => {
                    let hint = format!("in YAML 1.2 \"{s}\" is a string, write true or false");
                    self.wrong_type(node, "a boolean (true or false)", Some(&hint));
                }
                _ => self.wrong_type(node, "a boolean (true or false)", None),
            },
            Shape::AlwaysTrue(why) => match node.value {
                Value::Bool(true) => {}
                Value::Bool(false) => self.error(Code::InvalidValue, format!("must be true: {why}")),
                _ => self.wrong_type(node, "the boolean true", None),
            },
            Shape::Integer(bounds) => self.integer(node, bounds),
            Shape::Str(rule) => self.string(node, rule),
            Shape::Array(rule) => self.array(node, rule),
            Shape::Object(obj) => self.object(node, obj),
            Shape::Union(union) => self.union(node, union),
            Shape::Map(map) => self.map(node, map),
        }
    }

    fn integer(&mut self, node: &Node<'a>, bounds: &IntShape) {
        match node.value {
            Value::Number(Number::Integer(i)) => {
                if i < i128::from(bounds.min) || i > i128::from(bounds.max) {
                    let range = describe_range(bounds);
                    self.error(Code::OutOfRange, format!("{i} is out of range: {range}"));
                }
            }
            Value::String(ref s) if s.parse::<i128>().is_ok() => {
                self.wrong_type(node, "an integer", Some("write the number without quotes"));
            }
            _ => self.wrong_type(node, "an integer", None),
        }
    }

    fn string(&mut self, node: &Node<'a>, rule: &StrShape) {
        let Value::String(s) = &node.value else {
            return self.wrong_type(node, "a string", rule.hint);
        };
        if let Some(problem) = string_problem(s, rule) {
            let d = Diagnostic::error(Layer::Schema, problem.code, self.pointer(), problem.message);
            self.out.push(match problem.suggestion {
                Some(fix) => d.with_suggestion(fix),
                None => d,
            });
        }
    }

    fn array(&mut self, node: &mut Node<'a>, rule: &ArrayShape) {
        let Value::Array(items) = &mut node.value else {
            let kind = node.value.kind();
            return self.error(Code::InvalidType, format!("expected an array, found {kind}"));
        };
        if items.len() < rule.min_items {
            let message = if rule.min_items == 1 {
                "must not be empty; add at least one item".to_owned()
            } else {
                format!("has {} items; at least {} are required", items.len(), rule.min_items)
            };
            self.error(Code::TooFewItems, message);
        }
        if let Some(max) = rule.max_items
            && items.len() > max
        {
            self.error(Code::TooManyItems, format!("has {} items; the limit is {max}", items.len()));
        }
        let mut duplicates = Vec::new();
        if rule.unique {
            let mut seen: HashSet<&str> = HashSet::new();
            for (i, item) in items.iter().enumerate() {
                if let Value::String(s) = &item.value
                    && !seen.insert(s)
                {
                    duplicates.push((i, s.clone()));
                }
            }
        }
        let mut dups = duplicates.into_iter().peekable();
        for (i, item) in items.iter_mut().enumerate() {
            self.path.push(Step::Index(i));
            self.value(item, &rule.items);
            if dups.peek().is_some_and(|(d, _)| *d == i)
                && let Some((_, s)) = dups.next()
            {
                self.error(Code::DuplicateItem, format!("\"{s}\" is listed twice; items must be distinct"));
            }
            self.path.pop();
        }
    }

    fn map(&mut self, node: &mut Node<'a>, rule: &MapShape) {
        let Value::Object(members) = &mut node.value else {
            let kind = node.value.kind();
            return self.error(Code::InvalidType, format!("expected an object, found {kind}"));
        };
        if let Some(max) = rule.max_entries
            && members.len() > max
        {
            self.error(Code::TooManyItems, format!("has {} entries; the limit is {max}", members.len()));
        }
        for m in members.iter_mut() {
            // A key written without escapes is borrowed, so this costs no allocation.
            self.path.push(Step::Key(m.key.clone()));
            if rule.keys.min_chars > 0 && m.key.is_empty() {
                self.key_error(Code::TooShort, "keys must not be empty".to_owned());
            } else if let Some(problem) = string_problem(&m.key, &rule.keys) {
                self.key_error(problem.code, format!("key {}", problem.message));
            }
            self.value(&mut m.value, &rule.values);
            self.path.pop();
        }
    }

    fn object(&mut self, node: &mut Node<'a>, shape: &ObjectShape) {
        if !matches!(node.value, Value::Object(_)) {
            let kind = node.value.kind();
            return self.error(Code::InvalidType, format!("expected an object ({}), found {kind}", shape.name));
        }
        self.members(node, shape, None);
    }

    fn union(&mut self, node: &mut Node<'a>, union: &UnionShape) {
        let Value::Object(members) = &node.value else {
            let kind = node.value.kind();
            return self.error(Code::InvalidType, format!("expected an object ({}), found {kind}", union.name));
        };
        // Built only on the error paths below: most unions are fine.
        let values = || quoted_list(&union.values());
        let Some(tag) = members.iter().find(|m| same_key(&m.key, union.tag)) else {
            let pointer = self.pointer_to(union.tag);
            let message =
                format!("missing required field \"{}\": the {} is one of {}", union.tag, union.name, values());
            self.out.push(Diagnostic::error(Layer::Schema, Code::MissingRequiredField, pointer, message));
            return;
        };
        let arm = match &tag.value.value {
            Value::String(s) => match union.arm(s) {
                Some(arm) => arm,
                None => {
                    let article = if union.name.starts_with(['a', 'e', 'i', 'o', 'u']) { "an" } else { "a" };
                    let mut message =
                        format!("\"{s}\" is not {article} {} {}; use one of {}", union.name, union.tag, values());
                    let close = suggest(s, union.values().into_iter());
                    if let Some(close) = close {
                        message.push_str(&format!(" (did you mean \"{close}\"?)"));
                    }
                    let pointer = self.pointer_to(union.tag);
                    let d = Diagnostic::error(Layer::Schema, Code::UnknownVariant, pointer, message);
                    self.out.push(match close {
                        Some(close) => d.with_suggestion(close),
                        None => d,
                    });
                    return;
                }
            },
            other => {
                let message = format!("expected a string ({}), found {}", values(), other.kind());
                let pointer = self.pointer_to(union.tag);
                self.out.push(Diagnostic::error(Layer::Schema, Code::InvalidType, pointer, message));
                return;
            }
        };
        self.members(node, &arm.object, Some((union, arm.value)));
    }

    /// Checks the members of an object against `shape` (for a union arm, `arm` names the union
    /// and the chosen discriminator value), then reports missing fields and fills defaults.
    fn members(&mut self, node: &mut Node<'a>, shape: &ObjectShape, arm: Option<(&UnionShape, &str)>) {
        let span = node.span;
        let Value::Object(members) = &mut node.value else {
            return;
        };
        // Which fields are present, by index (a test keeps every object under 64 fields).
        let mut present: u64 = 0;
        // Members are often written in the order the table lists them, so the field after the
        // last one found is tried before the table is searched (names are distinct within a
        // table, a test checks, so both find the same field).
        let mut next = 0;
        // The object's keys, gathered at its first unknown field (a did-you-mean never names a
        // key already written): once per object, so a thousand unknown keys stay linear.
        let mut written: Option<HashSet<String>> = None;
        for index in 0..members.len() {
            let m = &mut members[index];
            let found = match shape.fields.get(next) {
                Some(f) if same_key(f.name, &m.key) => Some(next),
                _ => shape.fields.iter().position(|f| same_key(f.name, &m.key)),
            };
            if let Some(i) = found {
                next = i + 1;
                let field = &shape.fields[i];
                present |= 1 << i;
                if let Some(note) = field.note {
                    self.notes.note(note, index);
                }
                // The table's name is the key: a `'static` borrow even if the key was escaped.
                self.path.push(Step::Key(Text::Borrowed(field.name)));
                if field.deprecated {
                    let message = format!(
                        "\"{}\" is deprecated and kept only for compatibility; remove it from new manifests",
                        m.key
                    );
                    self.out.push(
                        Diagnostic::warning(Layer::Schema, Code::DeprecatedManifestField, self.pointer(), message)
                            .on_key(),
                    );
                }
                self.value(&mut m.value, &field.shape);
                self.path.pop();
            } else if arm.is_none_or(|(u, _)| !same_key(&m.key, u.tag)) {
                // A key written without escapes is borrowed, so this costs no allocation.
                let key = m.key.clone();
                self.path.push(Step::Key(key.clone()));
                let keys = written.get_or_insert_with(|| members.iter().map(|o| o.key.to_string()).collect());
                self.unexpected(&key, shape, arm, &|name| keys.contains(name));
                self.path.pop();
            }
        }

        let mut count = members.len();
        // Room for exactly the defaults about to be filled in: one reallocation at most. The
        // readers size most objects for every field, so the defaults are counted only when
        // the room left could be too small.
        let absent = |i: usize| present & (1 << i) == 0;
        let missing = shape.fields.len() - present.count_ones() as usize;
        if members.capacity() - members.len() < missing {
            let defaults = shape
                .fields
                .iter()
                .enumerate()
                .filter(|&(i, f)| absent(i) && matches!(f.presence, Presence::Default(_)))
                .count();
            members.reserve_exact(defaults);
        }
        for (i, field) in shape.fields.iter().enumerate() {
            if !absent(i) {
                continue;
            }
            match field.presence {
                Presence::Optional => {}
                Presence::Required => {
                    let pointer = self.pointer_to(field.name);
                    let message = format!("missing required field \"{}\" ({})", field.name, field.doc);
                    self.out.push(Diagnostic::error(Layer::Schema, Code::MissingRequiredField, pointer, message));
                }
                Presence::Default(default) => self.push_default(members, field, default, span),
            }
        }
        if arm.is_some() {
            count -= 1;
        }
        if count < shape.min_fields {
            let names: Vec<&str> = shape.fields.iter().map(|f| f.name).collect();
            self.error(Code::EmptyObject, format!("must contain at least one of {}", quoted_list(&names)));
        }
    }

    /// Fills in the defaults of an object default (`{}`, or a union's default arm: its tag
    /// alone) and of the object defaults inside it. A default is valid against its own shape
    /// (a test checks), so walking it could only add defaults: they are added directly, without
    /// looking each field up. A shape other than an object or a known arm is walked.
    fn default_object(&mut self, node: &mut Node<'a>, shape: &Shape) {
        let object = match (shape, &node.value) {
            (Shape::Object(object), Value::Object(members)) if members.is_empty() => Some(*object),
            // The default arm holds its tag alone, as `default_value` writes it.
            (Shape::Union(union), Value::Object(members)) if members.len() == 1 => match &members[0].value.value {
                Value::String(tag) if same_key(&members[0].key, union.tag) => union.arm(tag).map(|a| &a.object),
                _ => None,
            },
            _ => None,
        };
        let (Some(object), Value::Object(members)) = (object, &mut node.value) else {
            return self.value(node, shape);
        };
        // What the walk would do otherwise: report a missing field, or count the tag as a field.
        let tag = match shape {
            Shape::Union(union) => Some(union.tag),
            _ => None,
        };
        if object.min_fields > 0
            || object
                .fields
                .iter()
                .any(|f| matches!(f.presence, Presence::Required) || tag.is_some_and(|t| same_key(f.name, t)))
        {
            return self.value(node, shape);
        }
        let span = node.span;
        let defaults = object.fields.iter().filter(|f| matches!(f.presence, Presence::Default(_))).count();
        members.reserve_exact(defaults);
        for field in object.fields {
            let Presence::Default(default) = field.presence else { continue };
            self.push_default(members, field, default, span);
        }
    }

    /// Appends `field` with its default to `members`, at `span` (the object's), and fills in
    /// the defaults inside an object default.
    fn push_default(&mut self, members: &mut Vec<Member<'a>>, field: &Field, default: DefaultValue, span: Span) {
        // The member goes in first and its value is written in place: a node built aside and
        // then moved in (written in small pieces, read back in wide ones) stalled store
        // forwarding on every default.
        let at = members.len();
        if let Some(note) = field.note {
            self.notes.note(note, at);
        }
        members.push(DEFAULTED);
        let member = &mut members[at];
        member.key = Text::Borrowed(field.name);
        member.key_span = span;
        member.value.span = span;
        member.value.value = default_value(default, &field.shape);
        // Every default is valid against its own shape (a test checks), so only an object
        // default is gone into: to fill in its own fields' defaults.
        if matches!(default, DefaultValue::EmptyObject | DefaultValue::Arm(_)) {
            self.path.push(Step::Key(Text::Borrowed(field.name)));
            self.default_object(&mut member.value, &field.shape);
            self.path.pop();
        }
    }

    /// Reports a member the object does not have: a refused name with its own message, a field
    /// of another union arm, or an unknown field with a near-miss suggestion.
    /// A near miss already written in the object (`written`) is not suggested: renaming to it
    /// would repeat a key.
    fn unexpected(
        &mut self,
        key: &str,
        shape: &ObjectShape,
        arm: Option<(&UnionShape, &str)>,
        written: &dyn Fn(&str) -> bool,
    ) {
        if let Some(refused) = shape.refused.iter().flat_map(|list| list.iter()).find(|r| r.name == key) {
            return self.key_error(refused.code, refused.message.to_owned());
        }
        if let Some((union, chosen)) = arm
            && let Some(other) = union.arms.iter().find(|a| a.object.fields.iter().any(|f| f.name == key))
        {
            let message = format!(
                "\"{key}\" belongs to {} {} \"{}\", not \"{chosen}\"; the arms of a union do not mix",
                union.name, union.tag, other.value
            );
            return self.key_error(Code::ForeignArmField, message);
        }
        let names = shape.fields.iter().map(|f| f.name).chain(arm.map(|(u, _)| u.tag)).filter(|n| !written(n));
        let mut message = format!("unknown field \"{key}\"");
        if let Some(close) = suggest(key, names) {
            message.push_str(&format!("; did you mean \"{close}\"?"));
            let d = Diagnostic::error(Layer::Schema, Code::UnknownField, self.pointer(), message);
            return self.out.push(d.on_key().with_suggestion(close));
        } else {
            let allowed: Vec<&str> = shape.fields.iter().map(|f| f.name).collect();
            if allowed.is_empty() {
                message.push_str(&format!(" ({} has no other fields)", shape.name));
            } else {
                message.push_str(&format!("; allowed fields: {}", quoted_list(&allowed)));
            }
        }
        self.key_error(Code::UnknownField, message);
    }

    fn wrong_type(&mut self, node: &Node<'a>, expected: &str, hint: Option<&str>) {
        let mut message = format!("expected {expected}, found {}", node.value.kind());
        if let Value::Number(Number::Float(f)) = node.value {
            message = format!("expected {expected}, found {f} (a number with a fraction or exponent)");
        }
        if let Some(hint) = hint {
            message.push_str("; ");
            message.push_str(hint);
        }
        self.error(Code::InvalidType, message);
    }

    fn error(&mut self, code: Code, message: String) {
        self.out.push(Diagnostic::error(Layer::Schema, code, self.pointer(), message));
    }

    fn key_error(&mut self, code: Code, message: String) {
        self.out.push(Diagnostic::error(Layer::Schema, code, self.pointer(), message).on_key());
    }

    /// The RFC 6901 pointer of where the walk is.
    fn pointer(&self) -> String {
        let mut p = PointerBuf::with_capacity(64);
        for step in &self.path {
            match step {
                Step::Key(key) => p.push(key),
                Step::Index(i) => p.push_index(*i),
            }
        }
        p.into_string()
    }

    /// The pointer of a member `key` of the object where the walk is.
    fn pointer_to(&self, key: &str) -> String {
        let mut p = PointerBuf::from(self.pointer());
        p.push(key);
        p.into_string()
    }
}

/// What is wrong with a string, and the value that would fix it when one stands out.
struct StringProblem {
    code: Code,
    message: String,
    suggestion: Option<&'static str>,
}

impl StringProblem {
    fn new(code: Code, message: String) -> StringProblem {
        StringProblem { code, message, suggestion: None }
    }
}

/// What is wrong with a string (a value or a map key) under `rule`, if anything: the length
/// first, then the format.
fn string_problem(s: &str, rule: &StrShape) -> Option<StringProblem> {
    // Counting characters walks the whole string; most strings have no length bounds.
    let chars = if rule.min_chars > 0 || rule.max_chars.is_some() { s.chars().count() } else { 0 };
    if chars < rule.min_chars {
        let message = if rule.min_chars == 1 {
            "must not be empty".to_owned()
        } else {
            format!("must have at least {} characters", rule.min_chars)
        };
        return Some(StringProblem::new(Code::TooShort, message));
    }
    if let Some(max) = rule.max_chars
        && chars > max
    {
        return Some(StringProblem::new(Code::TooLong, format!("is {chars} characters long; the limit is {max}")));
    }
    match rule.format {
        StrFormat::Any => None,
        StrFormat::Const(expected) => (!same_key(s, expected)).then(|| StringProblem {
            code: Code::InvalidValue,
            message: format!("\"{s}\" is not allowed; the only value is \"{expected}\""),
            suggestion: Some(expected),
        }),
        StrFormat::Enum(values) => (!values.iter().any(|v| same_key(v, s))).then(|| {
            let mut message = format!("\"{s}\" is not one of {}", quoted_list(values));
            let close = suggest(s, values.iter().copied());
            if let Some(close) = close {
                message.push_str(&format!("; did you mean \"{close}\"?"));
            }
            StringProblem { code: Code::InvalidValue, message, suggestion: close }
        }),
        StrFormat::Pattern(p) => (!(p.check)(s))
            .then(|| StringProblem::new(Code::InvalidFormat, format!("\"{}\" is not {}", shorten(s), p.describe))),
    }
}

/// A default member before its key and value are written (see [`Walker::members`]).
const DEFAULTED: Member<'static> = Member {
    key: Text::Borrowed(""),
    key_span: Span { start: 0, end: 0 },
    value: Node { span: Span { start: 0, end: 0 }, value: Value::Null },
    defaulted: true,
};

#[inline]
pub(crate) fn default_value(default: DefaultValue, shape: &Shape) -> Value<'static> {
    match default {
        DefaultValue::Bool(b) => Value::Bool(b),
        DefaultValue::Integer(i) => Value::Number(Number::Integer(i128::from(i))),
        DefaultValue::Str(s) => Value::String(s.into()),
        DefaultValue::EmptyObject => Value::Object(Vec::new()),
        DefaultValue::EmptyArray => Value::Array(Vec::new()),
        DefaultValue::Arm(value) => {
            let tag = match shape {
                Shape::Union(u) => u.tag,
                _ => "mode",
            };
            let node = Node { span: Default::default(), value: Value::String(value.into()) };
            Value::Object(vec![Member { key: tag.into(), key_span: Default::default(), value: node, defaulted: true }])
        }
    }
}

fn describe_range(b: &IntShape) -> String {
    match (b.min, b.max) {
        (0, max) => format!("must be at most {max}"),
        (min, max) if min == max => format!("must be {min}"),
        (min, max) => format!("must be between {min} and {max}"),
    }
}

pub(crate) fn quoted_list(values: &[&str]) -> String {
    let quoted: Vec<String> = values.iter().map(|v| format!("\"{v}\"")).collect();
    quoted.join(", ")
}

/// Long values are cut in messages so one diagnostic stays one line.
fn shorten(s: &str) -> String {
    const MAX: usize = 80;
    if s.chars().count() <= MAX { s.to_owned() } else { format!("{}...", s.chars().take(MAX).collect::<String>()) }
}

/// The closest candidate to a misspelling, if one is close enough to be a likely typo.
pub(crate) fn suggest<'a>(input: &str, candidates: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    let lower = input.to_ascii_lowercase();
    candidates
        .map(|c| (strsim::jaro_winkler(&lower, &c.to_ascii_lowercase()), c))
        .filter(|(score, _)| *score >= 0.85)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c)
}

/// Whether every default in a shape table is valid against its own shape; used by tests (and
/// `document::table_problems`, for other crates' tables) so that filling defaults can never
/// produce a diagnostic.
pub(crate) fn defaults_are_valid(shape: &'static ObjectShape) -> Vec<Diagnostic> {
    fn fields(fs: &'static [crate::shape::Field], out: &mut Bounded) {
        for f in fs {
            if let Presence::Default(d) = f.presence {
                let mut node = Node { span: Default::default(), value: default_value(d, &f.shape) };
                let mut w = Walker { out, path: vec![Step::Key(Text::Borrowed(f.name))], notes: Notes::default() };
                w.value(&mut node, &f.shape);
            }
            nested(&f.shape, out);
        }
    }
    fn nested(shape: &Shape, out: &mut Bounded) {
        match shape {
            Shape::Object(o) => fields(o.fields, out),
            Shape::Union(u) => u.arms.iter().for_each(|a| fields(a.object.fields, out)),
            Shape::Array(a) => nested(&a.items, out),
            Shape::Map(m) => nested(&m.values, out),
            _ => {}
        }
    }
    let mut out = Bounded::default();
    fields(shape.fields, &mut out);
    out.into_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Calls `check` on every object shape reachable from `root` (arms included).
    fn each_object(root: &ObjectShape, check: &dyn Fn(&ObjectShape)) {
        fn walk(shape: &Shape, check: &dyn Fn(&ObjectShape)) {
            match shape {
                Shape::Object(o) => each_object(o, check),
                Shape::Union(u) => u.arms.iter().for_each(|a| each_object(&a.object, check)),
                Shape::Array(a) => walk(&a.items, check),
                Shape::Map(m) => walk(&m.values, check),
                _ => {}
            }
        }
        check(root);
        root.fields.iter().for_each(|f| walk(&f.shape, check));
    }

    #[test]
    fn every_object_has_at_most_64_fields() {
        for root in [&crate::v4::MANIFEST, &crate::v5::MANIFEST] {
            each_object(root, &|o| assert!(o.fields.len() <= 64, "{} has {} fields", o.name, o.fields.len()));
        }
    }

    #[test]
    fn field_names_are_distinct_within_an_object() {
        // `members` tries the field after the last one found before searching the table, which
        // finds the same field only if no name appears twice.
        for root in [&crate::v4::MANIFEST, &crate::v5::MANIFEST, &crate::policy::POLICY] {
            each_object(root, &|o| {
                let names: HashSet<&str> = o.fields.iter().map(|f| f.name).collect();
                assert_eq!(names.len(), o.fields.len(), "{} repeats a field name", o.name);
            });
        }
    }

    #[test]
    fn every_default_is_valid_against_its_own_shape() {
        assert_eq!(defaults_are_valid(&crate::v4::MANIFEST), []);
        assert_eq!(defaults_are_valid(&crate::v5::MANIFEST), []);
    }

    #[test]
    fn suggestions_catch_typos_only() {
        let names = ["schedule", "placement", "lifecycle", "spend"];
        assert_eq!(suggest("sheduel", names.into_iter()), Some("schedule"));
        assert_eq!(suggest("Schedule", names.into_iter()), Some("schedule"));
        assert_eq!(suggest("lifecyle", names.into_iter()), Some("lifecycle"));
        assert_eq!(suggest("owner", names.into_iter()), None);
    }

    #[test]
    fn each_did_you_mean_carries_its_replacement_and_only_those_do() {
        let text = r#"{"schema": "svc.aplication-manifest", "schemaVersion": 5, "applicationId": "a",
            "release": {"mode": "sourse"}, "runtime": {"kind": "javascript", "engine": "nodejz"},
            "deployment": {"jobz": 1, "owner": 2}}"#;
        let report = crate::validate(text.as_bytes());
        let fixes: Vec<(&str, Option<&str>)> =
            report.diagnostics.iter().map(|d| (d.pointer.as_str(), d.suggestion.as_deref())).collect();
        for expected in [
            ("/schema", Some("svc.application-manifest")),
            ("/release/mode", Some("source")),
            ("/runtime/engine", Some("nodejs")),
            ("/deployment/jobz", Some("jobs")),
            ("/deployment/owner", None),
        ] {
            assert!(fixes.contains(&expected), "{expected:?} in {fixes:?}");
        }
        let repeat = crate::validate(
            br#"{"schema": "svc.application-manifest", "schemaVersion": 5, "deployment": {"jobs": 1, "job": 2}}"#,
        );
        let job = repeat.diagnostics.iter().find(|d| d.pointer == "/deployment/job").expect("job");
        assert_eq!(job.suggestion, None, "jobs is written already: {}", job.message);
        assert!(!job.message.contains("did you mean"), "{}", job.message);
        let unfixed =
            report.diagnostics.iter().filter(|d| d.suggestion.is_some() && !d.message.contains("did you mean"));
        assert_eq!(unfixed.map(|d| d.code).collect::<Vec<_>>(), [Code::InvalidValue], "only a constant's is silent");
    }
}
