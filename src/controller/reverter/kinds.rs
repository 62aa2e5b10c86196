//! The kinds the reverter knows: each kind's resource and scope as discovery answered it, asked
//! once per kind, for the watches and the reconciles.

use std::collections::HashMap;
use std::sync::Mutex;

use kube::core::{ApiResource, GroupVersionKind};

use crate::core::KindScope;

use super::attempt::RevertError;
use super::cluster::Cluster;

/// Discovery's answers, per kind.
#[derive(Default)]
pub(super) struct KnownKinds(Mutex<HashMap<GroupVersionKind, (ApiResource, bool)>>);

impl KnownKinds {
    fn kinds(&self) -> std::sync::MutexGuard<'_, HashMap<GroupVersionKind, (ApiResource, bool)>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The kind's resource and whether it is namespaced: as discovery answered before, or
    /// asked now.
    pub(super) async fn resource(
        &self,
        cluster: &dyn Cluster,
        gvk: &GroupVersionKind,
    ) -> Result<(ApiResource, bool), RevertError> {
        if let Some(found) = self.kinds().get(gvk) {
            return Ok(found.clone());
        }
        let found = cluster
            .discover(gvk)
            .await
            .map_err(|source| RevertError::Discovery {
                kind: format!("{}/{} {}", gvk.group, gvk.version, gvk.kind),
                source,
            })?;
        self.kinds().insert(gvk.clone(), found.clone());
        Ok(found)
    }

    /// The kind's scope as discovery answered it ([`KindScope::Unknown`] when it has not been
    /// asked yet).
    pub(super) fn scope(&self, gvk: &GroupVersionKind) -> KindScope {
        match self.kinds().get(gvk) {
            Some((_, true)) => KindScope::Namespaced,
            Some((_, false)) => KindScope::Cluster,
            None => KindScope::Unknown,
        }
    }
}
