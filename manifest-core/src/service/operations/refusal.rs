//! Every refusal of the publication service, declared once (axum's rejection style): a
//! variant per stable `code`, its public message in its `#[error]`. Where a message is built
//! from values, the variant carries them; where one code has several wordings
//! (`invalid_request_body`, ...), the variant carries a small enum that says which. The
//! operations refuse with them, and so do the HTTP handlers and the console for what is
//! theirs (a missing token, a body over the bound); each variant's HTTP status and code are
//! the envelope's, in `http::rejection`.

use crate::diagnostic::Diagnostic;

/// A request the publication service refuses (4xx, and 503 for a large body beyond the
/// intake's bounds); one variant per `code`.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Rejection {
    /// No bearer token, or one the service does not know.
    #[error("send `Authorization: Bearer <token>` with a valid token")]
    Unauthenticated,
    /// A token whose role cannot do this.
    #[error("{0}")]
    Forbidden(Denied),
    /// A request body that does not read as the route's.
    #[error("{0}")]
    InvalidRequestBody(BodyProblem),
    /// A publication's pause pair (`postPublishStatus`, `reason`) that is not one.
    #[error("{0}")]
    InvalidPublicationPause(PauseProblem),
    /// A new application's ID that is not one.
    #[error("\"{id}\" is not an application ID: {} (1-64 characters)", crate::formats::APPLICATION_ID_V4.describe)]
    InvalidApplicationId {
        /// The ID as sent.
        id: String,
    },
    /// The URL's application is none of the caller's organization.
    #[error("no application \"{application_id}\" in your organization")]
    ApplicationNotFound {
        /// The URL's application ID.
        application_id: String,
    },
    /// The URL's policy version is none of the application's.
    #[error("no policy version {version}")]
    PolicyVersionNotFound {
        /// The URL's version, as sent.
        version: String,
    },
    /// A query string the route does not take (the message says what and why).
    #[error("{0}")]
    InvalidQuery(String),
    /// No route.
    #[error("no such route")]
    NoSuchRoute,
    /// A route that does not take the request's method.
    #[error("this route does not take that method")]
    MethodNotAllowed,
    /// A body over the bound of the route's bodies.
    #[error("the request body is over {max} bytes ({} MiB)", max / 1024 / 1024)]
    BodyTooLarge {
        /// The bound, in bytes.
        max: usize,
    },
    /// A large body (a big manifest) beyond the bounds on large bodies read at once, refused
    /// before it is read (with `Retry-After`).
    #[error("{0}")]
    TooManyLargeBodies(svc_http::Busy),
    /// A new application whose ID the organization has (the store's message).
    #[error("{0}")]
    ApplicationExists(String),
    /// A resume of an application that is not paused.
    #[error("application \"{application_id}\" is {status}, not paused: there is no pause to lift")]
    NotPaused {
        /// The application's ID.
        application_id: String,
        /// Its status.
        status: &'static str,
    },
    /// A manifest refused by a validation layer (the problems go in `diagnostics`).
    #[error(
        "the manifest was refused with {}; see `diagnostics`",
        crate::plural(.0.iter().filter(|d| d.is_error()).count() as u64, "error")
    )]
    ManifestInvalid(Vec<Diagnostic>),
    /// An upload's bundle that is not one (the problem names the file).
    #[error("{0}")]
    InvalidBundle(BundleProblem),
    /// An upload's bundle over the bounds of a bundle.
    #[error("{0}")]
    BundleTooLarge(Oversize),
    /// A confirmation whose manifest is not the one previewed (the console's: the manifest
    /// makes a round trip through the page, whose parser may change it).
    #[error("the manifest sent is not the one previewed; preview it again")]
    ManifestChanged,
    /// The fence: the caller reviewed another active version (also a diagnostic).
    #[error("you reviewed active version {expected}, but the active version is now {active}; review it again")]
    ActivePointerVersionConflict {
        /// `expectedActivePointerVersion`.
        expected: u64,
        /// The application's active pointer version.
        active: u64,
    },
}

impl Rejection {
    /// The application a 404 names.
    pub(crate) fn application_not_found(application_id: &str) -> Rejection {
        Rejection::ApplicationNotFound { application_id: application_id.to_owned() }
    }
}

/// What a token's role cannot do (`forbidden`).
#[derive(Debug, thiserror::Error)]
pub(crate) enum Denied {
    /// Create an application.
    #[error("a viewer token cannot create applications")]
    CreateApplication,
    /// Lift a pause.
    #[error("a viewer token cannot resume applications")]
    Resume,
    /// Upload an application's files.
    #[error("a viewer token cannot upload an application's files; ask for a developer token")]
    Upload,
    /// Publish.
    #[error("a {role} token cannot publish; ask for a developer token")]
    Publish {
        /// The token's role.
        role: &'static str,
    },
}

/// What is wrong with a request body (`invalid_request_body`).
#[derive(Debug, thiserror::Error)]
pub(crate) enum BodyProblem {
    /// Not UTF-8.
    #[error("the request body is not UTF-8")]
    NotUtf8,
    /// A body that stopped arriving (the client hung up; a body timeout is answered 408 by
    /// the listener).
    #[error("the request body did not arrive whole: {0}")]
    Incomplete(String),
    /// Not JSON (a new application's body).
    #[error("the request body is not valid JSON: {0}")]
    NotJson(String),
    /// Not JSON, at a pointer (a publication's body).
    #[error("the request body is not valid JSON: {message} (at {pointer})")]
    NotJsonAt {
        /// The reader's message.
        message: String,
        /// Where.
        pointer: String,
    },
    /// A publication's body that is not an object.
    #[error("the request body must be a JSON object")]
    NotObject,
    /// A new application's body that is not an object.
    #[error("the request body must be a JSON object: {{\"applicationId\": \"...\"}}")]
    NotApplicationObject,
    /// `manifest` of another type.
    #[error("`manifest` must be the document as a JSON object, or a string holding its JSON or YAML text")]
    ManifestType,
    /// `dryRun` of another type.
    #[error("`dryRun` must be true or false")]
    DryRunType,
    /// A field a publication does not take.
    #[error("unknown field \"{field}\" in the request body (at /{field}); the fields are {fields}")]
    UnknownField {
        /// The field.
        field: String,
        /// The fields a publication takes, as the request's reader lists them.
        fields: &'static str,
    },
    /// A field a new application does not take.
    #[error("unknown field \"{0}\" in the request body; the only field is applicationId")]
    UnknownApplicationField(String),
    /// A publication without `manifest`.
    #[error("the request body needs `manifest`: the document to publish")]
    ManifestMissing,
    /// `expectedActivePointerVersion` that is not a `u64` (what was found).
    #[error(
        "`expectedActivePointerVersion` (at /expectedActivePointerVersion) must be an integer from 0 to {}: the active version you reviewed; found {found}",
        u64::MAX
    )]
    PointerVersion {
        /// What was found: a number out of range, or the JSON type.
        found: String,
    },
    /// `applicationId` of another type.
    #[error("`applicationId` must be a string")]
    ApplicationIdType,
    /// A new application without `applicationId`.
    #[error("the request body needs `applicationId`")]
    ApplicationIdMissing,
    /// A resume's body that is not `{"reason": "..."}`.
    #[error("the request body must be {{\"reason\": \"...\"}}: {0}")]
    ResumeBody(serde_json::Error),
    /// A resume's reason out of bounds.
    #[error("the resume `reason` must be 1-{max_chars} characters; say why the application runs again")]
    ResumeReason {
        /// The bound, in characters after trimming.
        max_chars: usize,
    },
}

/// What is wrong with an upload's bundle (`invalid_bundle`).
#[derive(Debug, thiserror::Error)]
pub(crate) enum BundleProblem {
    /// Not `{"files": {"<path>": "<base64>", ...}}` (the reader's message).
    #[error("the request body must be {{\"files\": {{\"<path>\": \"<base64 content>\", ...}}}}: {0}")]
    Body(String),
    /// No file.
    #[error("the bundle has no file; `svc app deploy DIR` sends a directory's files")]
    Empty,
    /// A file's content that is not base64.
    #[error("the bundle's file {path:?} is not base64: {why}")]
    NotBase64 {
        /// The file.
        path: String,
        /// The decoder's reason.
        why: base64::DecodeError,
    },
    /// A path that is not a plain relative one.
    #[error("the bundle's path {path:?} {why}")]
    Path {
        /// The path.
        path: String,
        /// What is wrong with it.
        why: svc_execution::bundle::BundlePathProblem,
    },
    /// A file another path needs as a directory.
    #[error("the bundle's path {0:?} is a file, and another path needs it as a directory")]
    FileAndDirectory(String),
    /// An `executable` path that is none of the files.
    #[error("`executable` names {0:?}, which is not one of the bundle's files")]
    ExecutableMissing(String),
}

/// How an upload's bundle is over a bundle's bounds (`bundle_too_large`).
#[derive(Debug, thiserror::Error)]
pub(crate) enum Oversize {
    /// The body, before it is parsed.
    #[error(
        "the request body is over {max} bytes; a bundle holds at most {} files and {} MiB: leave build output and dependencies out with `.svcignore`",
        svc_execution::bundle::BUNDLE_MAX_FILES,
        svc_execution::bundle::BUNDLE_MAX_BYTES / 1024 / 1024
    )]
    Body {
        /// The bound of an upload's body, in bytes.
        max: usize,
    },
    /// Too many files (how many).
    #[error(
        "the bundle has {count} files; the most is {max}: leave build output and dependencies out with `.svcignore`",
        max = svc_execution::bundle::BUNDLE_MAX_FILES
    )]
    Files {
        /// How many.
        count: usize,
    },
    /// The decoded bytes go over the bound with this file.
    #[error(
        "the bundle's files are over {} MiB with {at:?}: leave build output and dependencies out with `.svcignore`",
        svc_execution::bundle::BUNDLE_MAX_BYTES / 1024 / 1024
    )]
    Bytes {
        /// The file.
        at: String,
    },
    /// The artifact store's own limits (its message).
    #[error("{0}")]
    Stored(String),
}

/// What is wrong with a publication's pause pair (`invalid_publication_pause`).
#[derive(Debug, thiserror::Error)]
pub(crate) enum PauseProblem {
    /// `postPublishStatus` that is not a string.
    #[error("`postPublishStatus` must be the string \"paused\"")]
    StatusType,
    /// `reason` that is not a string.
    #[error("`reason` must be a string of 1-500 characters")]
    ReasonType,
    /// `postPublishStatus: "active"`.
    #[error(
        "`active` is not a `postPublishStatus`: omit the pause fields to publish normally (a disabled application is activated, an existing pause kept)"
    )]
    Active,
    /// Another `postPublishStatus`.
    #[error("`postPublishStatus` \"{0}\" is not accepted; the only value is \"paused\", given with a `reason`")]
    Status(String),
    /// `paused` without a reason.
    #[error("`postPublishStatus: \"paused\"` needs a `reason` (1-500 characters)")]
    ReasonMissing,
    /// A reason without `paused`.
    #[error("a `reason` is given only with `postPublishStatus: \"paused\"`")]
    ReasonAlone,
    /// A reason of spaces.
    #[error("the pause `reason` is blank; say why the application is paused")]
    ReasonBlank,
    /// A reason over 500 characters once trimmed (how many).
    #[error("the pause `reason` has {0} characters once trimmed; the most is 500")]
    ReasonTooLong(usize),
    /// A reason with a control character (a NUL, an escape, ...): it is shown in the console
    /// and the CLI, and PostgreSQL's text cannot hold a NUL.
    #[error("the pause `reason` has a control character at character {0}; write it as plain text on one line")]
    ReasonControl(usize),
}
