//! Fuzz target: see `manifest_core::invariants::json_agrees_with_serde`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    manifest_core::invariants::json_agrees_with_serde(data);
});
