//! The deployment state machine. Every transition is checked here and recorded by the store,
//! so `svc ingress status` can show how a deployment got where it is.

use serde::{Deserialize, Serialize};

/// Where a deployment is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeploymentState {
    /// Created with a quote; waits for funding (also after the funds run out).
    PendingFunding,
    /// Funded; the job (app and agent) is being launched.
    Provisioning,
    /// The job runs; the coordinator checks the route through the public path.
    Validating,
    /// Funded and validated: the route serves the public.
    Live,
    /// Was live; the latest validation failed. Back to live when one passes.
    Degraded,
    /// Stopped by the customer (terminal).
    Stopped,
    /// Cannot run (the job would not start, or never validated in time); only stop remains.
    Failed,
}

impl DeploymentState {
    /// Every state.
    pub const ALL: [DeploymentState; 7] = [
        DeploymentState::PendingFunding,
        DeploymentState::Provisioning,
        DeploymentState::Validating,
        DeploymentState::Live,
        DeploymentState::Degraded,
        DeploymentState::Stopped,
        DeploymentState::Failed,
    ];

    /// The spelling in the store and the API.
    pub fn as_str(self) -> &'static str {
        match self {
            DeploymentState::PendingFunding => "pending_funding",
            DeploymentState::Provisioning => "provisioning",
            DeploymentState::Validating => "validating",
            DeploymentState::Live => "live",
            DeploymentState::Degraded => "degraded",
            DeploymentState::Stopped => "stopped",
            DeploymentState::Failed => "failed",
        }
    }

    /// Reads a spelling.
    pub fn parse(text: &str) -> Option<DeploymentState> {
        DeploymentState::ALL.into_iter().find(|s| s.as_str() == text)
    }

    /// Whether the deployment is over.
    pub fn is_terminal(self) -> bool {
        self == DeploymentState::Stopped
    }

    /// Whether the job should be running (and the gateway routing to it).
    pub fn runs_job(self) -> bool {
        matches!(self, DeploymentState::Validating | DeploymentState::Live | DeploymentState::Degraded)
    }

    /// Whether periods are being spent.
    pub fn spends(self) -> bool {
        matches!(self, DeploymentState::Live | DeploymentState::Degraded)
    }

    /// Whether `self -> to` is a transition of the machine.
    pub fn may_become(self, to: DeploymentState) -> bool {
        use DeploymentState::*;
        match (self, to) {
            (Stopped, _) => false,
            (_, Stopped) => true,
            (PendingFunding, Provisioning) => true,
            (Provisioning, Validating | Failed | PendingFunding) => true,
            (Validating, Live | Failed | Provisioning | PendingFunding) => true,
            // A job that keeps ending fails its deployment from any running state. A job
            // restarted since the route last validated validates again, routed meanwhile.
            (Live, Degraded | Validating | PendingFunding | Provisioning | Failed) => true,
            (Degraded, Live | Validating | PendingFunding | Provisioning | Failed) => true,
            // A deploy of a fixed project relaunches a failed deployment.
            (Failed, Provisioning) => true,
            _ => false,
        }
    }
}

impl std::fmt::Display for DeploymentState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A refused transition.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a deployment that is {from} cannot become {to}")]
pub struct TransitionError {
    /// The current state.
    pub from: DeploymentState,
    /// The state asked for.
    pub to: DeploymentState,
}

#[cfg(test)]
mod tests {
    use super::DeploymentState::{self, *};

    #[test]
    fn spellings_round_trip() {
        for s in DeploymentState::ALL {
            assert_eq!(DeploymentState::parse(s.as_str()), Some(s));
        }
        assert_eq!(DeploymentState::parse("running"), None);
    }

    #[test]
    fn only_funding_starts_a_deployment_and_nothing_leaves_stopped() {
        assert!(PendingFunding.may_become(Provisioning));
        assert!(!PendingFunding.may_become(Live), "never live without validation");
        assert!(!Provisioning.may_become(Live), "never live without validation");
        assert!(Validating.may_become(Live));
        assert!(Live.may_become(Degraded) && Degraded.may_become(Live));
        assert!(Live.may_become(Validating) && Degraded.may_become(Validating), "a restarted job validates again");
        for s in DeploymentState::ALL {
            assert!(!Stopped.may_become(s));
            assert_eq!(s.may_become(Stopped), s != Stopped);
        }
        assert!(Failed.may_become(Provisioning), "a redeploy relaunches a failed deployment");
        assert!(!Failed.may_become(Live), "never live without validation");
        for running in [Validating, Live, Degraded] {
            assert!(running.may_become(Failed), "a job that keeps ending fails from {running}");
        }
    }
}
