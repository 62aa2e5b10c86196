//! What the watches saw of locked objects' ownership: whether a live object is its release's,
//! and which deleted ones were.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use crate::core::ReleaseKey;

use super::key::ObjectKey;

/// What the watches saw of locked objects' `meta.helm.sh` annotations.
#[derive(Default)]
pub(super) struct Proofs {
    /// The uid of each object when it was last seen carrying its release's annotations. Kept
    /// after a delete: the object was the release's, so creating it again is Helm's job done.
    pub(super) carried: HashMap<ObjectKey, String>,
    /// Live objects a release renders that are not proven to be its own.
    pub(super) unproven: HashSet<ObjectKey>,
    /// Deleted objects the reverter leaves to helm upgrade, each reported once.
    pub(super) missing: HashSet<ObjectKey>,
}

impl Proofs {
    /// Whether `live` is the release's: it carries the release's annotations, or it is the same
    /// object (uid) the watches saw carry them. Records what it saw.
    pub(super) fn observe(&mut self, key: &ObjectKey, release: &ReleaseKey, live: &Value) -> bool {
        let uid = live
            .pointer("/metadata/uid")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let proven = if crate::core::live_owner(live).as_ref() == Some(release) {
            self.carried.insert(key.clone(), uid.to_string());
            true
        } else {
            !uid.is_empty() && self.carried.get(key).is_some_and(|seen| seen == uid)
        };
        if proven {
            self.unproven.remove(key);
        } else {
            self.unproven.insert(key.clone());
        }
        self.missing.remove(key);
        proven
    }
}
