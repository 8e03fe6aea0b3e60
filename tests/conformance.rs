//! Cross-crate tests of manifest validation, one binary with a module per concern.

mod conformance {
    mod corpus;
    mod coverage;
    mod digest;
    mod docs;
    mod examples;
    mod fuzz_corpus;
    mod golden;
    mod limits;
    mod policy;
}
