//! Fuzz target: see `manifest_core::invariants::yaml_reads_safely`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    manifest_core::invariants::yaml_reads_safely(data);
});
