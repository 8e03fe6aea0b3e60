//! Cross-crate tests of manifest validation, one binary with a module per concern.

mod conformance {
    pub mod corpus;
    pub mod coverage;
    pub mod digest;
    pub mod docs;
    pub mod fuzz_corpus;
    pub mod golden;
    pub mod limits;
}
