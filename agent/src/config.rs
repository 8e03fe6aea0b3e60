//! The agent's configuration file: declared in `relay-agent-config`, below the agent and the
//! coordinator that writes it; here under its old path.

pub use relay_agent_config::{AgentConfig, CertificateSource, ConfigError, DEFAULT_REFRESH_SECS, PinnedGateway};
