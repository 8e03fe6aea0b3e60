//! What a test does when this machine lacks something it needs: a program (PostgreSQL,
//! Pebble, Neovim, Node.js), root, a file installed by `npm ci`, Linux's `/proc`.
//!
//! Outside CI the test skips, saying so on one line of the test output; under
//! [`REQUIRE_ALL`] (`.ci/run` sets it) the same test fails instead, so nothing skips where
//! CI runs. Every such test goes through [`skip`]: one switch for all of them.

#![forbid(unsafe_code)]

/// Set to anything but empty or `0`, a test that cannot run here fails instead of skipping.
pub const REQUIRE_ALL: &str = "SVC_REQUIRE_ALL";

/// Whether [`REQUIRE_ALL`] is set: no test may skip.
pub fn required() -> bool {
    std::env::var_os(REQUIRE_ALL).is_some_and(|v| !v.is_empty() && v != "0")
}

/// The running test cannot run (all or part of its checks) for `why`, which says what is
/// missing and how to get it. Under [`REQUIRE_ALL`] this panics: the test fails. Otherwise it
/// writes `SKIPPED <test>: <why>` to standard error and returns; the caller then returns too,
/// or leaves out the part that cannot run.
///
/// The line is written to the stderr handle, not with `eprintln!`: libtest captures what the
/// print macros write and shows it only for a failing test, but not what is written to the
/// handle, so the line shows even though the test passes.
#[track_caller]
pub fn skip(why: &str) {
    // libtest runs each test on a thread named after it.
    let current = std::thread::current();
    let test = current.name().unwrap_or("a test");
    if required() {
        panic!("{test} cannot run here, and {REQUIRE_ALL} forbids skipping it: {why}");
    }
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {why} ({REQUIRE_ALL}=1 makes this a failure)");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_skip_fails_the_test_only_under_the_switch() {
        // Both cases in one test: the switch is the process's environment, shared by every
        // test thread of this binary.
        let outcome = |value: Option<&str>| {
            let mut command = std::process::Command::new(std::env::current_exe().expect("this test binary"));
            command.args(["--exact", "tests::skips_for_want_of_a_tool", "--include-ignored", "--test-threads=1"]);
            match value {
                Some(v) => command.env(REQUIRE_ALL, v),
                None => command.env_remove(REQUIRE_ALL),
            };
            let out = command.output().expect("the test binary runs");
            (
                out.status.success(),
                String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
            )
        };
        let (passed, output) = outcome(None);
        assert!(passed, "{output}");
        assert!(
            output.contains(
                "SKIPPED tests::skips_for_want_of_a_tool: no such tool (SVC_REQUIRE_ALL=1 makes this a failure)"
            ),
            "the line shows although the test passed: {output}"
        );
        for off in ["", "0"] {
            assert!(outcome(Some(off)).0, "{REQUIRE_ALL}={off:?} is off");
        }
        let (passed, output) = outcome(Some("1"));
        assert!(!passed, "{output}");
        assert!(output.contains("SVC_REQUIRE_ALL forbids skipping it: no such tool"), "{output}");
    }

    /// Run by [`a_skip_fails_the_test_only_under_the_switch`] in a process of its own.
    #[test]
    #[ignore = "run by a_skip_fails_the_test_only_under_the_switch"]
    fn skips_for_want_of_a_tool() {
        skip("no such tool");
    }
}
