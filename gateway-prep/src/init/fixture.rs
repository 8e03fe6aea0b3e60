//! Test fixtures for init's steps: a host under a scratch root, fresh or registered (its
//! files and record as a first run leaves them), and settings for it. No coordinator: its URL
//! is a closed loopback port, so a registration fails and a health question goes unanswered.

use std::os::unix::fs::PermissionsExt as _;

use relay_wire::admission::Operator;

use crate::Root;
use crate::init::files::{self, Action};
use crate::init::gateway;
use crate::init::plan::Plan;
use crate::init::record::{self, Registration};
use crate::init::settings::{InitOptions, Settings};
use crate::layout;

/// The unit's host path.
pub(super) const UNIT: &str = layout::UNIT;

/// A host under a scratch root (removed on drop).
pub(super) struct Host(tempfile::TempDir);

impl Host {
    /// An empty host.
    pub(super) fn new() -> Host {
        Host(tempfile::tempdir().expect("a scratch root"))
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

    /// The host's root.
    pub(super) fn root(&self) -> Root {
        Root::new(self.0.path())
    }

    /// Settings for this host as `gateway-prep init --hostname gw1.example.test --coordinator
    /// http://127.0.0.1:1 --admission-token adm_1 --operator north` gives them, changed by
    /// `change`.
    pub(super) fn settings(&self, change: impl FnOnce(&mut InitOptions)) -> Settings {
        let mut opts = InitOptions::new(self.root());
        opts.hostname = Some("gw1.example.test".into());
        opts.coordinator = Some("http://127.0.0.1:1".into());
        opts.admission_token = Some("adm_1".into());
        opts.operator = Some("north".into());
        change(&mut opts);
        Settings::try_from(&opts).expect("valid settings")
    }

    /// The host file `path`, as text.
    pub(super) fn read(&self, path: &str) -> String {
        self.root().read(path).expect("read")
    }

    /// Writes the host file `path` (and its directories).
    pub(super) fn write(&self, path: &str, content: &str) {
        let real = self.root().path(path);
        fs_err::create_dir_all(real.parent().expect("a parent")).expect("dirs");
        fs_err::write(real, content).expect("write");
    }

    /// Sets the host file `path`'s mode.
    pub(super) fn chmod(&self, path: &str, mode: u32) {
        fs_err::set_permissions(self.root().path(path), std::fs::Permissions::from_mode(mode)).expect("chmod");
    }

    /// Every file under the root (relative paths), sorted.
    pub(super) fn files(&self) -> Vec<String> {
        fn walk(dir: &std::path::Path, base: &std::path::Path, out: &mut Vec<String>) {
            for entry in fs_err::read_dir(dir).expect("read_dir").flatten() {
                let path = entry.path();
                if path.is_dir() {
                    walk(&path, base, out);
                } else {
                    out.push(path.strip_prefix(base).expect("under").display().to_string());
                }
            }
        }
        let mut out = Vec::new();
        walk(self.0.path(), self.0.path(), &mut out);
        out.sort();
        out
    }
}
