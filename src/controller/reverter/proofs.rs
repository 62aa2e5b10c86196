//! What the watches saw of locked objects' ownership: whether a live object is its release's,
//! and which deleted ones were; with the gauges `unproven_objects` and `missing_objects`.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use serde_json::Value;

use crate::core::{Index, LockedObject, ReleaseKey};
use crate::metrics::Metrics;

use super::key::ObjectKey;

/// What the watches saw of locked objects' `meta.helm.sh` annotations.
#[derive(Default)]
struct Seen {
    /// The uid of each object when it was last seen carrying its release's annotations, and
    /// that release. Kept after a delete: the object was the release's, so creating it again is
    /// Helm's job done; for that release only (another release that claims the object proves
    /// nothing by it).
    carried: HashMap<ObjectKey, (String, ReleaseKey)>,
    /// Live objects a release renders that are not proven to be its own.
    unproven: HashSet<ObjectKey>,
    /// Deleted objects the reverter leaves to helm upgrade, each reported once.
    missing: HashSet<ObjectKey>,
}

impl Seen {
    fn observe(&mut self, key: &ObjectKey, release: &ReleaseKey, live: &Value) -> bool {
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

    fn carried(&self, key: &ObjectKey, release: &ReleaseKey) -> Option<&str> {
        self.carried
            .get(key)
            .filter(|(_, seen)| seen == release)
            .map(|(uid, _)| uid.as_str())
    }
}

/// What the watches saw of locked objects' ownership, and its gauges.
pub(super) struct Proofs {
    seen: Mutex<Seen>,
    metrics: Arc<Metrics>,
}

impl Proofs {
    pub(super) fn new(metrics: Arc<Metrics>) -> Self {
        Proofs {
            seen: Mutex::new(Seen::default()),
            metrics,
        }
    }

    fn seen(&self) -> std::sync::MutexGuard<'_, Seen> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn gauge(&self, seen: &Seen) {
        self.metrics
            .unproven_objects
            .set(seen.unproven.len() as i64);
        self.metrics.missing_objects.set(seen.missing.len() as i64);
    }

    /// Whether a live locked object is its release's: it carries the release's annotations, or
    /// it is the same object (uid) the watches saw carry that release's. Records what it saw.
    pub(super) fn observe(&self, locked: &LockedObject, live: &Value) -> bool {
        let mut seen = self.seen();
        let proven = seen.observe(&ObjectKey::of(locked), &locked.release, live);
        self.gauge(&seen);
        if !proven {
            tracing::debug!(object = %locked.describe(), release = %locked.release, "does not carry the release's meta.helm.sh annotations; neither locked nor reverted");
        }
        proven
    }

    /// A locked object deleted: seen carrying the release's annotations as it went, it was the
    /// release's, and may be created again; gone, it is not an unproven live object.
    pub(super) fn deleted(&self, locked: &LockedObject, live: &Value) {
        let key = ObjectKey::of(locked);
        let mut seen = self.seen();
        seen.observe(&key, &locked.release, live);
        seen.unproven.remove(&key);
        self.gauge(&seen);
    }

    /// Whether `key` was last seen carrying `release`'s annotations.
    pub(super) fn carried(&self, key: &ObjectKey, release: &ReleaseKey) -> bool {
        self.seen().carried(key, release).is_some()
    }

    /// The release `key` was last seen carrying the annotations of.
    pub(super) fn last_owner(&self, key: &ObjectKey) -> Option<ReleaseKey> {
        self.seen()
            .carried
            .get(key)
            .map(|(_, release)| release.clone())
    }

    /// Records `key` missing (left to helm upgrade): whether it is newly so, to be reported.
    pub(super) fn missing(&self, key: ObjectKey) -> bool {
        let mut seen = self.seen();
        let new = seen.missing.insert(key);
        self.gauge(&seen);
        new
    }

    /// Forgets what was seen of objects no release renders any more.
    pub(super) fn forget(&self, index: &Index) {
        let mut seen = self.seen();
        seen.carried.retain(|key, _| key.claimed(index));
        seen.unproven.retain(|key| key.claimed(index));
        seen.missing.retain(|key| key.claimed(index));
        self.gauge(&seen);
    }
}

#[cfg(test)]
impl Proofs {
    pub(super) fn kept(&self) -> usize {
        let seen = self.seen();
        seen.carried.len() + seen.unproven.len() + seen.missing.len()
    }
}
