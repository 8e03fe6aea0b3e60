//! `gateway-prep` as an operator runs it: every preflight check's pass and non-pass paths
//! ([`checks`]) and `init` against a real coordinator ([`init`]), under a fake root, on
//! loopback. They live here, not in `gateway-prep/tests`, because the coordinator they run in
//! process is not a dependency of `gateway-prep` (which builds without a store or an HTTP
//! framework). One binary, a module per concern.

mod gateway_prep {
    mod checks;
    mod common;
    mod init;
}
