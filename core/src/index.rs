//! The lock index: every release by (namespace, name) with its revisions, and every object the
//! newest revision of each release owns, keyed by group, kind, namespace and name.
//!
//! An [`Index`] is an immutable value built from persistent maps: cloning it is O(1) and an
//! update touches only the entries of the release it changes. The server reads snapshots from a
//! shared snapshot on every request without locks while the one writer swaps in new ones.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;

use crate::interning::Interner;
pub use crate::locked::LockedObject;
use crate::manifest::SkippedDocument;
use crate::policy::Registration;
pub use crate::release::ReleaseKey;
use crate::release::{Driver, ReleaseSecret, SecretRef, Status};

mod claims;
mod namespace_bound;
mod objects;
use claims::ClaimSet;
pub use claims::Claims;
use namespace_bound::NamespaceOrder;
pub use namespace_bound::{ListingBound, Refused};
pub use objects::PreparedSecret;
use objects::{first_created, revision_of, Objects};

/// What the index keeps of a revision: everything but the manifest text.
#[derive(Clone, Debug, PartialEq)]
pub struct Revision {
    pub revision: u64,
    /// Who wrote the revision's Secret last: the reverter writes from it only what they could.
    pub author: crate::author::Authorship,
    pub status: Status,
    pub description: String,
    pub notes: String,
    pub chart: String,
    pub apply_method: Option<String>,
    pub secret: SecretRef,
    pub labels: BTreeMap<String, String>,
    /// When the API server created the revision's Secret (Unix seconds; `None` when not read
    /// from it). Helm creates a `pending-*` revision's Secret as it begins its work, so this is
    /// when that work began.
    pub created: Option<i64>,
}

/// A release and the objects of its newest revision.
#[derive(Debug)]
pub struct ReleaseState {
    pub key: ReleaseKey,
    /// Boxed: a map's leaf reserves room for 11 values, and a release keeps one or two
    /// revisions of 200 bytes (2 kB a release saved).
    pub revisions: BTreeMap<u64, Box<Revision>>,
    /// Objects of the newest revision, or `None` when the newest revision's Secret was removed
    /// while older ones remain (the source must supply the revision again; nothing is locked
    /// meanwhile).
    pub objects: Option<Vec<Arc<LockedObject>>>,
    pub skipped: Vec<SkippedDocument>,
    /// Refused by the bound on the objects kept per storage namespace
    /// (`--max-namespace-objects`): how many objects its newest revision renders. `objects` is
    /// then `None`: it locks nothing, its objects are open, until releases created before it
    /// leave room ([`UpdateReport::room_for`]).
    pub refused: Option<usize>,
}

impl ReleaseState {
    pub fn newest(&self) -> Option<&Revision> {
        self.revisions.values().next_back().map(Box::as_ref)
    }

    /// The state of a release is its newest revision's status.
    pub fn status(&self) -> Status {
        self.newest().map_or(Status::Unknown, |r| r.status)
    }
}

/// Two releases render the same object. The release the live object's Helm annotations name
/// owns it (decided per request); `winner`, when they name neither: the release of the
/// object's own namespace, else the smaller (namespace, name) ([`Claims::owner`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conflict {
    pub object: String,
    pub winner: ReleaseKey,
    pub losers: Vec<ReleaseKey>,
}

/// What an update did, for logs and metrics.
#[derive(Debug, Default, PartialEq)]
pub struct UpdateReport {
    /// The release whose objects were re-indexed, if any.
    pub reindexed: Option<ReleaseKey>,
    pub conflicts: Vec<Conflict>,
    /// The newest revision disappeared but older ones remain: re-read this release.
    pub needs_reload: Option<ReleaseKey>,
    /// The revision upserted is of another driver and older than every revision held, so it
    /// is the release's driver now ([`crate::release_driver`]): what was admitted beside the earlier
    /// driver must be asked again. Read every revision and [`Index::replace_release`].
    pub recheck_drivers: Option<ReleaseKey>,
    /// Releases this update refused, or pushed out, by the bound on a namespace's objects:
    /// report each (once), they lock nothing.
    pub refused: Vec<Refused>,
    /// Releases refused by the bound that fit now (a release created before them left or
    /// shrank): read each again ([`Index::upsert`] its newest revision) to index it.
    pub room_for: Vec<ReleaseKey>,
}

#[derive(Clone, Default)]
pub struct Index {
    releases: imbl::OrdMap<ReleaseKey, Arc<ReleaseState>>,
    objects: imbl::OrdMap<u64, ClaimSet>,
    secrets: imbl::OrdMap<SecretRef, (ReleaseKey, u64)>,
    /// HelmReleases by the release they register (only with a registration namespace).
    registrations: imbl::HashMap<ReleaseKey, Arc<Registration>>,
    /// LockExceptions by `namespace/name`.
    exceptions: imbl::HashMap<String, Arc<crate::exception::Exception>>,
    object_count: usize,
    /// How many indexed objects each namespace holds: a write that names no object (a
    /// collection DELETE's, named only in `oldObject`) in a namespace without any is no
    /// release's, known from the review's head.
    per_namespace: imbl::HashMap<crate::interning::SharedStr, usize>,
    /// The highest revision this index has held of each release (for the life of the process,
    /// also after the release's Secrets are gone) and when its Secret was created: a newest
    /// revision below it whose Secret is no younger was made newest by deleting newer ones.
    highest: imbl::HashMap<ReleaseKey, (u64, Option<i64>)>,
    /// The bound on objects kept per storage namespace; `None`: the flag's
    /// ([`crate::limits::max_namespace_objects`]).
    namespace_bound: Option<usize>,
    /// Each release's place in its storage namespace: when its earliest revision held was
    /// created (`i64::MAX` when unknown) and how many objects its newest revision renders.
    placed: imbl::HashMap<ReleaseKey, (i64, usize)>,
    /// The releases of each storage namespace in the order they are kept in, with their
    /// objects, and the sum of those.
    order: imbl::HashMap<String, (NamespaceOrder, usize)>,
    /// How many releases of each storage namespace the bound refuses
    /// ([`ReleaseState::refused`]), kept by [`Index::put_release`] and [`Index::take_release`]:
    /// after a write to a namespace under its bound without any, there is nothing to settle,
    /// known without a walk over the namespace's releases (one per write made a list of
    /// 10,000 releases in one namespace quadratic).
    refused_in: imbl::HashMap<String, usize>,
    /// While a batch (a list) is upserted: the storage namespaces it changed, each settled once
    /// when it ends ([`Index::settle_deferred`]) rather than after every release.
    deferred: Option<std::collections::BTreeSet<String>>,
}

impl fmt::Debug for Index {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Index")
            .field("releases", &self.releases.len())
            .field("objects", &self.object_count)
            .finish()
    }
}

impl Index {
    /// The ignore rules of `config` (and of the release's HelmRelease) that apply to `object`,
    /// and the path a controller owns on it ([`LockedObject::controller_owned`]): what the
    /// reverter and drift reports leave alone.
    pub fn ignored_paths(
        &self,
        config: &crate::policy::Config,
        object: &LockedObject,
    ) -> Vec<String> {
        let Some(state) = self.release(&object.release) else {
            return vec![];
        };
        let labels = state.newest().map(|r| r.labels.clone()).unwrap_or_default();
        let mut paths: Vec<String> = config
            .policy(&state.key, &labels, self.registration(&state.key))
            .ignored_paths(object)
            .into_iter()
            .map(str::to_string)
            .collect();
        // A controller's by design (an autoscaler's replicas): never reverted nor counted as
        // drift. Admission still denies people (the controller itself is exempt).
        paths.extend(object.controller_owned().map(str::to_string));
        paths
    }

    /// What the reverter leaves alone in `object` at `now`: the ignore rules, and the paths
    /// open LockExceptions give to their users (`""`, the whole object, when one opens every
    /// path).
    pub fn left_alone(
        &self,
        config: &crate::policy::Config,
        object: &LockedObject,
        now: i64,
    ) -> Vec<String> {
        let mut paths = self.ignored_paths(config, object);
        for exception in self.exceptions(&object.release) {
            if exception.is_open(now) {
                paths.extend(
                    exception
                        .open_paths(&object.kind, &object.name)
                        .unwrap_or_default(),
                );
            }
        }
        paths
    }

    /// The paths of `live` (the object as the API server has it) that writer rules give to
    /// their writers while they hold them ([`crate::writer_rule::rule_held_paths`]): the
    /// configuration's rules and the release's HelmRelease's. The reverter leaves them.
    pub fn rule_held(
        &self,
        config: &crate::policy::Config,
        object: &LockedObject,
        live: &serde_json::Value,
        helm_apply: Option<&str>,
        now: i64,
    ) -> Vec<String> {
        self.rule_holders(config, object, live, helm_apply, now)
            .into_iter()
            .map(|(path, _)| path)
            .collect()
    }

    /// [`Index::rule_held`], each path with the id of the rule holding it
    /// ([`crate::writer_rule::rule_holders`]).
    pub fn rule_holders(
        &self,
        config: &crate::policy::Config,
        object: &LockedObject,
        live: &serde_json::Value,
        helm_apply: Option<&str>,
        now: i64,
    ) -> Vec<(String, String)> {
        let own = self.registration(&object.release).map(|r| &r.writers[..]);
        let rules: Vec<&crate::writer_rule::WriterRule> = config
            .writers
            .iter()
            .chain(own.unwrap_or_default())
            .collect();
        if rules.is_empty() {
            return Vec::new();
        }
        let labels = self
            .release(&object.release)
            .and_then(|state| state.newest())
            .map(|newest| newest.labels.clone())
            .unwrap_or_default();
        let target = crate::writer_rule::RuleObject {
            release: &object.release,
            labels: &labels,
            group: &object.group,
            kind: &object.kind,
            name: &object.name,
        };
        crate::writer_rule::rule_holders(&rules, &target, live, helm_apply, now)
    }

    pub fn new() -> Self {
        Self::default()
    }

    pub fn from_secrets(secrets: impl IntoIterator<Item = ReleaseSecret>) -> Self {
        let mut index = Index::new();
        index.upsert_many(secrets.into_iter().collect());
        index
    }

    /// [`upsert`](Self::upsert)s a batch (a list of release Secrets), parsing the newest
    /// manifest of each release on every core first: YAML parsing is nearly all the cost of
    /// indexing a cluster. The result is the same as upserting one by one.
    pub fn upsert_many(&mut self, mut secrets: Vec<ReleaseSecret>) -> Vec<UpdateReport> {
        // Newest revision first within a release, so older ones are never parsed.
        secrets.sort_by_cached_key(|s| (s.key(), std::cmp::Reverse(s.release.revision)));
        let newest: Vec<usize> = (0..secrets.len())
            .filter(|&i| {
                let key = secrets[i].key();
                let first_of_release = i == 0 || secrets[i - 1].key() != key;
                let known = self
                    .releases
                    .get(&key)
                    .and_then(|s| s.revisions.keys().next_back().copied());
                first_of_release && known.is_none_or(|n| secrets[i].release.revision >= n)
            })
            .collect();
        // The manifests leave their releases (nothing else keeps them) and each is freed as soon
        // as it is parsed, so a cluster's manifests and parsed objects are never all in memory.
        let manifests: Vec<(usize, ReleaseKey, String)> = newest
            .iter()
            .map(|&i| {
                let key = secrets[i].key();
                (i, key, std::mem::take(&mut secrets[i].release.manifest))
            })
            .collect();
        let mut parsed: Vec<Option<Objects>> = (0..secrets.len()).map(|_| None).collect();
        let objects = crate::parallel::map(
            manifests,
            16,
            Interner::default,
            |strings, (i, key, manifest)| (i, Objects::of(&key, &manifest, strings)),
        );
        for (i, objects) in objects {
            parsed[i] = Some(objects);
        }
        let settles = self.defer_settling();
        let mut reports: Vec<UpdateReport> = secrets
            .into_iter()
            .zip(parsed)
            .map(|(secret, objects)| self.upsert_parsed(secret, objects))
            .collect();
        if settles {
            self.settle_deferred(&mut reports);
            self.settle_batch(&mut reports, Vec::new());
        }
        reports
    }

    /// Parses the manifests of a part of a list (a page as it arrives) on every core, for
    /// [`upsert_prepared`](Self::upsert_prepared). A list held as [`PreparedSecret`]s keeps what
    /// the index will keep, not the manifests' text: reading a cluster's releases never holds
    /// all their manifests at once.
    pub fn prepare(secrets: Vec<ReleaseSecret>) -> Vec<PreparedSecret> {
        // Each thread interns its own strings and builds the objects it parsed, so what the
        // index keeps is allocated where it was parsed and nothing parsing left behind is
        // interleaved with it.
        crate::parallel::map(secrets, 16, Interner::default, |strings, mut secret| {
            let key = secret.key();
            let manifest = std::mem::take(&mut secret.release.manifest);
            PreparedSecret {
                objects: Objects::of(&key, &manifest, strings),
                secret,
            }
        })
    }

    /// [`upsert_many`](Self::upsert_many) for a list read as [`prepare`](Self::prepare)d parts.
    /// The result is the same as upserting the Secrets one by one.
    pub fn upsert_prepared(&mut self, prepared: Vec<PreparedSecret>) -> Vec<UpdateReport> {
        let settles = self.defer_settling();
        let (mut reports, dropped) = self.upsert_each(prepared);
        if settles {
            self.settle_deferred(&mut reports);
            self.settle_batch(&mut reports, dropped);
        }
        reports
    }

    /// Upserts each of `prepared`, with the releases the list dropped for their namespace's
    /// bound (to report those still refused once the batch is settled).
    fn upsert_each(
        &mut self,
        mut prepared: Vec<PreparedSecret>,
    ) -> (Vec<UpdateReport>, Vec<ReleaseKey>) {
        // Newest revision first within a release: an older one's objects are not the release's.
        prepared.sort_by(|a, b| {
            let (a, b) = (&a.secret.release, &b.secret.release);
            (&a.namespace, &a.name, std::cmp::Reverse(a.revision)).cmp(&(
                &b.namespace,
                &b.name,
                std::cmp::Reverse(b.revision),
            ))
        });
        let dropped: Vec<ReleaseKey> = prepared
            .iter()
            .filter(|p| p.objects.dropped.is_some())
            .map(|p| p.secret.key())
            .collect();
        let reports: Vec<UpdateReport> = prepared
            .into_iter()
            .map(|p| self.upsert_parsed(p.secret, Some(p.objects)))
            .collect();
        (reports, dropped)
    }

    /// After a batch: only what still fits is read again (once), and a release the list dropped
    /// that does not fit is reported.
    fn settle_batch(&self, reports: &mut [UpdateReport], dropped: Vec<ReleaseKey>) {
        // Each namespace's verdicts, walked once (not once per release asked about).
        type Verdicts<'a> = HashMap<&'a ReleaseKey, (usize, bool)>;
        let mut walked: HashMap<String, Verdicts<'_>> = HashMap::new();
        let mut refused_now = |key: &ReleaseKey| -> Option<(usize, bool)> {
            self.releases.get(key)?.refused?;
            let namespace = key.storage_namespace();
            if !walked.contains_key(namespace) {
                walked.insert(
                    namespace.to_string(),
                    self.verdicts(namespace)
                        .map(|(held, before, fits)| (held, (before, fits)))
                        .collect(),
                );
            }
            walked.get(namespace)?.get(key).copied()
        };
        let mut asked = std::collections::HashSet::new();
        for report in reports.iter_mut() {
            report.room_for.retain(|key| {
                refused_now(key).is_some_and(|(_, fits)| fits) && asked.insert(key.clone())
            });
        }
        let reported: std::collections::HashSet<ReleaseKey> = reports
            .iter()
            .flat_map(|r| r.refused.iter().map(|r| r.release.clone()))
            .collect();
        let mut extra = Vec::new();
        for key in dropped {
            if reported.contains(&key) {
                continue;
            }
            let (Some((before, false)), Some(state)) = (refused_now(&key), self.releases.get(&key))
            else {
                continue;
            };
            if let Some(newest) = state.newest() {
                extra.push(Refused {
                    release: key.clone(),
                    secret: newest.secret.clone(),
                    objects: state.refused.unwrap_or(0),
                    before,
                    limit: self.namespace_bound(),
                });
            }
        }
        if let Some(last) = reports.last_mut() {
            last.refused.extend(extra);
        }
    }

    /// A list again of the release Secrets in `scope` (every namespace when `None`), as after
    /// a watch expired: `listed` are the Secrets it found new or changed, `unchanged` those it
    /// found as the index holds them (the same resourceVersion), kept without being decoded
    /// again. Every other Secret of the scope and of `driver` (one watch lists Secrets, another
    /// ConfigMaps) is gone from the cluster and leaves the index; what the other driver keeps
    /// is left as it is. With nothing unchanged, the result is the index of `listed` alone in
    /// that scope and driver.
    ///
    /// A release whose newest Secret is gone while older, unchanged ones remain is left
    /// without objects and named in a report's `needs_reload`: those older revisions were not
    /// decoded, so their manifest is read again by whoever called.
    pub fn relist(
        &mut self,
        scope: Option<&str>,
        driver: Driver,
        unchanged: &std::collections::HashSet<SecretRef>,
        listed: Vec<PreparedSecret>,
    ) -> Vec<UpdateReport> {
        let listed_refs: std::collections::HashSet<&SecretRef> =
            listed.iter().map(|p| &p.secret.secret).collect();
        let gone: Vec<SecretRef> = self
            .secrets
            .keys()
            .filter(|s| s.driver == driver && scope.is_none_or(|ns| s.namespace == ns))
            .filter(|s| !unchanged.contains(*s) && !listed_refs.contains(s))
            .cloned()
            .collect();
        // Removals first: a release whose newest Secret was replaced by a newer one is then
        // whole again once the list is upserted, and only a release still without objects
        // needs its remaining revisions read.
        let settles = self.defer_settling();
        let mut reports: Vec<UpdateReport> = gone.iter().map(|s| self.remove_secret(s)).collect();
        let (upserted, dropped) = self.upsert_each(listed);
        reports.extend(upserted);
        if settles {
            self.settle_deferred(&mut reports);
            self.settle_batch(&mut reports, dropped);
        }
        for report in &mut reports {
            let still_open = report
                .needs_reload
                .as_ref()
                .and_then(|key| self.releases.get(key))
                .is_some_and(|state| state.objects.is_none());
            if !still_open {
                report.needs_reload = None;
            }
        }
        reports
    }

    /// Whether the index holds the revision `secret` held.
    pub fn holds_secret(&self, secret: &SecretRef) -> bool {
        self.secrets.contains_key(secret)
    }

    pub fn release_count(&self) -> usize {
        self.releases.len()
    }

    pub fn object_count(&self) -> usize {
        self.object_count
    }

    /// Whether any release renders an object in `namespace` (an object of a kind of unknown
    /// scope counts in its namespace).
    pub fn holds_objects_in(&self, namespace: &str) -> bool {
        self.per_namespace.contains_key(namespace)
    }

    pub fn release(&self, key: &ReleaseKey) -> Option<&Arc<ReleaseState>> {
        self.releases.get(key)
    }

    /// Releases sorted by namespace and name.
    /// Every release, in no order the caller may rely on: for a count, which needs no sort.
    pub fn releases_unordered(&self) -> impl Iterator<Item = &Arc<ReleaseState>> {
        self.releases.values()
    }

    pub fn releases(&self) -> Vec<&Arc<ReleaseState>> {
        let mut all: Vec<_> = self.releases.values().collect();
        all.sort_by(|a, b| a.key.cmp(&b.key));
        all
    }

    /// The HelmRelease registering a release, if any.
    pub fn registration(&self, key: &ReleaseKey) -> Option<&Registration> {
        // A HelmRelease names a release by namespace and name, wherever it is stored.
        let named = ReleaseKey::new(key.namespace.clone(), key.name.clone());
        self.registrations.get(&named).map(|r| &**r)
    }

    /// Registers (or, with `None`, unregisters) a release.
    pub fn set_registration(&mut self, key: ReleaseKey, registration: Option<Registration>) {
        match registration {
            Some(r) => {
                self.registrations.insert(key, Arc::new(r));
            }
            None => {
                self.registrations.remove(&key);
            }
        }
    }

    /// Replaces every LockException (a re-list).
    pub fn replace_exceptions(
        &mut self,
        exceptions: impl IntoIterator<Item = crate::exception::Exception>,
    ) {
        self.exceptions = exceptions
            .into_iter()
            .map(|e| (e.name.clone(), Arc::new(e)))
            .collect();
    }

    /// The LockExceptions of a release, open or not, by name.
    pub fn exceptions(&self, release: &ReleaseKey) -> Vec<&crate::exception::Exception> {
        let mut out: Vec<_> = self
            .exceptions
            .values()
            .filter(|e| e.release.is(release))
            .map(|e| &**e)
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    /// Every LockException, by name.
    pub fn all_exceptions(&self) -> Vec<&crate::exception::Exception> {
        let mut out: Vec<_> = self.exceptions.values().map(|e| &**e).collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    /// Replaces every registration (a re-list of the HelmReleases).
    pub fn replace_registrations(
        &mut self,
        registrations: impl IntoIterator<Item = (ReleaseKey, Registration)>,
    ) {
        self.registrations = registrations
            .into_iter()
            .map(|(k, r)| (k, Arc::new(r)))
            .collect();
    }

    /// Where and when each revision the index holds of `key` was kept, for the release's
    /// driver ([`crate::release_driver`]).
    pub fn kept_revisions(&self, key: &ReleaseKey) -> Vec<crate::release_driver::Kept> {
        self.releases
            .get(key)
            .map(|state| {
                state
                    .revisions
                    .values()
                    .map(|r| (r.secret.driver, r.created, r.revision))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Replaces everything held of `key` by `secrets` (every revision of it that counts, read
    /// again after its driver changed: [`UpdateReport::recheck_drivers`]). The release's highest
    /// revision this process saw is kept (a deleted newer revision still makes an older one
    /// brought back name nobody), unless it was held by an object that no longer counts: a
    /// revision refused by the driver rule must never make the release's real newest revision
    /// "older than one seen".
    pub fn replace_release(
        &mut self,
        key: &ReleaseKey,
        secrets: Vec<ReleaseSecret>,
    ) -> Vec<UpdateReport> {
        let highest_refused = self.highest.get(key).is_some_and(|&(highest, _)| {
            self.releases
                .get(key)
                .and_then(|state| state.revisions.get(&highest))
                .is_some_and(|held| secrets.iter().all(|s| s.secret != held.secret))
        });
        self.remove_release(key);
        if highest_refused {
            self.highest.remove(key);
        }
        let mut reports = self.upsert_many(secrets);
        // Everything given was asked about: nothing to ask again.
        for report in &mut reports {
            report.recheck_drivers = None;
        }
        reports.push(UpdateReport {
            reindexed: Some(key.clone()),
            ..UpdateReport::default()
        });
        reports
    }

    /// Adds or replaces one revision of a release (a Secret was created or updated).
    pub fn upsert(&mut self, secret: ReleaseSecret) -> UpdateReport {
        self.upsert_parsed(secret, None)
    }

    /// `upsert` with the release's manifest already parsed (or `None` to parse it here if needed).
    fn upsert_parsed(&mut self, secret: ReleaseSecret, parsed: Option<Objects>) -> UpdateReport {
        let key = secret.key();
        let ReleaseSecret {
            secret: secret_ref,
            labels,
            release,
            author,
            created,
            counts_beside,
        } = secret;
        let mut report = UpdateReport::default();
        // A Secret that now holds another revision (or release) first leaves its old place.
        if let Some((old_key, old_revision)) = self.secrets.get(&secret_ref).cloned() {
            if old_key != key || old_revision != release.revision {
                report = self.remove_secret(&secret_ref);
            }
        }
        let previous = self.releases.get(&key).cloned();
        let mut revisions = previous
            .as_ref()
            .map(|p| p.revisions.clone())
            .unwrap_or_default();
        let held: Vec<crate::release_driver::Kept> = revisions
            .values()
            .filter(|r| r.secret != secret_ref)
            .map(|r| (r.secret.driver, r.created, r.revision))
            .collect();
        if let Some(driver_before) = crate::release_driver::release_driver(held.iter().copied()) {
            let kept = (secret_ref.driver, created, release.revision);
            let driver_now = crate::release_driver::release_driver(held.into_iter().chain([kept]));
            if driver_now != Some(driver_before) {
                // Older than every revision held: its driver is the release's now, and what
                // was held beside it must be asked about again.
                report.recheck_drivers = Some(key.clone());
            } else if secret_ref.driver != driver_before && !counts_beside {
                // Of the other driver, and not asked about: it counts for nothing (it never
                // is "a revision seen") until the release is read again and its author
                // answers. What its object held before leaves with it.
                if self.secrets.contains_key(&secret_ref) {
                    report = self.remove_secret(&secret_ref);
                }
                report.recheck_drivers = Some(key);
                return report;
            }
        }
        let newest_before = revisions.keys().next_back().copied();
        let is_newest = newest_before.is_none_or(|n| release.revision >= n);
        let highest = self.highest.get(&key).copied();
        // Helm only ever creates a revision above the newest (install, upgrade, rollback) and
        // deletes the oldest or all of them, so its revisions are created in the order of their
        // numbers. A newest revision below one this index held, whose Secret was not created
        // after that one's, was brought back by deleting the newer ones (an older revision, or
        // a saved state of it written over it). Its author names nobody, whatever its stamp
        // says, until a newer revision is written. (A Secret created later is a new install,
        // or a re-created one, whose stamp tells for itself.)
        let went_back = highest.is_some_and(|(revision, at)| {
            release.revision < revision
                && match (created, at) {
                    (Some(created), Some(at)) => created <= at,
                    _ => true,
                }
        });
        let author = if is_newest && went_back {
            crate::author::Authorship::Unknown(crate::author::Unknown::WentBack)
        } else {
            author
        };
        if highest.is_none_or(|(revision, _)| release.revision >= revision) {
            self.highest
                .insert(key.clone(), (release.revision, created));
        }
        revisions.insert(
            release.revision,
            Box::new(revision_of(
                &release,
                secret_ref.clone(),
                labels,
                author,
                created,
            )),
        );
        self.secrets
            .insert(secret_ref, (key.clone(), release.revision));

        let first_created = first_created(&revisions);
        let mut kept = true;
        let state = if is_newest {
            if let Some(previous) = &previous {
                self.unclaim(previous);
            }
            let parsed = parsed
                .unwrap_or_else(|| Objects::of(&key, &release.manifest, &mut Interner::default()));
            report.reindexed = Some(key.clone());
            let count = parsed.dropped.unwrap_or(parsed.objects.len());
            self.place(&key, first_created, count);
            let newest = revisions.get(&release.revision).map(|r| r.secret.clone());
            let deferred = self.deferred.is_some();
            if parsed.dropped.is_some() && (deferred || self.refusal(&key).is_none()) {
                // Dropped by the list: refused until read again, which `settle` asks for if it
                // fits (the list did not know all the index holds); in a batch, reported when
                // the batch is settled if it does not.
                kept = false;
            } else if deferred {
                // Kept for now: the batch's settle pushes it out if it does not fit.
            } else if let Some(before) = self.refusal(&key) {
                kept = false;
                report.refused.push(Refused {
                    release: key.clone(),
                    secret: newest.expect("the revision was just inserted"),
                    objects: count,
                    before,
                    limit: self.namespace_bound(),
                });
            }
            ReleaseState {
                key: key.clone(),
                revisions,
                objects: kept.then_some(parsed.objects),
                skipped: if kept { parsed.skipped } else { Vec::new() },
                refused: (!kept).then_some(count),
            }
        } else {
            let previous = previous.expect("an older revision implies a known release");
            let count = self.placed.get(&key).map_or(0, |&(_, count)| count);
            self.place(&key, first_created, count);
            ReleaseState {
                key: key.clone(),
                revisions,
                objects: previous.objects.clone(),
                skipped: previous.skipped.clone(),
                refused: previous.refused,
            }
        };
        let state = Arc::new(state);
        if is_newest && kept {
            report.conflicts = self.claim(&state);
        }
        let namespace = key.storage_namespace().to_string();
        self.put_release(key, state);
        self.settle(&namespace, &mut report);
        report
    }

    /// Forgets the revision a Secret held (the Secret was deleted).
    ///
    /// When an object of another kind of the same namespace and name (its [`Driver`] twin:
    /// the same revision kept by two drivers, as while a release is moved from one to the
    /// other) still holds the same revision, the revision stays, as that object holds it.
    /// If what the index read of it was the removed object's, it is read again from the twin
    /// (`needs_reload`, the release open meanwhile, as when a newest revision is deleted):
    /// until then it has no known author, never the removed object's.
    pub fn remove_secret(&mut self, secret: &SecretRef) -> UpdateReport {
        let mut report = UpdateReport::default();
        let Some((key, revision)) = self.secrets.remove(secret) else {
            return report;
        };
        let Some(previous) = self.releases.get(&key).cloned() else {
            return report;
        };
        let mut revisions = previous.revisions.clone();
        let was_newest = previous.newest().map(|r| r.revision) == Some(revision);
        let twin = Driver::ALL
            .iter()
            .filter(|&&driver| driver != secret.driver)
            .map(|&driver| SecretRef {
                driver,
                ..secret.clone()
            })
            .find(|twin| self.secrets.get(twin) == Some(&(key.clone(), revision)));
        if let Some(twin) = twin {
            let Some(kept) = revisions.get_mut(&revision) else {
                return report;
            };
            if kept.secret != *secret {
                // What the index holds was read from the twin: nothing changes.
                return report;
            }
            kept.secret = twin;
            kept.author = crate::author::Authorship::Unknown(crate::author::Unknown::NotRead);
            self.keep_release_without(key, revisions, &previous, was_newest, &mut report);
            return report;
        }
        revisions.remove(&revision);
        let namespace = key.storage_namespace().to_string();
        if revisions.is_empty() {
            self.unclaim(&previous);
            self.take_release(&key);
            self.unplace(&key);
            report.reindexed = Some(key);
            self.settle(&namespace, &mut report);
            return report;
        }
        let count = self.placed.get(&key).map_or(0, |&(_, count)| count);
        self.place(&key, first_created(&revisions), count);
        self.keep_release_without(key, revisions, &previous, was_newest, &mut report);
        self.settle(&namespace, &mut report);
        report
    }

    /// The release again with `revisions` after one of them left or changed hands: when it was
    /// the newest, its claims go and it must be read again (`needs_reload`); else it keeps what
    /// it locks.
    fn keep_release_without(
        &mut self,
        key: ReleaseKey,
        revisions: BTreeMap<u64, Box<Revision>>,
        previous: &ReleaseState,
        was_newest: bool,
        report: &mut UpdateReport,
    ) {
        let (objects, skipped, refused) = if was_newest {
            self.unclaim(previous);
            report.reindexed = Some(key.clone());
            report.needs_reload = Some(key.clone());
            (None, Vec::new(), None)
        } else {
            (
                previous.objects.clone(),
                previous.skipped.clone(),
                previous.refused,
            )
        };
        self.put_release(
            key.clone(),
            Arc::new(ReleaseState {
                key,
                revisions,
                objects,
                skipped,
                refused,
            }),
        );
    }

    /// Sets `key`'s state, counting the namespace's refused releases ([`Index::refused_in`]).
    fn put_release(&mut self, key: ReleaseKey, state: Arc<ReleaseState>) {
        let refused = state.refused.is_some();
        let was = self
            .releases
            .insert(key.clone(), state)
            .is_some_and(|s| s.refused.is_some());
        self.count_refused(key.storage_namespace(), was, refused);
    }

    /// Takes `key`'s state out, counting the namespace's refused releases.
    fn take_release(&mut self, key: &ReleaseKey) -> Option<Arc<ReleaseState>> {
        let previous = self.releases.remove(key)?;
        self.count_refused(key.storage_namespace(), previous.refused.is_some(), false);
        Some(previous)
    }

    fn count_refused(&mut self, namespace: &str, was: bool, is: bool) {
        match (was, is) {
            (false, true) => match self.refused_in.get_mut(namespace) {
                Some(n) => *n += 1,
                None => {
                    self.refused_in.insert(namespace.to_string(), 1);
                }
            },
            (true, false) => {
                if let Some(n) = self.refused_in.get_mut(namespace) {
                    *n = n.saturating_sub(1);
                    if *n == 0 {
                        self.refused_in.remove(namespace);
                    }
                }
            }
            _ => {}
        }
    }

    /// Forgets a whole release.
    pub fn remove_release(&mut self, key: &ReleaseKey) {
        if let Some(previous) = self.take_release(key) {
            self.unclaim(&previous);
            self.unplace(key);
            // Its revisions are kept in its storage namespace (whatever a Secret is named):
            // a walk over that namespace's, not over every Secret the index holds.
            let namespace = key.storage_namespace();
            let from = SecretRef {
                namespace: namespace.to_string(),
                name: String::new(),
                driver: Driver::Secret,
            };
            let held: Vec<SecretRef> = self
                .secrets
                .range(from..)
                .take_while(|(place, _)| place.namespace == namespace)
                .filter(|(_, (held, _))| held == key)
                .map(|(place, _)| place.clone())
                .collect();
            for place in held {
                self.secrets.remove(&place);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::tree::Tree;

    fn secret(
        ns: &str,
        name: &str,
        revision: u64,
        status: Status,
        manifest: &str,
    ) -> ReleaseSecret {
        let mut secret = crate::test_util::release_secret(ns, name, revision, status, manifest);
        secret.release.chart = "c-1".into();
        secret
    }

    const APP: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: 3}\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: reader, namespace: ignored}\n---\napiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: other, namespace: elsewhere}\n";

    /// At start-up the ConfigMap watch may list a tenant's ConfigMap revision before the
    /// Secret watch lists the release kept in Secrets, which the driver rule then finds older:
    /// the index says the release must be asked about again, and what it then holds is only
    /// what counts, never "older than a revision seen" for having held hers.
    #[test]
    fn a_revision_of_the_other_driver_older_than_all_held_asks_for_the_release_again() {
        use crate::author::{Author, Authorship};
        let by = |username: &str| {
            Authorship::Known(Arc::new(Author {
                username: username.into(),
                ..Author::default()
            }))
        };
        let admin = ReleaseSecret {
            author: by("admin"),
            created: Some(100),
            ..secret("team", "ops", 1, Status::Deployed, APP)
        };
        let mut alice = ReleaseSecret {
            author: by("alice"),
            created: Some(200),
            ..secret("team", "ops", 2, Status::PendingUpgrade, "")
        };
        alice.secret.driver = Driver::ConfigMap;
        let key = ReleaseKey::new("team", "ops");
        // Beside the admin's revision, alice's is refused until asked about: not held, not
        // the newest, not a revision seen.
        let mut index = Index::new();
        index.upsert(admin.clone());
        assert_eq!(
            index.upsert(alice.clone()).recheck_drivers,
            Some(key.clone())
        );
        assert!(!index.holds_secret(&alice.secret));
        let newest = index.release(&key).unwrap().newest().unwrap().clone();
        assert_eq!((newest.revision, newest.status), (1, Status::Deployed));
        // Asked, and allowed (the control: someone who may also create Secrets): it counts.
        let allowed = ReleaseSecret {
            counts_beside: true,
            ..alice.clone()
        };
        assert_eq!(index.upsert(allowed).recheck_drivers, None);
        assert_eq!(
            index.release(&key).unwrap().status(),
            Status::PendingUpgrade
        );
        // Listed first (no revision of the release held yet), it is indexed ...
        let mut index = Index::new();
        assert_eq!(index.upsert(alice.clone()).recheck_drivers, None);
        assert_eq!(
            index.kept_revisions(&key),
            vec![(Driver::ConfigMap, Some(200), 2)]
        );
        let report = index.upsert(admin.clone());
        assert_eq!(report.recheck_drivers, Some(key.clone()));
        // Read again, alice's revision refused by the driver rule: the admin's is the newest,
        // with its author, and it locks.
        index.replace_release(&key, vec![admin.clone()]);
        let newest = index.release(&key).unwrap().newest().unwrap().clone();
        assert_eq!((newest.revision, newest.author), (1, by("admin")));
        assert!(!index.holds_secret(&alice.secret));
        assert_eq!(index.object_count(), 4);
        // A revision seen and deleted stays seen across a replacement: an older one brought
        // back still names nobody, whatever is added beside it.
        let mut seen = Index::new();
        let v2 = ReleaseSecret {
            author: by("admin"),
            created: Some(150),
            ..secret("team", "ops", 2, Status::Deployed, APP)
        };
        seen.upsert(admin.clone());
        seen.upsert(v2.clone());
        seen.remove_secret(&v2.secret);
        seen.replace_release(&key, vec![admin.clone()]);
        let newest = seen.release(&key).unwrap().newest().unwrap().clone();
        assert_eq!(
            newest.author,
            Authorship::Unknown(crate::author::Unknown::WentBack)
        );
        // A later revision of the release's own driver asks nothing.
        let next = ReleaseSecret {
            created: Some(300),
            ..secret("team", "ops", 2, Status::Deployed, APP)
        };
        assert_eq!(index.upsert(next).recheck_drivers, None);
    }

    #[test]
    fn a_newest_revision_older_than_one_seen_names_no_author() {
        use crate::author::{Author, Authorship, Unknown};
        let admin = Authorship::Known(Arc::new(Author {
            username: "admin".into(),
            ..Author::default()
        }));
        // Revision n's Secret is created at 1000 + n, as Helm creates them.
        let by_admin = |revision: u64, status| ReleaseSecret {
            author: admin.clone(),
            created: Some(1000 + revision as i64),
            ..secret("team", "grant", revision, status, APP)
        };
        let key = ReleaseKey::new("team", "grant");
        let newest = |index: &Index| {
            let state = index.release(&key).unwrap();
            let newest = state.newest().unwrap();
            (newest.revision, newest.author.clone())
        };
        let went_back = Authorship::Unknown(Unknown::WentBack);
        let mut index = Index::new();
        index.upsert(by_admin(1, Status::Deployed));
        index.upsert(by_admin(2, Status::Deployed));
        assert_eq!(newest(&index), (2, admin.clone()));
        // An older revision updated while a newer one exists: not the newest, nothing changes.
        index.upsert(by_admin(1, Status::Superseded));
        assert_eq!(newest(&index), (2, admin.clone()));
        // Revision 2 deleted: revision 1 (read again, as the source does) is brought back.
        let report = index.remove_secret(&by_admin(2, Status::Deployed).secret);
        assert_eq!(report.needs_reload, Some(key.clone()));
        index.upsert(by_admin(1, Status::Superseded));
        assert_eq!(newest(&index), (1, went_back.clone()));
        // ... and stays unknown when it is overwritten with a saved state (deployed again).
        index.upsert(by_admin(1, Status::Deployed));
        assert_eq!(newest(&index), (1, went_back.clone()));
        // The watch leaves superseded revisions out: when the release's only Secret goes, the
        // mark stays, and revision 1 written back over its old Secret is still brought back.
        index.upsert(by_admin(2, Status::Deployed));
        assert_eq!(newest(&index), (2, admin.clone()));
        index.remove_secret(&by_admin(1, Status::Deployed).secret);
        index.remove_secret(&by_admin(2, Status::Deployed).secret);
        assert!(index.release(&key).is_none());
        index.upsert(by_admin(1, Status::Deployed));
        assert_eq!(newest(&index), (1, went_back.clone()));
        // Without creation times (not read from the API server): brought back too.
        let mut plain = Index::new();
        let undated = |revision| ReleaseSecret {
            created: None,
            ..by_admin(revision, Status::Deployed)
        };
        plain.upsert(undated(2));
        plain.remove_secret(&undated(2).secret);
        plain.upsert(undated(1));
        assert_eq!(newest(&plain), (1, went_back.clone()));
        // A newer revision (the next helm upgrade or rollback, at the highest number seen or
        // above) has its own author again.
        index.upsert(by_admin(2, Status::Deployed));
        assert_eq!(newest(&index), (2, admin.clone()));
        // Uninstalled (every revision deleted) and installed again: revision 1 is a Secret
        // created after revision 2's, its own author's.
        for revision in [1, 2] {
            index.remove_secret(&by_admin(revision, Status::Deployed).secret);
        }
        let reinstalled = ReleaseSecret {
            created: Some(2000),
            ..by_admin(1, Status::Deployed)
        };
        index.upsert(reinstalled);
        assert_eq!(newest(&index), (1, admin));
    }

    /// The index keeps 300,000 objects' lists for as long as their releases live: a list
    /// collected in place from the parsed objects kept their room, 16 times its own size.
    #[test]
    fn a_release_keeps_no_room_beyond_its_objects() {
        let manifest: String = (0..30)
            .map(|i| format!("---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: c{i}}}\n"))
            .collect();
        let batch: Vec<_> = (0..20)
            .map(|i| secret("bulk", &format!("r{i}"), 1, Status::Deployed, &manifest))
            .collect();
        let mut one = Index::new();
        one.upsert(secret("shop", "shop", 1, Status::Deployed, &manifest));
        for index in [Index::from_secrets(batch), one] {
            for state in index.releases() {
                let objects = state.objects.as_ref().unwrap();
                assert_eq!(objects.len(), 30);
                assert_eq!(objects.capacity(), objects.len(), "{}", state.key);
            }
        }
    }

    const OLD_CONFIG: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: old}\n";
    const NEW_CONFIG: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: new}\n";

    /// `first`, then 40 releases of namespace `bulk`: enough to take the parallel path.
    fn with_bulk(first: Vec<ReleaseSecret>) -> Vec<ReleaseSecret> {
        let mut all = first;
        for i in 0..40 {
            all.push(secret(
                "bulk",
                &format!("r{i}"),
                1,
                Status::Deployed,
                &APP.replace("name: web", &format!("name: web{i}")),
            ));
        }
        all
    }

    #[test]
    fn a_batch_indexes_like_one_by_one_in_any_order() {
        let (v1, v2) = (OLD_CONFIG, NEW_CONFIG);
        let batch = || {
            with_bulk(vec![
                secret("shop", "shop", 1, Status::Superseded, v1),
                secret("shop", "shop", 2, Status::Deployed, v2),
                secret("shop", "legacy", 3, Status::Deployed, APP),
            ])
        };
        let mut reversed = batch();
        reversed.reverse();
        let one_by_one = {
            let mut index = Index::new();
            for s in batch() {
                index.upsert(s);
            }
            index
        };
        for order in [batch(), reversed] {
            let mut index = Index::new();
            index.upsert_many(order);
            assert_eq!(index.release_count(), one_by_one.release_count());
            assert_eq!(index.object_count(), one_by_one.object_count());
            assert_eq!(index.per_namespace, one_by_one.per_namespace);
            assert!(index.holds_objects_in("shop") && !index.holds_objects_in("default"));
            assert!(index.lookup("", "ConfigMap", Some("shop"), "new").is_some());
            assert!(index.lookup("", "ConfigMap", Some("shop"), "old").is_none());
            let web7 = index
                .lookup("apps", "Deployment", Some("bulk"), "web7")
                .unwrap();
            assert_eq!(*web7.release, ReleaseKey::new("bulk", "r7"));
            assert_eq!(
                web7.content().pointer("/spec/replicas"),
                Some(&Tree::Int(3))
            );
        }
        // A batch older than what is indexed changes no objects.
        let mut index = Index::new();
        index.upsert(secret("shop", "shop", 2, Status::Deployed, v2));
        index.upsert_many(vec![secret("shop", "shop", 1, Status::Superseded, v1)]);
        assert!(index.lookup("", "ConfigMap", Some("shop"), "new").is_some());
        assert!(index.lookup("", "ConfigMap", Some("shop"), "old").is_none());
    }

    /// What a list again leaves: each release, its revisions, and its objects' names.
    fn releases_and_objects(index: &Index) -> Vec<(String, Vec<u64>, Option<Vec<String>>)> {
        index
            .releases()
            .iter()
            .map(|r| {
                (
                    r.key.to_string(),
                    r.revisions.keys().copied().collect(),
                    r.objects
                        .as_ref()
                        .map(|o| o.iter().map(|o| o.name.to_string()).collect()),
                )
            })
            .collect()
    }

    #[test]
    fn a_list_again_with_nothing_unchanged_indexes_like_the_list_alone() {
        let (v1, v2) = (OLD_CONFIG, NEW_CONFIG);
        let mut index = Index::new();
        index.upsert(secret("shop", "shop", 1, Status::Deployed, v1));
        index.upsert(secret("shop", "gone", 1, Status::Deployed, APP));
        index.upsert(secret("other", "kept", 1, Status::Deployed, APP));
        let listed = vec![
            secret("shop", "shop", 2, Status::Deployed, v2),
            secret("shop", "new", 1, Status::Deployed, v1),
        ];
        let mut alone = Index::new();
        alone.upsert(secret("other", "kept", 1, Status::Deployed, APP));
        for s in listed.clone() {
            alone.upsert(s);
        }
        let reports = index.relist(
            Some("shop"),
            Driver::Secret,
            &Default::default(),
            Index::prepare(listed),
        );
        assert_eq!(releases_and_objects(&index), releases_and_objects(&alone));
        assert_eq!(index.object_count(), alone.object_count());
        assert!(reports.iter().all(|r| r.needs_reload.is_none()));
        // Another namespace's releases are not the list's to remove.
        assert!(index.release(&ReleaseKey::new("other", "kept")).is_some());
    }

    #[test]
    fn a_list_again_keeps_unchanged_secrets_without_their_manifests() {
        let (v1, v2) = (OLD_CONFIG, NEW_CONFIG);
        let mut index = Index::new();
        index.upsert(secret("shop", "shop", 1, Status::Failed, v1));
        index.upsert(secret("shop", "shop", 2, Status::Deployed, v2));
        index.upsert(secret("shop", "db", 4, Status::Deployed, APP));
        index.upsert(secret("shop", "gone", 1, Status::Deployed, APP));
        let before = releases_and_objects(&index);
        let unchanged = |refs: &[(&str, u64)]| -> std::collections::HashSet<SecretRef> {
            refs.iter()
                .map(|(name, revision)| {
                    SecretRef::secret("shop", format!("sh.helm.release.v1.{name}.v{revision}"))
                })
                .collect()
        };
        assert!(unchanged(&[("shop", 2)])
            .iter()
            .all(|s| index.holds_secret(s)));
        // Everything unchanged but `gone`: the index is as it was, less that release.
        let mut again = index.clone();
        let reports = again.relist(
            Some("shop"),
            Driver::Secret,
            &unchanged(&[("shop", 1), ("shop", 2), ("db", 4)]),
            Vec::new(),
        );
        let expected: Vec<_> = before
            .iter()
            .filter(|(key, ..)| key != "shop/gone")
            .cloned()
            .collect();
        assert_eq!(releases_and_objects(&again), expected);
        assert!(reports.iter().all(|r| r.needs_reload.is_none()));
        assert!(again.lookup("", "ConfigMap", Some("shop"), "new").is_some());
        // The newest revision is gone and only an unchanged older one remains: the release
        // stays, open, and is named for a read of that revision.
        let mut again = index.clone();
        let reports = again.relist(
            Some("shop"),
            Driver::Secret,
            &unchanged(&[("shop", 1), ("db", 4), ("gone", 1)]),
            Vec::new(),
        );
        let shop = ReleaseKey::new("shop", "shop");
        assert!(reports
            .iter()
            .any(|r| r.needs_reload.as_ref() == Some(&shop)));
        assert!(again.release(&shop).is_some_and(|r| r.objects.is_none()));
        // The newest revision replaced by a newer one: whole again, nothing to read.
        let mut again = index.clone();
        let reports = again.relist(
            Some("shop"),
            Driver::Secret,
            &unchanged(&[("shop", 1), ("db", 4), ("gone", 1)]),
            Index::prepare(vec![secret("shop", "shop", 3, Status::Deployed, v1)]),
        );
        assert!(reports.iter().all(|r| r.needs_reload.is_none()));
        assert!(again.lookup("", "ConfigMap", Some("shop"), "old").is_some());
        assert!(again.lookup("", "ConfigMap", Some("shop"), "new").is_none());
        assert_eq!(
            again
                .release(&shop)
                .map(|r| r.revisions.keys().copied().collect::<Vec<_>>()),
            Some(vec![1, 3])
        );
    }

    /// A third driver (the tests' `Driver::Fake`): its object and a Secret of one namespace
    /// and name are two places, and when the Secret goes, the revision stays, held by its twin
    /// of the third kind, named for a reload, with no author until read again.
    #[test]
    fn a_third_drivers_twin_keeps_a_revision_when_the_secret_of_its_name_is_removed() {
        let in_fake = |mut s: ReleaseSecret| {
            s.secret.driver = Driver::Fake;
            s
        };
        let mut index = Index::new();
        let shop = secret("shop", "shop", 1, Status::Deployed, APP);
        index.upsert(shop.clone());
        assert!(
            index
                .clone()
                .upsert(in_fake(shop.clone()))
                .recheck_drivers
                .is_some(),
            "not asked about, the third kind's twin is rechecked"
        );
        index.upsert(ReleaseSecret {
            counts_beside: true,
            ..in_fake(shop.clone())
        });
        let as_fake = SecretRef {
            driver: Driver::Fake,
            ..SecretRef::secret("shop", "sh.helm.release.v1.shop.v1")
        };
        let as_secret = SecretRef::secret("shop", "sh.helm.release.v1.shop.v1");
        assert!(index.holds_secret(&as_secret) && index.holds_secret(&as_fake));
        assert_eq!(
            as_fake.to_string(),
            "shop/sh.helm.release.v1.shop.v1 (FakeStore)"
        );
        let report = index.remove_secret(&as_fake);
        let key = ReleaseKey::new("shop", "shop");
        assert_eq!(report.needs_reload.as_ref(), Some(&key));
        let kept = index.release(&key).and_then(|r| r.newest()).expect("kept");
        assert_eq!(kept.secret, as_secret);
        assert_eq!(
            kept.author,
            crate::author::Authorship::Unknown(crate::author::Unknown::NotRead)
        );
        // Open until read again; the reload locks it again.
        assert!(index
            .lookup("apps", "Deployment", Some("shop"), "web")
            .is_none());
        index.upsert(shop);
        assert!(index
            .lookup("apps", "Deployment", Some("shop"), "web")
            .is_some());
        // The control: without a twin, removing the Secret removes the release.
        index.remove_secret(&as_secret);
        assert!(index.release(&key).is_none());
    }

    #[test]
    fn a_secret_and_a_config_map_of_one_name_are_two_places_and_each_list_keeps_the_others() {
        // The same revision of `shop` kept by both drivers (a cluster moving from one to the
        // other), and `web` kept in a ConfigMap only.
        let in_config_map = |mut s: ReleaseSecret| {
            s.secret.driver = Driver::ConfigMap;
            s
        };
        let mut index = Index::new();
        let shop = secret("shop", "shop", 1, Status::Deployed, APP);
        index.upsert(shop.clone());
        // Beside the release's Secret, its ConfigMap twin counts once its author was asked
        // (may create Secrets there: crate::release_driver); not asked, it is refused.
        assert!(index
            .clone()
            .upsert(in_config_map(shop.clone()))
            .recheck_drivers
            .is_some());
        index.upsert(ReleaseSecret {
            counts_beside: true,
            ..in_config_map(shop.clone())
        });
        index.upsert(in_config_map(secret(
            "shop",
            "web",
            1,
            Status::Deployed,
            OLD_CONFIG,
        )));
        let (as_secret, as_config_map) = (
            SecretRef::secret("shop", "sh.helm.release.v1.shop.v1"),
            SecretRef::config_map("shop", "sh.helm.release.v1.shop.v1"),
        );
        assert_ne!(as_secret, as_config_map);
        assert!(index.holds_secret(&as_secret) && index.holds_secret(&as_config_map));
        assert_eq!(
            as_config_map.to_string(),
            "shop/sh.helm.release.v1.shop.v1 (ConfigMap)"
        );
        assert_eq!(as_secret.to_string(), "shop/sh.helm.release.v1.shop.v1");
        // A list again of the scope's Secrets, which finds none: the ConfigMaps' releases stay.
        let mut again = index.clone();
        again.relist(
            Some("shop"),
            Driver::Secret,
            &Default::default(),
            Vec::new(),
        );
        assert!(!again.holds_secret(&as_secret));
        assert!(again.holds_secret(&as_config_map));
        assert!(again.lookup("", "ConfigMap", Some("shop"), "old").is_some());
        assert!(again
            .lookup("apps", "Deployment", Some("shop"), "web")
            .is_some());
        // A list of its ConfigMaps that finds none leaves the Secrets' alone. `shop`'s revision
        // was last read from the ConfigMap: it stays, held by the Secret, read again from it
        // (named for a reload, no author until then, never the ConfigMap's).
        let mut again = index.clone();
        let reports = again.relist(
            Some("shop"),
            Driver::ConfigMap,
            &Default::default(),
            Vec::new(),
        );
        assert!(again.holds_secret(&as_secret) && !again.holds_secret(&as_config_map));
        assert!(again.release(&ReleaseKey::new("shop", "web")).is_none());
        let key = ReleaseKey::new("shop", "shop");
        assert!(reports
            .iter()
            .any(|r| r.needs_reload.as_ref() == Some(&key)));
        let kept = again.release(&key).and_then(|r| r.newest()).expect("kept");
        assert_eq!(kept.secret, as_secret);
        assert_eq!(
            kept.author,
            crate::author::Authorship::Unknown(crate::author::Unknown::NotRead)
        );
        again.upsert(shop);
        assert!(again
            .lookup("apps", "Deployment", Some("shop"), "web")
            .is_some());
        // Deleting the one it was not read from changes nothing.
        let mut again = index.clone();
        let report = again.remove_secret(&as_secret);
        assert_eq!(report, UpdateReport::default());
        assert!(again
            .lookup("apps", "Deployment", Some("shop"), "web")
            .is_some());
        // Deleting both forgets the release.
        again.remove_secret(&as_config_map);
        assert!(again.release(&key).is_none());
    }

    #[test]
    fn a_list_prepared_in_parts_indexes_like_one_by_one() {
        let (v1, v2) = (OLD_CONFIG, NEW_CONFIG);
        let list = || {
            with_bulk(vec![
                secret("shop", "shop", 2, Status::Deployed, v2),
                secret("shop", "legacy", 3, Status::Deployed, APP),
                secret("shop", "shop", 3, Status::PendingUpgrade, APP),
                secret("shop", "shop", 1, Status::Failed, v1),
            ])
        };
        let one_by_one = {
            let mut index = Index::new();
            for s in list() {
                index.upsert(s);
            }
            index
        };
        type State = Vec<(ReleaseKey, Vec<u64>, Option<Vec<Arc<LockedObject>>>)>;
        let state = |index: &Index| -> State {
            index
                .releases()
                .iter()
                .map(|r| {
                    (
                        r.key.clone(),
                        r.revisions.keys().copied().collect(),
                        r.objects.clone(),
                    )
                })
                .collect()
        };
        let mut reversed = list();
        reversed.reverse();
        // Parts of 1, 3 and all: a release's revisions fall in different parts.
        for (order, part) in [(list(), 1), (reversed, 3), (list(), 1000)] {
            let mut prepared = Vec::new();
            let mut order = order.into_iter().peekable();
            while order.peek().is_some() {
                prepared.extend(Index::prepare(order.by_ref().take(part).collect()));
            }
            let mut index = Index::new();
            index.upsert_prepared(prepared);
            assert_eq!(state(&index), state(&one_by_one), "parts of {part}");
            assert_eq!(index.object_count(), one_by_one.object_count());
        }
        // A list older than what is indexed changes no objects.
        let mut index = Index::new();
        index.upsert(secret("shop", "shop", 2, Status::Deployed, v2));
        index.upsert_prepared(Index::prepare(vec![secret(
            "shop",
            "shop",
            1,
            Status::Superseded,
            v1,
        )]));
        assert!(index.lookup("", "ConfigMap", Some("shop"), "new").is_some());
        assert!(index.lookup("", "ConfigMap", Some("shop"), "old").is_none());
    }

    #[test]
    fn namespaces_resolve_by_scope_and_version_does_not_matter() {
        let index = Index::from_secrets([secret("shop", "shop", 1, Status::Deployed, APP)]);
        assert_eq!(index.object_count(), 4);
        let web = index
            .lookup("apps", "Deployment", Some("shop"), "web")
            .unwrap();
        assert_eq!(*web.release, ReleaseKey::new("shop", "shop"));
        assert!(index
            .lookup("apps", "Deployment", Some("other"), "web")
            .is_none());
        assert!(index.lookup("apps", "Deployment", None, "web").is_none());
        assert!(index
            .lookup("", "Deployment", Some("shop"), "web")
            .is_none());
        // Cluster-scoped: the chart's namespace is ignored, as the API server does.
        assert!(index
            .lookup("rbac.authorization.k8s.io", "ClusterRole", None, "reader")
            .is_some());
        // A custom resource of unknown scope matches in the release namespace and cluster-wide.
        assert!(index
            .lookup("example.com", "Widget", Some("shop"), "w")
            .is_some());
        assert!(index.lookup("example.com", "Widget", None, "w").is_some());
        assert!(index
            .lookup("example.com", "Widget", Some("x"), "w")
            .is_none());
        // An explicit namespace wins over the release's.
        assert!(index
            .lookup("", "ConfigMap", Some("elsewhere"), "other")
            .is_some());
        // Kind is matched without case (a scale request derives it from the resource name).
        assert!(index
            .lookup("apps", "deployment", Some("shop"), "web")
            .is_some());
    }

    #[test]
    fn the_newest_revision_is_the_state_and_owns_the_objects() {
        let mut index = Index::from_secrets([secret("shop", "shop", 1, Status::Deployed, APP)]);
        index.upsert(secret(
            "shop",
            "shop",
            2,
            Status::PendingUpgrade,
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: new}\n",
        ));
        let state = index.release(&ReleaseKey::new("shop", "shop")).unwrap();
        assert_eq!(state.status(), Status::PendingUpgrade);
        assert!(index.lookup("", "ConfigMap", Some("shop"), "new").is_some());
        assert!(index
            .lookup("apps", "Deployment", Some("shop"), "web")
            .is_none());
        // Helm marks the old revision superseded: objects of the newest stay.
        index.upsert(secret("shop", "shop", 1, Status::Superseded, APP));
        assert!(index.lookup("", "ConfigMap", Some("shop"), "new").is_some());
        assert_eq!(index.object_count(), 1);
        assert_eq!(
            index
                .release(&ReleaseKey::new("shop", "shop"))
                .unwrap()
                .revisions
                .len(),
            2
        );
    }

    #[test]
    fn removing_secrets_and_releases_touches_only_their_own_entries() {
        let mut index = Index::from_secrets([
            secret("a", "a", 1, Status::Deployed, APP),
            secret("b", "b", 1, Status::Deployed, APP),
        ]);
        let before = index.clone();
        index.remove_release(&ReleaseKey::new("a", "a"));
        assert!(index
            .lookup("apps", "Deployment", Some("a"), "web")
            .is_none());
        assert!(index
            .lookup("apps", "Deployment", Some("b"), "web")
            .is_some());
        // The earlier snapshot is unaffected.
        assert!(before
            .lookup("apps", "Deployment", Some("a"), "web")
            .is_some());
        // Deleting the only Secret removes the release.
        let report = index.remove_secret(&SecretRef::secret("b", "sh.helm.release.v1.b.v1"));
        assert_eq!(report.reindexed, Some(ReleaseKey::new("b", "b")));
        assert_eq!((index.release_count(), index.object_count()), (0, 0));
    }

    #[test]
    fn losing_the_newest_revision_unlocks_and_asks_for_a_reload() {
        let mut index = Index::from_secrets([
            secret("a", "a", 1, Status::Superseded, APP),
            secret("a", "a", 2, Status::Deployed, APP),
        ]);
        let report = index.remove_secret(&SecretRef::secret("a", "sh.helm.release.v1.a.v2"));
        assert_eq!(report.needs_reload, Some(ReleaseKey::new("a", "a")));
        assert!(index
            .lookup("apps", "Deployment", Some("a"), "web")
            .is_none());
        index.upsert(secret("a", "a", 1, Status::Deployed, APP));
        assert!(index
            .lookup("apps", "Deployment", Some("a"), "web")
            .is_some());
    }

    #[test]
    fn two_releases_claiming_one_object_resolve_deterministically() {
        let cluster_role = "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: shared}\n";
        for order in [["zeta", "alpha"], ["alpha", "zeta"]] {
            let mut index = Index::new();
            let mut reports = Vec::new();
            for ns in order {
                reports.push(index.upsert(secret(ns, "r", 1, Status::Deployed, cluster_role)));
            }
            let owner = index
                .lookup("rbac.authorization.k8s.io", "ClusterRole", None, "shared")
                .unwrap();
            assert_eq!(*owner.release, ReleaseKey::new("alpha", "r"));
            let conflict = Conflict {
                object: "ClusterRole shared".into(),
                winner: ReleaseKey::new("alpha", "r"),
                losers: vec![ReleaseKey::new("zeta", "r")],
            };
            assert_eq!(reports[1].conflicts, std::slice::from_ref(&conflict));
            assert_eq!(index.conflicts(), [conflict]);
            index.remove_release(&ReleaseKey::new("alpha", "r"));
            assert_eq!(
                *index
                    .lookup("rbac.authorization.k8s.io", "ClusterRole", None, "shared")
                    .unwrap()
                    .release,
                ReleaseKey::new("zeta", "r")
            );
        }
    }

    /// Issue 60, attack 4: a release Secret of another namespace (`a-tenant` sorts before
    /// `team`) that names team's objects never outranks the release of the object's own
    /// namespace, nor the release the object's annotations name.
    /// Flux's layout: a release of `apps` stored in `flux-system` locks its objects in `apps`
    /// (those its manifest leaves without a namespace go there), is read back from where it is
    /// stored, and is second to a release of the same name stored in `apps` itself.
    #[test]
    fn a_release_stored_in_another_namespace_locks_its_own_namespaces_objects_second_to_one_stored_there(
    ) {
        let manifest = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: podinfo}\n";
        let mut flux = secret("flux-system", "apps-podinfo", 2, Status::Deployed, manifest);
        flux.release.namespace = "apps".into();
        let flux_key = ReleaseKey::stored("apps", "apps-podinfo", "flux-system");
        let mut index = Index::new();
        index.upsert(flux.clone());
        assert!(index.release(&flux_key).is_some());
        assert!(index
            .release(&ReleaseKey::new("apps", "apps-podinfo"))
            .is_none());
        let owned = index
            .lookup("apps", "Deployment", Some("apps"), "podinfo")
            .expect("locked in the release's namespace");
        assert_eq!(*owned.release, flux_key);
        assert_eq!(owned.release.storage_namespace(), "flux-system");
        assert!(index
            .lookup("apps", "Deployment", Some("flux-system"), "podinfo")
            .is_none());
        assert!(index.holds_secret(&flux.secret));

        // The same release stored in `apps` too (the Helm CLI's): two releases, and the one
        // stored in its own namespace owns the object, with or without the annotations (which
        // name both alike); a release of another name stored in `apps` is second to the
        // annotations, as any claim is.
        let cli = secret("apps", "apps-podinfo", 1, Status::Deployed, manifest);
        let other = secret("apps", "other", 1, Status::Deployed, manifest);
        index.upsert(cli);
        index.upsert(other);
        assert_eq!(index.release_count(), 3);
        let claims = index
            .find("apps", "Deployment", Some("apps"), "podinfo")
            .unwrap();
        let named = ReleaseKey::new("apps", "apps-podinfo");
        assert_eq!(
            *claims.owner(|| Some(named.clone())).release,
            ReleaseKey::new("apps", "apps-podinfo")
        );
        assert_eq!(
            *claims.owner(|| None).release,
            ReleaseKey::new("apps", "apps-podinfo")
        );
        index.remove_release(&ReleaseKey::new("apps", "apps-podinfo"));
        let claims = index
            .find("apps", "Deployment", Some("apps"), "podinfo")
            .unwrap();
        // Without the annotations, the release stored in `apps` wins over the one stored
        // elsewhere; with them, the release they name.
        assert_eq!(
            *claims.owner(|| None).release,
            ReleaseKey::new("apps", "other")
        );
        assert_eq!(*claims.owner(|| Some(named.clone())).release, flux_key);
        // Removing the Flux Secret removes the Flux release, not the others.
        index.remove_secret(&flux.secret);
        assert!(index.release(&flux_key).is_none());
        assert_eq!(index.release_count(), 1);
    }

    #[test]
    fn a_claim_from_another_namespace_never_outranks_the_owner() {
        let team = ReleaseKey::new("team", "ops");
        let tenant = ReleaseKey::new("a-tenant", "x");
        let outsider = ReleaseKey::new("zz", "y");
        let objects = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: team}\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: ops-agent}\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: agent, namespace: team}\n";
        let foreign_only =
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: loose, namespace: team}\n";
        for order in [[&team, &tenant, &outsider], [&outsider, &tenant, &team]] {
            let mut index = Index::new();
            for key in order {
                let mut manifest = objects.to_string();
                if *key != team {
                    manifest = format!("{manifest}---\n{foreign_only}");
                }
                index.upsert(secret(
                    &key.namespace,
                    &key.name,
                    1,
                    Status::Deployed,
                    &manifest,
                ));
            }
            let owner = |kind: &str, ns: Option<&str>, name: &str, named: Option<&ReleaseKey>| {
                let group = if kind == "ClusterRole" {
                    RBAC_GROUP
                } else {
                    ""
                };
                let claims = index.find(group, kind, ns, name).unwrap();
                assert!(claims.contested());
                (*claims.owner(|| named.cloned()).release).clone()
            };
            // A namespaced object: its own namespace's release, without annotations (a Scale
            // carries none) and when they name no claimant.
            let gone = ReleaseKey::new("team", "gone");
            for named in [None, Some(&gone)] {
                assert_eq!(owner("ConfigMap", Some("team"), "settings", named), team);
            }
            let claims = index
                .find("", "ConfigMap", Some("team"), "settings")
                .unwrap();
            assert!(!claims.unresolved());
            assert_eq!(
                *index
                    .lookup("", "ConfigMap", Some("team"), "settings")
                    .unwrap()
                    .release,
                team
            );
            assert_eq!(
                *index
                    .lookup("apps", "Deployment", Some("team"), "agent")
                    .unwrap()
                    .release,
                team
            );
            // The annotations decide first: only whoever may write the object puts them there.
            assert_eq!(
                owner("ConfigMap", Some("team"), "settings", Some(&tenant)),
                tenant
            );
            assert_eq!(
                owner("ConfigMap", Some("team"), "settings", Some(&team)),
                team
            );
            assert_eq!(
                owner("ConfigMap", Some("team"), "settings", Some(&outsider)),
                outsider
            );
            // A cluster-scoped object has no own namespace: the annotations decide, and without
            // them it is unresolved (the stored object's are read).
            assert_eq!(owner("ClusterRole", None, "ops-agent", Some(&team)), team);
            assert_eq!(
                owner("ClusterRole", None, "ops-agent", Some(&outsider)),
                outsider
            );
            let claims = index
                .find(RBAC_GROUP, "ClusterRole", None, "ops-agent")
                .unwrap();
            assert!(claims.unresolved());
            // A namespaced object only other namespaces' releases render: unresolved too.
            let claims = index.find("", "ConfigMap", Some("team"), "loose").unwrap();
            assert!(claims.unresolved());
            assert_eq!(
                owner("ConfigMap", Some("team"), "loose", Some(&outsider)),
                outsider
            );
            // Every claim is listed, the owner first.
            let listed: Vec<ReleaseKey> = index
                .find("", "ConfigMap", Some("team"), "settings")
                .unwrap()
                .by_owner(|| None)
                .iter()
                .map(|c| (*c.release).clone())
                .collect();
            assert_eq!(listed[0], team);
            assert_eq!(listed.len(), 3);
            // The conflict reported names the own namespace's release as the winner.
            let conflict = index
                .conflicts()
                .into_iter()
                .find(|c| c.object.contains("settings"))
                .unwrap();
            assert_eq!(conflict.winner, team);
        }
        // One claim, from another namespace: it is the only candidate, and its proof (the
        // object's annotations) is what decides whether it holds anything.
        let mut index = Index::new();
        index.upsert(secret("a-tenant", "x", 1, Status::Deployed, foreign_only));
        let claims = index.find("", "ConfigMap", Some("team"), "loose").unwrap();
        assert!(!claims.contested() && !claims.unresolved());
        assert_eq!(*claims.owner(|| Some(team.clone())).release, tenant);
    }

    const RBAC_GROUP: &str = "rbac.authorization.k8s.io";
}
