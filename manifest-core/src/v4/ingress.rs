//! V4 `ingress`: typed `http` and `ssh` requests, internal for general v1 workloads. This
//! schema does not mean service-hosted ingress (that is the ingress add-on).

use serde::{Deserialize, Serialize};

use crate::diagnostic::{Code, Diagnostic, Layer};
use crate::formats::HTTP_PATH;
use crate::shape::{DefaultValue, ObjectShape, Shape, defaulted, int, object, one_of, optional, pattern, required};

const MODES: &[&str] = &["disabled", "optional", "required"];

static HTTP: ObjectShape = object(
    "http ingress",
    &[
        required("mode", one_of(MODES), "`disabled`, `optional` or `required`"),
        required("port", int(0, 65_535), "unsigned 16-bit; a usable port is 1-65535"),
        optional("healthPath", pattern(&HTTP_PATH), "health check path"),
    ],
);

static SSH: ObjectShape = object(
    "ssh ingress",
    &[
        required("mode", one_of(MODES), "`disabled`, `optional` or `required`"),
        defaulted("port", int(0, 65_535), DefaultValue::Integer(22), "default 22; a usable port is 1-65535"),
    ],
);

/// `ingress`.
pub static INGRESS: ObjectShape = object(
    "ingress",
    &[
        optional("http", Shape::Object(&HTTP), "typed HTTP ingress request"),
        optional("ssh", Shape::Object(&SSH), "typed SSH ingress request"),
    ],
);

/// `ingress`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ingress {
    /// HTTP request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http: Option<HttpIngress>,
    /// SSH request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ssh: Option<SshIngress>,
}

/// Ingress request modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IngressMode {
    /// Off.
    Disabled,
    /// Capability-gated.
    Optional,
    /// Required.
    Required,
}

/// `ingress.http`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpIngress {
    /// Mode.
    pub mode: IngressMode,
    /// Port.
    pub port: u16,
    /// Health check path.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub health_path: Option<String>,
}

/// `ingress.ssh`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SshIngress {
    /// Mode.
    pub mode: IngressMode,
    /// Port, default 22.
    pub port: u16,
}

/// Layer 2: port 0 fits the schema's 16 bits but is not usable.
pub(crate) fn check_port(pointer: &str, port: u16, out: &mut Vec<Diagnostic>) {
    if port == 0 {
        out.push(Diagnostic::error(
            Layer::Semantic,
            Code::PortUnusable,
            pointer,
            "port 0 is not usable; use a port from 1 to 65535",
        ));
    }
}
