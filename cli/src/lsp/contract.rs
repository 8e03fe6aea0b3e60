//! What the shape tables say about a place in a document: the field a path names, its
//! contract in words (hover), and what may be written there (completion). The tables are the
//! ones `validate` walks, so the editor and the validator cannot disagree.

use std::fmt::Write as _;

use manifest_core::shape::{DefaultValue, Field, ObjectShape, Presence, Shape, StrFormat, StrShape, UnionShape};

use super::cursor::Step;

/// A place the tables describe.
#[derive(Clone, Copy)]
pub(crate) enum Place {
    /// A field of an object (or of a union's arm).
    Field(&'static Field),
    /// A union's discriminator (`kind`, `mode`, `source`).
    Tag(&'static UnionShape),
    /// A list item or a map entry: its shape, and what holds it.
    Item(Shape, &'static str),
}

impl Place {
    /// The shape of the value written there (a discriminator's values are its arms).
    pub(crate) fn shape(self) -> Option<Shape> {
        match self {
            Place::Field(f) => Some(f.shape),
            Place::Tag(_) => None,
            Place::Item(shape, _) => Some(shape),
        }
    }
}

/// Which arm a union is: `arm_of(depth, tag)` is the value of the discriminator `tag` of
/// the object `path[..depth]` names, where the document says it.
pub(crate) type ArmOf<'a> = dyn Fn(usize, &str) -> Option<String> + 'a;

/// The place `path` names under `root`, if the tables have it. `arm_of` tells a union's
/// arm; where it cannot, the first arm with the key is taken.
pub(crate) fn resolve(root: &'static ObjectShape, path: &[Step], arm_of: &ArmOf<'_>) -> Option<Place> {
    let mut shape = Shape::Object(root);
    let mut place = None;
    for (depth, step) in path.iter().enumerate() {
        let next = match (shape, step) {
            (Shape::Object(object), Step::Key(key)) => Place::Field(object.fields.iter().find(|f| f.name == key)?),
            (Shape::Union(union), Step::Key(key)) if key == union.tag => Place::Tag(union),
            (Shape::Union(union), Step::Key(key)) => {
                let chosen = arm_of(depth, union.tag).and_then(|value| union.arm(&value));
                let field = |arm: &'static manifest_core::shape::Arm| arm.object.fields.iter().find(|f| f.name == key);
                Place::Field(match chosen {
                    Some(arm) => field(arm)?,
                    None => union.arms.iter().find_map(field)?,
                })
            }
            (Shape::Map(map), Step::Key(_)) => Place::Item(map.values, "an entry of the map"),
            (Shape::Array(array), Step::Index(_)) => Place::Item(array.items, "an item of the list"),
            _ => return None,
        };
        shape = match next.shape() {
            Some(shape) => shape,
            None => return (depth + 1 == path.len()).then_some(next),
        };
        place = Some(next);
    }
    place
}

/// A field that may be written in an object.
pub(crate) struct Candidate {
    pub(crate) name: &'static str,
    pub(crate) detail: String,
    pub(crate) doc: String,
    pub(crate) deprecated: bool,
    pub(crate) required: bool,
}

/// The fields an object of `shape` may have that `written` does not name yet. A union's
/// discriminator comes first; its arm's fields follow once the discriminator is written (or
/// every arm's, each once, while it is not).
pub(crate) fn fields(shape: Shape, written: &[(String, Option<String>)]) -> Vec<Candidate> {
    let absent = |name: &str| !written.iter().any(|(k, _)| k == name);
    let mut out = Vec::new();
    let mut take = |f: &'static Field| {
        if absent(f.name) && !out.iter().any(|c: &Candidate| c.name == f.name) {
            out.push(Candidate {
                name: f.name,
                detail: describe(f.shape),
                doc: hover_field(f),
                deprecated: f.deprecated,
                required: matches!(f.presence, Presence::Required),
            });
        }
    };
    match shape {
        Shape::Object(object) => object.fields.iter().for_each(&mut take),
        Shape::Union(union) => {
            let tag = written.iter().find(|(k, _)| k == union.tag).and_then(|(_, v)| v.as_deref());
            match tag.and_then(|value| union.arm(value)) {
                Some(arm) => arm.object.fields.iter().for_each(&mut take),
                None => union.arms.iter().flat_map(|a| a.object.fields).for_each(&mut take),
            }
            if absent(union.tag) {
                out.insert(
                    0,
                    Candidate {
                        name: union.tag,
                        detail: format!("one of {}", code_list(&union.values())),
                        doc: hover_tag(union),
                        deprecated: false,
                        required: true,
                    },
                );
            }
        }
        _ => {}
    }
    out
}

/// A value that may be written.
pub(crate) struct Value {
    /// As JSON: `"text"`, `true`.
    pub(crate) json: String,
    /// The bare text (`text`, `true`), as YAML writes it.
    pub(crate) bare: String,
    /// Why it is offered, when it is not one of a closed set: the field's default, an example
    /// of its format, or the number being typed with a unit of the format.
    pub(crate) note: Option<&'static str>,
}

/// The values a place may take: a closed set (enums, booleans, a union's arms, a constant),
/// or, for an open one, the field's default and the examples of its format
/// (`manifest_core::formats::examples`: durations, byte sizes, catalog names). `typed` is the
/// word written so far: digits in a duration's or a byte size's place are offered with each
/// unit the format's examples carry (`15` gives `15s`, `15m`, ...), each one the format accepts.
pub(crate) fn values(place: Place, typed: &str) -> Vec<Value> {
    let string = |s: &str, note| Value { json: format!("\"{s}\""), bare: s.to_owned(), note };
    let literal = |s: &str, note| Value { json: s.to_owned(), bare: s.to_owned(), note };
    let mut out: Vec<Value> = match (place, place.shape()) {
        (Place::Tag(union), _) => union.values().into_iter().map(|v| string(v, None)).collect(),
        (_, Some(Shape::Bool)) => vec![literal("true", None), literal("false", None)],
        (_, Some(Shape::AlwaysTrue(_))) => vec![literal("true", None)],
        (_, Some(Shape::Str(StrShape { format: StrFormat::Const(value), .. }))) => vec![string(value, None)],
        (_, Some(Shape::Str(StrShape { format: StrFormat::Enum(values), .. }))) => {
            values.iter().map(|v| string(v, None)).collect()
        }
        (_, Some(Shape::Str(StrShape { format: StrFormat::Pattern(pattern), .. }))) => {
            let examples = manifest_core::formats::examples(pattern);
            let mut out: Vec<Value> = Vec::new();
            if !typed.is_empty() && typed.bytes().all(|b| b.is_ascii_digit()) {
                for example in examples {
                    let candidate = format!("{typed}{}", example.trim_start_matches(|c: char| c.is_ascii_digit()));
                    if (pattern.check)(&candidate) && !out.iter().any(|v| v.bare == candidate) {
                        out.push(string(&candidate, Some("with a unit of the format")));
                    }
                }
            }
            out.extend(examples.iter().map(|e| string(e, Some("an example of the format"))));
            out
        }
        _ => Vec::new(),
    };
    // The default goes first, marked, unless it is already one of a closed set.
    let default = match place {
        Place::Field(Field { presence: Presence::Default(default), .. }) => match *default {
            DefaultValue::Str(s) => Some(string(s, Some("the default"))),
            DefaultValue::Integer(i) => Some(literal(&i.to_string(), Some("the default"))),
            _ => None,
        },
        _ => None,
    };
    if let Some(default) = default {
        match out.iter_mut().find(|v| v.bare == default.bare) {
            Some(same) if same.note.is_some() => same.note = default.note,
            Some(_) => {}
            None => out.insert(0, default),
        }
    }
    out
}

/// The hover text of a place, in Markdown.
pub(crate) fn hover(place: Place, name: &str) -> String {
    match place {
        Place::Field(field) => hover_field(field),
        Place::Tag(union) => hover_tag(union),
        Place::Item(shape, what) => format!("**`{name}`**: {what}\n\n{}", describe(shape)),
    }
}

fn hover_field(field: &Field) -> String {
    let mut out = format!("**`{}`**: {}", field.name, presence(field));
    if field.deprecated {
        out.push_str(", **deprecated** (kept for compatibility; remove it from new manifests)");
    }
    let _ = write!(out, "\n\n{}\n\n{}", describe(field.shape), field.doc);
    out
}

fn hover_tag(union: &UnionShape) -> String {
    format!(
        "**`{}`**: required\n\nwhich {} this is: one of {}; each has its own fields, and the arms do not mix",
        union.tag,
        union.name,
        code_list(&union.values())
    )
}

fn presence(field: &Field) -> String {
    match field.presence {
        Presence::Required => "required".to_owned(),
        Presence::Optional => "optional".to_owned(),
        Presence::Default(default) => format!("optional, default {}", default_text(default)),
    }
}

fn default_text(default: DefaultValue) -> String {
    match default {
        DefaultValue::Bool(b) => format!("`{b}`"),
        DefaultValue::Integer(i) => format!("`{i}`"),
        DefaultValue::Str(s) => format!("`\"{s}\"`"),
        DefaultValue::EmptyObject => "`{}` (then its own defaults)".to_owned(),
        DefaultValue::EmptyArray => "`[]`".to_owned(),
        DefaultValue::Arm(value) => format!("`{value}` (then its defaults)"),
    }
}

/// A shape in words: type, bounds, closed sets, formats.
pub(crate) fn describe(shape: Shape) -> String {
    match shape {
        Shape::Bool => "boolean".to_owned(),
        Shape::AlwaysTrue(why) => format!("always `true`: {why}"),
        Shape::Integer(rule) if rule.min == rule.max => format!("integer `{}`", rule.min),
        Shape::Integer(rule) if rule.max == manifest_core::shape::MAX_SAFE_INTEGER => {
            format!("integer, at least {}", rule.min)
        }
        Shape::Integer(rule) => format!("integer, {} to {}", rule.min, rule.max),
        Shape::Str(rule) => {
            let mut out = match rule.format {
                StrFormat::Any => "string".to_owned(),
                StrFormat::Const(value) => format!("the string `\"{value}\"`"),
                StrFormat::Enum(values) => format!("one of {}", code_list(values)),
                StrFormat::Pattern(p) => format!("string: {}", p.describe),
            };
            match (rule.min_chars, rule.max_chars) {
                (0, None) => {}
                (1, None) => out.push_str(", not empty"),
                (min, None) => {
                    let _ = write!(out, ", at least {min} characters");
                }
                (min, Some(max)) => {
                    let _ = write!(out, ", {min} to {max} characters");
                }
            }
            out
        }
        Shape::Array(array) => {
            let mut out = format!("list of {}", describe(array.items));
            match (array.min_items, array.max_items) {
                (0, None) => {}
                (min, None) => {
                    let _ = write!(out, "; at least {min}");
                }
                (min, Some(max)) => {
                    let _ = write!(out, "; {min} to {max} items");
                }
            }
            if array.unique {
                out.push_str(", each distinct");
            }
            out
        }
        Shape::Object(object) => format!("object ({})", object.name),
        Shape::Union(union) => {
            format!("object ({}): `{}` is one of {}", union.name, union.tag, code_list(&union.values()))
        }
        Shape::Map(map) => {
            let mut out = format!("map from names to {}", describe(map.values));
            if let Some(max) = map.max_entries {
                let _ = write!(out, "; at most {max} entries");
            }
            out
        }
    }
}

fn code_list(values: &[&str]) -> String {
    values.iter().map(|v| format!("`{v}`")).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(steps: &[&str]) -> Vec<Step> {
        steps
            .iter()
            .map(|s| match s.parse::<usize>() {
                Ok(i) => Step::Index(i),
                Err(_) => Step::Key((*s).to_owned()),
            })
            .collect()
    }

    fn none(_: usize, _: &str) -> Option<String> {
        None
    }

    #[test]
    fn a_path_through_objects_unions_and_lists_finds_its_field() {
        let root = &manifest_core::v5::MANIFEST;
        let Some(Place::Field(f)) = resolve(root, &path(&["deployment", "jobs"]), &none) else { panic!("jobs") };
        assert_eq!(f.name, "jobs");
        assert!(matches!(resolve(root, &path(&["runtime", "kind"]), &none), Some(Place::Tag(u)) if u.tag == "kind"));
        assert!(resolve(root, &path(&["deployment", "nope"]), &none).is_none());
        assert!(resolve(root, &path(&["schemaVersion", "x"]), &none).is_none());
    }

    #[test]
    fn the_arm_written_in_the_document_picks_the_field() {
        let root = &manifest_core::v5::MANIFEST;
        let written = |arm: &'static str| move |depth: usize, _: &str| (depth == 1).then(|| arm.to_owned());
        let execution = Shape::Union(match root.fields.iter().find(|f| f.name == "execution").map(|f| f.shape) {
            Some(Shape::Union(u)) => u,
            _ => panic!("execution is a union"),
        });
        let arms: Vec<&str> = match execution {
            Shape::Union(u) => u.values(),
            _ => unreachable!(),
        };
        for arm in arms {
            let offered = fields(execution, &[("mode".to_owned(), Some(arm.to_owned()))]);
            let Shape::Union(u) = execution else { unreachable!() };
            let own: Vec<&str> = u.arm(arm).expect("arm").object.fields.iter().map(|f| f.name).collect();
            assert_eq!(offered.iter().map(|c| c.name).collect::<Vec<_>>(), own, "{arm}");
            for name in own {
                let found = resolve(root, &path(&["execution", name]), &written(arm));
                assert!(matches!(found, Some(Place::Field(f)) if f.name == name), "{arm}/{name}");
            }
        }
    }

    #[test]
    fn hover_says_presence_type_bounds_and_the_tables_doc() {
        let root = &manifest_core::v5::MANIFEST;
        let Some(place) = resolve(root, &path(&["schemaVersion"]), &none) else { panic!("schemaVersion") };
        let text = hover(place, "schemaVersion");
        assert!(text.starts_with("**`schemaVersion`**: required"), "{text}");
        assert!(text.contains("integer `5`") && text.contains("integer 5"), "{text}");
        let Some(place) = resolve(root, &path(&["runtime", "kind"]), &none) else { panic!("kind") };
        assert!(hover(place, "kind").contains("`javascript`"), "{}", hover(place, "kind"));
        let values: Vec<String> = values(place, "").into_iter().map(|v| v.json).collect();
        assert!(values.contains(&"\"javascript\"".to_owned()), "{values:?}");
    }
}
