//! The hold: objects of a revision whose author is not known are held at what was live when the
//! reverter first saw them under it, and never written from that revision.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::core::{unknown_author_scope, Authorship, Index, KindScope, LockedObject, Schema};
use crate::metrics::Metrics;

use super::attempt::{Attempt, Outcome, SkipReason, Step};
use super::authorize::{Refusal, Refusals};
use super::cluster::{Cluster, Place};
use super::key::ObjectKey;
use super::proofs::Proofs;
use super::recreate::report_missing;

/// Objects of releases whose newest revision's author is not known: the revision the reverter
/// first saw each under, and the paths where it then differed from that revision (held at what
/// is live, never written from it: [`crate::core::held_paths`]); with the gauge `held_objects`.
pub(super) struct Holds {
    held: Mutex<HashMap<ObjectKey, (u64, Vec<String>)>>,
    metrics: Arc<Metrics>,
    /// Bounds the first sights asked of the API server at once.
    asks: tokio::sync::Semaphore,
}

/// How many first sights ask the API server at once ([`first_sight`]): one dry run each.
pub(super) const STORED_FORM_ASKS: usize = 4;

impl Holds {
    pub(super) fn new(metrics: Arc<Metrics>) -> Self {
        Holds {
            held: Mutex::new(HashMap::new()),
            metrics,
            asks: tokio::sync::Semaphore::new(STORED_FORM_ASKS),
        }
    }

    fn held(&self) -> std::sync::MutexGuard<'_, HashMap<ObjectKey, (u64, Vec<String>)>> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// For a revision whose author is not known: the paths where `object` differed from it when
    /// the reverter first saw the object under it (`first_sight` is asked only then:
    /// [`first_sight`], without exceptions or ignore rules), held at what is live, and whether
    /// they are newly so. `None` when the author is known. `scope`: the kind's, as discovery
    /// answered it. At most [`STORED_FORM_ASKS`] first sights are asked at once.
    pub(super) async fn paths<F>(
        &self,
        object: &LockedObject,
        newest: &crate::core::Revision,
        scope: KindScope,
        first_sight: impl FnOnce() -> F,
    ) -> Option<(Vec<String>, bool)>
    where
        F: std::future::Future<Output = Vec<String>>,
    {
        match self.known(object, newest, scope)? {
            Some(paths) => Some((paths, false)),
            None => {
                let paths = {
                    let _permit = self.asks.acquire().await.ok();
                    first_sight().await
                };
                Some((self.record(object, newest, paths.clone()), true))
            }
        }
    }

    /// [`Holds::paths`] from a watch, which cannot wait for the API server: what is held when it
    /// is known, or when the local comparison finds no difference (nothing held: recorded).
    /// Where it finds one, the API server is to be asked ([`first_sight`]) by a reconcile: the
    /// local paths, newly, unrecorded (the watch queues the object, and holds them meanwhile).
    pub(super) fn paths_now(
        &self,
        object: &LockedObject,
        newest: &crate::core::Revision,
        scope: KindScope,
        local: impl FnOnce() -> Vec<String>,
    ) -> Option<(Vec<String>, bool)> {
        match self.known(object, newest, scope)? {
            Some(paths) => Some((paths, false)),
            None => {
                let paths = local();
                if paths.is_empty() {
                    self.record(object, newest, paths.clone());
                }
                Some((paths, true))
            }
        }
    }

    /// `None` when the author is known (or the scope is not one an unknown author's objects
    /// are held in); `Some(None)` when the object was not seen yet under that revision.
    fn known(
        &self,
        object: &LockedObject,
        newest: &crate::core::Revision,
        scope: KindScope,
    ) -> Option<Option<Vec<String>>> {
        let Authorship::Unknown(why) = &newest.author else {
            return None;
        };
        let namespace = object.namespace.as_deref();
        unknown_author_scope(
            *why,
            &object.group,
            namespace,
            &object.release.namespace,
            scope,
        )
        .ok()?;
        let held = self.held();
        Some(
            held.get(&ObjectKey::of(object))
                .filter(|(revision, _)| *revision == newest.revision)
                .map(|(_, paths)| paths.clone()),
        )
    }

    /// Records what is held for `object` at the newest revision, first seen now (or seen again
    /// by another reconcile meanwhile: the first record stands).
    fn record(
        &self,
        object: &LockedObject,
        newest: &crate::core::Revision,
        paths: Vec<String>,
    ) -> Vec<String> {
        let key = ObjectKey::of(object);
        let mut held = self.held();
        if let Some((revision, paths)) = held.get(&key) {
            if *revision == newest.revision {
                return paths.clone();
            }
        }
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
        paths
    }

    /// The author of the object's release is known (again): nothing of it is held.
    pub(super) fn release(&self, object: &LockedObject) {
        let released = self.held().remove(&ObjectKey::of(object));
        if released.is_some_and(|(_, p)| !p.is_empty()) {
            self.metrics.held_objects.dec();
        }
    }

    /// Forgets what is held for objects that no release's newest revision of unknown author
    /// renders any more at the revision held for (the release uninstalled, the object gone from
    /// its chart, a newer revision), so `helm_locker_held_objects` counts only what is held now.
    pub(super) fn forget(&self, index: &Index) {
        let mut held = self.held();
        let mut released = 0;
        held.retain(|key, (revision, paths)| {
            let keep = still_held(index, key, *revision);
            if !keep && !paths.is_empty() {
                released += 1;
            }
            keep
        });
        self.metrics.held_objects.dec_by(released);
    }

    #[cfg(test)]
    pub(super) fn kept(&self) -> usize {
        self.held().len()
    }
}

/// What the reverter may do for the newest revision when its author is not known
/// (docs/security.md): `None` when the author is known; `Some(paths)` to hold those paths at
/// what is live; the end of the attempt when nothing is written (reported).
pub(super) async fn unknown_author(
    cluster: &dyn Cluster,
    schema: &Schema,
    (holds, refusals, proofs): (&Holds, &Refusals, &Proofs),
    attempt: &Attempt<'_>,
) -> Step<Option<Vec<String>>> {
    let (state, object) = (attempt.state, &*attempt.object);
    let Some(newest) = state.newest() else {
        return Ok(None);
    };
    let Authorship::Unknown(why) = &newest.author else {
        return Ok(None);
    };
    let namespace = object.namespace.as_deref();
    let scope = match attempt.place.namespaced {
        true => KindScope::Namespaced,
        false => KindScope::Cluster,
    };
    if let Err(out) = unknown_author_scope(
        *why,
        &object.group,
        namespace,
        &object.release.namespace,
        scope,
    ) {
        refusals
            .report(cluster, newest, object, Refusal::NotKnown(*why, out))
            .await;
        return Err(Outcome::Refused.into());
    }
    let Some(live) = &attempt.live else {
        let why = "its release's newest revision has no known author, and helm-locker creates nothing for it";
        report_missing(cluster, proofs, state, object, why).await;
        return Err(Outcome::Skipped(SkipReason::LeftToHelmUpgrade).into());
    };
    let first_sight = || first_sight(cluster, schema, &attempt.place, object, live);
    let Some((paths, _)) = holds.paths(object, newest, scope, first_sight).await else {
        return Ok(None);
    };
    if !paths.is_empty() {
        refusals
            .report(cluster, newest, object, Refusal::Held(*why, &paths))
            .await;
    }
    Ok(Some(paths))
}

/// What is held of `object` seen `live` for the first time under a revision whose author is not
/// known: where it differs from the revision ([`crate::core::held_at_first_sight`], the fast
/// path), less where the API server answers that the revision's object would be stored as what
/// is live (a dry-run create: [`Cluster::stored_form`]), which the local comparison's list of
/// defaults does not know. A refused or failed dry run keeps the local answer: held, and said.
pub(super) async fn first_sight(
    cluster: &dyn Cluster,
    schema: &Schema,
    place: &Place,
    object: &LockedObject,
    live: &serde_json::Value,
) -> Vec<String> {
    let local = crate::core::held_at_first_sight(schema, object, live);
    if local.is_empty() || local.iter().any(|p| p == "/*") {
        return local;
    }
    let body = crate::core::stored_form_body(object);
    match cluster.stored_form(place, &body).await {
        Ok(stored) => {
            let held = crate::core::differing_from_stored(local.clone(), &stored, live);
            if held.len() < local.len() {
                tracing::info!(object = %object.describe(), release = %object.release, paths = %local.iter().filter(|p| !held.contains(p)).cloned().collect::<Vec<_>>().join(", "), "differs from its revision only as the API server stores the revision's object (dry-run create): not held there");
            }
            held
        }
        Err(error) => {
            tracing::warn!(object = %object.describe(), release = %object.release, paths = %local.join(", "), error = %crate::error_chain::with_causes(&error), "the API server did not answer how it would store the revision's object (dry-run create): compared without it, the paths that differ are held");
            local
        }
    }
}

/// Whether `key` is still rendered by its release's newest revision, numbered `revision`, whose
/// author is not known: what was held for it then still holds.
fn still_held(index: &Index, key: &ObjectKey, revision: u64) -> bool {
    index
        .lookup(&key.group, &key.kind, key.namespace.as_deref(), &key.name)
        .and_then(|object| index.release(&object.release))
        .and_then(|state| state.newest())
        .is_some_and(|newest| {
            newest.revision == revision && matches!(newest.author, Authorship::Unknown(_))
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::test_util::release_secret;
    use crate::core::Status;

    const CONFIG_MAP: &str =
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  a: b\n";

    #[test]
    fn a_hold_lasts_while_the_unknown_authors_revision_is_the_newest_and_renders_the_object() {
        let key = ObjectKey {
            group: String::new(),
            version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: Some("shop".into()),
            name: "settings".into(),
        };
        // Written without the author stamp: its author is not known.
        let unstamped =
            |revision| release_secret("shop", "shop", revision, Status::Deployed, CONFIG_MAP);
        let index = Index::from_secrets([unstamped(2)]);
        assert!(matches!(
            index
                .release(&crate::core::ReleaseKey::new("shop", "shop"))
                .unwrap()
                .newest()
                .unwrap()
                .author,
            Authorship::Unknown(_)
        ));
        assert!(still_held(&index, &key, 2));
        // A newer revision: what was held for revision 2 is asked again.
        assert!(!still_held(&index, &key, 1));
        // The release uninstalled: nothing is held for it.
        assert!(!still_held(&Index::new(), &key, 2));
        // The object gone from the chart.
        let other = release_secret(
            "shop",
            "shop",
            2,
            Status::Deployed,
            &CONFIG_MAP.replace("settings", "other"),
        );
        assert!(!still_held(&Index::from_secrets([other]), &key, 2));
    }
}
