//! Fuzz target: see `agent::invariants::tunnel_wire`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    agent::invariants::tunnel_wire(data);
});
