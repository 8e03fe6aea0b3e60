//! `svc`: parses arguments and hands over to the library.

use std::process::ExitCode;

/// mimalloc: fewer cycles in allocation than the system allocator under the service's load
/// (`docs/performance.md`, "Publication under load").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    svc_cli::set_allocator_collect(collect_freed_memory);
    svc_cli::main()
}

/// Gives back what the calling thread's mimalloc heap holds freed: pages emptied by frees
/// (its own and other threads') return to mimalloc's arenas, and memory whose purge delay has
/// passed to the system. The agent's runtime calls it when a worker parks (`collect.rs`).
#[expect(unsafe_code, reason = "the allocator's collection is a C function (docs/decisions.md)")]
fn collect_freed_memory() {
    // SAFETY: `mi_collect` takes no pointer and returns nothing; it works on the calling
    // thread's own heap and on mimalloc's arenas under their own locks, and may be called on
    // any thread at any time (mimalloc initialises a thread's heap on first use). mimalloc is
    // this process's global allocator (above), so the heap it collects is the one every
    // allocation of this thread came from; no Rust object is moved or freed by it.
    unsafe { libmimalloc_sys::mi_collect(false) }
}
