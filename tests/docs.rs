//! Executable documentation: every command block of README.md and docs/*.md that a user is
//! told to run is run here, as written, in a fresh directory, one shell session per
//! document; outputs the docs show are compared; synopses are checked against the binaries'
//! `--help`. The block conventions are in `docs/decisions.md`, "Executable documentation".

#[path = "docs/markdown.rs"]
mod markdown;
#[path = "docs/procs.rs"]
mod procs;
#[path = "docs/session.rs"]
mod session;
#[path = "docs/synopsis.rs"]
mod synopsis;

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use markdown::{Block, Kind};
use session::{Outcome, Session};

/// Documents name fixed ports (7300, 8443, 8080): one document runs at a time (under
/// cargo-nextest, where each test is a process, the `default-ports` group of `.config/nextest.toml`).
static PORTS: Mutex<()> = Mutex::new(());

/// The README's test command: CI runs its tests (`.ci/run`, as [`CI_TEST_COMMANDS`]), so the
/// docs test does not run itself.
const TEST_COMMAND: &str = "cargo test --workspace";

/// How `.ci/run` runs the README's test command's tests: every test binary's tests through
/// cargo-nextest (its `ci` profile), then the doc tests, which nextest does not run.
const CI_TEST_COMMANDS: [&str; 2] =
    ["cargo nextest run --workspace --locked --profile ci", "cargo test --workspace --locked --doc"];

fn bin_dir() -> PathBuf {
    let svc = svc_e2e::service::svc_binary();
    svc.parent().map(Path::to_owned).unwrap_or_default()
}

/// A command as the harness runs it. `cargo run [--release] -p svc-cli -- ARGS` is the
/// `svc` this build made (the same code, without a second build inside the test).
fn as_run(command: &str) -> String {
    for prefix in ["cargo run --release -p svc-cli -- ", "cargo run -p svc-cli -- "] {
        if let Some(args) = command.trim_start().strip_prefix(prefix) {
            return format!("svc {args}");
        }
    }
    command.to_owned()
}

/// Runs `document` (relative to the workspace) and returns every failure found.
fn run_document(document: &str) -> Vec<String> {
    let _one_at_a_time = PORTS.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let root = svc_e2e::workspace();
    let text = std::fs::read_to_string(root.join(document)).unwrap_or_else(|e| panic!("{document}: {e}"));
    let blocks = match markdown::blocks(Path::new(document), &text) {
        Ok(blocks) => blocks,
        Err(e) => return vec![e],
    };
    let bin = bin_dir();
    let mut checker = synopsis::Checker::new(&root, &bin);
    let mut failures = Vec::new();
    let mut session: Option<Session> = None;
    let mut last: Option<(Block, Outcome)> = None;
    for block in blocks {
        match &block.kind {
            Kind::Run | Kind::File(_) if session.is_none() => match Session::start(&root, &bin) {
                Ok(s) => session = Some(s),
                Err(e) => return vec![format!("{block}: {e}")],
            },
            _ => {}
        }
        match &block.kind {
            Kind::Synopsis | Kind::Manual => failures.extend(checker.check(&block)),
            Kind::File(name) => {
                if let Some(Err(e)) = session.as_ref().map(|s| s.write_file(name, &block.body)) {
                    failures.push(format!("{block}: {e}"));
                }
            }
            Kind::Output => match &last {
                Some((ran, outcome)) => {
                    let expected = snapbox::Data::text(block.body.clone());
                    let actual = snapbox::Data::text(outcome.stdout.clone());
                    if let Err(e) = snapbox::Assert::new().try_eq(Some(&format!("{ran}")), actual, expected) {
                        failures.push(format!("{block}: the output shown differs from what {ran} prints:\n{e}"));
                    }
                }
                None => failures.push(format!("{block}: an output block with no command block before it")),
            },
            Kind::Run => {
                let Some(session) = session.as_mut() else { continue };
                let commands = markdown::commands(&block.body);
                for (i, command) in commands.iter().enumerate() {
                    if markdown::without_comment(command) == TEST_COMMAND {
                        continue;
                    }
                    let expected = if i + 1 == commands.len() { block.exit } else { 0 };
                    match session.run(&as_run(command), block.interrupt.as_ref()) {
                        Err(e) => {
                            failures.push(format!("{block}: {e}"));
                            return failures;
                        }
                        Ok(outcome) => {
                            if let Some(problem) = judge(&outcome, expected) {
                                failures.push(format!(
                                    "{block}: `{command}` {problem}\n--- stdout\n{}\n--- stderr\n{}",
                                    outcome.stdout, outcome.stderr
                                ));
                                // Later blocks build on this one: stop at the first failure.
                                return failures;
                            }
                            last = Some((block.clone(), outcome));
                        }
                    }
                }
            }
            Kind::Other => {}
        }
    }
    if let Some(session) = session {
        for (n, output) in session.finish() {
            if output.contains("panicked") {
                failures.push(format!("{document}: the server of command {n} panicked:\n{output}"));
            }
        }
    }
    failures
}

/// Why `outcome` is not what a reader of the docs expects, if it is not.
fn judge(outcome: &Outcome, expected: i32) -> Option<String> {
    if outcome.stderr.contains("panicked") {
        return Some("panicked".into());
    }
    match outcome.code {
        // Ctrl-C: a clean stop is 130 (or 0 for a command that treats it as done).
        Some(130 | 0) if outcome.interrupted => None,
        Some(code) if outcome.interrupted => Some(format!("exited {code} after Ctrl-C, not 130")),
        Some(code) if code == expected => None,
        Some(code) => Some(format!("exited {code}, the docs expect {expected}")),
        None => Some("was killed by a signal".into()),
    }
}

fn assert_document(document: &str) {
    let failures = run_document(document);
    assert!(failures.is_empty(), "{document} drifted from what the code does:\n\n{}", failures.join("\n\n"));
}

#[test]
fn readme_runs_as_written() {
    assert_document("README.md");
}

/// One test per file under docs/, so a new document is covered once it is listed here;
/// `every_document_is_covered` fails until it is.
const DOCS: &[&str] = &[
    "docs/architecture.md",
    "docs/capabilities.md",
    "docs/compute-network.md",
    "docs/console.md",
    "docs/decisions.md",
    "docs/diagnostics.md",
    "docs/executions.md",
    "docs/fuzzing.md",
    "docs/gateway-prep.md",
    "docs/ingress-api.md",
    "docs/ingress-economics.md",
    "docs/ingress-project.md",
    "docs/ingress.md",
    "docs/performance.md",
    "docs/policy-v5.md",
    "docs/publication.md",
    "docs/scale-out.md",
    "docs/schemas.md",
    "docs/security.md",
    "docs/simulation.md",
];

#[test]
fn every_document_is_covered() {
    let mut found: Vec<String> = std::fs::read_dir(svc_e2e::workspace().join("docs"))
        .expect("docs/")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|name| name.ends_with(".md"))
        .map(|name| format!("docs/{name}"))
        .collect();
    found.sort();
    assert_eq!(found, DOCS, "list every document of docs/ in DOCS");
}

/// `docs/security.md` names the test that shows each claim as `file::function`: every one
/// it names exists, so a renamed or removed test fails here rather than leave a claim unshown.
#[test]
fn every_test_the_docs_name_exists() {
    // Each promise of these documents cites the test that measures it, as `file::function`.
    for (document, at_least) in [("docs/security.md", 40), ("docs/scale-out.md", 9)] {
        let root = svc_e2e::workspace();
        let text = std::fs::read_to_string(root.join(document)).expect("the document");
        let named: Vec<(String, &str)> = text
            .split('`')
            .filter(|span| !span.contains(char::is_whitespace))
            .filter_map(|span| span.split_once(".rs::").map(|(file, function)| (format!("{file}.rs"), function)))
            .collect();
        assert!(named.len() >= at_least, "{document} names its tests as `file::function`: {named:?}");
        let missing: Vec<String> = named
            .iter()
            .filter(|(file, function)| {
                let source = std::fs::read_to_string(root.join(file)).unwrap_or_default();
                !source.contains(&format!("fn {function}("))
            })
            .map(|(file, function)| format!("{file}::{function}"))
            .collect();
        assert!(missing.is_empty(), "{document} names tests that do not exist: {missing:#?}");
    }
}

#[test]
fn docs_run_as_written() {
    let failures: Vec<String> = DOCS.iter().flat_map(|d| run_document(d)).collect();
    assert!(failures.is_empty(), "the docs drifted from what the code does:\n\n{}", failures.join("\n\n"));
}

#[test]
fn ci_runs_the_readmes_test_command() {
    let root = svc_e2e::workspace();
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
    let ci = std::fs::read_to_string(root.join(".ci/run")).expect(".ci/run");
    let blocks = markdown::blocks(Path::new("README.md"), &readme).expect("README.md's blocks");
    let first = blocks.iter().find(|b| b.kind == Kind::Run).expect("a first command block");
    assert!(first.body.lines().any(|l| l.trim() == TEST_COMMAND), "the README opens with `{TEST_COMMAND}`");
    // `cargo test --workspace` runs each test binary's tests, then the doc tests: CI runs both
    // halves, as written (no filter or skip added on the command line).
    for command in CI_TEST_COMMANDS {
        assert!(
            ci.lines().any(|l| l.trim() == command || l.trim().starts_with(&format!("{command} || "))),
            ".ci/run runs `{command}`, as written"
        );
    }
    // What nextest leaves out (its profiles' `default-filter`) is only the second run of
    // publication tests on PostgreSQL: each of them runs in the `publication` binary.
    let nextest = std::fs::read_to_string(root.join(".config/nextest.toml")).expect(".config/nextest.toml");
    let filters: Vec<&str> = nextest.lines().filter(|l| l.trim_start().starts_with("default-filter")).collect();
    assert_eq!(filters, ["default-filter = \"\"\""], "one default filter, in [profile.default]");
    let filter =
        nextest.split("default-filter = \"\"\"").nth(1).and_then(|f| f.split("\"\"\"").next()).unwrap_or_default();
    assert!(
        filter.trim().starts_with("not (binary_id(svc-e2e::publication_pg) & ("),
        "nextest's default filter leaves out only tests of publication_pg:\n{filter}"
    );
    let publication = std::fs::read_to_string(root.join("tests/publication.rs")).expect("tests/publication.rs");
    for name in filter.split("test(").skip(1) {
        let name = name.split(')').next().unwrap_or_default();
        let module = name.trim_start_matches("/^").trim_start_matches('=').trim_start_matches("suite::publication::");
        let module = module.split("::").next().unwrap_or_default();
        let function = name.rsplit("::").next().unwrap_or_default();
        assert!(publication.contains(&format!("mod {module};")), "{name}: no module {module} in tests/publication.rs");
        if !name.ends_with("::/") {
            let source =
                std::fs::read_to_string(root.join(format!("tests/publication/{module}.rs"))).unwrap_or_default();
            assert!(source.contains(&format!("fn {function}(")), "{name}: no test {function} in the publication suite");
        }
    }
}

/// The harness itself: a drifted document fails at each drifted block, with its line.
#[test]
fn a_drifted_document_fails_at_each_drifted_block() {
    let failures = run_document("tests/docs/drifted.md");
    assert_eq!(failures.len(), 3, "{failures:#?}");
    assert!(
        failures[0].starts_with("tests/docs/drifted.md:3: ") && failures[0].contains("lists no --no-such-flag"),
        "{}",
        failures[0]
    );
    assert!(
        failures[1].starts_with("tests/docs/drifted.md:11: ") && failures[1].contains("goodbye"),
        "{}",
        failures[1]
    );
    assert!(
        failures[2].starts_with("tests/docs/drifted.md:15: ") && failures[2].contains("exited 2"),
        "{}",
        failures[2]
    );
}

/// CI once failed `svc serve --listen 127.0.0.1:8081 ... &` as "exited instead of serving"
/// right after it printed that it listened: the harness's own `mv`, writing the command's
/// status, was still a child of the shell and was taken for the server. The bookkeeping after
/// each command runs builtins only, so it works with no `PATH` at all.
#[test]
fn the_harness_bookkeeping_starts_no_process_that_could_be_taken_for_a_server() {
    let root = svc_e2e::workspace();
    let mut session = Session::start(&root, Path::new("/nonexistent")).expect("a session");
    for command in ["PATH=/nonexistent", "cd examples", "true"] {
        let outcome = session.run(command, None).unwrap_or_else(|e| panic!("`{command}`: {e}"));
        assert_eq!(outcome.code, Some(0), "`{command}`: {outcome:?}");
    }
    assert!(session.cwd().ends_with("work/examples"), "{}", session.cwd().display());
    assert!(session.finish().is_empty(), "no command ran in the background");
}
