//! Why a use case of the relay did not happen ([`OperationError`]): a refusal of what the
//! caller asked (a variant per stable `code` of the API), the store's error, or a failure
//! of the relay's own (a 500 at the API). Its words are the answers' messages; the one table
//! of HTTP statuses and codes is the API's (`http::rejection`), which the console shows too.

use crate::coordinator::api::{BUNDLE_MAX_BYTES, BUNDLE_MAX_FILES};
use crate::coordinator::files::{BundlePathProblem, FilesError};
use crate::coordinator::policy::PublishError;
use crate::coordinator::store::StoreError;
use crate::dns::DnsError;
use crate::project::{ManifestV5Error, ProjectErrors, Unsupported};

/// Why an operation of the relay did not happen.
#[derive(Debug, thiserror::Error)]
pub(crate) enum OperationError {
    /// The store's error (its refusals carry their own codes).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// What the caller names, the caller does not have.
    #[error("{0}")]
    NotFound(Missing),
    /// A quote asked for a stopped deployment.
    #[error("the deployment is stopped")]
    DeploymentNotFundable,
    /// A hostname added to a stopped deployment.
    #[error("the deployment is stopped")]
    DeploymentStopped,
    /// A quote's `periods` out of range.
    #[error("periods must be 1 to 10000")]
    Periods,
    /// A customer hostname that is not one.
    #[error("{0}")]
    InvalidHostname(#[source] DnsError),
    /// A customer hostname on a coordinator without an ACME CA.
    #[error(
        "this coordinator issues development certificates for .localhost names only; customer hostnames need a \
         coordinator configured with an ACME CA (`svc relay serve --acme-directory URL`)"
    )]
    HostnameNeedsAcme,
    /// A pin's digest that is not `sha256:` and 64 lowercase hex digits.
    #[error(
        "\"{digest}\" is not a validator digest: `sha256:` and 64 lowercase hex digits (`svc ingress pins list` shows the current one)"
    )]
    InvalidDigest {
        /// The digest as sent.
        digest: String,
    },
    /// A deploy's project file that is not valid (its problems go in `diagnostics`).
    #[error("the project file is not valid: {0}")]
    InvalidProject(#[source] ProjectErrors),
    /// A deploy's project that asks for what the add-on does not do (each in `diagnostics`).
    #[error("the ingress add-on does not support: {}", unsupported_names(.0))]
    IngressUnsupported(Vec<Unsupported>),
    /// A deploy's project whose V5 manifest cannot be had.
    #[error("the project's V5 manifest: {0}")]
    InvalidManifest(#[source] ManifestV5Error),
    /// A canonical hostname whose first label is over 63 bytes.
    #[error("\"{canonical}\": the project and organization names together exceed a DNS label (63); shorten `name`")]
    HostnameTooLong {
        /// The canonical hostname.
        canonical: String,
    },
    /// A canonical hostname that another organization's project holds.
    #[error(
        "\"{canonical}\" belongs to another organization's project (project and organization names \
         joined by hyphens can meet); choose another project `name` in ingress.json"
    )]
    CanonicalNameTaken {
        /// The canonical hostname.
        canonical: String,
    },
    /// A deploy's secret that the project does not name.
    #[error("secret {0} is not named in app.secrets")]
    UnknownSecret(String),
    /// A deploy whose files lack the project's entrypoint.
    #[error("the app files sent do not include the entrypoint \"{entrypoint}\"")]
    EntrypointMissing {
        /// The project's `app.entrypoint`.
        entrypoint: String,
    },
    /// A deploy whose manifest pins an artifact other than the files it sends.
    #[error(
        "the manifest pins the artifact {pinned}, and the app files sent have the digest {sent}; pin {sent}, or \
         write `release: {{mode: source}}` (the files sent are the release)"
    )]
    ArtifactNotSent {
        /// `/release/artifact/digest`.
        pinned: String,
        /// The bundle digest of the files sent.
        sent: String,
    },
    /// A deploy whose project gives the job what its named manifest does not declare.
    #[error("{0}")]
    ManifestUndeclared(#[source] PublishError),
    /// A deploy whose named manifest asks for what a route cannot run (two jobs, an update
    /// at the next renewal, a bound on the execution).
    #[error("{0}")]
    ManifestNotRunnable(#[source] PublishError),
    /// A redeploy whose project lists other hostnames than the deployment has.
    #[error(
        "the project file's hostnames differ from deployment {deployment}'s; nothing was deployed. Change them on the \
         deployment first ({}), or make `hostnames` in ingress.json match",
        hostname_fixes(.added, .removed)
    )]
    HostnamesChanged {
        /// The deployment's id.
        deployment: String,
        /// Hostnames in the project file that the deployment does not have.
        added: Vec<String>,
        /// Hostnames of the deployment that the project file does not list.
        removed: Vec<String>,
    },
    /// A deploy's files over [`BUNDLE_MAX_FILES`] files or [`BUNDLE_MAX_BYTES`] bytes.
    #[error("{0}")]
    BundleTooLarge(Oversize),
    /// A deploy's files that cannot be laid out as they are.
    #[error("{0}")]
    InvalidBundle(BundleProblem),
    /// The relay's own failure: its detail is for the log, never for the caller.
    #[error(transparent)]
    Internal(#[from] Internal),
}

/// A failure of the relay's own in an operation (the API answers `internal_error`).
#[derive(Debug, thiserror::Error)]
pub(crate) enum Internal {
    /// A revision's files could not be written.
    #[error(transparent)]
    Files(#[from] FilesError),
    /// The signed catalog could not be had.
    #[error("the catalog: {0}")]
    Catalog(#[source] crate::catalog::CatalogError),
    /// The manifest checked at the deploy's start is not V5 when its policy is made.
    #[error(transparent)]
    Policy(PublishError),
    /// A stored policy that does not read as JSON.
    #[error(transparent)]
    PolicyJson(#[from] serde_json::Error),
    /// Work handed to a blocking thread that did not finish.
    #[error("a request's work did not finish: {0}")]
    Unfinished(#[source] tokio::task::JoinError),
}

/// What the caller names and does not have (`not_found`).
#[derive(Debug, thiserror::Error)]
pub(crate) enum Missing {
    /// No deployment of this id (`dep_...`) in the caller's organization.
    #[error("no deployment {0} in this organization")]
    DeploymentId(String),
    /// No deployment of this project in the caller's organization.
    #[error("no deployment of project \"{0}\"")]
    Project(String),
    /// No published policy of this revision.
    #[error(
        "deployment {deployment} published no policy as revision {revision} (`svc ingress executions` lists its revisions)"
    )]
    Revision {
        /// The deployment's id.
        deployment: String,
        /// The revision asked for.
        revision: u32,
    },
    /// No hostname of this name on the deployment (or a removed one).
    #[error("hostname {0} not found")]
    Hostname(String),
    /// No such pin.
    #[error("{digest} is not pinned for project \"{project}\"")]
    Pin {
        /// The digest.
        digest: String,
        /// The project.
        project: String,
    },
}

impl Missing {
    /// The deployment a `{project}` names: an id (`dep_...`) or a project's name.
    pub(crate) fn deployment(project: &str) -> Missing {
        if project.starts_with("dep_") {
            Missing::DeploymentId(project.to_owned())
        } else {
            Missing::Project(project.to_owned())
        }
    }
}

/// Which bound a deploy's files exceed (`bundle_too_large`).
#[derive(Debug, thiserror::Error)]
pub(crate) enum Oversize {
    /// More than [`BUNDLE_MAX_FILES`] files.
    #[error("the app has {0} files; a deployment carries at most {BUNDLE_MAX_FILES}")]
    Files(usize),
    /// More than [`BUNDLE_MAX_BYTES`] bytes, reached at a file.
    #[error(
        "the app's files are over {BUNDLE_MAX_BYTES} bytes (at {:?}); a deployment carries at most that",
        truncated(.at)
    )]
    Bytes {
        /// The file at which the total went over.
        at: String,
    },
}

/// Why a deploy's files cannot be laid out (`invalid_bundle`).
#[derive(Debug, thiserror::Error)]
pub(crate) enum BundleProblem {
    /// A path that is not a plain, bounded relative path inside the app directory.
    #[error("{:?} {why}", truncated(.path))]
    Path {
        /// The path.
        path: String,
        /// What is wrong with it.
        why: BundlePathProblem,
    },
    /// A path that is a file, and a directory of other files.
    #[error("{:?} is a file, and other files need it as a directory", truncated(.0))]
    FileAndDirectory(String),
    /// A file's content that is not base64.
    #[error("{:?} is not base64: {why}", truncated(.path))]
    NotBase64 {
        /// The file.
        path: String,
        /// The decoder's complaint.
        why: base64::DecodeError,
    },
}

/// `name (pointer), ...` for each unsupported feature.
fn unsupported_names(unsupported: &[Unsupported]) -> String {
    let names: Vec<String> = unsupported.iter().map(|u| format!("{} ({})", u.as_str(), u.pointer())).collect();
    names.join(", ")
}

/// The commands that bring the deployment's hostnames to the project file's.
fn hostname_fixes(added: &[String], removed: &[String]) -> String {
    let mut fixes: Vec<String> = added.iter().map(|h| format!("`svc ingress hostname add {h}`")).collect();
    fixes.extend(removed.iter().map(|h| format!("`svc ingress hostname remove {h}`")));
    fixes.join(", ")
}

/// At most the first 80 characters of `path`, for messages.
fn truncated(path: &str) -> String {
    match path.char_indices().nth(80) {
        Some((at, _)) => format!("{}...", &path[..at]),
        None => path.to_owned(),
    }
}
