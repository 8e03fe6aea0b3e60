//! `svc relay serve` and `svc relay admin`: the relay coordinator and its data directory.

use std::process::ExitCode;
use std::time::Duration;

use relay_api::coordinator::store::TokenRole;
use relay_api::coordinator::{self, CoordinatorConfig};

use crate::args::{OutputFormat, RelayAdminCommand, RelayServeArgs};
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
    let Some(rt) = runtime() else { return fail("cannot start the runtime") };
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
        | RelayAdminCommand::AdmissionToken { data_dir, .. } => {
            crate::data_dir::existing(data_dir, "svc relay admin invite --org ORG --data-dir")
        }
    };
    if let Err(e) = existing {
        return crate::output::fail("svc relay admin", 2, "no_data_dir", &e.to_string());
    }
    match command {
        RelayAdminCommand::Invite { data_dir, database, org } => {
            match database.store_at(data_dir).map_err(|e| e.to_string()).and_then(|at| {
                // The data directory holds the CA and the files even when the store does not.
                agent::files::create_private_dir(data_dir).map_err(|e| e.to_string())?;
                coordinator::invite(at, org).map_err(|e| e.to_string())
            }) {
                Ok(()) => {
                    println!("organization \"{org}\" is invited to the ingress add-on");
                    ExitCode::SUCCESS
                }
                Err(e) => fail(&e),
            }
        }
        RelayAdminCommand::Token { data_dir, database, org, operator, name } => {
            let role = if *operator { TokenRole::Operator } else { TokenRole::Customer };
            match database.store_at(data_dir) {
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
            let issued = database.store_at(data_dir).map_err(|e| e.to_string()).and_then(|at| {
                coordinator::issue_admission_token(at, operator, Duration::from_secs(*ttl_secs))
                    .map_err(|e| e.to_string())
            });
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
                Err(e) => fail(&e),
            }
        }
    }
}

/// Issues a token: the secret alone on stdout (so `export SVC_RELAY_TOKEN=$(...)` takes it),
/// its public ID and name labelled on stderr, nothing there that looks like the secret. A
/// customer token for an organization not invited is refused (exit 1) with the command that
/// invites it.
fn token(
    at: relay_api::coordinator::store::StoreAt,
    data_dir: &std::path::Path,
    org: &str,
    role: TokenRole,
    name: Option<&str>,
) -> ExitCode {
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
