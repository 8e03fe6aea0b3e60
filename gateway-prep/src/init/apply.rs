//! Carrying a plan out: the operator key first, then the registration (once), then every
//! other file and the registration record, each written atomically with its mode.

use relay_wire::admission::{Operator, RegisterRequest, registration_message};

use crate::coordinator::ClientError;
use crate::init::error::InitError;
use crate::init::files::{self, Action, Fingerprint, Planned};
use crate::init::gateway;
use crate::init::plan::{Plan, Registering};
use crate::init::record::{self, Registration};
use crate::init::report::InitReport;
use crate::init::settings::Settings;
use crate::init::warnings::operator_warnings;
use crate::{Root, layout};

/// Applies `plan` (made from `settings`, with no file refused): writes what it creates,
/// updates or replaces, registers when it says so, and records what it wrote.
///
/// The key is on disk before the coordinator learns it, so a crash after registering never
/// loses the registered key; a registration that fails removes a key this run made (and the
/// directory made for it). The gateway configuration names the operator the coordinator
/// answers, so it is planned again with it.
pub async fn apply(settings: &Settings, mut plan: Plan) -> Result<InitReport, InitError> {
    let root = &settings.root;
    let mut report = InitReport {
        dry_run: false,
        files: Vec::new(),
        registration: plan.registration_report(),
        warnings: Vec::new(),
    };
    let planned_id = plan.record().map(|r| r.operator.id.clone()).unwrap_or_default();
    let key_file = &plan.files[0];
    let config_dir_existed = root.path(layout::CONFIG_DIR).exists();
    if key_file.action.writes() {
        write(root, key_file)?;
    }
    let operator = match &plan.registering {
        Registering::Registered(record) => record.operator.clone(),
        Registering::Register { admission_token, operator } => {
            register(&plan, admission_token, operator.as_deref()).await.map_err(|e| {
                if key_file.action == Action::Create {
                    remove_made_key(root, &key_file.path, config_dir_existed);
                }
                match e {
                    ClientError::Refused { .. } => InitError::Refused(e),
                    other => InitError::Client(other),
                }
            })?
        }
    };
    let mut planned = std::mem::take(&mut plan.files);
    if operator.id != planned_id
        && let Some(file) = planned.iter_mut().find(|f| f.path == layout::config_file(layout::GATEWAY_FILE))
    {
        file.content = gateway::text(&gateway::with_operator(plan.gateway.clone(), &operator.id));
        let recorded = plan.recorded(&file.path);
        file.action = files::classify(
            root,
            &file.path,
            &file.content,
            file.mode,
            file.fingerprint,
            recorded.as_deref(),
            settings.force,
        );
    }
    for f in &planned[1..] {
        if f.action.writes() {
            write(root, f)?;
        }
    }
    let record_file = record_file(root, &plan.coordinator, &operator, &planned);
    if record_file.action.writes() {
        write(root, &record_file)?;
    }
    planned.push(record_file);
    report.files = planned.iter().map(Planned::report).collect();
    report.warnings = operator_warnings(&plan.client, Some(&operator.name)).await;
    report.registration.operator = Some(operator);
    Ok(report)
}

/// Registers the plan's key and hostname with the admission token: the operator as the
/// coordinator recorded it.
async fn register(plan: &Plan, token: &str, operator: Option<&str>) -> Result<Operator, ClientError> {
    let public_key = plan.key.public_key();
    let request = RegisterRequest {
        signature: plan.key.sign(&registration_message(token, &plan.hostname, &public_key)),
        admission_token: token.to_owned(),
        operator: operator.map(str::to_owned),
        public_key,
        hostname: plan.hostname.clone(),
    };
    plan.client.register(&request).await
}

/// Removes the operator key this run wrote for a registration that failed, and the
/// configuration directory if this run made it (and it is empty).
fn remove_made_key(root: &Root, key: &std::path::Path, config_dir_existed: bool) {
    let _ = std::fs::remove_file(root.path(key));
    if !config_dir_existed {
        let _ = std::fs::remove_dir(root.path(layout::CONFIG_DIR));
    }
}

/// The registration record after this run: the coordinator, the operator, and the
/// fingerprint of every file as planned; unchanged when the host's record already says so.
fn record_file(root: &Root, coordinator: &str, operator: &Operator, planned: &[Planned]) -> Planned {
    let record = Registration {
        version: record::VERSION,
        coordinator: coordinator.to_owned(),
        operator: operator.clone(),
        files: files::digests(planned),
    };
    let text = record.to_text();
    let path = Registration::path();
    Planned {
        action: match std::fs::read_to_string(root.path(&path)) {
            Ok(old) if old == text => Action::Unchanged,
            Ok(_) => Action::Update,
            Err(_) => Action::Create,
        },
        path,
        content: text,
        mode: 0o644,
        fingerprint: Fingerprint::Bytes,
    }
}

/// Writes one planned file atomically with its mode.
fn write(root: &Root, f: &Planned) -> Result<(), InitError> {
    files::write_atomic(&root.path(&f.path), f.content.as_bytes(), f.mode)
        .map_err(|source| InitError::Io { path: f.path.display().to_string(), source })
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;
    use crate::init::fixture::{Host, UNIT};

    fn mode(host: &Host, path: &str) -> u32 {
        std::fs::metadata(host.root().path(path)).expect("exists").permissions().mode() & 0o777
    }

    #[tokio::test]
    async fn a_registered_host_gets_what_changed_with_its_modes_and_a_new_record() {
        let host = Host::registered();
        host.chmod("/etc/svc-gateway/tunnel.key", 0o644);
        let settings = host.settings(|o| o.admin = Some("127.0.0.1:9999".parse().expect("addr")));
        let before = Registration::read(&host.root()).expect("read").expect("a record");
        let report = apply(&settings, Plan::new(&settings).expect("a plan")).await.expect("applied");
        let actions: Vec<Action> = report.files.iter().map(|f| f.action).collect();
        use Action::{Unchanged, Update};
        assert_eq!(actions, [Unchanged, Update, Unchanged, Update, Unchanged, Update], "{}", report.text());
        assert_eq!(mode(&host, "/etc/svc-gateway/tunnel.key"), 0o600, "the mode put back");
        assert!(host.read("/etc/svc-gateway/gateway.json").contains("127.0.0.1:9999"));
        let after = Registration::read(&host.root()).expect("read").expect("a record");
        assert_eq!(after.operator, before.operator, "not registered again");
        assert_ne!(after.files["/etc/svc-gateway/gateway.json"], before.files["/etc/svc-gateway/gateway.json"]);
        assert!(report.warnings.is_empty(), "no coordinator answered, so nothing to say");
        assert_eq!(report.registration.operator.as_ref().map(|o| o.id.as_str()), Some("op_1"));

        // Applied, the plan is done: the next one keeps everything.
        let again = Plan::new(&settings).expect("a plan");
        assert!(again.files.iter().all(|f| f.action == Unchanged), "{:?}", again.report().files);
        let report = apply(&settings, again).await.expect("applied");
        assert!(report.unchanged(), "{}", report.text());
    }

    #[tokio::test]
    async fn with_force_a_file_changed_by_hand_is_replaced() {
        let host = Host::registered();
        let written = host.read(UNIT);
        host.write(UNIT, "[Service]\nExecStart=/bin/true\n");
        let settings = host.settings(|o| o.force = true);
        let report = apply(&settings, Plan::new(&settings).expect("a plan")).await.expect("applied");
        assert_eq!(report.files[4].action, Action::Replace);
        assert_eq!(host.read(UNIT), written);
        assert_eq!(mode(&host, UNIT), 0o644);
    }

    #[tokio::test]
    async fn a_registration_that_fails_removes_the_key_it_made_and_writes_nothing_else() {
        let host = Host::new();
        let settings = host.settings(|_| ());
        let e = apply(&settings, Plan::new(&settings).expect("a plan")).await.expect_err("no coordinator");
        assert!(matches!(&e, InitError::Client(ClientError::Unreachable { .. })), "{e:?}");
        assert_eq!(e.exit_code(), 3);
        assert_eq!(host.files(), Vec::<String>::new(), "the key made for it is removed");
        assert!(!host.root().path(layout::CONFIG_DIR).exists(), "and the directory made for it");

        // A directory that was there stays, and so does everything in it.
        host.write("/etc/svc-gateway/notes.txt", "mine\n");
        let e = apply(&settings, Plan::new(&settings).expect("a plan")).await.expect_err("no coordinator");
        assert_eq!(e.code(), "coordinator_unreachable");
        assert_eq!(host.files(), ["etc/svc-gateway/notes.txt"]);
    }
}
