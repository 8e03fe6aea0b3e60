//! Test fixtures for init's steps: a host under a scratch root ([`ScratchRoot`], shared with
//! the end-to-end suite), fresh or registered (its files and record as a first run leaves
//! them), and settings for it. No coordinator: its URL is a closed loopback port, so a
//! registration fails and a health question goes unanswered.

use relay_wire::admission::Operator;

use crate::init::files::{self, Action};
use crate::init::gateway;
use crate::init::plan::Plan;
use crate::init::record::{self, Registration};
use crate::init::settings::Settings;
use crate::layout;
use crate::scratch::ScratchRoot;

/// The unit's host path.
pub(super) const UNIT: &str = layout::UNIT;

/// A host under a scratch root (removed on drop): its files are the [`ScratchRoot`]'s.
pub(super) struct Host(ScratchRoot);

impl std::ops::Deref for Host {
    type Target = ScratchRoot;

    fn deref(&self) -> &ScratchRoot {
        &self.0
    }
}

impl Host {
    /// An empty host.
    pub(super) fn new() -> Host {
        Host(ScratchRoot::new("init"))
    }

    /// A host registered as operator `north` (id `op_1`) with every file init writes.
    pub(super) fn registered() -> Host {
        let host = Host::new();
        let settings = host.settings(|_| ());
        let plan = Plan::new(&settings).expect("a plan");
        let mut planned = plan.files.clone();
        planned[3].content = gateway::text(&gateway::with_operator(plan.gateway.clone(), "op_1"));
        for f in &planned {
            assert_eq!(f.action, Action::Create);
            files::write_atomic(&host.root().path(&f.path), f.content.as_bytes(), f.mode).expect("write");
        }
        let operator = Operator {
            id: "op_1".into(),
            name: "north".into(),
            public_key: plan.key.public_key(),
            hostname: plan.hostname.clone(),
            admitted_at: 0,
        };
        let record = Registration {
            version: record::VERSION,
            coordinator: plan.coordinator,
            operator,
            files: files::digests(&planned),
        };
        host.write(&Registration::path().display().to_string(), &record.to_text());
        host
    }

    /// Settings for this host as `gateway-prep init --hostname gw1.example.test --coordinator
    /// http://127.0.0.1:1 --admission-token adm_1 --operator north` gives them, changed by
    /// `change`.
    pub(super) fn settings(&self, change: impl FnOnce(&mut Settings)) -> Settings {
        let mut settings = Settings::new(self.root());
        settings.hostname = Some("gw1.example.test".into());
        settings.coordinator = Some("http://127.0.0.1:1".into());
        settings.admission_token = Some("adm_1".into());
        settings.operator = Some("north".into());
        change(&mut settings);
        settings
    }
}
