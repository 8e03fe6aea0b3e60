//! The customer tool `svc`: command-line arguments, reading inputs, and exit codes. Each
//! command is a thin layer over a library (`manifest-core` for manifests, its `service`
//! feature for the publication service and its administration, `relay-api` for the gateway
//! and the ingress demo, `agent` for the job-side agent).

#![forbid(unsafe_code)]

mod admin;
mod app_deploy;
mod args;
mod bundle;
mod catalog;
mod ci_formats;
mod client;
mod collect;
mod data_dir;
mod demo;
mod deploy;
mod economics;
mod failure;
mod ingress;
mod lsp;
mod manifest;
mod manifest_outcome;
mod manifests;
mod migrate;
mod output;
mod policy_diff;
mod relay;
mod remote;
mod serve;
mod settings;
mod tls;
mod trust;

pub use args::{
    AdminCommand, AgentCommand, AppCommand, CatalogCommand, CatalogTarget, Cli, Command, FactArgs, GatewayCommand,
    HostnameCommand, IngressCommand, ListenerArgs, ManifestCommand, OutputFormat, PinsCommand, PolicyCommand,
    ProjectTarget, RelayAdminCommand, RelayCommand, RelayServeArgs, RelayTarget, Remote, SchemaVersion, ServeArgs,
    Trust,
};
pub use collect::set_allocator_collect;

pub use migrate::MigrateDecisions;
pub use output::LogFormat;
pub use settings::SettingsError;

use std::process::ExitCode;

/// Parses the process's command line, sets up the terminal plumbing (`output`: quiet broken
/// pipes, Ctrl-C as 130, JSON errors for `--format json`), runs the command, and returns the
/// exit code.
pub fn main() -> ExitCode {
    use clap::FromArgMatches as _;
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let tree = command();
    let matches = match tree.clone().try_get_matches_from(&args) {
        Ok(m) => m,
        Err(e) => return usage_error(&e, asks_for_json(&args)),
    };
    if let Some(refusal) = settings::password_on_command_line(&tree, &matches) {
        let e = clap::Error::raw(clap::error::ErrorKind::ValueValidation, format!("{refusal}\n"));
        return usage_error(&e, asks_for_json(&args));
    }
    output::install(leaf_format(&matches) == Some(OutputFormat::Json));
    match Cli::from_arg_matches(&matches) {
        Ok(cli) => output::finish(run(cli)),
        Err(e) => usage_error(&e, output::json()),
    }
}

/// The command tree as `svc` parses it: [`Cli`] with each command's own `--format` help.
pub fn command() -> clap::Command {
    use clap::CommandFactory as _;
    output::describe_formats(Cli::command())
}

/// The `--format` of the innermost subcommand, if it has one.
fn leaf_format(matches: &clap::ArgMatches) -> Option<OutputFormat> {
    let mut leaf = matches;
    while let Some((_, sub)) = leaf.subcommand() {
        leaf = sub;
    }
    match leaf.try_get_one::<OutputFormat>("format") {
        Ok(format) => format.copied(),
        Err(_) => match leaf.try_get_one::<args::ValidateFormat>("format") {
            Ok(format) => format.map(|f| f.output()),
            Err(_) => leaf
                .try_get_one::<args::MigrateFormat>("format")
                .ok()
                .flatten()
                .map(|f| if *f == args::MigrateFormat::Json { OutputFormat::Json } else { OutputFormat::Text }),
        },
    }
}

/// Whether a command line that clap refused asked for JSON (`--format json` or `--format=json`).
fn asks_for_json(args: &[std::ffi::OsString]) -> bool {
    args.windows(2).any(|w| w[0] == "--format" && w[1] == "json") || args.iter().any(|a| a == "--format=json")
}

/// Help and version print as usual; a usage error (exit 2) is also the JSON envelope on
/// standard output when JSON was asked for.
fn usage_error(e: &clap::Error, json: bool) -> ExitCode {
    if !e.use_stderr() {
        // --help or --version: a closed pipe here is nobody's error.
        let _ = e.print();
        return ExitCode::SUCCESS;
    }
    if json {
        let message = e.kind().as_str().map_or_else(|| e.to_string(), str::to_owned);
        output::print_json(&svc_http::ErrorBody::new("usage", message).with("detail", e.to_string()));
    }
    let _ = e.print();
    ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2))
}

/// Runs a parsed command line and returns the process exit code. A command's typed error is
/// said here, once ([`failure::report`]: its text, its envelope under `--format json`, its
/// exit code), not where it happened.
pub fn run(cli: Cli) -> ExitCode {
    use failure::report;
    // The long-running servers log through `tracing`; client commands print their own lines.
    match &cli.command {
        Command::Serve(args) => output::start_logging(Some(args.listener.log_format)),
        Command::Relay { command: RelayCommand::Serve(args) } => output::start_logging(Some(args.listener.log_format)),
        // `svc relay admin` too: opening the store may say it created the key file.
        Command::Gateway { .. }
        | Command::Agent { .. }
        | Command::Ingress { command: IngressCommand::Demo { .. } }
        | Command::Relay { command: RelayCommand::Admin { .. } } => {
            output::start_logging(None);
        }
        _ => {}
    }
    match cli.command {
        Command::Lsp { stdio: _ } => report(lsp::run()),
        Command::Manifest { command } => match command {
            ManifestCommand::Validate { file, paths, include, format } => match (file, paths.as_slice()) {
                // One file (`--file` is always one: a directory there is an error, as it was),
                // reported as it always was; the CI formats report one file as they do many.
                (Some(file), []) if include.is_empty() && !format.is_ci() => {
                    report(manifest::validate(&file, format.output()))
                }
                (None, [one]) if include.is_empty() && !one.is_dir() && !format.is_ci() => {
                    report(manifest::validate(one, format.output()))
                }
                (file, _) => report(manifests::validate(file.as_deref(), &paths, &include, format)),
            },
            ManifestCommand::Schema { version, server: None, .. } => manifest::schema(version),
            ManifestCommand::Schema { version, server: Some(server), trust } => {
                report(remote::schema(manifest::schema_kind(version), Some(&server), &trust))
            }
            ManifestCommand::Migrate { file, decisions, format } => report(migrate::migrate(&file, &decisions, format)),
            ManifestCommand::Policy { file, facts } => report(manifest::policy(&file, &facts)),
            ManifestCommand::Digest { file, facts } => report(manifest::digest(&file, &facts)),
        },
        Command::Policy {
            command: PolicyCommand::Publish { file, app, dry_run, paused: _, reason, expect_version, remote },
        } => report(remote::publish(&remote::Publish {
            file: &file,
            app: &app,
            dry_run,
            reason: reason.as_deref(),
            expect_version,
            remote: &remote,
        })),
        Command::Policy { command: PolicyCommand::Diff { from, to, as_written, remote } } => {
            report(policy_diff::run(&from, &to, as_written, &remote))
        }
        Command::App { command } => match command {
            AppCommand::Deploy { dir, app, manifest, no_wait, timeout, remote } => {
                report(app_deploy::deploy(&app_deploy::AppDeploy {
                    dir: &dir,
                    app: app.as_deref(),
                    manifest: manifest.as_deref(),
                    no_wait,
                    timeout,
                    remote: &remote,
                }))
            }
            AppCommand::Create { id, remote } => report(remote::app_create(&id, &remote)),
            AppCommand::List { remote } => report(remote::app_list(&remote)),
            AppCommand::Resume { id, reason, remote } => report(remote::app_resume(&id, &reason, &remote)),
            AppCommand::Show { id, remote } => report(remote::app_show(&id, &remote)),
            AppCommand::Versions { id, version, remote } => report(remote::app_versions(&id, version, &remote)),
            AppCommand::Activity { id, remote } => report(remote::app_activity(&id, &remote)),
            AppCommand::Executions { id, watch, limit, cursor, remote } => {
                report(remote::app_executions(&id, watch, limit, cursor.as_deref(), &remote))
            }
            AppCommand::Logs { id, execution, follow, remote } => {
                report(remote::app_logs(&id, execution.as_deref(), follow, &remote))
            }
        },
        Command::Serve(args) => report(serve::serve(&args)),
        Command::Admin { command } => report(admin::run(&command)),
        Command::Ingress { command } => match command {
            IngressCommand::Demo { data_dir, listen, api_listen, cert_validity_secs, revalidate_secs, jobs } => {
                report(settings::JobSettings::try_from(&jobs).map_err(demo::DemoError::Jobs).and_then(|jobs| {
                    demo::run(demo::DemoSettings {
                        data_dir: data_dir.unwrap_or_else(|| demo::default_data_dir(dirs::data_local_dir().as_deref())),
                        public: listen,
                        api: api_listen,
                        certificate_validity: std::time::Duration::from_secs(cert_validity_secs),
                        revalidate: std::time::Duration::from_secs(revalidate_secs),
                        jobs,
                    })
                }))
            }
            IngressCommand::Deploy { no_fund, no_wait, timeout, target } => {
                report(deploy::deploy(&target, no_fund, no_wait, timeout))
            }
            IngressCommand::Status { target } => report(deploy::status(&target)),
            IngressCommand::Logs { follow, after, target } => report(deploy::logs(&target, follow, after)),
            IngressCommand::Hints { target } => report(deploy::hints(&target)),
            IngressCommand::Executions { limit, cursor, target } => {
                report(deploy::executions(&target, limit, cursor.as_deref()))
            }
            IngressCommand::Policy { revision, target } => report(deploy::policy(&target, revision)),
            IngressCommand::Fund { periods, target } => report(deploy::fund(&target, periods)),
            IngressCommand::Ledger { target } => report(deploy::ledger(&target)),
            IngressCommand::Stop { target } => report(deploy::stop(&target)),
            IngressCommand::Hostname { command } => report(deploy::hostname(&command)),
            IngressCommand::Schema => deploy::schema(),
            IngressCommand::Trust { data_dir, ca, remove } => {
                let ca = ca.unwrap_or_else(|| {
                    data_dir.unwrap_or_else(|| demo::default_data_dir(dirs::data_local_dir().as_deref())).join("ca.pem")
                });
                report(trust::run(&trust::TrustRequest { ca, remove }))
            }
            IngressCommand::List { target } => report(deploy::list(&target)),
            IngressCommand::Sessions { target } => report(economics::sessions(&target)),
            IngressCommand::Refund { session, target } => report(economics::refund(&target, &session)),
            IngressCommand::Rewards { target } => report(economics::rewards(&target)),
            IngressCommand::Claim { target } => report(economics::claim(&target)),
            IngressCommand::Pins { command } => report(economics::pins(&command)),
            IngressCommand::Catalog { command } => report(catalog::run(&command)),
        },
        Command::Relay { command } => match command {
            RelayCommand::Serve(args) => report(relay::serve(&args)),
            RelayCommand::Admin { command } => report(relay::admin(&command)),
        },
        Command::Gateway { command: GatewayCommand::Run { config } } => report(ingress::gateway(&config)),
        Command::Agent { command: AgentCommand::Run { config } } => report(ingress::agent(&config)),
    }
}
