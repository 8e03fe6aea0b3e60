//! The token commands as people use them (issue 42): `export T=$(svc ... token ...)` takes
//! the secret alone from standard output, standard error labels its ID and name (nothing
//! there looks like the secret), and a relay token for an organization that is not invited
//! is refused with the command that invites it, creating nothing.

use std::path::Path;
use std::process::{Command, Output};

fn svc(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_svc")).args(args).output().expect("svc runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The secret alone on stdout (one line, `prefix` and 64 hex digits); on stderr one line,
/// `token ID: tok_<16 hex> (name NAME, ORG_WORD ORG)`, without the secret or its digits.
fn assert_secret_and_label(out: &Output, prefix: &str, label: &str) {
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stderr}");
    // A new data directory's first command says first where it made the store's key file.
    let stderr = match stderr.split_once('\n') {
        Some((first, rest)) if first.starts_with("svc admin: created the key file ") => rest.to_owned(),
        _ => stderr,
    };
    let secret = stdout.strip_suffix('\n').expect("one line");
    assert!(!secret.contains('\n'), "the secret alone: {stdout:?}");
    let hex = secret.strip_prefix(prefix).unwrap_or_else(|| panic!("{prefix}...: {secret}"));
    assert!(hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()), "{secret}");
    assert!(stderr.starts_with("token ID: tok_"), "labelled: {stderr}");
    assert!(stderr.contains(label), "{label} in {stderr}");
    assert!(
        !stderr.contains(prefix) && !stderr.contains(&hex[..16]),
        "nothing on stderr looks like the secret: {stderr}"
    );
}

#[test]
fn token_commands_print_the_secret_alone_and_label_its_id_and_name() {
    let scratch = tempfile::tempdir().expect("a scratch directory");
    let relay = scratch.path().join("relay");
    let relay = relay.to_str().expect("UTF-8");
    assert!(svc(&["relay", "admin", "invite", "--data-dir", relay, "--org", "acme"]).status.success());
    let named = svc(&["relay", "admin", "token", "--data-dir", relay, "--org", "acme", "--name", "Ada Lovelace"]);
    assert_secret_and_label(&named, "rly_", "(name Ada Lovelace, org acme)");
    // Without --name: the role and the first four digits of the ID.
    let unnamed = svc(&["relay", "admin", "token", "--data-dir", relay, "--org", "acme"]);
    let err = text(&unnamed.stderr);
    let id = err.strip_prefix("token ID: tok_").and_then(|r| r.get(..4)).expect("an ID");
    assert_secret_and_label(&unnamed, "rly_", &format!("(name customer-{id}, org acme)"));
    let operator = svc(&["relay", "admin", "token", "--data-dir", relay, "--org", "north", "--operator"]);
    assert_secret_and_label(&operator, "rly_", ", gateway operator north)");

    let data = scratch.path().join("svc-data");
    std::fs::create_dir(&data).expect("mkdir");
    let data = data.to_str().expect("UTF-8");
    let create = ["admin", "token", "create", "--data-dir", data, "--org", "acme", "--role", "developer"];
    let named = svc(&[&create[..], &["--name", "Grace"]].concat());
    assert_secret_and_label(&named, "svc_", "(name Grace, org acme)");
    let unnamed = svc(&create);
    assert_secret_and_label(&unnamed, "svc_", "(name developer-");

    // A name is one bounded line.
    for bad in ["", "a\nb", &"x".repeat(65)] {
        let out = svc(&["relay", "admin", "token", "--data-dir", relay, "--org", "acme", "--name", bad]);
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
        assert!(out.stdout.is_empty() && text(&out.stderr).contains("token name"), "{bad:?}: {}", text(&out.stderr));
    }
}

#[test]
fn a_relay_token_for_an_organization_not_invited_is_refused_with_the_fix_and_creates_nothing() {
    let scratch = tempfile::tempdir().expect("a scratch directory");
    let relay = scratch.path().join("relay");
    let relay_dir = relay.to_str().expect("UTF-8");
    assert!(svc(&["relay", "admin", "invite", "--data-dir", relay_dir, "--org", "acme"]).status.success());
    let out = svc(&["relay", "admin", "token", "--data-dir", relay_dir, "--org", "other"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(out.stdout.is_empty(), "no token: {}", text(&out.stdout));
    assert!(err.contains("organization \"other\" is not invited"), "{err}");
    assert!(err.contains(&format!("`svc relay admin invite --data-dir {relay_dir} --org other`")), "the fix: {err}");
    assert_eq!(invited(&relay, "other"), None, "no organization \"other\" was created");

    // Once invited, the same command issues the token.
    assert!(svc(&["relay", "admin", "invite", "--data-dir", relay_dir, "--org", "other"]).status.success());
    let out = svc(&["relay", "admin", "token", "--data-dir", relay_dir, "--org", "other"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(invited(&relay, "other"), Some(true));
}

/// Whether the relay's store has organization `org`, and invited.
fn invited(data: &Path, org: &str) -> Option<bool> {
    relay_api::coordinator::RelayStore::open(data).expect("the relay's store").invited(org).expect("a read")
}

/// Setting a spend authority says what was set, in dollars (issue 42: money in the
/// customer's unit), on standard error; standard output stays empty for scripts.
#[test]
fn spend_authority_set_says_the_amount_in_dollars() {
    let scratch = tempfile::tempdir().expect("a scratch directory");
    let data = scratch.path().to_str().expect("UTF-8");
    let create = svc(&["admin", "token", "create", "--data-dir", data, "--org", "acme", "--role", "developer"]);
    assert!(create.status.success(), "{}", text(&create.stderr));
    let set = ["admin", "spend-authority", "set", "--data-dir", data, "--org", "acme"];
    for (flags, said) in [
        (&["--micros", "1250000"][..], "spend authority of acme: USD 1.25 per job\n"),
        (&["--micros", "1"][..], "spend authority of acme: USD 0.000001 per job\n"),
        (&["--none"][..], "spend authority of acme: none (its applications launch nothing)\n"),
    ] {
        let out = svc(&[&set[..], flags].concat());
        assert!(out.status.success(), "{}", text(&out.stderr));
        assert_eq!(text(&out.stderr), said);
        assert!(out.stdout.is_empty());
    }
}
