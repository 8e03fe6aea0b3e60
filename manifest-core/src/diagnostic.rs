//! Diagnostics: one per problem, with a stable code, a pointer, a layer and a message.
//!
//! The codes are listed with their meaning in `docs/diagnostics.md`; a test keeps the two in
//! step.

use serde::Serialize;

use crate::tree::Span;

/// Whether a diagnostic makes the document invalid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// The document is invalid.
    Error,
    /// The document stays valid; the author should still act (a deprecated field).
    Warning,
}

impl Severity {
    /// The spelling used in JSON output.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        }
    }
}

/// The validation layers of SPEC.md, in order. Layers 1-2 run offline (`validate`); 3-7 run
/// at publication and deployment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Layer {
    /// (1) JSON parse and strict schema.
    Schema = 1,
    /// (2) semantic and cross-field validation.
    Semantic = 2,
    /// (3) import identity and source binding.
    ImportIdentity = 3,
    /// (4) artifact and builder provenance resolution.
    Provenance = 4,
    /// (5) capability and organization entitlement.
    Entitlement = 5,
    /// (6) publication race fence and immutable effective-policy creation.
    Publication = 6,
    /// (7) deployment-time funding, market, configuration and external facts.
    Deployment = 7,
}

impl Layer {
    /// The layer's number, 1-7.
    pub fn number(self) -> u8 {
        self as u8
    }

    /// A short name for people.
    pub fn title(self) -> &'static str {
        match self {
            Layer::Schema => "parse and strict schema",
            Layer::Semantic => "semantic and cross-field",
            Layer::ImportIdentity => "import identity and source binding",
            Layer::Provenance => "artifact and builder provenance",
            Layer::Entitlement => "capability and entitlement",
            Layer::Publication => "publication fence and policy creation",
            Layer::Deployment => "deployment-time facts",
        }
    }
}

impl Serialize for Layer {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_u8(self.number())
    }
}

macro_rules! codes {
    ($($(#[doc = $doc:literal])* $variant:ident = $text:literal,)*) => {
        /// A stable diagnostic code. The spelling (`as_str`) never changes once released.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum Code {
            $($(#[doc = $doc])* $variant,)*
        }

        impl Code {
            /// Every code, in declaration order.
            pub const ALL: &'static [Code] = &[$(Code::$variant,)*];

            /// The stable snake_case spelling.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Code::$variant => $text,)*
                }
            }
        }
    };
}

codes! {
    /// The input is over 1 MiB.
    InputTooLarge = "input_too_large",
    /// The input is not UTF-8.
    InvalidUtf8 = "invalid_utf8",
    /// The input starts with a byte-order mark.
    ByteOrderMark = "byte_order_mark",
    /// The input holds no value.
    EmptyDocument = "empty_document",
    /// JSON syntax error.
    InvalidJson = "invalid_json",
    /// A number too large to represent.
    NumberOutOfRange = "number_out_of_range",
    /// Nesting deeper than 64 levels.
    NestingTooDeep = "nesting_too_deep",
    /// A key repeated in one object.
    DuplicateKey = "duplicate_key",
    /// YAML syntax error.
    YamlSyntax = "yaml_syntax",
    /// A YAML anchor.
    YamlAnchor = "yaml_anchor",
    /// A YAML alias.
    YamlAlias = "yaml_alias",
    /// A YAML merge key.
    YamlMergeKey = "yaml_merge_key",
    /// An explicit YAML tag.
    YamlTag = "yaml_tag",
    /// More than one YAML document.
    YamlMultipleDocuments = "yaml_multiple_documents",
    /// A YAML mapping key that is not a string.
    YamlNonStringKey = "yaml_non_string_key",
    /// The root value is not an object.
    RootNotObject = "root_not_object",
    /// `schemaVersion` is neither 4 nor 5.
    UnsupportedSchemaVersion = "unsupported_schema_version",
    /// A YAML document declares V4, which is JSON only.
    YamlNotSupportedForV4 = "yaml_not_supported_for_v4",
    /// A required field is absent.
    MissingRequiredField = "missing_required_field",
    /// A field the object does not have.
    UnknownField = "unknown_field",
    /// A field of another arm of a closed tagged union.
    ForeignArmField = "foreign_arm_field",
    /// A discriminator value no arm has.
    UnknownVariant = "unknown_variant",
    /// The wrong JSON type.
    InvalidType = "invalid_type",
    /// A value outside a fixed set (enum or constant).
    InvalidValue = "invalid_value",
    /// A string that does not match its format.
    InvalidFormat = "invalid_format",
    /// An integer outside its bounds.
    OutOfRange = "out_of_range",
    /// A string shorter than allowed.
    TooShort = "too_short",
    /// A string longer than allowed.
    TooLong = "too_long",
    /// A list shorter than allowed.
    TooFewItems = "too_few_items",
    /// A list longer than allowed.
    TooManyItems = "too_many_items",
    /// A repeated item in a list of distinct values.
    DuplicateItem = "duplicate_item",
    /// An object that needs at least one field is empty.
    EmptyObject = "empty_object",
    /// A V4 ingress port of 0.
    PortUnusable = "port_unusable",
    /// V4 `startDelayMs` above `maxStartDelayMs`.
    StartDelayExceedsMax = "start_delay_exceeds_max",
    /// V4 fixed renewal lead above half the scheduled duration.
    RenewalLeadOutOfRange = "renewal_lead_out_of_range",
    /// V4 placement group counts do not sum to `parallelism`.
    GroupCountMismatch = "group_count_mismatch",
    /// V4 placement group names repeat.
    DuplicateGroupName = "duplicate_group_name",
    /// An environment name claimed twice.
    DuplicateEnvironmentName = "duplicate_environment_name",
    /// V5 `jobsPerPhase` above `jobs`.
    JobsPerPhaseExceedsJobs = "jobs_per_phase_exceeds_jobs",
    /// V5 `jobsPerPhase` does not divide `jobs`.
    JobsPerPhaseNotDivisor = "jobs_per_phase_not_divisor",
    /// V5 renewal with non-continuous execution.
    RenewalRequiresContinuous = "renewal_requires_continuous",
    /// V5 recurring execution without `spend.rate`.
    SpendRateRequired = "spend_rate_required",
    /// V5 `access` with a javascript runtime.
    AccessRequiresNativeImage = "access_requires_native_image",
    /// An environment name the platform sets itself (the ingress project's `PORT`, `SVC_*`).
    ReservedEnvironmentName = "reserved_environment_name",
    /// A deprecated V4 logs field (warning).
    DeprecatedManifestField = "deprecated_manifest_field",
    /// The validator broke its own invariant.
    InternalError = "internal_error",
    /// More than 1,000 problems: the rest are counted, not listed.
    DiagnosticsTruncated = "diagnostics_truncated",
    /// (3) The manifest's `applicationId` is not the target application's.
    ApplicationIdMismatch = "application_id_mismatch",
    /// (3) The V4 manifest's `applicationUid` is not the target application's.
    ApplicationUidMismatch = "application_uid_mismatch",
    /// (4) No accepted artifact version for this build release.
    ArtifactNotAccepted = "artifact_not_accepted",
    /// (4) An accepted artifact version exists, but a builder field differs from it.
    ArtifactEvidenceMismatch = "artifact_evidence_mismatch",
    /// (4) A pinned V4 artifact that is not curated.
    ArtifactNotCurated = "artifact_not_curated",
    /// (4) A pinned V5 digest no curated or accepted artifact has.
    ArtifactNotFound = "artifact_not_found",
    /// (4) A V5 source release with no accepted build evidence.
    SourceEvidenceMissing = "source_evidence_missing",
    /// (4) A native image catalog or name that is not a valid name.
    ImageNameInvalid = "image_name_invalid",
    /// (4) A native image the catalog does not have.
    ImageNotFound = "image_not_found",
    /// (4) No catalog version of the image satisfies the version floor.
    ImageVersionUnresolved = "image_version_unresolved",
    /// (5) A gated value without the organization's capability grant.
    CapabilityNotGranted = "capability_not_granted",
    /// (5) The organization's entitlement tier is too low.
    EntitlementRequired = "entitlement_required",
    /// (5) A resource above the organization's plan bounds.
    ResourcePlanExceeded = "resource_plan_exceeded",
    /// (5) The organization's job slots would be exceeded.
    JobSlotsExceeded = "job_slots_exceeded",
    /// (5) The application ran `once` and settled; re-arming it is release-gated.
    OnceApplicationSettled = "once_application_settled",
    /// (5) The server does not register this schema pair.
    SchemaPairNotRegistered = "schema_pair_not_registered",
    /// (5) An ingress project asks for a feature the add-on does not support.
    UnsupportedFeature = "unsupported_feature",
    /// (6) `expectedActivePointerVersion` no longer matches.
    ActivePointerVersionConflict = "active_pointer_version_conflict",
    /// (7) A required secret is not provisioned (warning).
    SecretNotProvisioned = "secret_not_provisioned",
    /// (7) The organization has no spend authority (warning).
    SpendAuthorityMissing = "spend_authority_missing",
    /// (7) The manifest's spend is above the organization's authority (warning).
    SpendExceedsAuthority = "spend_exceeds_authority",
}

impl Code {
    /// The codes whose checks a JSON Schema can express: required and unknown fields, closed
    /// unions, types, enums, patterns, bounds, list rules. The generated schemas must agree
    /// with the validator on documents failing only these (the corpus and project fixture
    /// checks rely on it); parse errors, YAML features and cross-field rules are the
    /// validator's alone.
    pub const SCHEMA_EXPRESSIBLE: &'static [Code] = &[
        Code::MissingRequiredField,
        Code::UnknownField,
        Code::ForeignArmField,
        Code::UnknownVariant,
        Code::InvalidType,
        Code::InvalidValue,
        Code::InvalidFormat,
        Code::OutOfRange,
        Code::TooShort,
        Code::TooLong,
        Code::TooFewItems,
        Code::TooManyItems,
        Code::DuplicateItem,
        Code::EmptyObject,
    ];

    /// Whether `code` (a spelling, as in expected-outcome files) is in
    /// [`Code::SCHEMA_EXPRESSIBLE`].
    pub fn is_schema_expressible(code: &str) -> bool {
        Code::SCHEMA_EXPRESSIBLE.iter().any(|c| c.as_str() == code)
    }
}

impl Serialize for Code {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// Where a diagnostic's caret goes when it has no explicit span: on the member's key (for
/// problems with the key itself) or on its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Anchor {
    Key,
    Value,
}

/// One problem found in a document.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Diagnostic {
    /// Error or warning.
    pub severity: Severity,
    /// Stable code.
    pub code: Code,
    /// RFC 6901 pointer to the field to change.
    pub pointer: String,
    /// What is wrong and how to fix it.
    pub message: String,
    /// The layer that found it.
    pub layer: Layer,
    /// 1-based line, where known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// 1-based column in characters, where known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub column: Option<u32>,
    /// The source bytes to underline, where known.
    #[serde(skip)]
    pub span: Option<Span>,
    /// The text that would fix it, where one near miss stands out (the "did you mean"
    /// of an unknown field, enum value or union arm): it replaces the key or value `span`
    /// covers (inside its quotes). Editors offer it as a quick fix (`svc lsp`).
    #[serde(skip)]
    pub suggestion: Option<String>,
    #[serde(skip)]
    pub(crate) anchor: Anchor,
}

impl Diagnostic {
    /// An error at `pointer`.
    pub fn error(layer: Layer, code: Code, pointer: impl Into<String>, message: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Error,
            code,
            pointer: pointer.into(),
            message: message.into(),
            layer,
            line: None,
            column: None,
            span: None,
            suggestion: None,
            anchor: Anchor::Value,
        }
    }

    /// A warning at `pointer`.
    pub fn warning(layer: Layer, code: Code, pointer: impl Into<String>, message: impl Into<String>) -> Self {
        Diagnostic { severity: Severity::Warning, ..Diagnostic::error(layer, code, pointer, message) }
    }

    /// The same diagnostic with an explicit source span.
    pub fn with_span(mut self, span: Span) -> Self {
        self.span = Some(span);
        self
    }

    /// The same diagnostic with its caret on the key of the member its pointer names (a
    /// problem with the name itself, such as a reserved map key), rather than on the value.
    pub fn on_key(mut self) -> Self {
        self.anchor = Anchor::Key;
        self
    }

    /// The same diagnostic with the text that would fix it (see [`Diagnostic::suggestion`]).
    pub fn with_suggestion(mut self, suggestion: impl Into<String>) -> Self {
        self.suggestion = Some(suggestion.into());
        self
    }

    /// Whether this diagnostic makes the document invalid.
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}
