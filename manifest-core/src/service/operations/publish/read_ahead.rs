//! Layer reads answered from a publication's facts read ahead
//! ([`PublicationInputs`](crate::service::store::PublicationInputs)): on a database across a
//! network, one round trip instead of one per fact.

use std::collections::BTreeSet;

use crate::service::layers::{Reads, Unread};
use crate::service::store::{AcceptedArtifact, ArtifactEvidence, LayerReads, PublicationInputs, RuntimeImage};

/// Layer reads answered from [`PublicationInputs`]; what they do not hold (curated artifacts
/// and catalog images, keyed by what the manifest names, and another organization's facts) is
/// read from `rest`, or, with none, is [`Unread::NotReadAhead`].
pub(super) struct ReadAhead<'a> {
    /// The facts read ahead.
    pub(super) inputs: &'a PublicationInputs,
    /// Where the rest is read, if anywhere.
    pub(super) rest: Option<&'a mut dyn LayerReads>,
}

impl<'a> ReadAhead<'a> {
    fn ours(&self, organization: i64) -> bool {
        organization == self.inputs.organization.id
    }

    fn our_application(&self, organization: i64, application_id: &str) -> bool {
        self.ours(organization) && self.inputs.application.as_ref().is_some_and(|a| a.application_id == application_id)
    }

    fn rest(&mut self) -> Result<&mut (dyn LayerReads + 'a), Unread> {
        self.rest.as_deref_mut().ok_or(Unread::NotReadAhead)
    }
}

impl Reads for ReadAhead<'_> {
    fn grants(&mut self, organization: i64) -> Result<BTreeSet<String>, Unread> {
        if self.ours(organization) { Ok(self.inputs.grants.clone()) } else { Ok(self.rest()?.grants(organization)?) }
    }

    fn ssh_keys(&mut self, organization: i64) -> Result<Vec<String>, Unread> {
        if self.ours(organization) {
            Ok(self.inputs.ssh_keys.clone())
        } else {
            Ok(self.rest()?.ssh_keys(organization)?)
        }
    }

    fn jobs_in_use(&mut self, organization: i64, except: i64) -> Result<u64, Unread> {
        if self.ours(organization) && self.inputs.application.as_ref().is_some_and(|a| a.key == except) {
            Ok(self.inputs.jobs_in_use)
        } else {
            Ok(self.rest()?.jobs_in_use(organization, except)?)
        }
    }

    fn curated(&mut self, digest: &str) -> Result<Vec<ArtifactEvidence>, Unread> {
        Ok(self.rest()?.curated(digest)?)
    }

    fn accepted(&mut self, organization: i64, application_id: &str) -> Result<Vec<AcceptedArtifact>, Unread> {
        if self.our_application(organization, application_id) {
            Ok(self.inputs.accepted.clone())
        } else {
            Ok(self.rest()?.accepted(organization, application_id)?)
        }
    }

    fn runtime_images(&mut self, catalog: &str, name: &str) -> Result<Vec<RuntimeImage>, Unread> {
        Ok(self.rest()?.runtime_images(catalog, name)?)
    }

    fn provisioned_secrets(&mut self, organization: i64, application_id: &str) -> Result<BTreeSet<String>, Unread> {
        if self.our_application(organization, application_id) {
            Ok(self.inputs.provisioned.clone())
        } else {
            Ok(self.rest()?.provisioned_secrets(organization, application_id)?)
        }
    }
}
