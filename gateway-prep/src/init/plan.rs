//! Init's plan: from the settings and what is on the host now, every file init wants and
//! what it does to each (create, update, keep, or refuse a file changed by hand unless
//! `--force`), and whether the host registers. Making a plan reads the host's files (and the
//! coordinator's CA) and makes new keys in memory; it writes nothing and sends nothing, so a
//! dry run is the plan, reported.

use std::path::{Path, PathBuf};

use relay_gateway::file::GatewayFile;

use crate::coordinator::CoordinatorClient;
use crate::init::error::InitError;
use crate::init::files::{self, Action, FileReport, Fingerprint, Planned};
use crate::init::keys::{operator_key, tunnel_pair};
use crate::init::record::Registration;
use crate::init::report::{InitReport, RegistrationAction, RegistrationReport};
use crate::init::settings::{Settings, SettingsError};
use crate::init::{gateway, unit};
use crate::key::OperatorKey;
use crate::layout;

/// Whether the host registers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Registering {
    /// Not registered yet: register with this token, as this operator if one was named.
    Register {
        /// The admission token, as given (trimmed).
        admission_token: String,
        /// `--operator`, checked by the coordinator when given.
        operator: Option<String>,
    },
    /// The record says the host is registered with the plan's coordinator and hostname:
    /// nothing is sent.
    Registered(Registration),
}

/// Everything init will do, decided before anything is written or sent.
#[derive(Debug)]
pub struct Plan {
    /// The gateway's public hostname.
    pub hostname: String,
    /// The coordinator's base URL.
    pub coordinator: String,
    /// The coordinator's client (made here, so a bad URL or CA stops init before it decides).
    pub client: CoordinatorClient,
    /// The operator key: the host's, or a new one (written before the registration).
    pub key: OperatorKey,
    /// Whether the host registers.
    pub registering: Registering,
    /// The gateway configuration as planned: following the feed as the record's operator
    /// (an empty id until registered; applying fills in the one the coordinator answers).
    pub gateway: GatewayFile,
    /// Every file but the record, in the order written: the operator key first.
    pub files: Vec<Planned>,
}

impl Plan {
    /// Plans init for `settings`. Refuses (nothing written, nothing sent): a record that
    /// cannot be read or names another hostname or coordinator, a missing `--hostname` or
    /// `--coordinator` the record cannot stand for, an operator key that is not the
    /// registered one, a file changed since init wrote it (unless `--force`; a dry run
    /// reports it instead), and a registration without an admission token.
    pub fn new(settings: &Settings) -> Result<Plan, InitError> {
        let root = &settings.root;
        let record = Registration::read(root).map_err(|e| InitError::Conflict(e.to_string()))?;
        let (hostname, coordinator) = target(settings, record.as_ref())?;
        let client =
            CoordinatorClient::new(&coordinator, settings.coordinator_ca.as_deref()).map_err(InitError::Client)?;

        let (key, key_text) = operator_key(root, record.as_ref())?;
        let operator_id = record.as_ref().map(|r| r.operator.id.as_str()).unwrap_or_default();
        let (cert_pem, tunnel_key_pem) = tunnel_pair(root, &hostname)?;
        let existing = GatewayFile::read_as_written(&root.path(layout::config_file(layout::GATEWAY_FILE))).ok();
        let gateway = gateway::config(settings, existing, &coordinator, operator_id);
        let wanted = [
            (layout::config_file(layout::OPERATOR_KEY), key_text, 0o600, Fingerprint::Bytes),
            (layout::config_file(layout::TUNNEL_KEY), tunnel_key_pem, 0o600, Fingerprint::Bytes),
            (layout::config_file(layout::TUNNEL_CERT), cert_pem, 0o644, Fingerprint::Bytes),
            (layout::config_file(layout::GATEWAY_FILE), gateway::text(&gateway), 0o644, Fingerprint::GatewayConfig),
            (
                PathBuf::from(layout::UNIT),
                unit::unit(
                    &settings.svc_binary,
                    &layout::config_file(layout::GATEWAY_FILE),
                    settings.limit_nofile,
                    &hostname,
                ),
                0o644,
                Fingerprint::Bytes,
            ),
        ];
        let files: Vec<Planned> = wanted
            .into_iter()
            .map(|(path, content, mode, fingerprint)| {
                let recorded = recorded(record.as_ref(), &path);
                let action =
                    files::classify(root, &path, &content, mode, fingerprint, recorded.as_deref(), settings.force);
                Planned { path, content, mode, fingerprint, action }
            })
            .collect();
        let changed = changed(&files);
        if !changed.is_empty() && !settings.dry_run {
            return Err(InitError::Changed(changed));
        }
        let registering = match (record, &settings.admission_token) {
            (Some(record), _) => Registering::Registered(record),
            (None, Some(token)) => {
                Registering::Register { admission_token: token.clone(), operator: settings.operator.clone() }
            }
            (None, None) => return Err(SettingsError::NoAdmissionToken.into()),
        };
        Ok(Plan { hostname, coordinator, client, key, registering, gateway, files })
    }

    /// The files changed since init wrote them (host paths): refused without `--force`.
    pub fn changed(&self) -> Vec<String> {
        changed(&self.files)
    }

    /// Whether applying registers the host.
    pub fn registers(&self) -> bool {
        matches!(self.registering, Registering::Register { .. })
    }

    /// The registration record the host has, if registered.
    pub fn record(&self) -> Option<&Registration> {
        match &self.registering {
            Registering::Registered(record) => Some(record),
            Registering::Register { .. } => None,
        }
    }

    /// The operator's name as far as known before registering: the record's, else
    /// `--operator`'s.
    pub fn operator_name(&self) -> Option<&str> {
        match &self.registering {
            Registering::Registered(record) => Some(&record.operator.name),
            Registering::Register { operator, .. } => operator.as_deref(),
        }
    }

    /// What the record's SHA-256 says init last wrote at `path`, if anything.
    pub fn recorded(&self, path: &Path) -> Option<String> {
        recorded(self.record(), path)
    }

    /// The registration as the report shows it before applying (the operator: the record's).
    pub fn registration_report(&self) -> RegistrationReport {
        RegistrationReport {
            action: if self.registers() { RegistrationAction::Register } else { RegistrationAction::Unchanged },
            coordinator: self.coordinator.clone(),
            hostname: self.hostname.clone(),
            public_key: self.key.public_key(),
            operator: self.record().map(|r| r.operator.clone()),
        }
    }

    /// The plan as a dry run reports it: every file, then the record, which changes only if
    /// a file it describes does (created when registering). Without warnings (the
    /// coordinator's to give).
    pub fn report(&self) -> InitReport {
        let record_action = match self.record() {
            Some(_) if self.files.iter().all(|f| f.action == Action::Unchanged) => Action::Unchanged,
            Some(_) => Action::Update,
            None => Action::Create,
        };
        let mut files: Vec<FileReport> = self.files.iter().map(Planned::report).collect();
        files.push(FileReport {
            path: Registration::path().display().to_string(),
            mode: "0644".into(),
            action: record_action,
        });
        InitReport { dry_run: true, files, registration: self.registration_report(), warnings: Vec::new() }
    }
}

/// The hostname and coordinator of this run: the flags', else the record's; a record that
/// names others is a conflict (registering again needs a new admission token).
fn target(settings: &Settings, record: Option<&Registration>) -> Result<(String, String), InitError> {
    let hostname = match (&settings.hostname, record) {
        (Some(h), _) => h.clone(),
        (None, Some(r)) => r.operator.hostname.clone(),
        (None, None) => return Err(SettingsError::NoHostname.into()),
    };
    let coordinator = match (&settings.coordinator, record) {
        (Some(c), _) => c.clone(),
        (None, Some(r)) => r.coordinator.clone(),
        (None, None) => return Err(SettingsError::NoCoordinator.into()),
    };
    if let Some(r) = record
        && (r.operator.hostname != hostname || r.coordinator != coordinator)
    {
        return Err(InitError::Conflict(format!(
            "this host is registered as gateway {} with {}; to register it as {hostname} with {coordinator}, \
             remove {} and run init with a new admission token",
            r.operator.hostname,
            r.coordinator,
            Registration::path().display()
        )));
    }
    Ok((hostname, coordinator))
}

fn changed(files: &[Planned]) -> Vec<String> {
    files.iter().filter(|f| f.action == Action::Changed).map(|f| f.path.display().to_string()).collect()
}

fn recorded(record: Option<&Registration>, path: &Path) -> Option<String> {
    record.and_then(|r| r.files.get(&path.display().to_string()).cloned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::init::fixture::{Host, UNIT};

    fn actions(plan: &Plan) -> Vec<Action> {
        plan.files.iter().map(|f| f.action).collect()
    }

    #[test]
    fn a_fresh_host_creates_every_file_and_registers() {
        let host = Host::new();
        let plan = Plan::new(&host.settings(|_| ())).expect("a plan");
        assert_eq!(actions(&plan), [Action::Create; 5]);
        let paths: Vec<String> = plan.files.iter().map(|f| f.path.display().to_string()).collect();
        assert_eq!(paths[0], "/etc/svc-gateway/operator.key", "the key is written first");
        assert_eq!(paths[3], "/etc/svc-gateway/gateway.json");
        assert_eq!(paths[4], UNIT);
        assert_eq!(plan.files.iter().map(|f| f.mode).collect::<Vec<_>>(), [0o600, 0o600, 0o644, 0o644, 0o644]);
        assert_eq!(
            plan.registering,
            Registering::Register { admission_token: "adm_1".into(), operator: Some("north".into()) }
        );
        assert_eq!(plan.gateway.coordinator.as_ref().expect("a feed").operator_id, "", "not known until registered");
        let report = plan.report();
        assert_eq!(
            report.files.last().map(|f| (f.path.as_str(), f.action)),
            Some(("/etc/svc-gateway/operator.json", Action::Create))
        );
        assert_eq!(report.registration.action, RegistrationAction::Register);
        assert_eq!(report.registration.public_key, plan.key.public_key());
        assert_eq!(host.files(), Vec::<String>::new(), "planning writes nothing");
    }

    #[test]
    fn flags_the_record_cannot_stand_for_are_needed() {
        let host = Host::new();
        let needed = |change: fn(&mut Settings)| match Plan::new(&host.settings(change)).expect_err("a flag is needed")
        {
            InitError::Usage(e) => e.flag(),
            other => panic!("not a usage error: {other:?}"),
        };
        assert_eq!(needed(|o| o.hostname = None), "--hostname");
        assert_eq!(needed(|o| o.coordinator = None), "--coordinator");
        assert_eq!(needed(|o| o.admission_token = None), "--admission-token");
        // A dry run needs the token too: it shows the registration a real run would make.
        assert_eq!(
            needed(|o| {
                o.admission_token = None;
                o.dry_run = true;
            }),
            "--admission-token"
        );
        let e = Plan::new(&host.settings(|o| o.coordinator = Some("ftp://x".into()))).expect_err("a bad URL");
        assert!(matches!(e, InitError::Client(_)) && e.exit_code() == 3, "{e:?}");
    }

    #[test]
    fn a_registered_host_keeps_its_files_and_does_not_register_again() {
        let host = Host::registered();
        let bare = host.settings(|o| (o.hostname, o.coordinator, o.admission_token) = (None, None, None));
        let plan = Plan::new(&bare).expect("the record stands for the flags");
        assert_eq!(actions(&plan), [Action::Unchanged; 5]);
        assert!(!plan.registers());
        assert_eq!(plan.operator_name(), Some("north"));
        assert_eq!(plan.report().files[5].action, Action::Unchanged);
        assert_eq!(plan.registration_report().action, RegistrationAction::Unchanged);

        // A new flag value updates the file init wrote, and so the record.
        let moved = Plan::new(&host.settings(|o| o.admin = Some("127.0.0.1:9999".parse().expect("addr"))))
            .expect("a new metrics address");
        assert_eq!(actions(&moved)[3], Action::Update);
        assert_eq!(moved.report().files[5].action, Action::Update);
        // So does a mode changed by hand.
        host.chmod("/etc/svc-gateway/tunnel.key", 0o644);
        assert_eq!(actions(&Plan::new(&bare).expect("a plan"))[1], Action::Update);

        let e = Plan::new(&host.settings(|o| o.hostname = Some("gw2.example.test".into()))).expect_err("another");
        assert!(matches!(&e, InitError::Conflict(m) if m.contains("registered as gateway gw1.example.test")), "{e}");
        let e = Plan::new(&host.settings(|o| o.coordinator = Some("http://127.0.0.1:2".into()))).expect_err("another");
        assert!(matches!(e, InitError::Conflict(_)) && e.exit_code() == 2, "{e:?}");
    }

    #[test]
    fn a_file_changed_by_hand_is_refused_reported_in_a_dry_run_and_replaced_with_force() {
        let host = Host::registered();
        let edited = host.read(UNIT).replace("LimitNOFILE=1048576", "LimitNOFILE=4096");
        host.write(UNIT, &edited);
        let e = Plan::new(&host.settings(|_| ())).expect_err("refused");
        assert!(matches!(&e, InitError::Changed(files) if files == &[UNIT.to_owned()]), "{e:?}");
        assert_eq!(e.exit_code(), 2);
        let dry = Plan::new(&host.settings(|o| o.dry_run = true)).expect("a dry run reports it");
        assert_eq!(dry.changed(), [UNIT]);
        assert_eq!(dry.files[4].action, Action::Changed);
        let forced = Plan::new(&host.settings(|o| o.force = true)).expect("forced");
        assert_eq!(forced.files[4].action, Action::Replace);
        assert_eq!(host.read(UNIT), edited, "planning writes nothing");

        // The gateway's routes, and how the file is formatted, are not a change.
        let mut routed: serde_json::Value =
            serde_json::from_str(&host.read("/etc/svc-gateway/gateway.json")).expect("json");
        routed["routes"] = serde_json::json!([{"routeId": "rt_1", "hostnames": ["a.example.test"],
            "routePublicKey": "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}]);
        host.write("/etc/svc-gateway/gateway.json", &routed.to_string());
        let plan = Plan::new(&host.settings(|o| o.force = true)).expect("a plan");
        assert_eq!(plan.files[3].action, Action::Unchanged);
        assert_eq!(plan.gateway.routes.len(), 1, "kept");

        // A file init never wrote counts as changed too.
        let foreign = Host::new();
        foreign.write(UNIT, "[Service]\nExecStart=/bin/true\n");
        let e = Plan::new(&foreign.settings(|_| ())).expect_err("a foreign unit");
        assert!(matches!(e, InitError::Changed(_)), "{e:?}");
    }
}
