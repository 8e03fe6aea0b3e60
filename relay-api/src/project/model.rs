//! The typed project, fully defaulted: what the CLI sends to the coordinator and what the
//! coordinator binds quotes to ([`Project::digest`]).

use std::collections::BTreeMap;

use manifest_core::{Code, Diagnostic, Layer};
use serde::{Deserialize, Serialize};

/// A valid project file with every default filled in. Read it with [`super::read`], which
/// checks everything; serialized, it is the document the CLI sends (without `$schema`, an
/// editor hint), and [`super::read`] of that gives the same project back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Project {
    /// The file format version: 1.
    pub version: u8,
    /// The project's name, the first label of its canonical hostname.
    pub name: String,
    /// What runs the app.
    pub runtime: Runtime,
    /// What is hosted.
    pub kind: Kind,
    /// The app.
    pub app: App,
    /// Customer hostnames (besides the canonical one), in the order written.
    pub hostnames: Vec<String>,
    /// Whether the gateway sends PROXY v2, so the app sees client addresses.
    pub proxy_protocol: bool,
    /// Who may connect, and how fast (every client, no limit, when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access: Option<Access>,
    /// Funding.
    pub spend: Spend,
    /// Where application TLS ends.
    pub tls: Tls,
    /// A gateway asked for by name (unsupported).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gateway: Option<String>,
    /// Gateway DNS delegation (unsupported).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dns: Option<Dns>,
    /// A Manifest V5 file to publish instead of the derived one, relative to the project
    /// file's folder.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub manifest: Option<String>,
}

/// `runtime`: typed so that an unsupported one is named as such.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Runtime {
    /// Node.js: the only supported runtime.
    Node,
    /// Python (unsupported).
    Python,
    /// Ruby (unsupported).
    Ruby,
    /// Go (unsupported).
    Go,
    /// Java (unsupported).
    Java,
    /// Deno (unsupported).
    Deno,
    /// Bun (unsupported).
    Bun,
    /// A container image (unsupported).
    Container,
}

/// `kind`: typed so that an unsupported one is named as such.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// A long-running web server: the only supported kind.
    WebService,
    /// Static files (unsupported).
    StaticSite,
    /// Any container (unsupported).
    Container,
    /// A virtual machine (unsupported).
    Vm,
}

/// `tls`: where application TLS ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Tls {
    /// In the job, with a key only the job holds: the only supported mode.
    Job,
    /// At the gateway (unsupported: the gateway never sees plaintext).
    Gateway,
}

/// `app`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct App {
    /// The app's folder relative to the project file's folder; the artifact root.
    pub dir: String,
    /// The file Node.js runs, relative to `dir`.
    pub entrypoint: String,
    /// The port the app listens on (given as `PORT`).
    pub port: u16,
    /// The app's own health route.
    pub health_path: String,
    /// Plain environment variables.
    pub env: BTreeMap<String, String>,
    /// Secret environment variables and where the CLI reads each value at deploy time.
    pub secrets: BTreeMap<String, SecretSource>,
}

/// Where a secret's value comes from: never the project file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SecretSource {
    /// The deployer's environment variable holding the value.
    pub from_env: String,
}

/// `access`: enforced by every gateway serving the route.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Access {
    /// The client networks allowed, as written (CIDR or one address); empty: every client.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_clients: Vec<String>,
    /// The new-connection rate limit, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limit: Option<AccessRate>,
}

/// A network no client connects from (0.0.0.0): an allow-list of it refuses everyone.
const NOBODY: crate::gateway::ClientNetwork =
    crate::gateway::ClientNetwork::host(std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED));

/// `access.rateLimit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AccessRate {
    /// New connections per second, sustained.
    pub per_second: u32,
    /// New connections at once after a quiet spell (`per_second` when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst: Option<u32>,
}

impl Access {
    /// The guards of a stored project that no longer reads as a whole (a newer validator):
    /// its `access` alone; if that does not read either, guards that refuse every client
    /// (never none: an allow-list must not open by accident).
    pub fn guards_of_stored(project_json: &str) -> crate::gateway::Guards {
        let document: Option<serde_json::Value> = serde_json::from_str(project_json).ok();
        let access = document.as_ref().and_then(|d| d.get("access"));
        match access.map(|a| serde_json::from_value::<Access>(a.clone())) {
            None => crate::gateway::Guards::default(),
            Some(Ok(access)) => access.guards(),
            Some(Err(_)) => crate::gateway::Guards { allow_clients: vec![NOBODY], rate_limit: None },
        }
    }

    /// The gateway's guards for it. Networks were checked when the project was read; one
    /// that does not parse (never, but a newer validator could differ) is left out, which
    /// narrows the allow-list rather than opening it.
    pub fn guards(&self) -> crate::gateway::Guards {
        let allow_clients: Vec<crate::gateway::ClientNetwork> =
            self.allow_clients.iter().filter_map(|n| n.parse().ok()).collect();
        let allow_clients = if allow_clients.is_empty() && !self.allow_clients.is_empty() {
            // Every entry failed to parse: allow nothing rather than everyone.
            vec![NOBODY]
        } else {
            allow_clients
        };
        let rate_limit = self
            .rate_limit
            .map(|r| crate::gateway::RateLimit { per_second: r.per_second, burst: r.burst.unwrap_or(r.per_second) });
        crate::gateway::Guards { allow_clients, rate_limit }
    }
}

/// `spend`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Spend {
    /// The most the project may ever be funded in total, in service-credit micros.
    pub ceiling_micros: u64,
    /// How many quoted periods one `deploy` funds.
    pub fund_periods: u32,
}

/// `dns` (unsupported).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Dns {
    /// The zone to delegate.
    pub delegate_zone: String,
}

/// Something a well-formed project asks for that the ingress add-on does not support
/// (SPEC.md: "Unsupported: arbitrary hosting, arbitrary runtimes, self-serve gateway
/// selection, delegated gateway DNS zones, gateway-terminated application TLS"). The
/// coordinator refuses such a project with HTTP 422 naming each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Unsupported {
    /// `kind` other than `web-service`.
    ArbitraryHosting,
    /// `runtime` other than `node`.
    ArbitraryRuntimes,
    /// `gateway` given.
    SelfServeGatewaySelection,
    /// `dns` given.
    DelegatedGatewayDnsZones,
    /// `tls: gateway`.
    GatewayTerminatedTls,
}

impl Unsupported {
    /// Every unsupported feature, in the order [`Project::unsupported`] reports them.
    pub const ALL: [Unsupported; 5] = [
        Unsupported::ArbitraryRuntimes,
        Unsupported::ArbitraryHosting,
        Unsupported::GatewayTerminatedTls,
        Unsupported::SelfServeGatewaySelection,
        Unsupported::DelegatedGatewayDnsZones,
    ];

    /// The feature's name, as SPEC.md words it (stable: the coordinator's 422 names it).
    pub fn as_str(self) -> &'static str {
        match self {
            Unsupported::ArbitraryHosting => "arbitrary hosting",
            Unsupported::ArbitraryRuntimes => "arbitrary runtimes",
            Unsupported::SelfServeGatewaySelection => "self-serve gateway selection",
            Unsupported::DelegatedGatewayDnsZones => "delegated gateway DNS zones",
            Unsupported::GatewayTerminatedTls => "gateway-terminated TLS",
        }
    }

    /// The JSON pointer of the field that asks for it.
    pub fn pointer(self) -> &'static str {
        match self {
            Unsupported::ArbitraryHosting => "/kind",
            Unsupported::ArbitraryRuntimes => "/runtime",
            Unsupported::SelfServeGatewaySelection => "/gateway",
            Unsupported::DelegatedGatewayDnsZones => "/dns",
            Unsupported::GatewayTerminatedTls => "/tls",
        }
    }

    /// Why, and what to do instead.
    pub fn fix(self) -> &'static str {
        match self {
            Unsupported::ArbitraryHosting => {
                "only long-running web servers are hosted; set `kind` to \"web-service\" (or remove it)"
            }
            Unsupported::ArbitraryRuntimes => "only Node.js runs; set `runtime` to \"node\"",
            Unsupported::SelfServeGatewaySelection => "the coordinator assigns the gateway; remove `gateway`",
            Unsupported::DelegatedGatewayDnsZones => {
                "hostnames are validated by DNS records you add, not by a delegated zone; remove `dns`"
            }
            Unsupported::GatewayTerminatedTls => {
                "the job terminates TLS with a key only it holds; set `tls` to \"job\" (or remove it)"
            }
        }
    }

    /// The diagnostic the coordinator's 422 carries for it: code `unsupported_feature`,
    /// layer 5 (capability), the field's pointer, the feature's name and the fix.
    pub fn diagnostic(self) -> Diagnostic {
        let message = format!("not supported by the ingress add-on: {}; {}", self.as_str(), self.fix());
        Diagnostic::error(Layer::Entitlement, Code::UnsupportedFeature, self.pointer(), message)
    }
}

impl std::fmt::Display for Unsupported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "not supported by the ingress add-on: {} ({}); {}", self.as_str(), self.pointer(), self.fix())
    }
}

impl Project {
    /// What the project asks for that the add-on does not support, in [`Unsupported::ALL`]
    /// order; empty for a deployable project.
    pub fn unsupported(&self) -> Vec<Unsupported> {
        Unsupported::ALL
            .into_iter()
            .filter(|u| match u {
                Unsupported::ArbitraryRuntimes => self.runtime != Runtime::Node,
                Unsupported::ArbitraryHosting => self.kind != Kind::WebService,
                Unsupported::GatewayTerminatedTls => self.tls != Tls::Job,
                Unsupported::SelfServeGatewaySelection => self.gateway.is_some(),
                Unsupported::DelegatedGatewayDnsZones => self.dns.is_some(),
            })
            .collect()
    }

    /// `sha256:` of the RFC 8785 canonical JSON of the defaulted project (as serialized), so
    /// writing a default out or reordering keys does not change it; `$schema` is not part of
    /// it. The coordinator binds quotes to it.
    pub fn digest(&self) -> String {
        // A project is strings, booleans, integers up to 2^53 - 1 and string-keyed maps: it
        // always has a canonical form.
        manifest_core::canonical_digest(self).unwrap_or_default()
    }

    /// What a deploy ships: `sha256:` of the canonical JSON of `{"project": <the defaulted
    /// project>, "files": {<path>: "sha256:<hex of its bytes>"}}`. Editing any app file, adding
    /// or removing one, changes it; the order files come in does not. Deployments and quotes
    /// are bound to it; secret values are not part of it (they are compared on the relay).
    pub fn digest_with_files<'a>(&self, files: impl IntoIterator<Item = (&'a str, &'a [u8])>) -> String {
        let files: BTreeMap<&str, String> = files
            .into_iter()
            .map(|(path, bytes)| (path, format!("sha256:{}", relay_wire::wire::sha256_hex(bytes))))
            .collect();
        manifest_core::canonical_digest(&serde_json::json!({"project": self, "files": files})).unwrap_or_default()
    }
}
