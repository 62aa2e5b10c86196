//! What the watches saw of locked objects' ownership: whether a live object is its release's,
//! and which deleted ones were.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use crate::core::ReleaseKey;

use super::key::ObjectKey;

/// What the watches saw of locked objects' `meta.helm.sh` annotations.
#[derive(Default)]
pub(super) struct Proofs {
    /// The uid of each object when it was last seen carrying its release's annotations, and
    /// that release. Kept after a delete: the object was the release's, so creating it again is
    /// Helm's job done; for that release only (another release that claims the object proves
    /// nothing by it).
    pub(super) carried: HashMap<ObjectKey, (String, ReleaseKey)>,
    /// Live objects a release renders that are not proven to be its own.
    pub(super) unproven: HashSet<ObjectKey>,
    /// Deleted objects the reverter leaves to helm upgrade, each reported once.
    pub(super) missing: HashSet<ObjectKey>,
}

impl Proofs {
    /// Whether `live` is the release's: it carries the release's annotations, or it is the same
    /// object (uid) the watches saw carry that release's. Records what it saw.
    pub(super) fn observe(&mut self, key: &ObjectKey, release: &ReleaseKey, live: &Value) -> bool {
        let uid = live
            .pointer("/metadata/uid")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let proven = if crate::core::live_owner(live).is_some_and(|owner| owner.is(release)) {
            self.carried
                .insert(key.clone(), (uid.to_string(), release.clone()));
            true
        } else {
            !uid.is_empty() && self.carried(key, release).is_some_and(|seen| seen == uid)
        };
        if proven {
            self.unproven.remove(key);
        } else {
            self.unproven.insert(key.clone());
        }
        self.missing.remove(key);
        proven
    }

    /// The uid `key` had when it was last seen carrying `release`'s annotations.
    pub(super) fn carried(&self, key: &ObjectKey, release: &ReleaseKey) -> Option<&str> {
        self.carried
            .get(key)
            .filter(|(_, seen)| seen == release)
            .map(|(uid, _)| uid.as_str())
    }

    /// The release `key` was last seen carrying the annotations of.
    pub(super) fn last_owner(&self, key: &ObjectKey) -> Option<ReleaseKey> {
        self.carried.get(key).map(|(_, release)| release.clone())
    }
}
