//! Why something is as it is: a stable code and a sentence for people. A plan's hold, an
//! execution's failure and a refusal's cause are each told by one; it stands apart from the
//! records, the plan and the market so that each of them can name it.

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
