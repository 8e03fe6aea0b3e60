//! A database password stays off the command line (issue 40, point 4): `ps` shows every
//! process's arguments to every user of the machine. A `--database` URL with a password is
//! refused (exit 2) on every command family that takes one, naming the fix and never
//! echoing the password; the same URL from the environment (`SVC_DATABASE`,
//! `SVC_RELAY_DATABASE`) and a password file (`--database-password-file`, 0600) reach a
//! database that asks for the password.

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::process::{Command, Output};

const PASSWORD: &str = "s3cret-Pa55";

fn svc(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_svc"));
    command.args(args).env_remove("SVC_DATABASE").env_remove("SVC_RELAY_DATABASE");
    command.env_remove("SVC_DATABASE_PASSWORD_FILE").env_remove("SVC_RELAY_DATABASE_PASSWORD_FILE");
    command.envs(env.iter().copied()).output().expect("svc runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Refused before anything is touched: exit 2, the variable and the password file named,
/// the URL shown with its password hidden.
fn assert_refused(out: &Output, variable: &str, what: &str) {
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(2), "{what}: {stdout}{stderr}");
    assert!(stderr.contains("holds a password") && stderr.contains("(ps)"), "{what}: says why: {stderr}");
    assert!(stderr.contains(&format!("({variable}=postgres://...)")), "{what}: names {variable}: {stderr}");
    assert!(stderr.contains("--database-password-file FILE"), "{what}: names the password file: {stderr}");
    assert!(stderr.contains("***"), "{what}: shows the URL, hidden: {stderr}");
    assert!(!stderr.contains(PASSWORD) && !stdout.contains(PASSWORD), "{what}: never the password: {stderr}");
}

#[test]
fn a_database_url_with_a_password_is_refused_on_every_command_that_takes_one() {
    let scratch = tempfile::tempdir().expect("a scratch directory");
    let dir = scratch.path().join("data");
    std::fs::create_dir(&dir).expect("mkdir");
    let dir = dir.to_str().expect("UTF-8");
    // Nothing listens on port 1: were the URL used, the commands would fail otherwise.
    let in_credentials = format!("postgres://svc:{PASSWORD}@127.0.0.1:1/svc");
    let in_options = format!("postgresql://svc@127.0.0.1:1/svc?sslmode=disable&password={PASSWORD}");
    for url in [&in_credentials, &in_options] {
        let flag = format!("--database={url}");
        let serve = ["serve", "--listen", "127.0.0.1:0", "--data-dir", dir, "--database", url];
        assert_refused(&svc(&serve, &[]), "SVC_DATABASE", "svc serve");
        let token = ["admin", "token", "create", "--data-dir", dir, "--org", "acme", "--role", "owner", &flag];
        assert_refused(&svc(&token, &[]), "SVC_DATABASE", "svc admin token create");
        let image = [
            "admin",
            "image",
            "add",
            "--data-dir",
            dir,
            "--database",
            url,
            "--name",
            "node",
            "--version",
            "1.0.0",
            "--digest",
            "sha256:00",
        ];
        assert_refused(&svc(&image, &[]), "SVC_DATABASE", "svc admin image add");
        let relay = ["relay", "serve", "--data-dir", dir, "--database", url];
        assert_refused(&svc(&relay, &[]), "SVC_RELAY_DATABASE", "svc relay serve");
        let invite = ["relay", "admin", "invite", "--data-dir", dir, "--org", "acme", "--database", url];
        assert_refused(&svc(&invite, &[]), "SVC_RELAY_DATABASE", "svc relay admin invite");
        let admission = ["relay", "admin", "admission-token", "--data-dir", dir, "--operator", "north", &flag];
        assert_refused(&svc(&admission, &[]), "SVC_RELAY_DATABASE", "svc relay admin admission-token");
    }
    let left: Vec<_> = std::fs::read_dir(dir).expect("read_dir").flatten().map(|e| e.file_name()).collect();
    assert!(left.is_empty(), "refused before anything was made: {left:?}");
    // The relay's variable is not the service's: `svc serve` is not told about SVC_RELAY_DATABASE.
    let serve = svc(&["serve", "--listen", "127.0.0.1:0", "--data-dir", dir, "--database", &in_credentials], &[]);
    assert!(!text(&serve.stderr).contains("SVC_RELAY_DATABASE"), "{}", text(&serve.stderr));
}

/// A password file holding `password`, with `mode`.
fn password_file(dir: &Path, name: &str, password: &str, mode: u32) -> String {
    let path = dir.join(name);
    std::fs::write(&path, format!("{password}\n")).expect("write");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
    path.to_str().expect("UTF-8").to_owned()
}

/// The secret alone on stdout, as `svc ... token` prints it.
fn assert_token(out: &Output, prefix: &str, what: &str) {
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{what}: {stdout}{}", text(&out.stderr));
    assert!(stdout.starts_with(prefix), "{what}: {stdout}");
}

#[test]
fn the_environment_and_a_password_file_reach_a_database_that_asks_for_the_password() {
    let Some(cluster) = svc_pg_cluster::for_test("database_password") else { return };
    let publication = cluster.create_password_database("publication", "svc", PASSWORD).expect("a database");
    let relay_db = cluster.create_password_database("relay", "relay", PASSWORD).expect("a database");
    let with_password =
        |url: &str, user: &str| url.replacen(&format!("//{user}@"), &format!("//{user}:{PASSWORD}@"), 1);
    let scratch = tempfile::tempdir().expect("a scratch directory");
    let data = scratch.path().join("svc-data");
    std::fs::create_dir(&data).expect("mkdir");
    let data = data.to_str().expect("UTF-8");
    let relay = scratch.path().join("relay");
    let relay = relay.to_str().expect("UTF-8");
    let token = ["admin", "token", "create", "--data-dir", data, "--org", "acme", "--role", "owner"];

    // Without the password the database refuses, and no message shows one.
    let refused = svc(&[&token[..], &["--database", &publication]].concat(), &[]);
    assert_eq!(refused.status.code(), Some(2), "{}", text(&refused.stderr));
    assert!(text(&refused.stderr).contains("password"), "the database's reason: {}", text(&refused.stderr));

    // The whole URL in the environment.
    let env = svc(&token, &[("SVC_DATABASE", &with_password(&publication, "svc"))]);
    assert_token(&env, "svc_", "SVC_DATABASE");
    let env = svc(
        &["relay", "admin", "invite", "--data-dir", relay, "--org", "acme"],
        &[("SVC_RELAY_DATABASE", &with_password(&relay_db, "relay"))],
    );
    assert!(env.status.success(), "SVC_RELAY_DATABASE: {}", text(&env.stderr));

    // The password alone in a file only its owner may read.
    let file = password_file(scratch.path(), "password", PASSWORD, 0o600);
    let by_file = svc(&[&token[..], &["--database", &publication, "--database-password-file", &file]].concat(), &[]);
    assert_token(&by_file, "svc_", "--database-password-file");
    let relay_token = ["relay", "admin", "token", "--data-dir", relay, "--org", "acme", "--database", &relay_db];
    let by_file = svc(&relay_token, &[("SVC_RELAY_DATABASE_PASSWORD_FILE", &file)]);
    assert_token(&by_file, "rly_", "SVC_RELAY_DATABASE_PASSWORD_FILE");
    let rows = cluster.sql("publication", "SELECT count(*) FROM tokens").expect("the tokens");
    assert_eq!(rows, "2", "both tokens are in the database");

    // A file others may read is refused, as libpq refuses such a .pgpass; so is a password given twice.
    let open = password_file(scratch.path(), "open", PASSWORD, 0o644);
    let refused = svc(&[&token[..], &["--database", &publication, "--database-password-file", &open]].concat(), &[]);
    let stderr = text(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("0644") && stderr.contains(&format!("chmod 600 {open}")), "{stderr}");
    assert!(!stderr.contains(PASSWORD), "{stderr}");
    let twice = svc(
        &[&token[..], &["--database-password-file", &file]].concat(),
        &[("SVC_DATABASE", &with_password(&publication, "svc"))],
    );
    let stderr = text(&twice.stderr);
    assert_eq!(twice.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("give it once") && !stderr.contains(PASSWORD), "{stderr}");
}

/// A store that cannot be reached is said once, whole (where, and why), by the admin
/// commands that open it.
#[test]
fn relay_admin_commands_say_why_the_store_cannot_be_reached() {
    let scratch = tempfile::tempdir().expect("a scratch directory");
    let dir = scratch.path().join("data");
    std::fs::create_dir(&dir).expect("mkdir");
    let dir = dir.to_str().expect("UTF-8");
    // Nothing listens on port 1.
    let url = "postgres://svc@127.0.0.1:1/svc";
    for command in [
        &["relay", "admin", "invite", "--data-dir", dir, "--org", "acme", "--database", url][..],
        &["relay", "admin", "keys", "rotate", "--data-dir", dir, "--database", url][..],
    ] {
        let out = svc(command, &[]);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{command:?}: {stderr}");
        let said = "svc relay: the relay store is unavailable: database 127.0.0.1:1/svc: unreachable: ";
        assert!(stderr.starts_with(said) && stderr.contains("refused"), "{command:?}: {stderr}");
    }
}
