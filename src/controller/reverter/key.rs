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
    /// Whether a release in `index` still renders this object: what the reverter keeps per
    /// object is forgotten once none does (the object, or its release, is gone), so nothing
    /// kept per object outlives it.
    pub(super) fn claimed(&self, index: &crate::core::Index) -> bool {
        index
            .lookup(
                &self.group,
                &self.kind,
                self.namespace.as_deref(),
                &self.name,
            )
            .is_some()
    }

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::test_util::release_secret;
    use crate::core::{Index, ReleaseKey, Status};

    /// What the reverter keeps per object is forgotten with the object or its release: the
    /// test of [`ObjectKey::claimed`] each of its maps is pruned by.
    #[test]
    fn an_object_is_claimed_while_a_release_renders_it() {
        let manifest = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: extra}\n";
        let mut index = Index::from_secrets([release_secret(
            "shop",
            "shop",
            1,
            Status::Deployed,
            manifest,
        )]);
        let key = |name: &str| {
            ObjectKey::of(
                &index
                    .lookup("", "ConfigMap", Some("shop"), name)
                    .unwrap()
                    .clone(),
            )
        };
        let (settings, extra) = (key("settings"), key("extra"));
        assert_eq!(settings.to_string(), "ConfigMap shop/settings");
        assert!(settings.claimed(&index) && extra.claimed(&index));
        // An upgrade that no longer renders `extra`.
        index.upsert(release_secret(
            "shop",
            "shop",
            2,
            Status::Deployed,
            &manifest[..manifest.find("---").unwrap()],
        ));
        assert!(settings.claimed(&index));
        assert!(!extra.claimed(&index));
        // The release uninstalled.
        index.remove_release(&ReleaseKey::new("shop", "shop"));
        assert!(!settings.claimed(&index));
    }
}
