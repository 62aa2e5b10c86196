//! The watches: one per kind the locked releases own, following the index; each queues the
//! locked objects that drifted or went, and records what it saw of their ownership.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, DynamicObject};
use kube::core::GroupVersionKind;
use kube::runtime::watcher::{self, Event as WatchEvent};
use kube::runtime::WatchStreamExt;
use serde_json::Value;
use tokio::sync::mpsc;
use tracing::Instrument as _;

use crate::core::{drift, helm_attribution, helm_writer, ownership_return, Index, LockedObject};
use crate::index_store::IndexStore;
use crate::live_config::LiveConfig;
use crate::metrics::Metrics;
use crate::source::openapi::SharedSchema;

use super::hold::Holds;
use super::key::{Job, ObjectKey};
use super::kinds::KnownKinds;
use super::proofs::Proofs;
use super::queueing::{kinds_owned, missing_from_list, to_check_after_update, Listed, OwnedKind};
use super::revertable::revertable;
use super::Reverter;

impl Reverter {
    /// Starts and stops one watch per kind the releases own, and queues the objects of
    /// releases that just became revertable or changed (a deleted object shows up here).
    pub(super) async fn follow_index(self: Arc<Self>, tx: mpsc::UnboundedSender<Job>) {
        let mut updates = self.index.subscribe();
        // A switch flipped back (mode on again, the reverter resumed) re-checks every object.
        let mut switches = self.config.subscribe();
        let mut switched = false;
        let mut updates_seen: u64 = 0;
        let mut watches: HashMap<OwnedKind, (String, tokio::task::JoinHandle<()>)> = HashMap::new();
        let mut previous = self.index.snapshot();
        loop {
            let index = self.index.snapshot();
            let wanted = kinds_owned(&index);
            watches.retain(|kind, (_, task)| {
                let keep = wanted.contains_key(kind);
                if !keep {
                    task.abort();
                    tracing::debug!(group = %kind.0, kind = %kind.1, "no release owns this kind any more: watch stopped");
                }
                keep
            });
            for (kind, version) in wanted {
                if let std::collections::hash_map::Entry::Vacant(slot) = watches.entry(kind) {
                    let (group, kind) = slot.key().clone();
                    // Each kind's log lines say which kind they are about.
                    let span = tracing::info_span!("kind_watch", group = %group, kind = %kind);
                    let task = tokio::spawn(
                        self.clone()
                            .watch_kind(GroupVersionKind::gvk(&group, &version, &kind), tx.clone())
                            .instrument(span),
                    );
                    slot.insert((version, task));
                }
            }
            for key in to_check_after_update(&self.config.load(), &previous, &index, switched) {
                let _ = tx.send(Job {
                    key,
                    writer: None,
                    delayed: false,
                });
            }
            self.parts.holds.forget(&index);
            // What is kept per object is forgotten when releases or objects went, and every
            // 256 updates (an upgrade that renames objects): a lookup per kept object, not on
            // every update of a large index.
            updates_seen += 1;
            if index.object_count() < previous.object_count()
                || index.release_count() < previous.release_count()
                || updates_seen % 256 == 0
            {
                self.parts.forget_unclaimed(&index);
            }
            previous = index;
            switched = tokio::select! {
                changed = updates.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    false
                }
                changed = switches.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    true
                }
            };
        }
    }

    /// Watches one kind cluster-wide and queues locked objects that drifted or vanished.
    pub(super) async fn watch_kind(
        self: Arc<Self>,
        gvk: GroupVersionKind,
        tx: mpsc::UnboundedSender<Job>,
    ) {
        let mut wait = Duration::from_millis(500);
        let (ar, _) = loop {
            match self.parts.kinds.resource(&*self.cluster, &gvk).await {
                Ok(found) => break found,
                Err(e) => {
                    tracing::debug!(group = %gvk.group, kind = %gvk.kind, error = %crate::error_chain::with_causes(&e), "kind not served (yet); retrying");
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(Duration::from_secs(30));
                }
            }
        };
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &ar);
        let mut stream = watcher::watcher(api, watcher::Config::default())
            .default_backoff()
            .boxed();
        let mut listed: HashSet<Listed> = HashSet::new();
        while let Some(event) = stream.next().await {
            match event {
                Ok(WatchEvent::Init) => listed.clear(),
                Ok(WatchEvent::InitApply(object)) => {
                    listed.insert((
                        object.metadata.namespace.clone(),
                        object.metadata.name.clone().unwrap_or_default(),
                    ));
                    send(&tx, self.watched().seen(&gvk, &object));
                }
                Ok(WatchEvent::Apply(object)) => send(&tx, self.watched().seen(&gvk, &object)),
                Ok(WatchEvent::InitDone) => {
                    // Locked objects missing from the full list were deleted.
                    let index = self.index.snapshot();
                    for key in missing_from_list(&self.config.load(), &index, &gvk, &listed) {
                        let _ = tx.send(Job {
                            key,
                            writer: None,
                            delayed: false,
                        });
                    }
                    listed.clear();
                }
                Ok(WatchEvent::Delete(object)) => {
                    send(&tx, self.watched().deleted(&gvk, &object));
                }
                Err(e) => {
                    self.metrics.watch_restarts.inc();
                    tracing::warn!(group = %gvk.group, kind = %gvk.kind, error = %e, "watch failed; retrying with backoff");
                }
            }
        }
    }

    /// The reverter as its watches see it: what an object seen queues.
    fn watched(&self) -> Watched<'_> {
        Watched {
            index: &self.index,
            config: &self.config,
            schema: &self.schema,
            proofs: &self.parts.proofs,
            holds: &self.parts.holds,
            kinds: &self.parts.kinds,
            attributions: &self.parts.attributions,
        }
    }
}

/// What a kind's watch needs of the reverter to tell what an object it sees queues: the index,
/// the policy in force, the schema, and the parts that record what was seen.
pub(super) struct Watched<'r> {
    pub(super) index: &'r IndexStore,
    pub(super) config: &'r LiveConfig,
    pub(super) schema: &'r SharedSchema,
    pub(super) proofs: &'r Proofs,
    pub(super) holds: &'r Holds,
    pub(super) kinds: &'r KnownKinds,
    pub(super) attributions: &'r Attributions,
}

impl Watched<'_> {
    /// The locked object `object` is, as its annotations name its owner.
    fn locked<'i>(
        index: &'i Index,
        gvk: &GroupVersionKind,
        object: &DynamicObject,
    ) -> Option<&'i Arc<LockedObject>> {
        let name = object.metadata.name.as_deref()?;
        // The owner as the object's annotations name it ([`crate::core::Claims::owner`]): a claim
        // of another release is never followed.
        index.owned(
            &gvk.group,
            &gvk.kind,
            object.metadata.namespace.as_deref(),
            name,
            || {
                object
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(crate::core::annotated_release_key)
            },
        )
    }

    /// What a watched object seen live queues: itself when it is locked and differs from the
    /// chart (or its fields are co-owned), and when fields of it are newly held.
    pub(super) fn seen(&self, gvk: &GroupVersionKind, object: &DynamicObject) -> Vec<Job> {
        let mut jobs = Vec::new();
        let index = self.index.snapshot();
        let Some(locked) = Self::locked(&index, gvk, object) else {
            return jobs;
        };
        if revertable(&self.config.load(), &index, locked).is_none() {
            return jobs;
        }
        let Ok(live) = serde_json::to_value(object) else {
            return jobs;
        };
        if !self.proofs.observe(locked, &live) {
            return jobs;
        }
        let schema = self.schema.load();
        self.attributions.check(&schema, locked, &live);
        let mut ignore =
            index.left_alone(&self.config.load(), locked, crate::lock_exception::now());
        if let Some(newest) = index.release(&locked.release).and_then(|s| s.newest()) {
            let first_sight = || crate::core::held_at_first_sight(&schema, locked, &live);
            let scope = self.kinds.scope(&ObjectKey::of(locked).gvk());
            match self.holds.paths_now(locked, newest, scope, first_sight) {
                // Newly held (or to be asked of the API server): decided and reported by the
                // worker.
                Some((held, true)) if !held.is_empty() => {
                    jobs.push(Job {
                        key: ObjectKey::of(locked),
                        writer: None,
                        delayed: false,
                    });
                    ignore.extend(held);
                }
                Some((held, _)) => ignore.extend(held),
                None => self.holds.release(locked),
            }
        }
        let ignore: Vec<&str> = ignore.iter().map(String::as_str).collect();
        let drifted = !drift(&schema, locked, &live, &ignore).is_empty();
        // Without drift, a server-side release's fields may still be co-owned by another
        // manager (a restore by kubectl apply): handed back so Helm's next upgrade does not
        // conflict.
        let co_owned = || {
            let apply_method = index
                .release(&locked.release)
                .and_then(|s| s.newest())
                .and_then(|r| r.apply_method.as_deref());
            if apply_method != Some("ssa") {
                return false;
            }
            // A restore by another manager alone: the worker knows Helm's writer.
            let Some((helm, _)) = crate::core::helm_fields(&live, None) else {
                return true;
            };
            ownership_return(&schema, locked, &live, helm, &ignore).is_some()
        };
        if drifted || co_owned() {
            jobs.push(Job {
                key: ObjectKey::of(locked),
                writer: None,
                delayed: false,
            });
        }
        jobs
    }

    /// What a watched object deleted queues: itself, to be created again, when it is locked
    /// (recorded as seen going, with the release's annotations or not) and revertable.
    pub(super) fn deleted(&self, gvk: &GroupVersionKind, object: &DynamicObject) -> Vec<Job> {
        let index = self.index.snapshot();
        let Some(locked) = Self::locked(&index, gvk, object) else {
            return Vec::new();
        };
        let live = serde_json::to_value(object).ok();
        if let Some(live) = &live {
            self.proofs.deleted(locked, live);
        }
        if revertable(&self.config.load(), &index, locked).is_none() {
            return Vec::new();
        }
        let apply_method = index
            .release(&locked.release)
            .and_then(|s| s.newest())
            .and_then(|r| r.apply_method.clone());
        vec![Job {
            key: ObjectKey::of(locked),
            writer: Some(helm_writer(live.as_ref(), apply_method.as_deref())),
            delayed: false,
        }]
    }
}

/// Queues `jobs`.
fn send(tx: &mpsc::UnboundedSender<Job>, jobs: Vec<Job>) {
    for job in jobs {
        let _ = tx.send(job);
    }
}

/// The time of Helm's managedFields entry last compared with the lock, per object; the counter
/// `ownership_mismatches` counts the differences found.
pub(super) struct Attributions {
    seen: Mutex<HashMap<ObjectKey, String>>,
    metrics: Arc<Metrics>,
}

impl Attributions {
    pub(super) fn new(metrics: Arc<Metrics>) -> Self {
        Attributions {
            seen: Mutex::new(HashMap::new()),
            metrics,
        }
    }

    fn seen(&self) -> std::sync::MutexGuard<'_, HashMap<ObjectKey, String>> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner())
    }

    #[cfg(test)]
    pub(super) fn kept(&self) -> usize {
        self.seen().len()
    }

    /// Forgets the entries of objects no release renders any more.
    pub(super) fn forget(&self, index: &Index) {
        self.seen().retain(|key, _| key.claimed(index));
    }

    /// Compares the lock with the managedFields entry the API server wrote for Helm, once per
    /// entry: a difference is a schema gap (a field locked that Helm does not own, or the
    /// reverse), counted and logged so it shows in production rather than as a bypass.
    pub(super) fn check(&self, schema: &crate::core::Schema, locked: &LockedObject, live: &Value) {
        // Re-compared only when Helm's entry changes (a new apply), not on every status update.
        let Some((_, fields)) = crate::core::helm_fields(live, None) else {
            return;
        };
        let stamp = fields.to_string();
        let key = ObjectKey::of(locked);
        {
            let mut seen = self.seen();
            if seen.get(&key) == Some(&stamp) {
                return;
            }
            seen.insert(key, stamp);
        }
        if let Some(attribution) = helm_attribution(schema, locked, live) {
            if !attribution.matches() {
                self.metrics.ownership_mismatches.inc();
                tracing::warn!(
                    object = %locked.describe(),
                    manager = %attribution.manager,
                    missing = ?attribution.missing,
                    extra = ?attribution.extra,
                    "what helm-locker locks differs from what the API server attributes to Helm"
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use kube::api::DynamicObject;
    use kube::core::GroupVersionKind;
    use serde_json::json;

    use super::*;
    use crate::controller::reverter::parts::Parts;
    use crate::core::test_util::release_secret;
    use crate::core::{Author, Authorship, Config, Schema, Status};

    const CHART: &str =
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  a: b\n";

    /// Release `shop/shop`, deployed, rendering ConfigMap `settings`, its author known.
    struct World {
        index: IndexStore,
        config: LiveConfig,
        schema: SharedSchema,
        parts: Parts,
    }

    impl World {
        fn new() -> Self {
            World::with(Config {
                ownership_returned: true,
                ..Config::default()
            })
        }

        /// The world with the policy `config`.
        fn with(config: Config) -> Self {
            let mut secret = release_secret("shop", "shop", 1, Status::Deployed, CHART);
            secret.author = Authorship::Known(Arc::new(Author {
                username: "alice".into(),
                ..Author::default()
            }));
            World {
                index: IndexStore::new(Index::from_secrets([secret])),
                config: LiveConfig::new(config),
                schema: arc_swap::ArcSwap::new(Schema::builtin()),
                parts: Parts::new(&Arc::new(Metrics::new())),
            }
        }

        fn watched(&self) -> Watched<'_> {
            Watched {
                index: &self.index,
                config: &self.config,
                schema: &self.schema,
                proofs: &self.parts.proofs,
                holds: &self.parts.holds,
                kinds: &self.parts.kinds,
                attributions: &self.parts.attributions,
            }
        }
    }

    fn config_maps() -> GroupVersionKind {
        GroupVersionKind::gvk("", "v1", "ConfigMap")
    }

    /// ConfigMap `name` in `shop` with `a` set to `value`, carrying release `shop`'s
    /// annotations when `annotated`.
    fn live(name: &str, value: &str, annotated: bool) -> DynamicObject {
        let annotations = if annotated {
            json!({"meta.helm.sh/release-name": "shop", "meta.helm.sh/release-namespace": "shop"})
        } else {
            json!({})
        };
        serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "shop", "uid": format!("uid-{name}"),
                         "resourceVersion": "7", "annotations": annotations,
                         "labels": {"app.kubernetes.io/managed-by": "Helm"}},
            "data": {"a": value},
        }))
        .unwrap()
    }

    #[test]
    fn a_locked_object_that_drifted_is_queued_and_one_as_the_chart_is_not() {
        let world = World::new();
        let jobs = world
            .watched()
            .seen(&config_maps(), &live("settings", "c", true));
        assert_eq!(jobs.len(), 1);
        assert_eq!(jobs[0].key.name, "settings");
        assert!(jobs[0].writer.is_none());
        // Control: as the chart renders it, nothing to do.
        let jobs = world
            .watched()
            .seen(&config_maps(), &live("settings", "b", true));
        assert!(jobs.is_empty());
    }

    #[test]
    fn an_object_without_the_releases_annotations_or_not_locked_is_not_queued() {
        let world = World::new();
        let unproven = world
            .watched()
            .seen(&config_maps(), &live("settings", "c", false));
        assert!(unproven.is_empty());
        let other = world
            .watched()
            .seen(&config_maps(), &live("other", "c", true));
        assert!(other.is_empty());
    }

    #[test]
    fn nothing_is_queued_while_the_reverter_is_paused() {
        let world = World::with(Config {
            ownership_returned: false,
            ..Config::default()
        });
        assert!(world
            .watched()
            .seen(&config_maps(), &live("settings", "c", true))
            .is_empty());
        assert!(world
            .watched()
            .deleted(&config_maps(), &live("settings", "b", true))
            .is_empty());
    }

    #[test]
    fn a_locked_object_deleted_is_queued_with_helms_writer() {
        let world = World::new();
        let jobs = world
            .watched()
            .deleted(&config_maps(), &live("settings", "b", true));
        assert_eq!(jobs.len(), 1);
        assert!(jobs[0].writer.is_some());
        // Control: an object no release locks, deleted, queues nothing.
        let jobs = world
            .watched()
            .deleted(&config_maps(), &live("other", "b", true));
        assert!(jobs.is_empty());
    }
}
