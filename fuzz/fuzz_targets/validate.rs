//! Fuzz target: see `manifest_core::invariants::validation_is_consistent`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    manifest_core::invariants::validation_is_consistent(data);
});
