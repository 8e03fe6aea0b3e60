//! The declarative field tables that describe a manifest: every field, type, bound, closed
//! union and default, once. Layer 1 ([`crate::check`]) walks a document against them; the
//! JSON Schema routes are generated from the same tables, so the two cannot drift.
//!
//! Tables are `static`s in the module of the manifest section they describe (`v4::deployment`,
//! `v5::runtime`, ...), with the spec's wording in each field's `doc`.

use crate::diagnostic::Code;
use crate::notes::Note;
use crate::tree::same_key;

/// The shape a value must have.
#[derive(Debug, Clone, Copy)]
pub enum Shape {
    /// `true` or `false`.
    Bool,
    /// A boolean that may only be `true` (a secure default that cannot be weakened); the text
    /// says why.
    AlwaysTrue(&'static str),
    /// An integer within bounds (inclusive).
    Integer(IntShape),
    /// A string.
    Str(StrShape),
    /// An array.
    Array(&'static ArrayShape),
    /// An object with fixed fields.
    Object(&'static ObjectShape),
    /// A closed tagged union of objects.
    Union(&'static UnionShape),
    /// An object used as a map from string keys to values of one shape.
    Map(&'static MapShape),
}

/// Integer bounds, inclusive.
#[derive(Debug, Clone, Copy)]
pub struct IntShape {
    /// Smallest allowed value.
    pub min: u64,
    /// Largest allowed value.
    pub max: u64,
}

/// String rules.
#[derive(Debug, Clone, Copy)]
pub struct StrShape {
    /// The allowed values.
    pub format: StrFormat,
    /// Fewest characters.
    pub min_chars: usize,
    /// Most characters, if bounded.
    pub max_chars: Option<usize>,
    /// Extra advice when a value of another type is given (e.g. "quote money amounts").
    pub hint: Option<&'static str>,
}

/// Which strings are allowed.
#[derive(Debug, Clone, Copy)]
pub enum StrFormat {
    /// Any string (within the length bounds).
    Any,
    /// Exactly this value.
    Const(&'static str),
    /// One of these values.
    Enum(&'static [&'static str]),
    /// Strings matching a format.
    Pattern(&'static Pattern),
}

/// A string format: a check function, and the same rule as a regular expression in the
/// syntax common to ECMA-262 and Python `re` (for JSON Schema). A test checks the two agree.
#[derive(Debug)]
pub struct Pattern {
    /// What the format is, for messages ("a duration such as `10m`").
    pub describe: &'static str,
    /// The rule as a regular expression.
    pub regex: &'static str,
    /// The rule as code.
    pub check: fn(&str) -> bool,
    /// Whether the regex says everything the check does. False for rules a pattern cannot
    /// express (a real calendar date); the JSON Schema then catches less than the validator.
    pub exact: bool,
}

/// Array rules.
#[derive(Debug)]
pub struct ArrayShape {
    /// Shape of each item.
    pub items: Shape,
    /// Fewest items.
    pub min_items: usize,
    /// Most items, if bounded.
    pub max_items: Option<usize>,
    /// Whether items must be distinct.
    pub unique: bool,
}

/// An object with a closed set of fields.
#[derive(Debug)]
pub struct ObjectShape {
    /// The object's name in messages and schema titles.
    pub name: &'static str,
    /// Its fields, in the order the spec lists them.
    pub fields: &'static [Field],
    /// Fewest fields that must be present (V5 `placement.minimums`).
    pub min_fields: usize,
    /// Names refused with a specific code and message rather than a plain unknown field
    /// (several lists, so shared lists such as [`SERVER_OWNED`] combine with local ones).
    pub refused: &'static [&'static [Refused]],
}

/// A field name refused with its own explanation (a server-owned fact, a CID in a build).
#[derive(Debug)]
pub struct Refused {
    /// The field name.
    pub name: &'static str,
    /// The code reported.
    pub code: Code,
    /// Why, and what to do instead.
    pub message: &'static str,
}

impl Refused {
    /// A field refused as an `unknown_field`, with `message` saying why.
    pub const fn unknown(name: &'static str, message: &'static str) -> Refused {
        Refused { name, code: Code::UnknownField, message }
    }
}

/// A closed tagged union: the `tag` field picks one arm, and only that arm's fields are allowed.
#[derive(Debug)]
pub struct UnionShape {
    /// The union's name in messages and schema titles.
    pub name: &'static str,
    /// The discriminator field (`mode`, `kind`, `source`).
    pub tag: &'static str,
    /// The arms.
    pub arms: &'static [Arm],
}

/// One arm of a union.
#[derive(Debug)]
pub struct Arm {
    /// The discriminator value.
    pub value: &'static str,
    /// The arm's own fields (not the tag).
    pub object: ObjectShape,
}

impl UnionShape {
    /// The arm for a discriminator value.
    pub fn arm(&self, value: &str) -> Option<&Arm> {
        self.arms.iter().find(|a| same_key(a.value, value))
    }

    /// The discriminator values, for messages.
    pub fn values(&self) -> Vec<&'static str> {
        self.arms.iter().map(|a| a.value).collect()
    }
}

/// A map from string keys to values.
#[derive(Debug)]
pub struct MapShape {
    /// Rule for keys (length and format, checked like a string value; a problem points at the key).
    pub keys: StrShape,
    /// Shape of each value.
    pub values: Shape,
    /// Most entries, if bounded.
    pub max_entries: Option<usize>,
}

/// One field of an object.
#[derive(Debug)]
pub struct Field {
    /// The JSON name.
    pub name: &'static str,
    /// The value's shape.
    pub shape: Shape,
    /// Whether it is required, optional, or filled with a default.
    pub presence: Presence,
    /// The spec's contract for the field.
    pub doc: &'static str,
    /// Accepted with a `deprecated_manifest_field` warning.
    pub deprecated: bool,
    /// A node layer 2 reads: layer 1 notes where it finds it (`crate::notes`).
    pub(crate) note: Option<Note>,
}

/// Whether a field must be written.
#[derive(Debug, Clone, Copy)]
pub enum Presence {
    /// Must be present.
    Required,
    /// May be omitted; nothing is filled in.
    Optional,
    /// May be omitted; the default is filled in.
    Default(DefaultValue),
}

/// A default value. Objects and arms are filled recursively, so `EmptyObject` for a section
/// whose fields have defaults yields the fully defaulted section.
#[derive(Debug, Clone, Copy)]
pub enum DefaultValue {
    /// A boolean.
    Bool(bool),
    /// An integer.
    Integer(u64),
    /// A string.
    Str(&'static str),
    /// `{}`, then its own fields' defaults.
    EmptyObject,
    /// `[]`.
    EmptyArray,
    /// The union arm with this discriminator value, then its defaults.
    Arm(&'static str),
}

// Constructors that keep the tables short. They are `const` so tables stay `static`.

/// A required field.
pub const fn required(name: &'static str, shape: Shape, doc: &'static str) -> Field {
    Field { name, shape, presence: Presence::Required, doc, deprecated: false, note: None }
}

/// An optional field with no default.
pub const fn optional(name: &'static str, shape: Shape, doc: &'static str) -> Field {
    Field { name, shape, presence: Presence::Optional, doc, deprecated: false, note: None }
}

/// An optional field filled with `default` when absent.
pub const fn defaulted(name: &'static str, shape: Shape, default: DefaultValue, doc: &'static str) -> Field {
    Field { name, shape, presence: Presence::Default(default), doc, deprecated: false, note: None }
}

/// A deprecated optional field (accepted with a warning).
pub const fn deprecated(name: &'static str, shape: Shape, doc: &'static str) -> Field {
    Field { name, shape, presence: Presence::Optional, doc, deprecated: true, note: None }
}

impl Field {
    /// The field marked as one layer 2 reads (`crate::notes`).
    pub(crate) const fn noted(self, note: Note) -> Field {
        Field { note: Some(note), ..self }
    }
}

/// An object shape with no refused names.
pub const fn object(name: &'static str, fields: &'static [Field]) -> ObjectShape {
    ObjectShape { name, fields, min_fields: 0, refused: &[] }
}

/// A union arm.
pub const fn arm(value: &'static str, fields: &'static [Field]) -> Arm {
    Arm { value, object: object(value, fields) }
}

/// Any string.
pub const STRING: Shape = Shape::Str(StrShape { format: StrFormat::Any, min_chars: 0, max_chars: None, hint: None });

/// A non-empty string.
pub const NON_EMPTY: Shape = Shape::Str(StrShape { format: StrFormat::Any, min_chars: 1, max_chars: None, hint: None });

/// The largest integer every JSON reader keeps exactly (2^53 - 1). Integers are bounded by it,
/// so two different documents never share a canonical (RFC 8785) form, which writes numbers
/// as IEEE doubles.
pub const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// Any unsigned integer a JSON reader keeps exactly: 0 to 2^53 - 1.
pub const UINT: Shape = Shape::Integer(IntShape { min: 0, max: MAX_SAFE_INTEGER });

/// An integer in `min..=max`.
pub const fn int(min: u64, max: u64) -> Shape {
    Shape::Integer(IntShape { min, max })
}

/// Exactly one string value.
pub const fn constant(value: &'static str) -> Shape {
    Shape::Str(StrShape { format: StrFormat::Const(value), min_chars: 0, max_chars: None, hint: None })
}

/// One of a set of strings.
pub const fn one_of(values: &'static [&'static str]) -> Shape {
    Shape::Str(StrShape { format: StrFormat::Enum(values), min_chars: 0, max_chars: None, hint: None })
}

/// A string in a format.
pub const fn pattern(p: &'static Pattern) -> Shape {
    Shape::Str(StrShape { format: StrFormat::Pattern(p), min_chars: 0, max_chars: None, hint: None })
}

/// A string of `min..=max` characters in a format. The length is checked first, so a value
/// of the wrong length is reported as `too_short`/`too_long`, not as a format problem.
pub const fn pattern_len(p: &'static Pattern, min: usize, max: usize) -> Shape {
    Shape::Str(StrShape { format: StrFormat::Pattern(p), min_chars: min, max_chars: Some(max), hint: None })
}

/// A string in a format, with advice for values of the wrong type.
pub const fn pattern_hint(p: &'static Pattern, hint: &'static str) -> Shape {
    Shape::Str(StrShape { format: StrFormat::Pattern(p), min_chars: 0, max_chars: None, hint: Some(hint) })
}

/// A string of at most `max` characters.
pub const fn string_max(max: usize) -> Shape {
    Shape::Str(StrShape { format: StrFormat::Any, min_chars: 0, max_chars: Some(max), hint: None })
}

/// The optional top-level `$schema` of both manifest versions: where an editor finds the
/// schema (a URL or a path). An authoring hint: part of the authored document and its digest,
/// never of the effective policy.
pub const SCHEMA_HINT: Field =
    optional("$schema", NON_EMPTY, "editor hint: the URL or path of this document's JSON Schema");

/// Server-owned facts (SPEC.md conventions): refused as unknown fields at the top level of
/// both versions, with a message that says why.
pub const SERVER_OWNED: &[Refused] = &{
    const MESSAGE: &str = "unknown field: this is a server-owned fact (owner, status, timestamps, signatures, provenance, quotes, processor identities, launch facts) and cannot be authored; remove it";
    const fn r(name: &'static str) -> Refused {
        Refused::unknown(name, MESSAGE)
    }
    [
        r("displayName"),
        r("owner"),
        r("ownerId"),
        r("organizationId"),
        r("status"),
        r("createdAt"),
        r("updatedAt"),
        r("publishedAt"),
        r("publishedBy"),
        r("signature"),
        r("signatures"),
        r("provenance"),
        r("quote"),
        r("quotes"),
        r("processorIdentities"),
        r("launch"),
        r("launchFacts"),
        r("policyDigest"),
        r("activePointerVersion"),
    ]
};

/// The shape the manifest tables give a value, as far as a reader (JSON or YAML) can tell while
/// reading. It only sizes objects: room for every field of their table from the start, so that
/// neither reading the members nor filling in layer 1's defaults reallocates. What is read does
/// not depend on it.
#[derive(Clone, Copy)]
pub(crate) enum Hint {
    /// Nothing known (a value outside the tables, or the version not yet read).
    Unknown,
    /// The root object: its table depends on `schemaVersion`.
    Root,
    /// A value the tables describe.
    Shape(&'static Shape),
}

impl Hint {
    /// The hint for the member `key` of an object with this hint (`version`: the root's
    /// `schemaVersion` when read so far).
    pub(crate) fn member(self, key: &str, version: Option<u8>) -> Hint {
        let fields = match self {
            Hint::Root => match version {
                Some(4) => crate::v4::MANIFEST.fields,
                Some(5) => crate::v5::MANIFEST.fields,
                _ => return Hint::Unknown,
            },
            Hint::Shape(Shape::Object(o)) => o.fields,
            Hint::Shape(Shape::Union(u)) => {
                return u
                    .arms
                    .iter()
                    .find_map(|a| a.object.fields.iter().find(|f| same_key(f.name, key)))
                    .map_or(Hint::Unknown, |f| Hint::Shape(&f.shape));
            }
            Hint::Shape(Shape::Map(m)) => return Hint::Shape(&m.values),
            _ => return Hint::Unknown,
        };
        fields.iter().find(|f| same_key(f.name, key)).map_or(Hint::Unknown, |f| Hint::Shape(&f.shape))
    }

    /// The hint for the items of an array with this hint.
    pub(crate) fn item(self) -> Hint {
        match self {
            Hint::Shape(Shape::Array(a)) => Hint::Shape(&a.items),
            _ => Hint::Unknown,
        }
    }

    /// Room for the members of an object with this hint, including defaults.
    pub(crate) fn room(self, version: Option<u8>) -> usize {
        match self {
            Hint::Root => match version {
                Some(4) => crate::v4::MANIFEST.fields.len(),
                Some(5) => crate::v5::MANIFEST.fields.len(),
                // Not read yet (it is usually written first): room for either version.
                _ => crate::v4::MANIFEST.fields.len().max(crate::v5::MANIFEST.fields.len()),
            },
            Hint::Shape(Shape::Object(o)) => o.fields.len(),
            // The tag, then the largest arm.
            Hint::Shape(Shape::Union(u)) => 1 + u.arms.iter().map(|a| a.object.fields.len()).max().unwrap_or(0),
            _ => 0,
        }
    }
}
