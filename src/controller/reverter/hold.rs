//! The hold: objects of a revision whose author is not known are held at what was live when the
//! reverter first saw them under it, and never written from that revision.

use std::collections::HashMap;

use crate::core::{held_paths, unknown_author_scope, Authorship, Change, LockedObject};

use super::attempt::{Attempt, Outcome};
use super::authorize::Refusal;
use super::key::ObjectKey;
use super::Reverter;

impl Reverter {
    pub(super) fn held(&self) -> std::sync::MutexGuard<'_, HashMap<ObjectKey, (u64, Vec<String>)>> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// For a revision whose author is not known: the paths where `object` differed from it when
    /// the reverter first saw the object under it (`drift` is asked only then), held at what is
    /// live. `None` when the author is known.
    pub(super) fn held_paths(
        &self,
        object: &LockedObject,
        newest: &crate::core::Revision,
        drift: impl FnOnce() -> Vec<Change>,
    ) -> Option<(Vec<String>, bool)> {
        let Authorship::Unknown(why) = &newest.author else {
            return None;
        };
        let namespace = object.namespace.as_deref();
        unknown_author_scope(*why, &object.group, namespace, &object.release.namespace).ok()?;
        let key = ObjectKey::of(object);
        let mut held = self.held();
        if let Some((revision, paths)) = held.get(&key) {
            if *revision == newest.revision {
                return Some((paths.clone(), false));
            }
        }
        let paths = held_paths(&drift());
        let before = held.insert(key, (newest.revision, paths.clone()));
        let was_held = before.is_some_and(|(_, p)| !p.is_empty());
        match (was_held, !paths.is_empty()) {
            (false, true) => self.metrics.held_objects.inc(),
            (true, false) => self.metrics.held_objects.dec(),
            _ => 0,
        };
        if !paths.is_empty() {
            tracing::warn!(object = %object.describe(), release = %object.release, revision = newest.revision, author = %newest.author, paths = %paths.join(", "), "differs from a revision whose author is not known: held at what is live, never written from it");
        }
        Some((paths, true))
    }

    /// The author of the object's release is known (again): nothing of it is held.
    pub(super) fn release_hold(&self, object: &LockedObject) {
        let released = self.held().remove(&ObjectKey::of(object));
        if released.is_some_and(|(_, p)| !p.is_empty()) {
            self.metrics.held_objects.dec();
        }
    }

    /// What the reverter may do for the newest revision when its author is not known
    /// (docs/security.md): `Ok(None)` when the author is known; `Ok(Some(paths))` to hold those
    /// paths at what is live; `Err` when nothing is written (reported).
    pub(super) async fn unknown_author(
        &self,
        attempt: &Attempt<'_>,
    ) -> Result<Option<Vec<String>>, Outcome> {
        let (state, object) = (attempt.state, &*attempt.object);
        let Some(newest) = state.newest() else {
            return Ok(None);
        };
        let Authorship::Unknown(why) = &newest.author else {
            return Ok(None);
        };
        let namespace = object.namespace.as_deref();
        if let Err(out) =
            unknown_author_scope(*why, &object.group, namespace, &object.release.namespace)
        {
            self.report_refusal(newest, object, Refusal::NotKnown(*why, out))
                .await;
            return Err(Outcome::Refused);
        }
        let Some(live) = &attempt.live else {
            let why = "its release's newest revision has no known author, and helm-locker creates nothing for it";
            self.report_missing(state, object, why).await;
            return Err(Outcome::Skipped("missing; left to helm upgrade"));
        };
        let schema = self.schema.load();
        let drift = || crate::core::drift(&schema, object, live, &attempt.ignored());
        let Some((paths, _)) = self.held_paths(object, newest, drift) else {
            return Ok(None);
        };
        if !paths.is_empty() {
            self.report_refusal(newest, object, Refusal::Held(*why, &paths))
                .await;
        }
        Ok(Some(paths))
    }
}
