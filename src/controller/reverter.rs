//! The drift reverter: the second line behind the webhook. It watches every kind that locked
//! releases own (discovery + dynamic API; watches come and go with the releases), finds drift
//! with the webhook's own field comparison, and puts the chart's values back as Helm's field
//! manager (see [`crate::core::revert_plan`]); a deleted object is created again, unless the chart gives it
//! owners (then the garbage collector deleted it with them).
//!
//! It writes nothing a release's author could not (docs/security.md): a release Secret is
//! written by whoever may create Secrets in its namespace, yet the reverter may write every
//! kind everywhere. So it patches only objects that carry the release's `meta.helm.sh`
//! annotations (or carried them when it last saw the same object), and creates a deleted object
//! only when it saw the object carry them before it went, or a HelmRelease in the registration
//! namespace (which only the admin may write) vouches for the release. Anything else is
//! reported: a Warning Event on the release Secret and `helm_locker_missing_objects`.
//!
//! Every replica watches and queues; only the Lease holder writes, and it checks leadership
//! right before each write. A write happens only after a fresh read of the release's newest
//! revision from the API server agrees with the index (deployed, same revision), so the
//! reverter never fights Helm mid-operation or with an index that lags behind an upgrade.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::discovery::{pinned_kind, Scope};
use kube::runtime::events::{Event, EventType, Recorder};
use kube::runtime::watcher::{self, Event as WatchEvent};
use kube::runtime::WatchStreamExt;
use kube::{Client, Resource};
use serde_json::Value;
use tokio::sync::{mpsc, watch};

use crate::confirm::Confirm;
use crate::core::author;
use crate::core::fight;
use crate::core::index::{Index, LockedObject, ReleaseKey, ReleaseState};
use crate::core::ownership::Change;
use crate::core::policy::{Config, Mode};
use crate::core::release::Status;
use crate::core::revert_plan::{self, Backoff, HelmWriter};
use crate::metrics::{Metrics, ResultLabels};

/// One object, as the index keys it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct ObjectKey {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub namespace: Option<String>,
    pub name: String,
}

impl ObjectKey {
    fn of(object: &LockedObject) -> ObjectKey {
        ObjectKey {
            group: object.group.to_string(),
            version: object.version.to_string(),
            kind: object.kind.to_string(),
            namespace: object.namespace.as_deref().map(str::to_string),
            name: object.name.to_string(),
        }
    }

    fn gvk(&self) -> GroupVersionKind {
        GroupVersionKind::gvk(&self.group, &self.version, &self.kind)
    }
}

#[derive(Clone, Debug)]
struct Job {
    key: ObjectKey,
    /// Helm's writer as last seen (a Delete event carries the object's managedFields).
    writer: Option<HelmWriter>,
    /// Already waited its backoff.
    delayed: bool,
}

/// The chart's own Role or ClusterRole that a binding of the same release refers to: writing
/// the binding is as much as granting that role's rules.
fn referenced_role(index: &Index, object: &LockedObject, desired: &Value) -> Option<Value> {
    if object.group != "rbac.authorization.k8s.io" || !object.kind.ends_with("Binding") {
        return None;
    }
    let name = desired.pointer("/roleRef/name")?.as_str()?;
    let (kind, namespace) = match desired.pointer("/roleRef/kind")?.as_str()? {
        "Role" => ("Role", object.namespace.as_deref()),
        "ClusterRole" => ("ClusterRole", None),
        _ => return None,
    };
    let role = index.lookup("rbac.authorization.k8s.io", kind, namespace, name)?;
    (role.release == object.release).then(|| role.content().to_json())
}

/// The shortest time between two writes of the reverter, over every object: at most 20 a second.
const MIN_WRITE_INTERVAL: Duration = Duration::from_millis(50);

/// Which objects the reverter may touch: those of deployed releases whose mode is deny or
/// repair (warn only reports; off does nothing).
fn revertable<'i>(
    config: &Config,
    index: &'i Index,
    object: &LockedObject,
) -> Option<(&'i ReleaseState, u64)> {
    let state = index.release(&object.release)?;
    let newest = state.newest()?;
    if newest.status != Status::Deployed || state.objects.is_none() {
        return None;
    }
    let policy = config.policy(&state.key, &newest.labels, index.registration(&state.key));
    matches!(policy.mode, Mode::Deny | Mode::Repair).then_some((&**state, newest.revision))
}

pub(crate) struct Reverter {
    pub client: Client,
    pub index: Arc<crate::index_store::IndexStore>,
    pub config: Arc<Config>,
    pub schema: Arc<crate::core::schema::SharedSchema>,
    pub confirm: Arc<dyn Confirm>,
    pub leader: watch::Receiver<bool>,
    pub metrics: Arc<Metrics>,
    pub recorder: Recorder,
    resources: Mutex<HashMap<GroupVersionKind, (ApiResource, bool)>>,
    /// The time of Helm's managedFields entry last compared with the lock, per object.
    attributions: std::sync::Mutex<HashMap<ObjectKey, String>>,
    /// Create deleted objects again (`--recreate`).
    recreate: bool,
    /// What the watches saw of each locked object's ownership.
    proofs: Mutex<Proofs>,
    /// Whether a revision's author may make a write (SubjectAccessReviews, cached).
    authors: crate::controller::author_check::AuthorChecks,
    /// Objects left drifted because their revision's author may not write them (or is not
    /// known), with the revision's Secret: each reported once per revision.
    refused: Mutex<HashMap<ObjectKey, String>>,
    /// Objects of releases whose newest revision's author is not known: the revision the
    /// reverter first saw each under, and the paths where it then differed from that revision
    /// (held at what is live, never written from it: [`revert_plan::held_paths`]).
    held: Mutex<HashMap<ObjectKey, (u64, Vec<String>)>>,
    /// Reverts of the same fields, and the fights with another writer stopped.
    fights: Mutex<crate::core::fight::Fights<ObjectKey>>,
}

/// What the watches saw of locked objects' `meta.helm.sh` annotations.
#[derive(Default)]
struct Proofs {
    /// The uid of each object when it was last seen carrying its release's annotations. Kept
    /// after a delete: the object was the release's, so creating it again is Helm's job done.
    carried: HashMap<ObjectKey, String>,
    /// Live objects a release renders that are not proven to be its own.
    unproven: HashSet<ObjectKey>,
    /// Deleted objects the reverter leaves to helm upgrade, each reported once.
    missing: HashSet<ObjectKey>,
}

impl Proofs {
    /// Whether `live` is the release's: it carries the release's annotations, or it is the same
    /// object (uid) the watches saw carry them. Records what it saw.
    fn observe(&mut self, key: &ObjectKey, release: &ReleaseKey, live: &Value) -> bool {
        let uid = live
            .pointer("/metadata/uid")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let proven = if crate::core::release::live_owner(live).as_ref() == Some(release) {
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

/// Why the reverter leaves a drifted object as it is, for its author.
enum Refusal<'a> {
    /// The revision's author lacks these accesses.
    Lacks(&'a [author::Access]),
    /// The author is not known, and the object is out of what is held for such a revision.
    NotKnown(author::Unknown, author::OutOfScope),
    /// The author is not known: these paths are held at what was live.
    Held(author::Unknown, &'a [String]),
}

/// How often a revert reads the object again after a concurrent write, before it waits a backoff.
const CONFLICT_RETRIES: usize = 8;

/// Why a revert failed: its retry waits a backoff.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RevertError {
    #[error("cannot find the API resource of {kind}")]
    Discovery {
        kind: String,
        #[source]
        source: kube::Error,
    },
    #[error("the API server refused")]
    Api(#[from] kube::Error),
    #[error("an object that does not read as JSON")]
    Json(#[from] serde_json::Error),
    #[error(transparent)]
    Confirm(#[from] crate::confirm::ConfirmError),
    #[error("cannot ask the API server what the revision's author may do")]
    Author(#[source] kube::Error),
    #[error("the object changed under each of {tries} writes")]
    Raced {
        tries: usize,
        #[source]
        source: Option<kube::Error>,
    },
}

/// Why one attempt at a revert did not happen.
#[derive(Debug)]
enum Failure {
    Error(RevertError),
    /// The object changed since it was read.
    Conflict(Conflict),
    /// A guarded write failed, and a fresh read shows the object unchanged: the failure was
    /// the write's own, not a concurrent write's.
    Unchanged,
}

impl From<RevertError> for Failure {
    fn from(error: RevertError) -> Self {
        Failure::Error(error)
    }
}

impl From<kube::Error> for Failure {
    fn from(error: kube::Error) -> Self {
        Failure::Error(RevertError::Api(error))
    }
}

impl From<serde_json::Error> for Failure {
    fn from(error: serde_json::Error) -> Self {
        Failure::Error(RevertError::Json(error))
    }
}

impl From<crate::confirm::ConfirmError> for Failure {
    fn from(error: crate::confirm::ConfirmError) -> Self {
        Failure::Error(RevertError::Confirm(error))
    }
}

impl Failure {
    /// A write's error; `guarded`: the resourceVersion its JSON patch tested. A failed test
    /// (422) or a change the API server saw under the write (409) means someone wrote since
    /// the read: a conflict, not an error of the revert.
    fn of(error: kube::Error, guarded: Option<&str>) -> Failure {
        match guarded {
            Some(rv) if matches!(&error, kube::Error::Api(s) if s.code == 422 || s.code == 409) => {
                Failure::Conflict(Conflict {
                    resource_version: rv.to_string(),
                    error,
                })
            }
            _ => Failure::Error(RevertError::Api(error)),
        }
    }
}

/// Objects whose revert waits (a backoff, a retry after an error): drift seen meanwhile is
/// that revert's job. Each such job used to take another step of the backoff, so one fight, or
/// one failure seen through a few watch events, put the object minutes away.
#[derive(Default)]
struct Scheduled(HashSet<ObjectKey>);

impl Scheduled {
    /// Whether to reconcile `job` now: a delayed job always (its wait is over), another only
    /// when no revert of its object is waiting.
    fn admit(&mut self, job: &Job) -> bool {
        if job.delayed {
            self.0.remove(&job.key);
            true
        } else {
            !self.0.contains(&job.key)
        }
    }

    /// A delayed job for `key` is on its way.
    fn wait(&mut self, key: ObjectKey) {
        self.0.insert(key);
    }
}

/// A resourceVersion-guarded write that failed: the version it tested, and the API server's answer.
#[derive(Debug)]
struct Conflict {
    resource_version: String,
    error: kube::Error,
}

enum Outcome {
    InSync,
    Skipped(&'static str),
    /// The revision's author may not make the write, or is not known.
    Refused,
    Reverted,
    Recreated,
    /// Fields another manager co-owned with the chart's values are Helm's alone again.
    OwnershipReturned,
}

/// What a reconcile writes.
enum Plan {
    /// The chart's values of the drifted fields; every field when the object is gone.
    Revert(Vec<Change>),
    /// No drift, but another field manager co-owns Helm's fields: hand them back.
    ReturnOwnership(revert_plan::OwnershipReturn),
}

/// What the worker remembers between jobs.
struct Worker {
    backoff: Backoff<ObjectKey>,
    /// Helm's writer of each object as last seen: a deleted object has none to read.
    last_writer: HashMap<ObjectKey, HelmWriter>,
    /// Differences a dry run showed the API server does not store, per object and revision.
    not_stored: HashMap<ObjectKey, (u64, Vec<Change>)>,
    scheduled: Scheduled,
    tx: mpsc::UnboundedSender<Job>,
}

impl Worker {
    fn new(tx: mpsc::UnboundedSender<Job>) -> Self {
        Worker {
            backoff: Backoff::new(
                Duration::from_secs(1),
                Duration::from_secs(300),
                Duration::from_secs(600),
            ),
            last_writer: HashMap::new(),
            not_stored: HashMap::new(),
            scheduled: Scheduled::default(),
            tx,
        }
    }

    /// Queues `job` again after `delay`; drift seen meanwhile is that job's.
    fn later(&mut self, job: &Job, delay: Duration) {
        let job = Job {
            delayed: true,
            ..job.clone()
        };
        self.scheduled.wait(job.key.clone());
        let tx = self.tx.clone();
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            let _ = tx.send(job);
        });
    }
}

impl Reverter {
    // The reverter's collaborators, each shared with the server; a struct would only rename them.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        client: Client,
        index: Arc<crate::index_store::IndexStore>,
        config: Arc<Config>,
        schema: Arc<crate::core::schema::SharedSchema>,
        confirm: Arc<dyn Confirm>,
        leader: watch::Receiver<bool>,
        metrics: Arc<Metrics>,
        recorder: Recorder,
        recreate: bool,
    ) -> Self {
        Reverter {
            index,
            config,
            schema,
            confirm,
            leader,
            metrics,
            recorder,
            resources: Mutex::new(HashMap::new()),
            attributions: std::sync::Mutex::new(HashMap::new()),
            recreate,
            proofs: Mutex::new(Proofs::default()),
            authors: crate::controller::author_check::AuthorChecks::new(client.clone()),
            refused: Mutex::new(HashMap::new()),
            held: Mutex::new(HashMap::new()),
            fights: Mutex::new(Default::default()),
            client,
        }
    }

    /// Runs until aborted: watches follow the index; one worker reverts.
    pub(crate) async fn run(self: Arc<Self>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let follow = tokio::spawn(self.clone().follow_index(tx.clone()));
        self.work(rx, tx).await;
        follow.abort();
    }

    /// Starts and stops one watch per kind the releases own, and queues the objects of
    /// releases that just became revertable or changed (a deleted object shows up here).
    async fn follow_index(self: Arc<Self>, tx: mpsc::UnboundedSender<Job>) {
        let mut updates = self.index.subscribe();
        let mut watches: HashMap<(String, String), (String, tokio::task::JoinHandle<()>)> =
            HashMap::new();
        let mut previous = self.index.snapshot();
        loop {
            let index = self.index.snapshot();
            let mut wanted: HashMap<(String, String), String> = HashMap::new();
            for state in index.releases() {
                for object in state.objects.iter().flatten() {
                    wanted
                        .entry((object.group.to_string(), object.kind.to_string()))
                        .or_insert_with(|| object.version.to_string());
                }
            }
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
                    let task = tokio::spawn(
                        self.clone()
                            .watch_kind(GroupVersionKind::gvk(&group, &version, &kind), tx.clone()),
                    );
                    slot.insert((version, task));
                }
            }
            for state in index.releases() {
                let before = previous.release(&state.key);
                // A LockException that opens or closes changes what is left alone: when one
                // closes, the drift it left behind is reverted.
                let changed = before.is_none_or(|b| !Arc::ptr_eq(b, state))
                    || previous.registration(&state.key) != index.registration(&state.key)
                    || previous.exceptions(&state.key) != index.exceptions(&state.key);
                if !changed {
                    continue;
                }
                for object in state.objects.iter().flatten() {
                    if revertable(&self.config, &index, object).is_some() {
                        let _ = tx.send(Job {
                            key: ObjectKey::of(object),
                            writer: None,
                            delayed: false,
                        });
                    }
                }
            }
            previous = index;
            if updates.changed().await.is_err() {
                return;
            }
        }
    }

    async fn resource(&self, gvk: &GroupVersionKind) -> Result<(ApiResource, bool), RevertError> {
        if let Some(found) = self.resources.lock().expect("not poisoned").get(gvk) {
            return Ok(found.clone());
        }
        let (ar, caps) =
            pinned_kind(&self.client, gvk)
                .await
                .map_err(|source| RevertError::Discovery {
                    kind: format!("{}/{} {}", gvk.group, gvk.version, gvk.kind),
                    source,
                })?;
        let found = (ar, caps.scope == Scope::Namespaced);
        self.resources
            .lock()
            .expect("not poisoned")
            .insert(gvk.clone(), found.clone());
        Ok(found)
    }

    fn api(
        &self,
        ar: &ApiResource,
        namespaced: bool,
        namespace: Option<&str>,
    ) -> Api<DynamicObject> {
        match (namespaced, namespace) {
            (true, Some(ns)) => Api::namespaced_with(self.client.clone(), ns, ar),
            _ => Api::all_with(self.client.clone(), ar),
        }
    }

    /// Watches one kind cluster-wide and queues locked objects that drifted or vanished.
    async fn watch_kind(self: Arc<Self>, gvk: GroupVersionKind, tx: mpsc::UnboundedSender<Job>) {
        let mut wait = Duration::from_millis(500);
        let (ar, _) = loop {
            match self.resource(&gvk).await {
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
        let mut listed: HashSet<(Option<String>, String)> = HashSet::new();
        while let Some(event) = stream.next().await {
            match event {
                Ok(WatchEvent::Init) => listed.clear(),
                Ok(WatchEvent::InitApply(object)) => {
                    listed.insert((
                        object.metadata.namespace.clone(),
                        object.metadata.name.clone().unwrap_or_default(),
                    ));
                    self.check_live(&gvk, &object, &tx);
                }
                Ok(WatchEvent::Apply(object)) => self.check_live(&gvk, &object, &tx),
                Ok(WatchEvent::InitDone) => {
                    // Locked objects missing from the full list were deleted.
                    let index = self.index.snapshot();
                    for state in index.releases() {
                        for object in state.objects.iter().flatten() {
                            if object.group == gvk.group
                                && object.kind == gvk.kind
                                && !listed.contains(&(
                                    object.namespace.as_deref().map(str::to_string),
                                    object.name.to_string(),
                                ))
                                && revertable(&self.config, &index, object).is_some()
                            {
                                let _ = tx.send(Job {
                                    key: ObjectKey::of(object),
                                    writer: None,
                                    delayed: false,
                                });
                            }
                        }
                    }
                    listed.clear();
                }
                Ok(WatchEvent::Delete(object)) => {
                    let index = self.index.snapshot();
                    if let Some(locked) = self.locked(&index, &gvk, &object) {
                        let live = serde_json::to_value(&object).ok();
                        if let Some(live) = &live {
                            // Seen carrying the release's annotations as it went: it was the
                            // release's, and may be created again.
                            let mut proofs = self.proofs();
                            proofs.observe(&ObjectKey::of(locked), &locked.release, live);
                            proofs.unproven.remove(&ObjectKey::of(locked));
                            self.metrics
                                .unproven_objects
                                .set(proofs.unproven.len() as i64);
                        }
                        if revertable(&self.config, &index, locked).is_some() {
                            let apply_method = index
                                .release(&locked.release)
                                .and_then(|s| s.newest())
                                .and_then(|r| r.apply_method.clone());
                            let _ = tx.send(Job {
                                key: ObjectKey::of(locked),
                                writer: Some(revert_plan::helm_writer(
                                    live.as_ref(),
                                    apply_method.as_deref(),
                                )),
                                delayed: false,
                            });
                        }
                    }
                }
                Err(e) => {
                    self.metrics.watch_restarts.inc();
                    tracing::warn!(group = %gvk.group, kind = %gvk.kind, error = %e, "watch failed; retrying with backoff");
                }
            }
        }
    }

    fn locked<'i>(
        &self,
        index: &'i Index,
        gvk: &GroupVersionKind,
        object: &DynamicObject,
    ) -> Option<&'i Arc<LockedObject>> {
        let name = object.metadata.name.as_deref()?;
        index.lookup(
            &gvk.group,
            &gvk.kind,
            object.metadata.namespace.as_deref(),
            name,
        )
    }

    /// Queues a watched object when it is locked and differs from the chart.
    fn check_live(
        &self,
        gvk: &GroupVersionKind,
        object: &DynamicObject,
        tx: &mpsc::UnboundedSender<Job>,
    ) {
        let index = self.index.snapshot();
        let Some(locked) = self.locked(&index, gvk, object) else {
            return;
        };
        if revertable(&self.config, &index, locked).is_none() {
            return;
        }
        let Ok(live) = serde_json::to_value(object) else {
            return;
        };
        if !self.observe(locked, &live) {
            return;
        }
        let schema = self.schema.load();
        self.check_attribution(&schema, locked, &live);
        let mut ignore = index.left_alone(&self.config, locked, crate::lock_exception::now());
        if let Some(newest) = index.release(&locked.release).and_then(|s| s.newest()) {
            let seen = |ignore: &[String]| {
                let ignore: Vec<&str> = ignore.iter().map(String::as_str).collect();
                revert_plan::drift(&schema, locked, &live, &ignore)
            };
            match self.held_paths(locked, newest, || seen(&ignore)) {
                // Newly held: reported by the worker.
                Some((held, true)) if !held.is_empty() => {
                    let _ = tx.send(Job {
                        key: ObjectKey::of(locked),
                        writer: None,
                        delayed: false,
                    });
                    ignore.extend(held);
                }
                Some((held, _)) => ignore.extend(held),
                None => self.release_hold(locked),
            }
        }
        let ignore: Vec<&str> = ignore.iter().map(String::as_str).collect();
        let drifted = !revert_plan::drift(&schema, locked, &live, &ignore).is_empty();
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
            let Some((helm, _)) = crate::core::fields_v1::helm_fields(&live, None) else {
                return true;
            };
            revert_plan::ownership_return(&schema, locked, &live, helm, &ignore).is_some()
        };
        if drifted || co_owned() {
            let _ = tx.send(Job {
                key: ObjectKey::of(locked),
                writer: None,
                delayed: false,
            });
        }
    }

    fn held(&self) -> std::sync::MutexGuard<'_, HashMap<ObjectKey, (u64, Vec<String>)>> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// For a revision whose author is not known: the paths where `object` differed from it when
    /// the reverter first saw the object under it (`drift` is asked only then), held at what is
    /// live. `None` when the author is known.
    fn held_paths(
        &self,
        object: &LockedObject,
        newest: &crate::core::index::Revision,
        drift: impl FnOnce() -> Vec<Change>,
    ) -> Option<(Vec<String>, bool)> {
        let author::Authorship::Unknown(why) = &newest.author else {
            return None;
        };
        let namespace = object.namespace.as_deref();
        author::unknown_author_scope(*why, &object.group, namespace, &object.release.namespace)
            .ok()?;
        let key = ObjectKey::of(object);
        let mut held = self.held();
        if let Some((revision, paths)) = held.get(&key) {
            if *revision == newest.revision {
                return Some((paths.clone(), false));
            }
        }
        let paths = revert_plan::held_paths(&drift());
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
    fn release_hold(&self, object: &LockedObject) {
        let released = self.held().remove(&ObjectKey::of(object));
        if released.is_some_and(|(_, p)| !p.is_empty()) {
            self.metrics.held_objects.dec();
        }
    }

    /// What the reverter may do for the newest revision when its author is not known
    /// (docs/security.md): `Ok(None)` when the author is known; `Ok(Some(paths))` to hold those
    /// paths at what is live; `Err` when nothing is written (reported).
    async fn unknown_author(
        &self,
        state: &ReleaseState,
        object: &LockedObject,
        live: Option<&Value>,
        ignore: &[String],
    ) -> Result<Option<Vec<String>>, Outcome> {
        let Some(newest) = state.newest() else {
            return Ok(None);
        };
        let author::Authorship::Unknown(why) = &newest.author else {
            return Ok(None);
        };
        let namespace = object.namespace.as_deref();
        if let Err(out) =
            author::unknown_author_scope(*why, &object.group, namespace, &object.release.namespace)
        {
            self.report_refusal(newest, object, Refusal::NotKnown(*why, out))
                .await;
            return Err(Outcome::Refused);
        }
        let Some(live) = live else {
            let why = "its release's newest revision has no known author, and helm-locker creates nothing for it";
            self.report_missing(state, object, why).await;
            return Err(Outcome::Skipped("missing; left to helm upgrade"));
        };
        let schema = self.schema.load();
        let drift = || {
            let ignore: Vec<&str> = ignore.iter().map(String::as_str).collect();
            revert_plan::drift(&schema, object, live, &ignore)
        };
        let Some((paths, _)) = self.held_paths(object, newest, drift) else {
            return Ok(None);
        };
        if !paths.is_empty() {
            self.report_refusal(newest, object, Refusal::Held(*why, &paths))
                .await;
        }
        Ok(Some(paths))
    }

    fn proofs(&self) -> std::sync::MutexGuard<'_, Proofs> {
        self.proofs.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether a live locked object is proven to be its release's ([`Proofs::observe`]); keeps
    /// the gauges current.
    fn observe(&self, locked: &LockedObject, live: &Value) -> bool {
        let mut proofs = self.proofs();
        let proven = proofs.observe(&ObjectKey::of(locked), &locked.release, live);
        self.metrics
            .unproven_objects
            .set(proofs.unproven.len() as i64);
        self.metrics
            .missing_objects
            .set(proofs.missing.len() as i64);
        if !proven {
            tracing::debug!(object = %locked.describe(), release = %locked.release, "does not carry the release's meta.helm.sh annotations; neither locked nor reverted");
        }
        proven
    }

    /// A deleted object the reverter will not create: reported once (while it stays missing) as
    /// a Warning Event on the release's newest Secret, and counted.
    async fn report_missing(&self, state: &ReleaseState, object: &LockedObject, why: &str) {
        let key = ObjectKey::of(object);
        {
            let mut proofs = self.proofs();
            let new = proofs.missing.insert(key);
            self.metrics
                .missing_objects
                .set(proofs.missing.len() as i64);
            if !new {
                return;
            }
        }
        tracing::warn!(object = %object.describe(), release = %object.release, why, "locked object is missing; left to helm upgrade");
        let Some(secret) = state.newest().map(|r| r.secret.clone()) else {
            return;
        };
        let reference = k8s_openapi::api::core::v1::ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Secret".into()),
            namespace: Some(secret.namespace),
            name: Some(secret.name),
            ..Default::default()
        };
        let event = Event {
            type_: EventType::Warning,
            reason: "LockedObjectMissing".into(),
            note: Some(format!(
                "{} of release {} does not exist; helm-locker does not create it ({why}). Run helm upgrade to create it.",
                object.describe(),
                object.release
            )),
            action: "Report".into(),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&event, &reference).await {
            tracing::debug!(error = %e, "could not record the LockedObjectMissing event");
        }
    }

    /// A write refused for the revision's author: a warning log line and a Warning Event on the
    /// revision's Secret (`AuthorLacksRights` naming the author and what they may not do, or
    /// `UnknownAuthor`), once per object and revision; counted in `author_refused_objects`.
    async fn report_refusal(
        &self,
        revision: &crate::core::index::Revision,
        object: &LockedObject,
        refusal: Refusal<'_>,
    ) {
        let key = ObjectKey::of(object);
        let secret = revision.secret.to_string();
        {
            let mut refused = self.refused.lock().unwrap_or_else(|e| e.into_inner());
            let new = refused.insert(key, secret.clone()).as_ref() != Some(&secret);
            self.metrics
                .author_refused_objects
                .set(refused.len() as i64);
            if !new {
                return;
            }
        }
        let (object_name, release, number) =
            (object.describe(), &object.release, revision.revision);
        let (reason, note) = match refusal {
            Refusal::Lacks(accesses) => {
                let refused: Vec<String> = accesses.iter().map(ToString::to_string).collect();
                tracing::warn!(object = %object_name, release = %release, revision = number, author = %revision.author, refused = ?refused, "drift not reverted: the revision's author may not make the write");
                (
                    "AuthorLacksRights",
                    format!(
                        "helm-locker does not write {object_name} from release {release} revision {number}: its author {} may not {}. A revision acts only with its author's rights; helm upgrade by someone who may makes the release's objects locked and reverted again.",
                        revision.author,
                        refused.join(", ")
                    ),
                )
            }
            Refusal::NotKnown(why, out) => {
                tracing::warn!(object = %object_name, release = %release, revision = number, why = why.as_str(), scope = out.as_str(), "drift not reverted: the revision's author is not known");
                (
                    "UnknownAuthor",
                    format!(
                        "helm-locker does not write {object_name} from release {release} revision {number}: the revision's author is not known ({}), and {}. helm upgrade makes the release's objects reverted again.",
                        why.as_str(),
                        out.as_str()
                    ),
                )
            }
            Refusal::Held(why, paths) => (
                "UnknownAuthor",
                format!(
                    "helm-locker holds {object_name} at what was live when it first saw it under release {release} revision {number}, and never writes that revision's {}: its author is not known ({}). helm upgrade makes the release's objects reverted to the chart again.",
                    paths.join(", "),
                    why.as_str()
                ),
            ),
        };
        let reference = k8s_openapi::api::core::v1::ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Secret".into()),
            namespace: Some(revision.secret.namespace.clone()),
            name: Some(revision.secret.name.clone()),
            ..Default::default()
        };
        // The object as the related one: one Event per object refused, not one series per Secret.
        let related = k8s_openapi::api::core::v1::ObjectReference {
            api_version: Some(if object.group.is_empty() {
                object.version.to_string()
            } else {
                format!("{}/{}", object.group, object.version)
            }),
            kind: Some(object.kind.to_string()),
            namespace: object.namespace.as_deref().map(str::to_string),
            name: Some(object.name.to_string()),
            ..Default::default()
        };
        let event = Event {
            type_: EventType::Warning,
            reason: reason.into(),
            note: Some(note),
            action: "Refuse".into(),
            secondary: Some(related),
        };
        if let Err(e) = self.recorder.publish(&event, &reference).await {
            tracing::debug!(error = %e, "could not record the {reason} event");
        }
    }

    fn fights(&self) -> std::sync::MutexGuard<'_, fight::Fights<ObjectKey>> {
        self.fights.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A fight just stopped: a warning log line, a Warning Event `RevertFight` on the object
    /// naming the other writer, and the `revert_fights` gauge.
    async fn report_fight(
        &self,
        object: &LockedObject,
        ar: &ApiResource,
        live: Option<&DynamicObject>,
        writer: &HelmWriter,
        stopped: &fight::Fight,
    ) {
        let stopped_now = self.fights().stopped();
        self.metrics.revert_fights.set(stopped_now as i64);
        let other = live
            .and_then(|l| serde_json::to_value(l).ok())
            .and_then(|l| fight::other_writer(&l, writer.manager(), "helm-locker"))
            .unwrap_or_else(|| "another writer".into());
        tracing::warn!(object = %object.describe(), release = %object.release, revision = stopped.revision, paths = %stopped.paths, other = %other, "a fight with another writer: reverting stopped");
        let Some(live) = live else {
            return;
        };
        let event = Event {
            type_: EventType::Warning,
            reason: "RevertFight".into(),
            note: Some(format!(
                "helm-locker stopped reverting {} of {} to release {} revision {}: it put them back {} times within {} and {other} changed them again each time. The admission lock stays; a new revision (helm upgrade) or a restart of helm-locker resumes reverting.",
                stopped.paths,
                object.describe(),
                object.release,
                stopped.revision,
                fight::FIGHT_REVERTS,
                humantime::format_duration(fight::FIGHT_WINDOW),
            )),
            action: "Stop".into(),
            secondary: None,
        };
        if let Err(e) = self.publish(&event, &live.object_ref(ar)).await {
            tracing::debug!(error = %e, "could not record the RevertFight event");
        }
    }

    fn clear_refusal(&self, key: &ObjectKey) {
        let mut refused = self.refused.lock().unwrap_or_else(|e| e.into_inner());
        if refused.remove(key).is_some() {
            self.metrics
                .author_refused_objects
                .set(refused.len() as i64);
        }
    }

    /// Compares the lock with the managedFields entry the API server wrote for Helm, once per
    /// entry: a difference is a schema gap (a field locked that Helm does not own, or the
    /// reverse), counted and logged so it shows in production rather than as a bypass.
    fn check_attribution(
        &self,
        schema: &crate::core::schema::Schema,
        locked: &LockedObject,
        live: &Value,
    ) {
        // Re-compared only when Helm's entry changes (a new apply), not on every status update.
        let Some((_, fields)) = crate::core::fields_v1::helm_fields(live, None) else {
            return;
        };
        let stamp = fields.to_string();
        let key = ObjectKey::of(locked);
        {
            let mut seen = self.attributions.lock().unwrap_or_else(|e| e.into_inner());
            if seen.get(&key) == Some(&stamp) {
                return;
            }
            seen.insert(key, stamp);
        }
        if let Some(attribution) = revert_plan::attribution(schema, locked, live) {
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

    /// Reverts queued objects while leading; holds them while following.
    async fn work(&self, mut rx: mpsc::UnboundedReceiver<Job>, tx: mpsc::UnboundedSender<Job>) {
        let mut leader = self.leader.clone();
        let mut held: HashMap<ObjectKey, Job> = HashMap::new();
        let mut worker = Worker::new(tx.clone());
        let mut last_write: Option<Instant> = None;
        loop {
            let job = tokio::select! {
                job = rx.recv() => match job { Some(job) => job, None => return },
                changed = leader.changed() => {
                    if changed.is_err() { return; }
                    if *leader.borrow() {
                        for (_, job) in held.drain() {
                            let _ = tx.send(job);
                        }
                    }
                    continue;
                }
            };
            if !*leader.borrow() {
                held.insert(job.key.clone(), job);
                continue;
            }
            if let Some(writer) = &job.writer {
                worker.last_writer.insert(job.key.clone(), writer.clone());
            }
            if !worker.scheduled.admit(&job) {
                tracing::debug!(object = ?job.key, "a revert is already scheduled");
                continue;
            }
            // Global rate limit: however many objects drift, at most one write every
            // MIN_WRITE_INTERVAL (a bad chart across 1,000 releases cannot flood the API server).
            if let Some(last) = last_write {
                tokio::time::sleep_until((last + MIN_WRITE_INTERVAL).into()).await;
            }
            let started = Instant::now();
            let result = self.reconcile(&mut worker, &job).await;
            let label = match &result {
                Ok(Outcome::InSync) | Ok(Outcome::Skipped(_)) => None,
                Ok(Outcome::Refused) => Some("refused"),
                Ok(Outcome::Reverted) => Some("reverted"),
                Ok(Outcome::Recreated) => Some("recreated"),
                Ok(Outcome::OwnershipReturned) => Some("ownership_returned"),
                Err(_) => Some("failed"),
            };
            if matches!(
                result,
                Ok(Outcome::Reverted | Outcome::Recreated | Outcome::OwnershipReturned)
            ) {
                last_write = Some(Instant::now());
            }
            if let Some(result) = label {
                self.metrics
                    .reverts
                    .get_or_create(&ResultLabels { result })
                    .inc();
            }
            match result {
                Ok(Outcome::Skipped(why)) => {
                    tracing::debug!(object = ?job.key, why, "not reverted")
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(kind = %job.key.kind, namespace = ?job.key.namespace, name = %job.key.name, error = %crate::error_chain::with_causes(&e), "revert failed; retrying with backoff");
                    let delay = worker
                        .backoff
                        .next_delay(&job.key, Instant::now())
                        .max(Duration::from_secs(1));
                    worker.later(&job, delay);
                }
            }
            if started.elapsed() > Duration::from_secs(5) {
                tracing::debug!(elapsed = ?started.elapsed(), "slow revert");
            }
            worker.backoff.prune(Instant::now());
            self.fights().prune(Instant::now(), |_| true);
        }
    }

    /// Puts the chart's values back on a live object as Helm's field manager would: a forced
    /// server-side apply, or a JSON patch guarded by the resource version. `dry_run`: the API
    /// server answers what it would store, and stores nothing.
    #[allow(clippy::too_many_arguments)]
    async fn write(
        &self,
        api: &Api<DynamicObject>,
        name: &str,
        writer: &HelmWriter,
        desired: &Value,
        changes: &[Change],
        live: &Value,
        dry_run: bool,
    ) -> Result<DynamicObject, Failure> {
        let guarded = match writer {
            HelmWriter::Apply(_) => None,
            HelmWriter::Update(_) => live
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str),
        };
        match writer {
            HelmWriter::Apply(manager) => {
                let params = PatchParams {
                    dry_run,
                    ..PatchParams::apply(manager).force()
                };
                api.patch(name, &params, &Patch::Apply(desired)).await
            }
            HelmWriter::Update(manager) => {
                let rv = live
                    .pointer("/metadata/resourceVersion")
                    .and_then(Value::as_str);
                let params = PatchParams {
                    field_manager: Some(manager.clone()),
                    dry_run,
                    ..PatchParams::default()
                };
                api.patch(
                    name,
                    &params,
                    &Patch::<()>::Json(revert_plan::revert_patch(changes, rv)),
                )
                .await
            }
        }
        .map_err(|e| Failure::of(e, guarded))
    }

    /// [`Self::reconcile_once`], again at once (reading the object again) when the object
    /// changed between the read and a resourceVersion-guarded write: the deployment controller
    /// writes a Deployment's status right after a `kubectl edit`, and waiting a backoff for that
    /// made client-side reverts take seconds.
    async fn reconcile(&self, worker: &mut Worker, job: &Job) -> Result<Outcome, RevertError> {
        let mut stale: Option<Conflict> = None;
        for _ in 0..=CONFLICT_RETRIES {
            match self.reconcile_once(worker, job, stale.as_ref()).await {
                Ok(outcome) => return Ok(outcome),
                Err(Failure::Error(e)) => return Err(e),
                Err(Failure::Unchanged) => {
                    return Err(match stale {
                        Some(conflict) => RevertError::Api(conflict.error),
                        None => RevertError::Raced {
                            tries: 0,
                            source: None,
                        },
                    })
                }
                Err(Failure::Conflict(conflict)) => {
                    tracing::debug!(kind = %job.key.kind, namespace = ?job.key.namespace, name = %job.key.name, resource_version = %conflict.resource_version, "the object changed between the read and the write; reading it again");
                    stale = Some(conflict);
                }
            }
        }
        Err(RevertError::Raced {
            tries: CONFLICT_RETRIES + 1,
            source: stale.map(|c| c.error),
        })
    }

    /// One read, plan and write. `stale`: the write just failed on a resourceVersion read
    /// before; if the object still has it, the failure was not a concurrent write.
    async fn reconcile_once(
        &self,
        worker: &mut Worker,
        job: &Job,
        stale: Option<&Conflict>,
    ) -> Result<Outcome, Failure> {
        let key = &job.key;
        let index = self.index.snapshot();
        let Some(object) = index
            .lookup(&key.group, &key.kind, key.namespace.as_deref(), &key.name)
            .cloned()
        else {
            return Ok(Outcome::Skipped("no longer locked"));
        };
        let Some((state, revision)) = revertable(&self.config, &index, &object) else {
            return Ok(Outcome::Skipped("release not revertable"));
        };
        let apply_method = state.newest().and_then(|r| r.apply_method.clone());
        let (ar, namespaced) = self.resource(&key.gvk()).await?;
        let api = self.api(&ar, namespaced, key.namespace.as_deref());
        let live = self.read(&api, &key.name, stale).await?;
        let mut ignore = index.left_alone(&self.config, &object, crate::lock_exception::now());
        if ignore.iter().any(String::is_empty) {
            return Ok(Outcome::Skipped("opened by a LockException"));
        }
        // A revision whose author is not known writes none of its content (docs/security.md).
        let unknown_author = match self
            .unknown_author(state, &object, live.as_ref(), &ignore)
            .await
        {
            Ok(held) => held.is_some_and(|held| {
                ignore.extend(held);
                true
            }),
            Err(outcome) => return Ok(outcome),
        };
        let ignore: Vec<&str> = ignore.iter().map(String::as_str).collect();
        let writer = revert_plan::helm_writer_seen(
            live.as_ref(),
            apply_method.as_deref(),
            worker.last_writer.get(key),
        );
        let plan = self
            .plan(
                worker,
                &index,
                state,
                &object,
                revision,
                live.as_ref(),
                &writer,
                &ignore,
            )
            .await;
        let plan = match plan {
            Ok(plan) => plan,
            Err(outcome) => return Ok(outcome),
        };
        // Helm may be at work, or the index behind: the API server has the last word.
        match self.confirm.newest_revision(&object.release).await? {
            Some((fresh, Status::Deployed)) if fresh == revision => {}
            _ => {
                return Ok(Outcome::Skipped(
                    "the release changed; waiting for the index",
                ))
            }
        }
        worker.last_writer.insert(key.clone(), writer.clone());
        let desired = revert_plan::desired_object(&object, live.as_ref(), &ignore);
        // The revision speaks only with its author's rights (docs/security.md); one whose
        // author is not known writes only what was live, held above.
        if !unknown_author {
            if let Some(refused) = self
                .authorize(&index, state, &object, &ar, live.is_some(), &desired)
                .await?
            {
                return Ok(refused);
            }
        }
        let fixed = match (&plan, &live) {
            (Plan::Revert(changes), Some(live)) => {
                let preview = self
                    .preview(&api, &object, &writer, &desired, changes, live, &ignore)
                    .await?;
                match preview {
                    Some(fixed) => fixed,
                    None => {
                        worker
                            .not_stored
                            .insert(key.clone(), (revision, changes.clone()));
                        return Ok(Outcome::InSync);
                    }
                }
            }
            _ => String::new(),
        };
        let fought = match (&plan, &live) {
            (Plan::Revert(changes), Some(_)) => revert_plan::describe_paths(changes),
            (Plan::Revert(_), None) => "(the whole object, created again)".to_string(),
            (Plan::ReturnOwnership(back), _) => format!("(ownership of {})", back.describe()),
        };
        if let Some(held) = self
            .hold(
                worker,
                job,
                stale,
                &object,
                &ar,
                live.as_ref(),
                &writer,
                revision,
                &fought,
            )
            .await
        {
            return Ok(held);
        }
        let (written, outcome, note) = match (&plan, &live) {
            (Plan::Revert(changes), Some(live)) => {
                let written = self
                    .write(&api, &key.name, &writer, &desired, changes, live, false)
                    .await?;
                tracing::info!(object = %object.describe(), release = %object.release, revision, paths = %fixed, manager = writer.manager(), "drift reverted");
                let note = format!("helm-locker put back {fixed} to the values of release {} revision {revision}, as field manager {}", object.release, writer.manager());
                (written, Outcome::Reverted, note)
            }
            (Plan::Revert(_), None) => {
                let written = self.recreate(&api, &key.name, &writer, desired).await?;
                tracing::info!(object = %object.describe(), release = %object.release, revision, manager = writer.manager(), "deleted object recreated");
                let note = format!(
                    "helm-locker recreated this object from release {} revision {revision}",
                    object.release
                );
                (written, Outcome::Recreated, note)
            }
            (Plan::ReturnOwnership(back), live) => {
                let written = self
                    .return_ownership(&api, &object, back, live.as_ref(), &writer, revision)
                    .await?;
                let note = format!("helm-locker handed back to Helm's field manager {} what another manager co-owned with the values of release {} revision {revision}: {}", writer.manager(), object.release, back.describe());
                (written, Outcome::OwnershipReturned, note)
            }
        };
        worker.not_stored.remove(key);
        self.fights()
            .reverted(key, revision, &fought, Instant::now());
        let event = Event {
            type_: EventType::Normal,
            reason: "Reverted".into(),
            note: Some(note),
            action: "Revert".into(),
            secondary: None,
        };
        if let Err(e) = self.publish(&event, &written.object_ref(&ar)).await {
            tracing::debug!(error = %e, "could not record the Reverted event");
        }
        Ok(outcome)
    }

    /// A fresh read of the object (`None`: it is gone). `stale`: a write failed on the
    /// resourceVersion this read must differ from, else that failure was not a concurrent write.
    async fn read(
        &self,
        api: &Api<DynamicObject>,
        name: &str,
        stale: Option<&Conflict>,
    ) -> Result<Option<Value>, Failure> {
        let live = api.get_opt(name).await?;
        let live = live.as_ref().map(serde_json::to_value).transpose()?;
        if let (Some(stale), Some(live)) = (stale, &live) {
            let rv = live
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str);
            if rv == Some(stale.resource_version.as_str()) {
                return Err(Failure::Unchanged);
            }
        }
        Ok(live)
    }

    /// What to write, from the fresh read: the drifted fields, the whole object when it is
    /// gone (and may be created), or the fields another manager co-owns with Helm's values
    /// (a server-side release without drift); or why nothing is written.
    #[allow(clippy::too_many_arguments)]
    async fn plan(
        &self,
        worker: &Worker,
        index: &Index,
        state: &ReleaseState,
        object: &Arc<LockedObject>,
        revision: u64,
        live: Option<&Value>,
        writer: &HelmWriter,
        ignore: &[&str],
    ) -> Result<Plan, Outcome> {
        let key = ObjectKey::of(object);
        let Some(live) = live else {
            if !revert_plan::recreate_when_deleted(object) {
                return Err(Outcome::Skipped("deleted with its owner"));
            }
            let seen = self.proofs().carried.contains_key(&key);
            let vouched = index.registration(&object.release).is_some();
            let why = if !self.recreate {
                Some("recreation is off (--recreate=false)")
            } else if !seen && !vouched {
                Some("it was never seen carrying the release's meta.helm.sh annotations, and no HelmRelease vouches for the release")
            } else {
                None
            };
            if let Some(why) = why {
                self.report_missing(state, object, why).await;
                return Err(Outcome::Skipped("missing; left to helm upgrade"));
            }
            return Ok(Plan::Revert(vec![]));
        };
        if !self.observe(object, live) {
            return Err(Outcome::Skipped(
                "does not carry the release's meta.helm.sh annotations",
            ));
        }
        let schema = self.schema.load();
        let changes = revert_plan::drift(&schema, object, live, ignore);
        if changes.is_empty() {
            // Helm's field manager is read from its entry, or was seen as the object went; it
            // is not guessed (the Helm SDK applies under the program's name).
            let known = crate::core::fields_v1::helm_fields(live, None).is_some()
                || matches!(worker.last_writer.get(&key), Some(HelmWriter::Apply(_)));
            return match writer {
                HelmWriter::Apply(_) if !known => Err(Outcome::InSync),
                HelmWriter::Apply(helm) => {
                    revert_plan::ownership_return(&schema, object, live, helm, ignore)
                        .map(Plan::ReturnOwnership)
                        .ok_or(Outcome::InSync)
                }
                HelmWriter::Update(_) => Err(Outcome::InSync),
            };
        }
        // The same difference a dry run already showed the API server does not store.
        if worker.not_stored.get(&key) == Some(&(revision, changes.clone())) {
            return Err(Outcome::InSync);
        }
        Ok(Plan::Revert(changes))
    }

    /// Whether the newest revision's author may make the write (docs/security.md): `None`
    /// when granted, else the refusal, reported.
    async fn authorize(
        &self,
        index: &Index,
        state: &ReleaseState,
        object: &LockedObject,
        ar: &ApiResource,
        exists: bool,
        desired: &Value,
    ) -> Result<Option<Outcome>, Failure> {
        let key = ObjectKey::of(object);
        let write = if exists {
            author::Write::Patch
        } else {
            author::Write::Create
        };
        let role = referenced_role(index, object, desired);
        let needed = author::needs(
            write,
            &key.group,
            &ar.plural,
            key.namespace.as_deref(),
            &key.name,
            desired,
            role.as_ref(),
        );
        let Some(newest) = state.newest() else {
            return Ok(Some(Outcome::Skipped("release not revertable")));
        };
        let permission = self
            .authors
            .permission(&newest.author, &needed)
            .await
            .map_err(RevertError::Author)?;
        let refusal = match &permission {
            author::Permission::Granted => None,
            author::Permission::Refused(accesses) => Some(Refusal::Lacks(accesses)),
            author::Permission::NoAuthor(why) => {
                Some(Refusal::NotKnown(*why, author::OutOfScope::NotHeld(*why)))
            }
        };
        if let Some(refusal) = refusal {
            self.report_refusal(newest, object, refusal).await;
            return Ok(Some(Outcome::Refused));
        }
        self.clear_refusal(&key);
        Ok(None)
    }

    /// The revert as a dry run: what it would not change is not stored by the API server as
    /// the chart writes it (`hostNetwork: false`), and writing it would start again after every
    /// backoff. The paths the write puts back, or `None` when it would put back nothing.
    #[allow(clippy::too_many_arguments)]
    async fn preview(
        &self,
        api: &Api<DynamicObject>,
        object: &LockedObject,
        writer: &HelmWriter,
        desired: &Value,
        changes: &[Change],
        live: &Value,
        ignore: &[&str],
    ) -> Result<Option<String>, Failure> {
        let preview = self
            .write(api, &object.name, writer, desired, changes, live, true)
            .await?;
        let preview = serde_json::to_value(&preview)?;
        let after = revert_plan::drift(&self.schema.load(), object, &preview, ignore);
        if !revert_plan::write_would_fix(changes, &after) {
            tracing::debug!(object = %object.describe(), paths = %revert_plan::describe_paths(changes), "differs from the chart only where the API server stores nothing; not reverted");
            return Ok(None);
        }
        // What the write puts back: the rest differs before and after it.
        Ok(Some(revert_plan::describe_paths(
            revert_plan::fixed_by_write(changes, &after),
        )))
    }

    /// Why the write waits or does not happen: a backoff after recent reverts, a fight with
    /// another writer (stopped, [`crate::core::fight`]), a lost lease. `None`: write now.
    #[allow(clippy::too_many_arguments)]
    async fn hold(
        &self,
        worker: &mut Worker,
        job: &Job,
        stale: Option<&Conflict>,
        object: &LockedObject,
        ar: &ApiResource,
        live: Option<&Value>,
        writer: &HelmWriter,
        revision: u64,
        fought: &str,
    ) -> Option<Outcome> {
        let key = &job.key;
        // A retry after a conflict is the same revert, already counted by the backoff.
        if !job.delayed && stale.is_none() {
            let delay = worker.backoff.next_delay(key, Instant::now());
            if !delay.is_zero() {
                tracing::info!(kind = %key.kind, namespace = ?key.namespace, name = %key.name, ?delay, "drifted again soon after a revert; backing off");
                worker.later(job, delay);
                return Some(Outcome::Skipped("backing off"));
            }
        }
        let next = self.fights().next(key, revision, fought, Instant::now());
        match next {
            fight::Next::Revert => {}
            fight::Next::Stopped => {
                return Some(Outcome::Skipped("a fight with another writer; left to it"))
            }
            fight::Next::Stop(stopped) => {
                let live: Option<DynamicObject> =
                    live.and_then(|l| serde_json::from_value(l.clone()).ok());
                self.report_fight(object, ar, live.as_ref(), writer, &stopped)
                    .await;
                return Some(Outcome::Skipped("a fight with another writer; stopped"));
            }
        }
        // The last moment to notice a lost lease.
        if !*self.leader.borrow() {
            return Some(Outcome::Skipped("not the leader"));
        }
        None
    }

    /// Writes the object's `managedFields` with the fields another manager co-owned handed back
    /// to Helm ([`revert_plan::ownership_return`]), if the object is still the one read.
    async fn return_ownership(
        &self,
        api: &Api<DynamicObject>,
        object: &LockedObject,
        back: &revert_plan::OwnershipReturn,
        live: Option<&Value>,
        writer: &HelmWriter,
        revision: u64,
    ) -> Result<DynamicObject, Failure> {
        let rv = live
            .and_then(|l| l.pointer("/metadata/resourceVersion"))
            .and_then(Value::as_str);
        let written = api
            .patch(
                &object.name,
                &PatchParams::default(),
                &Patch::<()>::Json(back.patch(rv)),
            )
            .await
            .map_err(|e| Failure::of(e, rv))?;
        tracing::info!(object = %object.describe(), release = %object.release, revision, manager = writer.manager(), taken = %back.describe(), "fields another manager co-owned handed back to Helm");
        Ok(written)
    }

    /// Creates a deleted object again: by server-side apply when Helm applies, else by a create.
    async fn recreate(
        &self,
        api: &Api<DynamicObject>,
        name: &str,
        writer: &HelmWriter,
        desired: Value,
    ) -> Result<DynamicObject, Failure> {
        Ok(match writer {
            HelmWriter::Apply(manager) => {
                api.patch(
                    name,
                    &PatchParams::apply(manager).force(),
                    &Patch::Apply(&desired),
                )
                .await?
            }
            HelmWriter::Update(manager) => {
                let body: DynamicObject = serde_json::from_value(desired)?;
                let params = PostParams {
                    field_manager: Some(manager.clone()),
                    ..PostParams::default()
                };
                api.create(&params, &body).await?
            }
        })
    }

    /// Publishes an Event with the recorder, except about a cluster-scoped object: the recorder
    /// puts that in `default`, which kube-apiserver before 1.22 refuses for events.k8s.io
    /// Events ([`crate::attempts::create`] falls back to `kube-system` there).
    async fn publish(
        &self,
        event: &Event,
        reference: &k8s_openapi::api::core::v1::ObjectReference,
    ) -> Result<(), kube::Error> {
        if reference
            .namespace
            .as_deref()
            .is_some_and(|ns| !ns.is_empty())
        {
            return self.recorder.publish(event, reference).await;
        }
        let instance = std::env::var("HOSTNAME")
            .ok()
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "helm-locker".into());
        let type_ = match event.type_ {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        };
        let event = crate::attempts::event_about(
            reference,
            crate::attempts::Note {
                type_,
                reason: &event.reason,
                action: &event.action,
                note: event.note.clone().unwrap_or_default(),
            },
            ("helm-locker", &instance),
            k8s_openapi::jiff::Timestamp::now(),
        );
        crate::attempts::create(&self.client, event).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api_error(code: u16, message: &str) -> kube::Error {
        kube::Error::Api(Box::new(kube::core::Status {
            code,
            message: message.into(),
            ..Default::default()
        }))
    }

    #[test]
    fn a_failed_resource_version_guard_is_a_conflict_and_other_errors_are_errors() {
        // kube-apiserver 1.20's answer to a JSON patch whose `test` op failed.
        let test_failed = || {
            api_error(
                422,
                "the server rejected our request due to an error in our request",
            )
        };
        match Failure::of(test_failed(), Some("42")) {
            Failure::Conflict(c) => {
                assert_eq!(c.resource_version, "42");
                assert!(c.error.to_string().contains("rejected our request"));
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            Failure::of(api_error(409, "the object has been modified"), Some("42")),
            Failure::Conflict(_)
        ));
        // No guard (a forced apply): a 422 is the revert's own error.
        assert!(matches!(
            Failure::of(test_failed(), None),
            Failure::Error(_)
        ));
        assert!(matches!(
            Failure::of(api_error(403, "forbidden"), Some("42")),
            Failure::Error(_)
        ));
    }

    #[test]
    fn drift_seen_while_a_revert_waits_is_left_to_it() {
        let key = ObjectKey {
            group: "apps".into(),
            version: "v1".into(),
            kind: "Deployment".into(),
            namespace: Some("shop".into()),
            name: "web".into(),
        };
        let job = |delayed| Job {
            key: key.clone(),
            writer: None,
            delayed,
        };
        let mut scheduled = Scheduled::default();
        assert!(scheduled.admit(&job(false)));
        scheduled.wait(key.clone());
        // Watch events of the same drift (status updates) while the backoff runs.
        assert!(!scheduled.admit(&job(false)));
        assert!(!scheduled.admit(&job(false)));
        // The delayed job itself, then new drift again at once.
        assert!(scheduled.admit(&job(true)));
        assert!(scheduled.admit(&job(false)));
        let mut other = job(false);
        other.key.name = "api".into();
        scheduled.wait(key.clone());
        assert!(scheduled.admit(&other));
    }
}
