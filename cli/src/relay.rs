//! `svc relay serve` and `svc relay admin`: the relay coordinator and its data directory.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use relay_api::coordinator::store::{OpenAt, TokenRole, default_key_file};
use relay_api::coordinator::{self, CoordinatorConfig, RelayStore};

use crate::args::{DatabaseArgs, OutputFormat, RelayAdminCommand, RelayKeysCommand, RelayServeArgs};
use crate::ingress::{runtime, shutdown_signal};
use crate::settings::DatabaseFlags as _;

/// Why `svc relay serve` or `svc relay admin` failed: said once, by
/// [`crate::failure::report`], as `svc relay: ...` (exit 2), or `svc relay admin: ...` for a
/// data directory that is not there (exit 2) and an organization not invited (exit 1).
#[derive(Debug, thiserror::Error)]
pub(crate) enum RelayError {
    /// The flags do not make a coordinator's settings.
    #[error(transparent)]
    Settings(crate::settings::SettingsError),
    /// The API's TLS cannot be set up.
    #[error(transparent)]
    Tls(crate::tls::ServerTlsError),
    /// No runtime.
    #[error("cannot start the runtime")]
    Runtime(#[source] std::io::Error),
    /// The coordinator failed, starting or running.
    #[error(transparent)]
    Coordinator(coordinator::CoordinatorError),
    /// The data directory is not there.
    #[error(transparent)]
    NoDataDir(crate::data_dir::NoDataDir),
    /// The store, its settings or the data directory.
    #[error(transparent)]
    Admin(#[from] AdminError),
    /// The catalog's signing key.
    #[error(transparent)]
    Catalog(relay_api::catalog::CatalogError),
    /// A customer token for an organization not invited.
    #[error(
        "{}; invite it first: `svc relay admin invite --data-dir {} --org {org}`",
        match source { coordinator::StoreError::Refused { message, .. } => message.as_str(), _ => "" },
        shell_word(&data_dir.to_string_lossy())
    )]
    NotInvited {
        /// The store's refusal.
        #[source]
        source: coordinator::StoreError,
        /// The data directory.
        data_dir: PathBuf,
        /// The organization.
        org: String,
    },
}

impl crate::failure::Failure for RelayError {
    fn exit_code(&self) -> u8 {
        if matches!(self, RelayError::NotInvited { .. }) { 1 } else { 2 }
    }

    fn envelope(&self) -> svc_http::ErrorBody {
        let code = match self {
            RelayError::NoDataDir(_) => "no_data_dir",
            RelayError::NotInvited { .. } => "not_invited",
            _ => "relay_failed",
        };
        svc_http::ErrorBody::new(code, self.to_string())
    }

    fn text(&self) -> String {
        let who = match self {
            RelayError::NoDataDir(_) | RelayError::NotInvited { .. } => "svc relay admin",
            _ => "svc relay",
        };
        crate::failure::line(who, self)
    }
}

/// `svc relay serve`
pub(crate) fn serve(args: &RelayServeArgs) -> Result<ExitCode, RelayError> {
    let mut config = CoordinatorConfig::try_from(args).map_err(RelayError::Settings)?;
    config.node = std::env::var_os("SVC_NODE").unwrap_or_else(|| "node".into());
    if let Some(key_file) = &args.database.key_file {
        config.key_file = key_file.clone();
    }
    // The relay's development CA lives in its data directory (it also signs the agents').
    let tls = crate::tls::server_tls(&args.listener, &args.data_dir, args.listen).map_err(RelayError::Tls)?;
    if let Some(ca) = tls.as_ref().and_then(|t| t.dev_ca.as_ref()) {
        crate::output::say(&format!(
            "svc relay: API over HTTPS with a development certificate; clients trust {}",
            ca.display()
        ));
    }
    config.api_tls = tls.map(|t| t.tls);
    let scheme = if config.api_tls.is_some() { "https" } else { "http" };
    let rt = runtime().map_err(RelayError::Runtime)?;
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
    result.map(|()| ExitCode::SUCCESS).map_err(RelayError::Coordinator)
}

/// `svc relay admin ...`
pub(crate) fn admin(command: &RelayAdminCommand) -> Result<ExitCode, RelayError> {
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
    existing.map_err(RelayError::NoDataDir)?;
    match command {
        RelayAdminCommand::Invite { data_dir, database, org } => {
            let at = open_at(database, data_dir)?;
            // The data directory holds the CA and the files even when the store does not.
            agent::files::create_private_dir(data_dir).map_err(AdminError::DataDir)?;
            coordinator::invite(at, org).map_err(AdminError::Store)?;
            println!("organization \"{org}\" is invited to the ingress add-on");
            Ok(ExitCode::SUCCESS)
        }
        RelayAdminCommand::Token { data_dir, database, org, operator, name } => {
            let role = if *operator { TokenRole::Operator } else { TokenRole::Customer };
            token(open_at(database, data_dir)?, data_dir, org, role, name.as_deref())
        }
        RelayAdminCommand::CatalogKey { data_dir } => {
            let key = relay_api::catalog::signing_key(data_dir).map_err(RelayError::Catalog)?;
            println!("{key}");
            Ok(ExitCode::SUCCESS)
        }
        RelayAdminCommand::RotateCatalogKey { data_dir, format } => {
            let rotation = relay_api::catalog::rotate_key(data_dir).map_err(RelayError::Catalog)?;
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
            Ok(ExitCode::SUCCESS)
        }
        RelayAdminCommand::AdmissionToken { data_dir, database, operator, ttl_secs } => {
            let at = open_at(database, data_dir)?;
            let issued = coordinator::issue_admission_token(at, operator, Duration::from_secs(*ttl_secs))
                .map_err(AdminError::Store)?;
            println!("{}", issued.plaintext);
            eprintln!(
                "admission token ID: {} (operator {operator}, single use, expires in {ttl_secs} s); the token itself \
                 is the line on standard output, shown once: give it to the operator for \
                 `gateway-prep init --admission-token`",
                issued.id
            );
            Ok(ExitCode::SUCCESS)
        }
        RelayAdminCommand::Keys { command: RelayKeysCommand::Rotate { data_dir, database } } => {
            rotate_keys(database, data_dir)
        }
    }
}

/// Why a `svc relay admin` command on the store failed (each says it all: they are shown as
/// they are).
#[derive(Debug, thiserror::Error)]
pub(crate) enum AdminError {
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
fn rotate_keys(database: &DatabaseArgs, data_dir: &Path) -> Result<ExitCode, RelayError> {
    let at = open_at(database, data_dir)?;
    let rotation = RelayStore::open_at(&at).and_then(|store| store.rotate_keys()).map_err(AdminError::Store)?;
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
    Ok(ExitCode::SUCCESS)
}

fn plural<'a>(n: usize, one: &'a str, many: &'a str) -> &'a str {
    if n == 1 { one } else { many }
}

/// Issues a token: the secret alone on stdout (so `export SVC_RELAY_TOKEN=$(...)` takes it),
/// its public ID and name labelled on stderr, nothing there that looks like the secret. A
/// customer token for an organization not invited is refused (exit 1) with the command that
/// invites it.
fn token(at: OpenAt, data_dir: &Path, org: &str, role: TokenRole, name: Option<&str>) -> Result<ExitCode, RelayError> {
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
            Ok(ExitCode::SUCCESS)
        }
        Err(source @ coordinator::store::StoreError::Refused { code: "not_invited", .. }) => {
            Err(RelayError::NotInvited { source, data_dir: data_dir.to_owned(), org: org.to_owned() })
        }
        Err(e) => Err(AdminError::Store(e).into()),
    }
}

/// `word` as one shell word: as is when it holds only characters no shell reads specially,
/// else single-quoted.
fn shell_word(word: &str) -> String {
    let plain = !word.is_empty() && word.chars().all(|c| c.is_ascii_alphanumeric() || "/._-+:@%,=".contains(c));
    if plain { word.to_owned() } else { format!("'{}'", word.replace('\'', r"'\''")) }
}
