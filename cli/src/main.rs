//! `svc`: parses arguments and hands over to the library.

use std::process::ExitCode;

/// mimalloc: fewer cycles in allocation than the system allocator under the service's load
/// (`docs/performance.md`, "Publication under load").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    svc_cli::main()
}
