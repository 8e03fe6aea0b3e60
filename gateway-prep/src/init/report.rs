//! Init's report: what it did (or would do), as people read it and as `--format json` shows
//! it.

use relay_wire::admission::Operator;
use serde::Serialize;

use crate::init::files::{Action, FileReport};
use crate::layout;

/// What happened (or would) with the registration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RegistrationAction {
    /// Registered in this run (or would be, in a dry run).
    Register,
    /// The record says this host is registered: nothing sent.
    Unchanged,
}

/// The registration in init's report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RegistrationReport {
    /// `register` or `unchanged`.
    pub action: RegistrationAction,
    /// The coordinator.
    pub coordinator: String,
    /// The gateway hostname.
    pub hostname: String,
    /// The public key sent (or registered).
    pub public_key: String,
    /// The operator as the coordinator recorded it (absent in a dry run that would register).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub operator: Option<Operator>,
}

/// What init did (or would do): the JSON shape of `init --format json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InitReport {
    /// Nothing was written.
    pub dry_run: bool,
    /// Every file, in the order written.
    pub files: Vec<FileReport>,
    /// The registration.
    pub registration: RegistrationReport,
    /// What works but needs fixing, each with its fix (`found; fix: ...`): the coordinator
    /// routes for another operator than the one this host is registered as. Absent when none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

impl InitReport {
    /// Whether the run changed nothing (every file unchanged, no registration).
    pub fn unchanged(&self) -> bool {
        self.registration.action == RegistrationAction::Unchanged
            && self.files.iter().all(|f| f.action == Action::Unchanged)
    }

    /// The text people read.
    pub fn text(&self) -> String {
        let mut out = String::new();
        if self.dry_run {
            out.push_str("dry run: nothing is written or registered\n");
        }
        for f in &self.files {
            out.push_str(&format!("{:<9}  {}  {}\n", f.action.as_str(), f.mode, f.path));
        }
        let r = &self.registration;
        match (r.action, self.dry_run) {
            (RegistrationAction::Unchanged, _) => {
                out.push_str(&format!("registered  gateway {} with {} (unchanged)\n", r.hostname, r.coordinator))
            }
            (RegistrationAction::Register, true) => out.push_str(&format!(
                "register   gateway {} with {}, public key {}\n",
                r.hostname, r.coordinator, r.public_key
            )),
            (RegistrationAction::Register, false) => out.push_str(&format!(
                "registered  operator \"{}\" gateway {} with {}, public key {}\n",
                r.operator.as_ref().map_or("", |o| o.name.as_str()),
                r.hostname,
                r.coordinator,
                r.public_key
            )),
        }
        let unit_written = self.files.iter().any(|f| f.path == layout::UNIT && f.action.writes());
        if unit_written && !self.dry_run {
            out.push_str("next: systemctl daemon-reload && systemctl enable --now svc-gateway\n");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(dry_run: bool, action: RegistrationAction, files: &[(&str, Action)]) -> InitReport {
        let operator = Operator {
            id: "op_1".into(),
            name: "north".into(),
            public_key: "PK".into(),
            hostname: "gw1.example.test".into(),
            admitted_at: 0,
        };
        InitReport {
            dry_run,
            files: files
                .iter()
                .map(|(path, action)| FileReport { path: (*path).into(), mode: "0644".into(), action: *action })
                .collect(),
            registration: RegistrationReport {
                action,
                coordinator: "http://c".into(),
                hostname: "gw1.example.test".into(),
                public_key: "PK".into(),
                operator: (action == RegistrationAction::Unchanged || !dry_run).then_some(operator),
            },
            warnings: Vec::new(),
        }
    }

    #[test]
    fn the_text_says_what_was_done_and_what_is_next() {
        let files = [(layout::UNIT, Action::Create), ("/etc/svc-gateway/operator.json", Action::Create)];
        assert_eq!(
            report(true, RegistrationAction::Register, &files).text(),
            "dry run: nothing is written or registered\n\
             create     0644  /etc/systemd/system/svc-gateway.service\n\
             create     0644  /etc/svc-gateway/operator.json\n\
             register   gateway gw1.example.test with http://c, public key PK\n"
        );
        let first = report(false, RegistrationAction::Register, &files);
        assert!(!first.unchanged());
        assert_eq!(
            first.text(),
            "create     0644  /etc/systemd/system/svc-gateway.service\n\
             create     0644  /etc/svc-gateway/operator.json\n\
             registered  operator \"north\" gateway gw1.example.test with http://c, public key PK\n\
             next: systemctl daemon-reload && systemctl enable --now svc-gateway\n"
        );
        let again = report(false, RegistrationAction::Unchanged, &[(layout::UNIT, Action::Unchanged)]);
        assert!(again.unchanged());
        assert_eq!(
            again.text(),
            "unchanged  0644  /etc/systemd/system/svc-gateway.service\n\
             registered  gateway gw1.example.test with http://c (unchanged)\n"
        );
        let json = serde_json::to_value(&again).expect("json");
        assert_eq!(json["files"][0]["action"], "unchanged");
        assert_eq!(json["registration"]["action"], "unchanged");
        assert!(json.get("warnings").is_none(), "no warnings key when none: {json}");
    }
}
