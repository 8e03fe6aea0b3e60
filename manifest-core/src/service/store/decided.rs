//! A publication decided on a read snapshot: on a database across a network, layers 3-7 read
//! what they need off the writers' lock, in parallel with other publications, and the write
//! under the lock is one statement that first checks that what they read still holds
//! ([`Transaction::publish_decided`](super::Transaction::publish_decided)). If it does not,
//! nothing is written and the publication runs again under the lock.

use std::collections::BTreeSet;

use super::{AcceptedArtifact, Activity, Application, Organization, PolicyVersion, Status};

/// What a publication's layers 3-7 and fence were decided on, as read.
#[derive(Debug, Clone)]
pub struct DecidedOn {
    /// The application's store key.
    pub application: i64,
    /// Its organization's inputs revision: grants, tier, spend authority, SSH keys, secrets
    /// and artifacts are as they were while this holds (every write to them counts it up).
    pub inputs_revision: i64,
    /// The application's settlement (the re-arm gate reads it).
    pub settled: bool,
    /// Its status and pause, from which the status after the publication follows.
    pub status: Status,
    /// Why it is paused.
    pub pause_reason: Option<String>,
    /// Job slots the organization's other applications hold (the quota gate).
    pub jobs_in_use: u64,
    /// The fence: the active version the publisher named, if any.
    pub expected: Option<u64>,
}

/// The writes of a decided publication. The version's number is not decided on the
/// snapshot: it is the active version's successor when written, so publications of one
/// application that do not fence do not refuse each other.
#[derive(Debug, Clone)]
pub struct DecidedWrite {
    /// The new version (its `version` is set when written).
    pub version: PolicyVersion,
    /// The application's status after the publication.
    pub status: Status,
    /// Its pause reason after the publication.
    pub pause_reason: Option<String>,
    /// Whether the publication re-arms a settled application.
    pub rearm: bool,
    /// The activity entry (its `policy_version` is set when written).
    pub activity: Activity,
    /// When the scheduler should look at the application (Unix milliseconds).
    pub due_at_ms: u64,
}

/// What a publication's layers 3-7 read of its organization and application, read ahead in
/// one statement ([`Transaction::publication_inputs`](super::Transaction::publication_inputs)):
/// on a database across a network, one round trip instead of one per fact.
#[derive(Debug, Clone)]
pub struct PublicationInputs {
    /// The organization.
    pub organization: Organization,
    /// Its inputs revision ([`DecidedOn::inputs_revision`]).
    pub inputs_revision: i64,
    /// The application, if the organization has one by that ID.
    pub application: Option<Application>,
    /// The organization's capability grants.
    pub grants: BTreeSet<String>,
    /// Job slots the organization's other applications hold.
    pub jobs_in_use: u64,
    /// The application's provisioned secrets.
    pub provisioned: BTreeSet<String>,
    /// The application's accepted artifacts, newest first.
    pub accepted: Vec<AcceptedArtifact>,
    /// The organization's operator SSH keys, in order.
    pub ssh_keys: Vec<String>,
}
