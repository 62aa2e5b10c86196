//! What the reverter queues: one object as the index keys it, and a job to reconcile it.

use kube::core::GroupVersionKind;

use crate::core::{HelmWriter, LockedObject};

/// One object, as the index keys it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct ObjectKey {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub namespace: Option<String>,
    pub name: String,
}

/// `Kind namespace/name`, or `Kind name` for a cluster-scoped object: how logs name it.
impl std::fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{} {ns}/{}", self.kind, self.name),
            None => write!(f, "{} {}", self.kind, self.name),
        }
    }
}

impl ObjectKey {
    pub(super) fn of(object: &LockedObject) -> ObjectKey {
        ObjectKey {
            group: object.group.to_string(),
            version: object.version.to_string(),
            kind: object.kind.to_string(),
            namespace: object.namespace.as_deref().map(str::to_string),
            name: object.name.to_string(),
        }
    }

    pub(super) fn gvk(&self) -> GroupVersionKind {
        GroupVersionKind::gvk(&self.group, &self.version, &self.kind)
    }
}

#[derive(Clone, Debug)]
pub(super) struct Job {
    pub(super) key: ObjectKey,
    /// Helm's writer as last seen (a Delete event carries the object's managedFields).
    pub(super) writer: Option<HelmWriter>,
    /// Already waited its backoff.
    pub(super) delayed: bool,
}
