//! The project file's fields, once: every field, type, bound, closed set and default. The
//! validator ([`super::read`]) walks documents against [`PROJECT`] and the JSON Schema
//! ([`super::schema`]) is generated from it, so the two cannot drift.
//!
//! Values the add-on does not support (other runtimes and kinds, gateway TLS, a chosen
//! gateway, a delegated DNS zone) are typed here, so a file using them is well formed and the
//! coordinator can answer that it does not support them, naming the feature
//! ([`super::Unsupported`]), instead of "unknown value".

use manifest_core::formats::ENV_NAME_V5;
use manifest_core::shape::SCHEMA_HINT;
use manifest_core::shape::{
    ArrayShape, DefaultValue, MAX_SAFE_INTEGER, MapShape, NON_EMPTY, ObjectShape, Refused, STRING, Shape, StrFormat,
    StrShape, defaulted, int, object, one_of, optional, pattern, pattern_len, required,
};

use super::formats::{CLIENT_NETWORK, HEALTH_PATH, HOSTNAME, LOCAL_ENV_NAME, PROJECT_NAME, RELATIVE_PATH};

/// `runtime` values; only `node` is supported.
pub const RUNTIMES: &[&str] = &["node", "python", "ruby", "go", "java", "deno", "bun", "container"];
/// `kind` values; only `web-service` is supported.
pub const KINDS: &[&str] = &["web-service", "static-site", "container", "vm"];
/// `tls` values; only `job` is supported.
pub const TLS_MODES: &[&str] = &["job", "gateway"];
/// Most customer hostnames.
pub const MAX_HOSTNAMES: usize = 10;
/// Most `app.env` entries: the derived manifest's 64 variables, less `PORT`.
pub const MAX_ENV: usize = 63;
/// Most `app.secrets` entries: the derived manifest's 64 secrets.
pub const MAX_SECRETS: usize = 64;
/// Most periods one `deploy` funds at once.
pub const MAX_FUND_PERIODS: u64 = 12;
/// Most `access.allowClients` entries.
pub const MAX_ALLOW_CLIENTS: usize = 64;
/// The highest `access.rateLimit.perSecond`.
pub const MAX_RATE_PER_SECOND: u64 = 100_000;
/// The highest `access.rateLimit.burst`.
pub const MAX_RATE_BURST: u64 = 1_000_000;
/// The app's port when none is given.
pub const DEFAULT_PORT: u64 = 8080;
/// The app's health path when none is given.
pub const DEFAULT_HEALTH_PATH: &str = "/health";

/// An environment name the job will see (a V5 environment name).
const ENV_KEY: StrShape =
    StrShape { format: StrFormat::Pattern(&ENV_NAME_V5), min_chars: 1, max_chars: None, hint: None };

static ENV: MapShape = MapShape { keys: ENV_KEY, values: STRING, max_entries: Some(MAX_ENV) };

static SECRET_SOURCE: ObjectShape = object(
    "secret source {\"fromEnv\": \"LOCAL_VAR\"}",
    &[required(
        "fromEnv",
        pattern(&LOCAL_ENV_NAME),
        "the variable of the deployer's environment that `svc ingress deploy` reads the value from",
    )],
);

static SECRETS: MapShape = MapShape {
    // At most 127 characters: the name is also the secret's ID in the derived manifest.
    keys: StrShape { max_chars: Some(127), ..ENV_KEY },
    values: Shape::Object(&SECRET_SOURCE),
    max_entries: Some(MAX_SECRETS),
};

static APP: ObjectShape = object(
    "app",
    &[
        defaulted(
            "dir",
            pattern(&RELATIVE_PATH),
            DefaultValue::Str("."),
            "the app's folder, relative to the project file's folder (default `.`); it is the artifact root",
        ),
        required(
            "entrypoint",
            pattern(&RELATIVE_PATH),
            "the file Node.js runs, relative to `dir` (`server.js`); no `..` segment",
        ),
        defaulted(
            "port",
            int(1, 65535),
            DefaultValue::Integer(DEFAULT_PORT),
            "the port the app listens on at 127.0.0.1, given to it as `PORT` (default 8080)",
        ),
        defaulted(
            "healthPath",
            pattern_len(&HEALTH_PATH, 1, 256),
            DefaultValue::Str(DEFAULT_HEALTH_PATH),
            "the app's own health route, which the agent's `/health` checks (default `/health`)",
        ),
        defaulted(
            "env",
            Shape::Map(&ENV),
            DefaultValue::EmptyObject,
            "plain environment variables, name to value (at most 63); `PORT` and `SVC_*` are set by the platform",
        ),
        defaulted(
            "secrets",
            Shape::Map(&SECRETS),
            DefaultValue::EmptyObject,
            "secret environment variables, name to `{\"fromEnv\": \"LOCAL_VAR\"}` (at most 64); values are read at deploy time, never written here",
        ),
    ],
);

static HOSTNAMES: ArrayShape =
    ArrayShape { items: pattern_len(&HOSTNAME, 1, 253), min_items: 0, max_items: Some(MAX_HOSTNAMES), unique: true };

static SPEND: ObjectShape = object(
    "spend",
    &[
        required(
            "ceilingMicros",
            int(1, MAX_SAFE_INTEGER),
            "the most the project may ever be funded in total, in service-credit micros (1000000 = USD 1.00)",
        ),
        defaulted(
            "fundPeriods",
            int(1, MAX_FUND_PERIODS),
            DefaultValue::Integer(1),
            "how many quoted periods one `deploy` funds at once, 1-12 (default 1)",
        ),
    ],
);

static ALLOW_CLIENTS: ArrayShape = ArrayShape {
    items: pattern_len(&CLIENT_NETWORK, 1, 49),
    min_items: 1,
    max_items: Some(MAX_ALLOW_CLIENTS),
    unique: true,
};

static RATE_LIMIT: ObjectShape = object(
    "rate limit",
    &[
        required(
            "perSecond",
            int(1, MAX_RATE_PER_SECOND),
            "new connections per second the route takes, sustained, at each gateway (1-100000)",
        ),
        optional(
            "burst",
            int(1, MAX_RATE_BURST),
            "new connections taken at once after a quiet spell (1-1000000; default `perSecond`)",
        ),
    ],
);

static ACCESS: ObjectShape = ObjectShape {
    name: "access",
    fields: &[
        optional(
            "allowClients",
            Shape::Array(&ALLOW_CLIENTS),
            "the client networks allowed, in CIDR form (`203.0.113.0/24`, `2001:db8::/32`) or one address; every other client is refused (1-64, distinct)",
        ),
        optional(
            "rateLimit",
            Shape::Object(&RATE_LIMIT),
            "a new-connection rate limit for the route, at each gateway: `perSecond` and `burst`; beyond it new connections are refused",
        ),
    ],
    min_fields: 1,
    refused: &[],
};

static DNS: ObjectShape =
    object("dns", &[required("delegateZone", NON_EMPTY, "a DNS zone delegated to the gateway (not supported)")]);

/// Facts the coordinator assigns: refused with a message that says so.
static COORDINATOR_OWNED: &[Refused] = &{
    const MESSAGE: &str = "unknown field: this is assigned by the coordinator (canonical hostname, route, quote, credentials, status) and cannot be written in the project file; remove it";
    const fn r(name: &'static str) -> Refused {
        Refused::unknown(name, MESSAGE)
    }
    [
        r("canonicalHostname"),
        r("routeId"),
        r("quote"),
        r("quoteId"),
        r("credential"),
        r("routeSecret"),
        r("status"),
        r("owner"),
    ]
};

/// The project file, `ingress.json`.
pub static PROJECT: ObjectShape = ObjectShape {
    name: "ingress project file",
    fields: &[
        SCHEMA_HINT,
        required("version", int(1, 1), "the project file's format version: 1"),
        required(
            "name",
            pattern_len(&PROJECT_NAME, 1, 40),
            "the project's name: a DNS label of 1-40 lowercase letters, digits and hyphens; the first label of the canonical hostname",
        ),
        required("runtime", one_of(RUNTIMES), "what runs the app: `node` (the only runtime the add-on supports)"),
        defaulted(
            "kind",
            one_of(KINDS),
            DefaultValue::Str("web-service"),
            "what is hosted: `web-service`, a long-running web server (default; the only kind supported)",
        ),
        required("app", Shape::Object(&APP), "the app: folder, entry point, port, health route, environment"),
        defaulted(
            "hostnames",
            Shape::Array(&HOSTNAMES),
            DefaultValue::EmptyArray,
            "customer hostnames besides the canonical one, validated by DNS (at most 10, distinct)",
        ),
        defaulted(
            "proxyProtocol",
            Shape::Bool,
            DefaultValue::Bool(false),
            "pass each client's address to the app (`X-Forwarded-For`), via PROXY v2 from the gateway (default false)",
        ),
        optional(
            "access",
            Shape::Object(&ACCESS),
            "who may connect to the app, and how fast: `allowClients` networks and a `rateLimit`, enforced at every gateway (default: every client, no limit)",
        ),
        required("spend", Shape::Object(&SPEND), "the funding ceiling and how much one deploy funds"),
        defaulted(
            "tls",
            one_of(TLS_MODES),
            DefaultValue::Str("job"),
            "where application TLS ends: `job` (default; the job holds its key; the only mode supported)",
        ),
        optional("gateway", NON_EMPTY, "a specific gateway (not supported: the coordinator assigns one)"),
        optional("dns", Shape::Object(&DNS), "gateway DNS delegation (not supported)"),
        optional(
            "manifest",
            pattern(&RELATIVE_PATH),
            "a Manifest V5 file to publish, relative to the project file's folder; when absent one is derived",
        ),
    ],
    min_fields: 0,
    refused: &[COORDINATOR_OWNED],
};
