//! The publication service's use cases, as plain functions over the store: publishing (which
//! may pause), resuming, creating an application, and what is read of one. Each answers a
//! value or an [`OperationError`]. The HTTP handlers (`http`) and the console's views
//! (`console`) only translate requests, answers and errors into theirs; the one mapping of an
//! error to the HTTP envelope is `http::rejection`.

pub(crate) mod applications;
pub(crate) mod publish;
pub(crate) mod refusal;

use crate::service::store::StoreError;
use refusal::Rejection;

/// Why an operation did not do what it was asked.
#[derive(Debug, thiserror::Error)]
pub(crate) enum OperationError {
    /// A request the service refuses: the caller's to change.
    #[error(transparent)]
    Refused(#[from] Rejection),
    /// The store failed (or cannot be reached).
    #[error("the store failed")]
    Store(#[from] StoreError),
    /// A failure inside the service: what failed, for the server's log.
    #[error("{what}")]
    Internal {
        /// What failed.
        what: &'static str,
        /// Why, when something said.
        #[source]
        cause: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
}

impl OperationError {
    /// A failure inside the service, with no cause but itself.
    pub(crate) fn internal(what: &'static str) -> OperationError {
        OperationError::Internal { what, cause: None }
    }

    /// A failure inside the service, and its cause.
    pub(crate) fn internal_because(
        what: &'static str,
        cause: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> OperationError {
        OperationError::Internal { what, cause: Some(cause.into()) }
    }

    /// The error and its causes, one after another (for the server's log).
    pub(crate) fn detail(&self) -> String {
        let mut text = self.to_string();
        let mut cause = std::error::Error::source(self);
        while let Some(c) = cause {
            text.push_str(": ");
            text.push_str(&c.to_string());
            cause = c.source();
        }
        text
    }
}

/// A task of blocking store work that did not finish (it panicked, or the runtime is shutting
/// down).
pub(crate) fn task_failed(what: &'static str) -> impl FnOnce(tokio::task::JoinError) -> OperationError {
    move |e| OperationError::internal_because(what, e)
}

/// Runs blocking store work off the async runtime.
pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, OperationError> + Send + 'static,
) -> Result<T, OperationError> {
    tokio::task::spawn_blocking(f).await.unwrap_or_else(|e| Err(task_failed("the store task failed")(e)))
}
