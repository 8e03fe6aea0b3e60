//! The deployment logs: the jobs' output copied in each tick (tagged with the revision or
//! the replica when not the serving one's), and the last output of jobs stopped here.

use std::collections::HashMap;

use svc_execution::market::Market;

use super::{Engine, launch};

/// Output lines of one job, by the process that printed them, for the logs.
pub(super) type Output = Vec<(&'static str, Vec<String>)>;

/// Groups lines by process, keeping their order within each.
pub(super) fn by_part(lines: Vec<(svc_execution::market::Part, String)>) -> Output {
    let mut out: Output = Vec::new();
    for (part, line) in lines {
        match out.iter_mut().find(|(source, _)| *source == part.as_str()) {
            Some((_, group)) => group.push(line),
            None => out.push((part.as_str(), vec![line])),
        }
    }
    out
}

impl Engine {
    /// Stops every job this coordinator runs, keeping their last output in their logs.
    pub(super) async fn stop_local_jobs(&self) {
        for job in self.market.jobs() {
            let id = job.execution_id;
            let output = crate::coordinator::blocking(|| {
                self.market.stop_now(&id);
                self.market.take_output(&id)
            });
            if let Some(meta) = self.launcher.meta(&id) {
                self.record_output(&meta, meta.revision, by_part(output));
            }
        }
    }

    /// Records output lines of a job in its deployment's logs; lines of a revision other than
    /// the `serving` one (a successor, a predecessor draining) say which, and so do those of
    /// each replica of a route of several jobs.
    pub(super) fn record_output(&self, job: &launch::JobMeta, serving: u32, output: Output) {
        let (id, revision) = (job.deployment.as_str(), job.revision);
        let tag = match (&job.replica, revision == serving) {
            (None, true) => None,
            (None, false) => Some(format!("[revision {revision}]")),
            (Some(name), true) => Some(format!("[{name}]")),
            (Some(name), false) => Some(format!("[revision {revision} {name}]")),
        };
        for (source, lines) in output {
            match &tag {
                None => {
                    let _ = self.db(|store| store.append_logs(id, source, &lines));
                }
                Some(tag) => {
                    let tagged: Vec<String> = lines.iter().map(|l| format!("{tag} {l}")).collect();
                    let _ = self.db(|store| store.append_logs(id, source, &tagged));
                }
            }
        }
    }

    /// Copies new lines of each job's output into the deployment's logs (`serving`: each
    /// active deployment's serving revision, read once per tick).
    pub(super) async fn tail_logs(&self, serving: &HashMap<&str, u32>) {
        for job in self.market.jobs() {
            let Some(meta) = self.launcher.meta(&job.execution_id) else { continue };
            let lines = self.market.take_output(&job.execution_id);
            if lines.is_empty() {
                continue;
            }
            let current = serving.get(meta.deployment.as_str()).copied().unwrap_or(meta.revision);
            self.record_output(&meta, current, by_part(lines));
        }
    }
}
