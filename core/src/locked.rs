//! An object a release locks: its identity and the chart's content, as the index keeps it.

use std::sync::Arc;

use crate::interning::SharedStr;
use crate::release::ReleaseKey;
use crate::tree::{Packed, Tree};

/// An object a release locks, with the chart's content.
#[derive(Debug, PartialEq)]
pub struct LockedObject {
    // Shared: a cluster's objects repeat a few groups, versions, kinds and namespaces.
    pub group: SharedStr,
    pub version: SharedStr,
    pub kind: SharedStr,
    /// Resolved: the chart's namespace, else the release's for namespaced kinds; `None` for
    /// cluster-scoped kinds.
    pub namespace: Option<SharedStr>,
    pub name: String,
    /// The chart's content, packed; [`content`](Self::content) unpacks it.
    pub packed: Packed,
    /// Shared by the objects of a release.
    pub release: Arc<ReleaseKey>,
}

impl LockedObject {
    /// The object as the chart renders it.
    pub fn content(&self) -> Tree {
        self.packed.unpack()
    }

    pub fn api_version(&self) -> String {
        crate::manifest::api_version(&self.group, &self.version)
    }

    /// `Deployment shop/shop-web`, or `ClusterRole shop-reader` when cluster-scoped.
    pub fn describe(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{} {}/{}", self.kind, ns, self.name),
            None => format!("{} {}", self.kind, self.name),
        }
    }
}
