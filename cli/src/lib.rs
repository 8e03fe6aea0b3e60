//! The customer tool `svc`: command-line arguments, reading inputs, and exit codes. Each
//! command is a thin layer over a library (`manifest-core` for manifests, its `service`
//! feature for the publication service and its administration, `relay-api` for the gateway
//! and the ingress demo, `agent` for the job-side agent).

#![forbid(unsafe_code)]

mod admin;
mod args;
mod catalog;
mod client;
mod deploy;
mod economics;
mod ingress;
mod manifest;
mod relay;
mod remote;
mod serve;
mod tls;

pub use args::{
    AdminCommand, AgentCommand, AppCommand, CatalogCommand, CatalogTarget, Cli, Command, FactArgs, GatewayCommand,
    HostnameCommand, IngressCommand, ListenerArgs, ManifestCommand, OutputFormat, PinsCommand, PolicyCommand,
    ProjectTarget, RelayAdminCommand, RelayCommand, RelayServeArgs, RelayTarget, Remote, SchemaVersion, ServeArgs,
    Trust,
};

use std::process::ExitCode;

/// Runs a parsed command line and returns the process exit code.
pub fn run(cli: Cli) -> ExitCode {
    match cli.command {
        Command::Manifest { command } => match command {
            ManifestCommand::Validate { file, format } => manifest::validate(&file, format),
            ManifestCommand::Schema { version, server: None, .. } => manifest::schema(version),
            ManifestCommand::Schema { version, server: Some(server), trust } => {
                remote::schema(manifest::schema_kind(version), Some(&server), &trust)
            }
            ManifestCommand::Policy { file, facts } => manifest::policy(&file, &facts),
            ManifestCommand::Digest { file, facts } => manifest::digest(&file, &facts),
        },
        Command::Policy {
            command: PolicyCommand::Publish { file, app, dry_run, paused: _, reason, expect_version, remote },
        } => remote::publish(&remote::Publish {
            file: &file,
            app: &app,
            dry_run,
            reason: reason.as_deref(),
            expect_version,
            remote: &remote,
        }),
        Command::App { command } => match command {
            AppCommand::Create { id, remote } => remote::app_create(&id, &remote),
            AppCommand::Show { id, remote } => remote::app_show(&id, &remote),
            AppCommand::Versions { id, version, remote } => remote::app_versions(&id, version, &remote),
            AppCommand::Activity { id, remote } => remote::app_activity(&id, &remote),
        },
        Command::Serve(args) => serve::serve(&args),
        Command::Admin { command } => admin::run(&command),
        Command::Ingress { command } => match command {
            IngressCommand::Demo { data_dir, listen, cert_validity_secs } => {
                ingress::demo(data_dir.as_deref(), listen, cert_validity_secs)
            }
            IngressCommand::Deploy { no_fund, no_wait, timeout, target } => {
                deploy::deploy(&target, no_fund, no_wait, timeout)
            }
            IngressCommand::Status { target } => deploy::status(&target),
            IngressCommand::Logs { follow, after, target } => deploy::logs(&target, follow, after),
            IngressCommand::Hints { target } => deploy::hints(&target),
            IngressCommand::Fund { periods, target } => deploy::fund(&target, periods),
            IngressCommand::Ledger { target } => deploy::ledger(&target),
            IngressCommand::Stop { target } => deploy::stop(&target),
            IngressCommand::Hostname { command } => deploy::hostname(&command),
            IngressCommand::Schema => deploy::schema(),
            IngressCommand::Sessions { target } => economics::sessions(&target),
            IngressCommand::Refund { session, target } => economics::refund(&target, &session),
            IngressCommand::Rewards { target } => economics::rewards(&target),
            IngressCommand::Claim { target } => economics::claim(&target),
            IngressCommand::Pins { command } => economics::pins(&command),
            IngressCommand::Catalog { command } => catalog::run(&command),
        },
        Command::Relay { command } => match command {
            RelayCommand::Serve(args) => relay::serve(&args),
            RelayCommand::Admin { command } => relay::admin(&command),
        },
        Command::Gateway { command: GatewayCommand::Run { config } } => ingress::gateway(&config),
        Command::Agent { command: AgentCommand::Run { config } } => ingress::agent(&config),
    }
}
