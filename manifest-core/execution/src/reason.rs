//! Why something is as it is: a stable code and a sentence for people. A plan's hold and an
//! execution's failure are each told by one; it stands apart from the records and the plan
//! so that each of them can name it. The codes that more than one module acts on are here
//! too.

/// A reason: a stable code and a sentence for people.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reason {
    /// snake_case.
    pub code: String,
    /// What happened and what to do.
    pub message: String,
}

impl Reason {
    /// A reason.
    pub fn new(code: &str, message: impl Into<String>) -> Reason {
        Reason { code: code.to_owned(), message: message.into() }
    }
}

/// The reason of an execution lost because its processor restarted with the service (the
/// local pool): the scheduler gives its slot a new attempt for the rest of its window.
pub const PROCESSOR_RESTARTED: &str = "processor_restarted";
