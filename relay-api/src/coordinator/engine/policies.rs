//! An old-data fix-up: the policies of revisions deployed before revisions published one are
//! published before the scheduler plans from them. It runs when the engine starts to lead and
//! at its ticks only until every such revision has its policy: a deploy records its revision's
//! policy in the same transaction, so no revision without one appears later.

use super::{Engine, launch};
use crate::coordinator::files::APP_DIR;
use crate::coordinator::model::Deployment;

impl Engine {
    /// Publishes the policies of the revisions deployed before revisions published one
    /// (each served or deployed revision of the `active` deployments), before the scheduler
    /// plans from them, and wakes it for them.
    /// Once all are published, it does nothing (a failure leaves it to try again next tick).
    pub(super) fn publish_missing_policies(&self, active: &[Deployment]) {
        use std::sync::atomic::Ordering;
        if self.policies_published.load(Ordering::Relaxed) {
            return;
        }
        // One read for every deployment (it was two per active deployment, every tick).
        let Ok(unpublished) = self.db(|store| store.unpublished()) else { return };
        let mut all_published = true;
        for d in active {
            let revisions = unpublished
                .iter()
                .filter(|u| u.deployment_id == d.id)
                .map(|u| (u.revision, u.route_id.clone(), u.successor));
            for (revision, route_id, successor) in revisions {
                let project_json = if successor {
                    self.db(|store| store.successor_project_json(&d.id))
                } else {
                    self.db(|store| store.project_json(&d.id))
                };
                let Ok(project_json) = project_json else {
                    all_published = false;
                    continue;
                };
                let job = launch::JobOf {
                    deployment: d,
                    revision,
                    slot: 0,
                    route_id: &route_id,
                    project_json: &project_json,
                };
                let published =
                    crate::project::read(&project_json).map_err(launch::StartError::Project).and_then(|project| {
                        let deployments = self.parts.config.deployments_dir();
                        self.db(|store| crate::coordinator::files::materialize(store, &deployments, &d.id, revision))?;
                        let app_dir = self.revision_dir(&d.id, revision).join(APP_DIR);
                        crate::coordinator::blocking(|| self.launcher.publish_unpublished(&job, &project, &app_dir))
                    });
                match published {
                    Ok(_) => {
                        let _ = self.db(|store| store.wake_scheduler(&d.id));
                        self.wake_here();
                    }
                    Err(e) => {
                        all_published = false;
                        // Once per revision, and in the customer's words: the details (host
                        // paths) go to the coordinator's log (review finding: four lines a
                        // second, with paths).
                        let first =
                            self.unpublishable.lock().is_ok_and(|mut said| said.insert((d.id.clone(), revision)));
                        if first {
                            tracing::warn!("svc relay: {} revision {revision} cannot publish its policy: {e}", d.id);
                            let line = format!(
                                "revision {revision} cannot publish its policy, so its job is not launched: {}; \
                                 deploy the project again",
                                match e {
                                    launch::StartError::Project(ref why) => why.to_string(),
                                    _ => "the coordinator's log has why".to_owned(),
                                }
                            );
                            let _ = self.db(|store| store.append_logs(&d.id, "route", &[line]));
                        }
                    }
                }
            }
        }
        if all_published {
            self.policies_published.store(true, Ordering::Relaxed);
        }
    }
}
