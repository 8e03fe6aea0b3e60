//! V5 `access`: managed runtime SSH only. Valid only with a `native_image` runtime; it also
//! needs the runtime-SSH capability and a Developer-or-above entitlement (checked at
//! publication). No keys, port, mode or other provider are authored: organization operator
//! keys are snapshotted into a job attachment by the server.

use serde::{Deserialize, Serialize};

use crate::shape::{ObjectShape, Shape, UnionShape, arm, object, required};

static PROVIDER: UnionShape = UnionShape { name: "ssh provider", tag: "kind", arms: &[arm("managed", &[])] };

static SSH: ObjectShape = object("ssh", &[required("provider", Shape::Union(&PROVIDER), "`{kind: managed}`")]);

/// `access`.
pub static ACCESS: ObjectShape = object("access", &[required("ssh", Shape::Object(&SSH), "managed runtime SSH")]);

/// `access`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Access {
    /// Runtime SSH.
    pub ssh: Ssh,
}

/// `access.ssh`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ssh {
    /// The provider.
    pub provider: SshProvider,
}

/// `access.ssh.provider`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SshProvider {
    /// The service-managed provider.
    Managed {},
}
