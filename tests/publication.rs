//! The publication service as users reach it: the real `svc` binary serving on loopback over
//! a real SQLite data directory, driven over HTTP and by `svc admin` / `svc policy publish`.
//! One binary, a module per concern. With `SVC_E2E_BACKEND=postgres` the same tests run with
//! every store on PostgreSQL (`svc_e2e::service::database_of`); `instances` holds what only
//! several instances on one store can show.

mod publication {
    mod bad_day;
    mod bounds;
    mod capabilities;
    mod chaos;
    mod cli;
    mod crash_charges;
    mod deploy;
    mod durability;
    mod executions;
    mod instances;
    mod intake;
    mod keys;
    mod listener;
    mod logs;
    mod path_ids;
    mod routes;
    mod semantics;
    mod tls;

    use serde_json::{Value, json};
    use svc_e2e::service::{Server, TempDir, accept_build, admin, fixtures, token};

    /// A started service with one organization (`acme`) and a developer token.
    pub(super) struct World {
        pub(super) server: Server,
        pub(super) dir: TempDir,
        pub(super) token: String,
    }

    impl World {
        pub(super) fn new(name: &str) -> World {
            World::with_args(name, &[])
        }

        /// The same, with more `svc serve` arguments.
        pub(super) fn with_args(name: &str, extra: &[&str]) -> World {
            let dir = TempDir::new(name);
            let token = token(dir.str(), "acme", "developer");
            let server = Server::start(dir.path(), extra);
            World { server, dir, token }
        }

        /// Creates an application; panics unless 201.
        pub(super) fn create(&self, id: &str) -> Value {
            let r = self.server.request(
                "POST",
                "/api/applications",
                Some(&self.token),
                Some(&json!({"applicationId": id})),
            );
            assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
            r.json()
        }

        /// Accepts build evidence for a V5 source release of `app`.
        pub(super) fn accept_source(&self, app: &str) {
            accept_build(self.dir.str(), "acme", app);
        }

        /// POSTs a publication body.
        pub(super) fn publish(&self, app: &str, body: &Value) -> svc_e2e::service::Response {
            self.server.request(
                "POST",
                &format!("/api/applications/{app}/policy-versions"),
                Some(&self.token),
                Some(body),
            )
        }

        /// GET with the developer token.
        pub(super) fn get(&self, path: &str) -> Value {
            let r = self.server.request("GET", path, Some(&self.token), None);
            assert_eq!(r.status, 200, "{path}: {}", String::from_utf8_lossy(&r.body));
            r.json()
        }

        /// How many scheduler wakeups an application has had, read from the store itself.
        pub(super) fn wakeups(&self, app: &str) -> u64 {
            let store = svc_e2e::service::open_store(self.dir.path());
            let mut tx = store.read().expect("tx");
            let org = tx.organization("acme").expect("read").expect("org");
            let key = tx.application(org.id, app).expect("read").expect("app").key;
            tx.wakeups(key).expect("wakeups")
        }
    }

    /// A valid V5 manifest (source release, once) for `app`.
    pub(super) fn v5(app: &str) -> Value {
        json!({
            "schema": "svc.application-manifest", "schemaVersion": 5, "applicationId": app,
            "release": {"mode": "source"},
            "runtime": {"kind": "javascript", "entrypoint": {"file": "server.js"}},
            "execution": {"mode": "once"},
            "deployment": {"schedule": {"duration": "1h"}, "spend": {"unit": "service_credit_micros", "perJob": "1000000"}},
            "state": {"mode": "off"}
        })
    }

    /// A valid V4 manifest pinned to a curated artifact (`curate_v4` curates it).
    pub(super) fn v4(app: &str) -> Value {
        json!({
            "schema": "svc.application-manifest", "schemaVersion": 4, "applicationId": app,
            "release": {"mode": "pinned", "artifact": {"kind": "ipfs_bundle", "cid": fixtures::CID,
                "digest": fixtures::digest('b'), "encryption": {"mode": "none"}}},
            "deployment": {
                "schedule": {"durationMs": 3600000},
                "lifecycle": {
                    "renewal": {"mode": "after_scheduled_end"},
                    "update": {"timing": "next_scheduled_renewal", "existingJobs": {"mode": "run_until_scheduled_end"}},
                    "recovery": {"runtimeFailure": {"mode": "wait_until_scheduled_end"}}
                }
            }
        })
    }

    /// Curates the artifact `v4` pins.
    pub(super) fn curate_v4(dir: &TempDir) {
        admin(&[
            "artifact",
            "curate",
            "--data-dir",
            dir.str(),
            "--cid",
            fixtures::CID,
            "--digest",
            &fixtures::digest('b'),
        ]);
    }

    /// The codes and pointers of an error envelope's diagnostics.
    pub(super) fn diagnostics(body: &Value) -> Vec<(String, String)> {
        body["error"]["diagnostics"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|d| (d["code"].as_str().unwrap_or("").to_owned(), d["pointer"].as_str().unwrap_or("").to_owned()))
            .collect()
    }
}
