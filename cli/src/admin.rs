//! `svc admin ...`: offline administration of a data directory.

use std::process::ExitCode;

use manifest_core::service::admin::{self, AdminError, ArtifactArgs, BuildArgs, Target};
use manifest_core::service::auth::Role;
use manifest_core::service::capability::Tier;
use manifest_core::service::store::RuntimeImage;

use crate::args::{
    AdminCommand, ArtifactCommand, ArtifactFlags, CapabilityCommand, EntitlementCommand, ImageCommand, KeysCommand,
    SecretCommand, ServiceDatabaseArgs, SpendAuthorityCommand, SshKeyCommand, TokenCommand,
};
use crate::settings::DatabaseFlags as _;

fn artifact(flags: &ArtifactFlags) -> ArtifactArgs {
    ArtifactArgs {
        cid: flags.cid.clone(),
        digest: flags.digest.clone(),
        kind: flags.kind.clone(),
        encryption: flags.encryption.clone(),
        image_digest: flags.image_digest.clone(),
    }
}

/// The data directory an admin command works on, and where its store lives (`--database`;
/// storing an artifact touches only files).
fn target_of(command: &AdminCommand) -> (&std::path::Path, Option<&ServiceDatabaseArgs>) {
    match command {
        AdminCommand::Token { command: TokenCommand::Create { target, .. } }
        | AdminCommand::Artifact { command: ArtifactCommand::Accept { target, .. } }
        | AdminCommand::Capability { command: CapabilityCommand::Grant { target, .. } }
        | AdminCommand::Capability { command: CapabilityCommand::Revoke { target, .. } }
        | AdminCommand::Entitlement { command: EntitlementCommand::Set { target, .. } }
        | AdminCommand::SpendAuthority { command: SpendAuthorityCommand::Set { target, .. } }
        | AdminCommand::SshKey { command: SshKeyCommand::Add { target, .. } }
        | AdminCommand::Secret { command: SecretCommand::Provision { target, .. } } => {
            (&target.data_dir, Some(&target.database))
        }
        AdminCommand::Artifact { command: ArtifactCommand::Curate { data_dir, database, .. } }
        | AdminCommand::Image { command: ImageCommand::Add { data_dir, database, .. } }
        | AdminCommand::Keys { command: KeysCommand::Rotate { data_dir, database } } => (data_dir, Some(database)),
        AdminCommand::Artifact { command: ArtifactCommand::Store { data_dir, .. } } => (data_dir, None),
    }
}

/// Why an `svc admin` command did nothing: said once, by [`crate::failure::report`], as
/// `svc admin: ...`; exit 1 refused (with the reason), 2 store trouble.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AdminCommandError {
    /// The data directory is not there.
    #[error(transparent)]
    NoDataDir(crate::data_dir::NoDataDir),
    /// `--database` cannot be used.
    #[error(transparent)]
    Database(crate::settings::SettingsError),
    /// The administration refused or failed.
    #[error(transparent)]
    Admin(AdminError),
    /// The directory to store as an artifact cannot be read or sent.
    #[error(transparent)]
    Bundle(crate::bundle::BundleError),
    /// `--value-file` cannot be read (the error names it).
    #[error("--value-file: {0}")]
    ValueFile(#[source] std::io::Error),
}

impl crate::failure::Failure for AdminCommandError {
    fn exit_code(&self) -> u8 {
        match self {
            AdminCommandError::Admin(AdminError::Invalid(_))
            | AdminCommandError::Bundle(_)
            | AdminCommandError::ValueFile(_) => 1,
            _ => 2,
        }
    }

    fn envelope(&self) -> svc_http::ErrorBody {
        let code = match self {
            AdminCommandError::NoDataDir(_) => "no_data_dir",
            AdminCommandError::Database(_) => "bad_database",
            e if e.exit_code() == 1 => "invalid",
            _ => "admin_failed",
        };
        svc_http::ErrorBody::new(code, self.to_string())
    }

    fn text(&self) -> String {
        crate::failure::line("svc admin", self)
    }
}

/// Runs one admin command; exit 0 done, 1 refused (with the reason), 2 store trouble.
pub(crate) fn run(command: &AdminCommand) -> Result<ExitCode, AdminCommandError> {
    let (data_dir, database) = target_of(command);
    crate::data_dir::existing(data_dir, "svc serve --data-dir").map_err(AdminCommandError::NoDataDir)?;
    let at = database
        .map(|d| d.store_at(data_dir))
        .transpose()
        .map_err(AdminCommandError::Database)?
        .unwrap_or_else(|| svc_sql::StoreAt::DataDir(data_dir.to_owned()));
    // The store and the key file that unwraps its secrets (`--key-file`, `SVC_KEY_FILE`).
    let at = Target::new(at, database.and_then(|d| d.key_file.clone()), data_dir);
    let result = match command {
        AdminCommand::Token { command: TokenCommand::Create { target, role, name } } => {
            let role = Role::parse(role).unwrap_or(Role::Viewer);
            // The secret alone on stdout (`export SVC_TOKEN=$(...)`), its ID and name labelled
            // on stderr.
            admin::token_create(&at, &target.org, role, name.as_deref()).map(|token| {
                println!("{}", token.plaintext);
                eprintln!(
                    "token ID: {} (name {}, org {}); the token itself is the line on standard output, shown once",
                    token.id, token.name, target.org
                );
            })
        }
        AdminCommand::Artifact { command: ArtifactCommand::Store { data_dir, bundle, digest } } => {
            // The files `svc app deploy` would send from this directory: the same digest.
            let exclude = crate::bundle::Exclude::of(bundle, svc_manifest(bundle).as_deref(), &[]);
            let files = crate::bundle::read(bundle, &exclude).map_err(AdminCommandError::Bundle)?;
            admin::artifact_store_files(data_dir, &files.files, &files.executable, digest.as_deref())
                .map(|digest| println!("{digest}"))
        }
        AdminCommand::Artifact { command: ArtifactCommand::Curate { artifact: flags, .. } } => {
            admin::artifact_curate(&at, &artifact(flags))
        }
        AdminCommand::Artifact {
            command:
                ArtifactCommand::Accept { target, app, repository, git_ref, workflow_ref, manifest_path, artifact: flags },
        } => {
            let build = BuildArgs {
                repository: repository.clone(),
                git_ref: git_ref.clone(),
                workflow_ref: workflow_ref.clone(),
                manifest_path: manifest_path.clone(),
            };
            admin::artifact_accept(&at, &target.org, app, &build, &artifact(flags))
        }
        AdminCommand::Capability { command: CapabilityCommand::Grant { target, name } } => {
            admin::capability_set(&at, &target.org, name, true)
        }
        AdminCommand::Capability { command: CapabilityCommand::Revoke { target, name } } => {
            admin::capability_set(&at, &target.org, name, false)
        }
        AdminCommand::Entitlement { command: EntitlementCommand::Set { target, tier } } => {
            admin::entitlement_set(&at, &target.org, Tier::parse(tier).unwrap_or(Tier::Basic))
        }
        AdminCommand::SpendAuthority { command: SpendAuthorityCommand::Set { target, micros, .. } } => {
            admin::spend_authority_set(&at, &target.org, *micros).map(|()| match micros {
                Some(m) => eprintln!("spend authority of {}: {} per job", target.org, svc_execution::money::usd(*m)),
                None => eprintln!("spend authority of {}: none (its applications launch nothing)", target.org),
            })
        }
        AdminCommand::SshKey { command: SshKeyCommand::Add { target, key } } => {
            admin::ssh_key_add(&at, &target.org, key)
        }
        AdminCommand::Secret { command: SecretCommand::Provision { target, app, secret_id, value_file } } => {
            let value = value_file.as_deref().map(read_secret).transpose().map_err(AdminCommandError::ValueFile)?;
            admin::secret_provision(&at, &target.org, app, secret_id, value.as_deref())
        }
        AdminCommand::Image { command: ImageCommand::Add { catalog, name, version, digest, .. } } => {
            let image = RuntimeImage {
                catalog: catalog.clone(),
                name: name.clone(),
                version: version.clone(),
                digest: digest.clone(),
            };
            admin::image_add(&at, &image)
        }
        AdminCommand::Keys { command: KeysCommand::Rotate { .. } } => {
            admin::keys_rotate(&at).map(|rotation| print!("{}", rotation.report()))
        }
    };
    result.map(|()| ExitCode::SUCCESS).map_err(AdminCommandError::Admin)
}

/// A secret's value from `--value-file`: a regular file (a FIFO or a device such as
/// `/dev/zero` could block or never end), read no further than one byte past the bound, so
/// the store's own check can say how large is too large without reading it all.
fn read_secret(path: &std::path::Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let file = fs_err::File::open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{} is not a regular file", path.display()),
        ));
    }
    let bound = manifest_core::service::admin::MAX_SECRET_BYTES as u64 + 1;
    let mut value = Vec::new();
    file.take(bound).read_to_end(&mut value)?;
    Ok(value)
}

/// The application manifest `svc app deploy` would read in `dir` (left out of its bundle), if
/// it is one: a `manifest.json` of a web app is an app file.
fn svc_manifest(dir: &std::path::Path) -> Option<std::path::PathBuf> {
    let path = crate::app_deploy::find_manifest(dir)?;
    let bytes = fs_err::read(&path).ok()?;
    manifest_core::validate(&bytes).schema_version.is_some().then_some(path)
}
