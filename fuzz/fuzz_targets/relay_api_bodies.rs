//! Fuzz target: see `relay_api::invariants::api_bodies`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    relay_api::invariants::api_bodies(data);
});
