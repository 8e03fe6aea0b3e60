//! `svc relay serve` and `svc relay admin`: the relay coordinator and its data directory.

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use relay_api::coordinator::store::{OpenAt, TokenRole, default_key_file};
use relay_api::coordinator::{self, CoordinatorConfig, RelayStore};

use crate::args::{DatabaseArgs, OutputFormat, RelayAdminCommand, RelayKeysCommand, RelayServeArgs};
use crate::ingress::{runtime, shutdown_signal};
use crate::settings::DatabaseFlags as _;

fn fail(message: &str) -> ExitCode {
    crate::output::fail("svc relay", 2, "relay_failed", message)
}

/// `svc relay serve`
pub(crate) fn serve(args: &RelayServeArgs) -> ExitCode {
    let mut config = match CoordinatorConfig::try_from(args) {
        Ok(config) => config,
        Err(e) => return fail(&e.to_string()),
    };
    config.node = std::env::var_os("SVC_NODE").unwrap_or_else(|| "node".into());
    if let Some(key_file) = &args.database.key_file {
        config.key_file = key_file.clone();
    }
    // The relay's development CA lives in its data directory (it also signs the agents').
    match crate::tls::server_tls(&args.listener, &args.data_dir, args.listen) {
        Ok(tls) => {
            if let Some(ca) = tls.as_ref().and_then(|t| t.dev_ca.as_ref()) {
                crate::output::say(&format!(
                    "svc relay: API over HTTPS with a development certificate; clients trust {}",
                    ca.display()
                ));
            }
            config.api_tls = tls.map(|t| t.tls);
        }
        Err(e) => return fail(&e.to_string()),
    }
    let scheme = if config.api_tls.is_some() { "https" } else { "http" };
    let Ok(rt) = runtime() else { return fail("cannot start the runtime") };
    let started_up = std::cell::Cell::new(false);
    let result = rt.block_on(coordinator::run(
        config,
        |started| {
            started_up.set(true);
            crate::output::say(&format!(
                "svc relay: gateway public {} tunnel {} metrics http://{}/metrics",
                started.gateway.public, started.gateway.tunnel, started.gateway.admin
            ));
            crate::output::say(&format!(
                "svc relay: console {scheme}://{}/console/ (sign in with a customer token)",
                started.api
            ));
            crate::output::say(&format!("ready {scheme}://{}", started.api));
        },
        shutdown_signal(),
    ));
    if !started_up.get() {
        // Stopped (or failed) while starting: a connection to a database that does not
        // answer may still be waited for on a blocking thread; dropping the runtime would
        // wait for it too.
        rt.shutdown_background();
    }
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&e.to_string()),
    }
}

/// `svc relay admin ...`
pub(crate) fn admin(command: &RelayAdminCommand) -> ExitCode {
    // `invite` is the first command on a new machine and makes the directory; every other
    // one works on a directory that exists.
    let existing = match command {
        RelayAdminCommand::Invite { .. } => Ok(()),
        RelayAdminCommand::Token { data_dir, .. }
        | RelayAdminCommand::CatalogKey { data_dir }
        | RelayAdminCommand::RotateCatalogKey { data_dir, .. }
        | RelayAdminCommand::AdmissionToken { data_dir, .. }
        | RelayAdminCommand::Keys { command: RelayKeysCommand::Rotate { data_dir, .. } } => {
            crate::data_dir::existing(data_dir, "svc relay admin invite --org ORG --data-dir")
        }
    };
    if let Err(e) = existing {
        return crate::output::fail("svc relay admin", 2, "no_data_dir", &e.to_string());
    }
    match command {
        RelayAdminCommand::Invite { data_dir, database, org } => {
            match open_at(database, data_dir).and_then(|at| {
                // The data directory holds the CA and the files even when the store does not.
                agent::files::create_private_dir(data_dir)?;
                Ok(coordinator::invite(at, org)?)
            }) {
                Ok(()) => {
                    println!("organization \"{org}\" is invited to the ingress add-on");
                    ExitCode::SUCCESS
                }
                Err(e) => fail(&e.to_string()),
            }
        }
        RelayAdminCommand::Token { data_dir, database, org, operator, name } => {
            let role = if *operator { TokenRole::Operator } else { TokenRole::Customer };
            match open_at(database, data_dir) {
                Ok(at) => token(at, data_dir, org, role, name.as_deref()),
                Err(e) => fail(&e.to_string()),
            }
        }
        RelayAdminCommand::CatalogKey { data_dir } => match relay_api::catalog::signing_key(data_dir) {
            Ok(key) => {
                println!("{key}");
                ExitCode::SUCCESS
            }
            Err(e) => fail(&e.to_string()),
        },
        RelayAdminCommand::RotateCatalogKey { data_dir, format } => match relay_api::catalog::rotate_key(data_dir) {
            Ok(rotation) => {
                if *format == OutputFormat::Json {
                    println!("{}", serde_json::to_string_pretty(&rotation).unwrap_or_default());
                } else {
                    println!("catalog signing key rotated from {} to {}", rotation.from, rotation.to);
                    println!(
                        "catalogs from sequence {} on are signed by the new key and carry the old key's statement; \
                         customers who pinned the old key follow it",
                        rotation.sequence
                    );
                }
                ExitCode::SUCCESS
            }
            Err(e) => fail(&e.to_string()),
        },
        RelayAdminCommand::AdmissionToken { data_dir, database, operator, ttl_secs } => {
            let issued = open_at(database, data_dir)
                .and_then(|at| Ok(coordinator::issue_admission_token(at, operator, Duration::from_secs(*ttl_secs))?));
            match issued {
                Ok(issued) => {
                    println!("{}", issued.plaintext);
                    eprintln!(
                        "admission token ID: {} (operator {operator}, single use, expires in {ttl_secs} s); the token itself \
                         is the line on standard output, shown once: give it to the operator for \
                         `gateway-prep init --admission-token`",
                        issued.id
                    );
                    ExitCode::SUCCESS
                }
                Err(e) => fail(&e.to_string()),
            }
        }
        RelayAdminCommand::Keys { command: RelayKeysCommand::Rotate { data_dir, database } } => {
            rotate_keys(database, data_dir)
        }
    }
}

/// Why a `svc relay admin` command on the store failed (each says it all: they are shown as
/// they are).
#[derive(Debug, thiserror::Error)]
enum AdminError {
    /// `--database` cannot be used.
    #[error(transparent)]
    Settings(#[from] crate::settings::SettingsError),
    /// The data directory cannot be made.
    #[error(transparent)]
    DataDir(#[from] std::io::Error),
    /// The store refused or failed.
    #[error(transparent)]
    Store(#[from] coordinator::StoreError),
}

/// Where the store lives (`--database`, else the data directory) and its key file
/// (`--key-file`, else `secrets.key` in the data directory).
fn open_at(database: &DatabaseArgs, data_dir: &Path) -> Result<OpenAt, AdminError> {
    let at = database.store_at(data_dir)?;
    let key_file = database.key_file.clone().unwrap_or_else(|| default_key_file(data_dir));
    Ok(OpenAt::new(at, key_file))
}

/// `svc relay admin keys rotate`: what it did, and what the operator does next.
fn rotate_keys(database: &DatabaseArgs, data_dir: &Path) -> ExitCode {
    let rotated = open_at(database, data_dir)
        .and_then(|at| Ok(RelayStore::open_at(&at)?))
        .and_then(|store| Ok(store.rotate_keys()?));
    let rotation = match rotated {
        Ok(rotation) => rotation,
        Err(e) => return fail(&e.to_string()),
    };
    let key_file = rotation.key_file.display();
    println!("key file {key_file}: key-encryption key {} replaces {}", rotation.kek, rotation.previous_keks.join(", "));
    let revisions = usize::try_from(rotation.resealed).unwrap_or(usize::MAX);
    println!(
        "data key {} seals the store's secrets now (the secrets of {} {} sealed again); older data keys: {} \
         wrapped again, {} deleted",
        rotation.data_key,
        rotation.resealed,
        plural(revisions, "revision", "revisions"),
        rotation.rewrapped,
        rotation.deleted,
    );
    println!(
        "back the key file up again (an older copy no longer opens this store), and copy it now to every other \
         coordinator on the same database (--key-file): they need it for the secrets sealed from now on"
    );
    ExitCode::SUCCESS
}

fn plural<'a>(n: usize, one: &'a str, many: &'a str) -> &'a str {
    if n == 1 { one } else { many }
}

/// Issues a token: the secret alone on stdout (so `export SVC_RELAY_TOKEN=$(...)` takes it),
/// its public ID and name labelled on stderr, nothing there that looks like the secret. A
/// customer token for an organization not invited is refused (exit 1) with the command that
/// invites it.
fn token(at: OpenAt, data_dir: &std::path::Path, org: &str, role: TokenRole, name: Option<&str>) -> ExitCode {
    match coordinator::issue_token(at, org, role, name) {
        Ok(token) => {
            let kind = match role {
                TokenRole::Customer => "org",
                TokenRole::Operator => "gateway operator",
            };
            println!("{}", token.plaintext);
            eprintln!(
                "token ID: {} (name {}, {kind} {org}); the token itself is the line on standard output, shown once",
                token.id, token.name
            );
            ExitCode::SUCCESS
        }
        Err(coordinator::store::StoreError::Refused { code: "not_invited", message }) => {
            let fix = format!(
                "invite it first: `svc relay admin invite --data-dir {} --org {org}`",
                shell_word(&data_dir.to_string_lossy())
            );
            crate::output::fail("svc relay admin", 1, "not_invited", &format!("{message}; {fix}"))
        }
        Err(e) => fail(&e.to_string()),
    }
}

/// `word` as one shell word: as is when it holds only characters no shell reads specially,
/// else single-quoted.
fn shell_word(word: &str) -> String {
    let plain = !word.is_empty() && word.chars().all(|c| c.is_ascii_alphanumeric() || "/._-+:@%,=".contains(c));
    if plain { word.to_owned() } else { format!("'{}'", word.replace('\'', r"'\''")) }
}
