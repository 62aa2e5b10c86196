//! Release Secrets from the API server: a watch on `owner=helm` Secrets of type
//! `helm.sh/release.v1` (all namespaces, or the configured ones), and the fresh read of rule 7.
//! Helm's ConfigMap driver keeps the same revisions in `owner=helm` ConfigMaps: the same watch
//! runs over them ([`ReleaseObject`], one watch per kind and scope, `--release-drivers`), and
//! every read of a release reads every kind on ([`StoredRevisions`]).

use std::collections::HashSet;
use std::sync::Arc;

use futures::stream::BoxStream;
use futures::StreamExt;
use kube::api::Api;

use kube::runtime::watcher::{self, Event as WatchEvent};
use kube::runtime::WatchStreamExt;
use kube::Client;

use crate::confirm::BoxFuture;
use crate::core::{
    storage_question, Index, PreparedSecret, ReleaseDriver, ReleaseKey, ReleaseSecret, SecretError,
    SecretRef, Stamping, UpdateReport,
};
use crate::index_store::IndexStore;
use crate::metrics::Metrics;
use crate::readiness::Readiness;
use crate::source::author_key::StampingRx;
use crate::source::initial_list::{self, InitialList};
use crate::source::read_ahead::read_ahead;
use crate::source::release_object::{
    resource_version, secret_ref, KindVisitor, ReleaseObject, StoredRevision,
};
use crate::source::release_watch::{
    ListedPart, ReleaseIndexWriter, ReleaseWatch, Step, DECODED_TOGETHER,
};
use crate::source::storage_gate::StorageGate;

mod decode;
mod fresh_read;
use decode::{decode, decode_or_foreign, spend_stamp, ForeignWarnings};
pub(crate) use fresh_read::{KubeConfirm, StoredRevisions};

/// What the watch lists: Helm keeps up to `--history-max` (10) revisions of each release, all
/// but the newest few `superseded`, and only the newest revision (with any pending or failed
/// one) decides what is locked. A revision Helm supersedes leaves the watch as a delete, which
/// removes only that revision; when the newest revision's Secret goes, the release is read
/// again in full ([`IndexWriter::reload`]).
const WATCHED_LABELS: &str = "owner=helm,status!=superseded";

/// A manifest longer than this is parsed into what it locks as soon as its Secret is decoded;
/// shorter ones (a 30-object release is about 18 kB) a part at a time, on every core. What a
/// part holds decoded at once is then at most 256 of these, not 256 releases of 16 MiB.
const PARSED_AT_ONCE_BYTES: usize = 256 * 1024;

/// A part of a list, decoded and its manifests parsed.
struct DecodedPart<K> {
    prepared: Vec<PreparedSecret>,
    /// The resourceVersion of each Secret in `prepared`.
    versions: Vec<(SecretRef, String)>,
    /// Secrets too large to decode, to warn on.
    foreign: Vec<(K, SecretError)>,
    /// Releases stored outside their own namespace: indexed once the storage gate admits them.
    crossing: Vec<(K, ReleaseSecret)>,
}

impl<K> Default for DecodedPart<K> {
    fn default() -> Self {
        DecodedPart {
            prepared: Vec::new(),
            versions: Vec::new(),
            foreign: Vec::new(),
            crossing: Vec::new(),
        }
    }
}

/// Decodes a part of a list and parses its manifests, both on every core (the blocking pool).
async fn decode_part<K: ReleaseObject>(
    secrets: Vec<K>,
    stamping: Arc<Stamping>,
    metrics: Arc<Metrics>,
) -> DecodedPart<K> {
    if secrets.is_empty() {
        return DecodedPart::default();
    }
    // The watch's span (its namespace, driver and kind) over what is logged while decoding,
    // on the blocking pool and on every core.
    let span = tracing::Span::current();
    tokio::task::spawn_blocking(move || {
        let _entered = span.enter();
        // The objects parsed so far in this part per storage namespace: past the bound
        // (--max-namespace-objects) a large manifest's are let go as soon as parsed, so a part
        // of one tenant's releases holds about a bound's worth, not all she wrote. Which of
        // them the index keeps is decided later by creation; one let go here that it keeps is
        // read again.
        let parsed: std::sync::Mutex<std::collections::HashMap<String, usize>> =
            std::sync::Mutex::default();
        let bound = usize::try_from(crate::core::max_namespace_objects()).unwrap_or(usize::MAX);
        let decoded = crate::core::parallel_map(
            secrets,
            4,
            || (),
            |_, secret| {
                let _entered = span.enter();
                let decoded = decode_or_foreign(&secret, &stamping, &metrics);
                // A large manifest is parsed as soon as it is decoded, and its text let go: a
                // part of 256 small Secrets of 16 MiB releases each is not 4 GiB at once.
                let decoded = match decoded {
                    Ok(Some(release))
                        if storage_question(&release).is_none()
                            && release.release.manifest.len() > PARSED_AT_ONCE_BYTES =>
                    {
                        let mut prepared = Index::prepare(vec![release]);
                        let mut held = parsed.lock().unwrap_or_else(|e| e.into_inner());
                        for p in &mut prepared {
                            let sum = held.entry(p.storage_namespace()).or_default();
                            if sum.saturating_add(p.object_count()) > bound {
                                p.drop_objects();
                            } else {
                                *sum += p.object_count();
                            }
                        }
                        Err(prepared)
                    }
                    other => Ok(other),
                };
                (secret, decoded)
            },
        );
        let mut part = DecodedPart::default();
        let mut releases = Vec::with_capacity(decoded.len());
        for (secret, decoded) in decoded {
            let decoded = match decoded {
                Ok(decoded) => decoded,
                Err(prepared) => {
                    if let Some(version) = resource_version(&secret) {
                        part.versions.push((secret_ref(&secret), version));
                    }
                    part.prepared.extend(prepared);
                    continue;
                }
            };
            match decoded {
                Ok(Some(release)) if storage_question(&release).is_some() => {
                    part.crossing.push((secret, release));
                }
                Ok(Some(release)) => {
                    if let Some(version) = resource_version(&secret) {
                        part.versions.push((secret_ref(&secret), version));
                    }
                    releases.push(release);
                }
                Ok(None) => {}
                Err(note) => part.foreign.push((secret, note)),
            }
        }
        part.prepared.extend(Index::prepare(releases));
        part
    })
    .await
    .unwrap_or_else(|e| {
        // Decoding and parsing never panic on input (fuzzed); a panic here is a bug, and the
        // list's part is lost, not the process.
        tracing::error!(error = %e, "decoding a part of the release Secret list failed");
        DecodedPart::default()
    })
}

/// A decoded part, its releases stored in other namespaces through the storage gate: what
/// the list keeps.
async fn admit_part<K: ReleaseObject>(
    mut part: DecodedPart<K>,
    gate: &StorageGate,
    foreign: &mut ForeignWarnings,
    metrics: &Metrics,
) -> DecodedPart<K> {
    for (secret, note) in std::mem::take(&mut part.foreign) {
        if foreign.may_report(
            kube::ResourceExt::namespace(&secret)
                .as_deref()
                .unwrap_or_default(),
        ) {
            foreign.warn(&secret, note).await;
        }
    }
    let mut admitted = Vec::new();
    for (secret, release) in std::mem::take(&mut part.crossing) {
        if let Some(release) = foreign.admit(&secret, release, gate, metrics).await {
            if let Some(version) = resource_version(&secret) {
                part.versions.push((secret_ref(&secret), version));
            }
            admitted.push(release);
        }
    }
    if !admitted.is_empty() {
        part.prepared.extend(Index::prepare(admitted));
    }
    part
}

fn log_report(report: &UpdateReport) {
    // One line per set of releases, not per object: one release can render thousands.
    for group in crate::core::group_conflicts(&report.conflicts) {
        tracing::warn!(winner = %group.winner, losers = ?group.losers, objects = group.objects, examples = ?group.examples, "objects claimed by several releases (one line per set of releases)");
    }
}

/// A release watch: on release Secrets (`K`: or release ConfigMaps) in `namespace` (all when
/// `None`), keeping `index` current. What this watch lists is its kind's only, so a list again
/// never removes what the other kind's watch indexed. Tells `readiness` once, after its first
/// complete list. Starts once the author key is loaded (each revision's author is read with
/// it).
pub(crate) struct ReleaseObjectsWatch {
    pub(crate) client: Client,
    pub(crate) namespace: Option<String>,
    pub(crate) index: Arc<IndexStore>,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) readiness: Arc<Readiness>,
    pub(crate) stamping: StampingRx,
    pub(crate) gate: Arc<StorageGate>,
    /// Every kind a release's revisions are read from when it is read again.
    pub(crate) drivers: Vec<ReleaseDriver>,
    /// Whether its start (and every list again) is one paged list or a streamed watch
    /// ([`initial_list`]).
    pub(crate) initial_list: InitialList,
}

impl ReleaseObjectsWatch {
    /// Runs the watch: each event the watcher yields is applied to the index
    /// ([`ReleaseWatch::apply`]). Returns only if the watch stream ends, or the key's sender is
    /// gone, which the server treats as a failure.
    pub(crate) async fn run<K: ReleaseObject>(mut self) {
        let stamping: Arc<Stamping> = match self.stamping.wait_for(Option::is_some).await {
            Ok(loaded) => loaded.clone().expect("waited for it"),
            Err(_) => return,
        };
        let streaming = initial_list::streams(&self.client, self.initial_list).await;
        let mut state = ReleaseWatch::<K>::new(self.initial_list, streaming);
        let mut stream = start::<K>(&self.client, self.namespace.as_deref(), streaming);
        let (namespace, kind) = (self.namespace.clone(), K::DRIVER.kind());
        let mut index = IndexWriter {
            foreign: ForeignWarnings::new(&self.client),
            client: self.client,
            scope: self.namespace,
            shared: self.index,
            stamping,
            gate: self.gate,
            metrics: self.metrics,
            drivers: self.drivers,
        };
        while let Some(item) = stream.next().await {
            match state.apply(item, &mut index).await {
                Step::Applied => {}
                Step::Listed(listed) => {
                    let snapshot = index.shared.snapshot();
                    tracing::info!(namespace = ?namespace, kind, streamed = listed.streamed, decoded = listed.decoded, unchanged = listed.unchanged, releases = snapshot.release_count(), objects = snapshot.object_count(), "release Secrets listed");
                    if listed.first {
                        self.readiness.scope_listed();
                    }
                }
                Step::Retry(e) => {
                    index.metrics.watch_restarts.inc();
                    tracing::warn!(namespace = ?namespace, kind, error = %e, "release Secret watch failed; retrying with backoff");
                }
                Step::ListInstead(e) => {
                    index.metrics.watch_restarts.inc();
                    tracing::warn!(namespace = ?namespace, kind, error = %e, "the API server refuses a streamed list; release watch starts again with a list");
                    stream = start::<K>(&index.client, index.scope.as_deref(), state.streaming());
                }
            }
        }
    }
}

/// The watch of a driver's kind, as a supervised task: its name and its future.
impl KindVisitor for ReleaseObjectsWatch {
    type Output = (&'static str, futures::future::BoxFuture<'static, ()>);
    fn visit<K: ReleaseObject>(self) -> Self::Output {
        (K::WATCH_TASK, Box::pin(self.run::<K>()))
    }
}

/// The watcher on `K`'s release objects in `namespace` (all when `None`), its lists streamed
/// when `streaming`.
fn start<K: ReleaseObject>(
    client: &Client,
    namespace: Option<&str>,
    streaming: bool,
) -> BoxStream<'static, Result<WatchEvent<K>, watcher::Error>> {
    let api: Api<K> = match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let config = watcher::Config::default().labels(WATCHED_LABELS);
    let config = match K::DRIVER.field_selector() {
        Some(fields) => config.fields(&fields),
        None => config,
    };
    let config = if streaming {
        config.streaming_lists()
    } else {
        config
    };
    // Read ahead by a part: the next page is asked for while this part is decoded.
    read_ahead(
        watcher::watcher(api, config).default_backoff().boxed(),
        DECODED_TOGETHER,
    )
}

/// The index as a release watch writes it: each object decoded (by name in any log, never its
/// content), through the storage gate, and what a change leaves to read again read from the
/// API server.
struct IndexWriter {
    client: Client,
    /// The watch's namespace (all when `None`).
    scope: Option<String>,
    shared: Arc<IndexStore>,
    stamping: Arc<Stamping>,
    gate: Arc<StorageGate>,
    foreign: ForeignWarnings,
    metrics: Arc<Metrics>,
    drivers: Vec<ReleaseDriver>,
}

impl<K: ReleaseObject> ReleaseIndexWriter<K> for IndexWriter {
    fn holds(&self, secret: &SecretRef) -> bool {
        self.shared.current().holds_secret(secret)
    }

    fn kept_unchanged(&mut self) {
        self.metrics.release_secrets_unchanged.inc();
    }

    fn decode_part(&mut self, part: Vec<K>) -> BoxFuture<'_, ListedPart> {
        Box::pin(async move {
            let part = decode_part(part, self.stamping.clone(), self.metrics.clone()).await;
            let part = admit_part(part, &self.gate, &mut self.foreign, &self.metrics).await;
            ListedPart {
                prepared: part.prepared,
                versions: part.versions,
            }
        })
    }

    fn relist(
        &mut self,
        listed: Vec<PreparedSecret>,
        unchanged: HashSet<SecretRef>,
    ) -> BoxFuture<'_, Vec<UpdateReport>> {
        Box::pin(async move {
            let scope = self.scope.clone();
            let reports = self
                .shared
                .update(move |index| {
                    // The list replaces everything in scope: releases deleted while the watch
                    // was down disappear, unchanged Secrets stay as they were.
                    index.relist(scope.as_deref(), K::DRIVER, &unchanged, listed)
                })
                .await;
            self.metrics.release_secret_lists.inc();
            reports
        })
    }

    fn read_again(&mut self, reports: Vec<UpdateReport>) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            for report in &reports {
                log_report(report);
                if let Some(key) = &report.needs_reload {
                    self.reload_and_follow(key).await;
                }
            }
            let recheck: std::collections::BTreeSet<&ReleaseKey> = reports
                .iter()
                .filter_map(|r| r.recheck_drivers.as_ref())
                .collect();
            for key in recheck {
                self.recheck(key).await;
            }
            self.follow(reports).await;
            crate::source::return_freed_memory();
        })
    }

    fn upsert(&mut self, secret: K) -> BoxFuture<'_, bool> {
        Box::pin(async move {
            let decoded = self
                .foreign
                .decode(&secret, &self.stamping, &self.gate, &self.metrics)
                .await;
            if let Some(decoded) = decoded {
                tracing::debug!(secret = %decoded.secret, status = %decoded.release.status, "release revision updated");
                let report = self.shared.update(|index| index.upsert(decoded)).await;
                log_report(&report);
                if let Some(key) = &report.recheck_drivers {
                    self.recheck(key).await;
                }
                self.follow(vec![report]).await;
                return true;
            }
            let reference = secret_ref(&secret);
            if self.shared.current().holds_secret(&reference) {
                // What it held before this write no longer counts either.
                let report = self
                    .shared
                    .update(move |index| index.remove_secret(&reference))
                    .await;
                if let Some(key) = report.needs_reload.clone() {
                    self.reload_and_follow(&key).await;
                }
                self.follow(vec![report]).await;
            }
            false
        })
    }

    fn remove(&mut self, secret: K) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            spend_stamp(&secret, &self.stamping);
            let reference = secret_ref(&secret);
            let report = self
                .shared
                .update(move |index| index.remove_secret(&reference))
                .await;
            if let Some(key) = report.needs_reload.clone() {
                self.reload_and_follow(&key).await;
            }
            self.follow(vec![report]).await;
        })
    }
}

impl IndexWriter {
    /// What updates of the index refused by the bound on a namespace's objects is reported
    /// (one log line per release, the metric, a `ReleaseTooLarge` Event on its Secret), and
    /// each release they made room for is read again and indexed, until nothing changes.
    async fn follow(&mut self, reports: Vec<UpdateReport>) {
        self.follow_rounds(reports).await;
        self.foreign.summarize();
    }

    async fn follow_rounds(&mut self, mut reports: Vec<UpdateReport>) {
        // Each round reads again only releases the one before made room for; a release read
        // again fits, so rounds end at once in practice. Bounded all the same.
        for _ in 0..16 {
            if reports.is_empty() {
                return;
            }
            let mut next = Vec::new();
            for report in reports {
                for refused in &report.refused {
                    self.metrics.releases_over_namespace_bound.inc();
                    if self.foreign.may_report(&refused.secret.namespace) {
                        tracing::warn!(release = %refused.release, secret = %refused.secret, objects = refused.objects, kept_before = refused.before, limit = refused.limit, "release not indexed: its namespace's releases created before it keep too many objects; it locks nothing (--max-namespace-objects)");
                        self.foreign.warn_over_bound(refused).await;
                    }
                }
                for key in report.room_for {
                    tracing::info!(release = %key, "room in its namespace's bound: release read again (--max-namespace-objects)");
                    next.extend(self.reload(&key).await);
                }
            }
            reports = next;
        }
    }

    /// [`reload`](Self::reload), then what it refused or made room for ([`follow`](Self::follow)).
    async fn reload_and_follow(&mut self, key: &ReleaseKey) {
        let report = self.reload(key).await;
        self.follow(report.into_iter().collect()).await;
    }

    /// The newest revision's Secret of a release vanished while older ones remain (or a
    /// release refused by its namespace's bound fits now): index the newest remaining revision
    /// again (of whichever kind keeps it).
    async fn reload(&mut self, key: &ReleaseKey) -> Option<UpdateReport> {
        let read = match StoredRevisions::read(
            &self.client,
            key.storage_namespace(),
            &key.name,
            &self.drivers,
        )
        .await
        {
            Ok(read) => read,
            Err(e) => {
                tracing::warn!(release = %key, error = %e, "could not re-read release after its newest revision was deleted");
                return None;
            }
        };
        let mut revisions: Vec<ReleaseSecret> = read
            .decoded(&self.stamping, &self.metrics)
            .into_iter()
            .filter(|s| s.key() == *key)
            .collect();
        // The newest revision that counts: of the release's driver, or of the other one as
        // its author's answer says (crate::core::counts_beside_its_release).
        let release_driver = crate::core::release_driver(
            revisions
                .iter()
                .map(|s| (s.secret.driver, s.created, s.release.revision)),
        );
        revisions.sort_by_key(|s| std::cmp::Reverse(s.release.revision));
        for mut newest in revisions {
            let beside = match release_driver {
                Some(driver) => self.gate.admit_beside(&mut newest, driver).await,
                None => Ok(()),
            };
            match beside.and(self.gate.admit(&newest).await) {
                Ok(()) => {
                    let report = self.shared.update(|index| index.upsert(newest)).await;
                    log_report(&report);
                    return Some(report);
                }
                Err(note) => {
                    self.metrics.foreign_release_secrets.inc();
                    tracing::warn!(secret = %newest.secret, error = %note, "release Secret ignored");
                }
            }
        }
        None
    }

    /// A release whose revisions are kept by more than one driver, named by the index
    /// ([`crate::core::UpdateReport::recheck_drivers`]): every revision of it is read again, in
    /// every kind watched, the release's driver taken from all of them
    /// ([`crate::core::release_driver`]), and each revision of another driver admitted only as
    /// its author's answer says; the
    /// index then holds what counts and nothing else. What is refused is reported (log, metric,
    /// a `ForeignRelease` Warning Event on its object).
    async fn recheck(&mut self, key: &ReleaseKey) {
        let read = match StoredRevisions::read(
            &self.client,
            key.storage_namespace(),
            &key.name,
            &self.drivers,
        )
        .await
        {
            Ok(read) => read,
            Err(e) => {
                tracing::warn!(release = %key, error = %e, "could not read a release kept by more than one driver again");
                return;
            }
        };
        let revisions = self.admitted_revisions(key, &read.0).await;
        let Some(release_driver) = crate::core::release_driver(
            revisions
                .iter()
                .map(|s| (s.secret.driver, s.created, s.release.revision)),
        ) else {
            return;
        };
        let mut counted = Vec::new();
        for mut revision in revisions {
            let Err(note) = self.gate.admit_beside(&mut revision, release_driver).await else {
                counted.push(revision);
                continue;
            };
            self.metrics.foreign_release_secrets.inc();
            tracing::warn!(secret = %revision.secret, error = %note, "release revision of another driver than its release's ignored");
            if let Some(object) = read.at(&revision.secret) {
                self.foreign.warn(object, note).await;
            }
        }
        let key = key.clone();
        let reports = self
            .shared
            .update(move |index| index.replace_release(&key, counted))
            .await;
        for report in &reports {
            log_report(report);
        }
        self.follow(reports).await;
    }

    /// The revisions of release `key` among `objects` that decode and pass the storage gate.
    async fn admitted_revisions(
        &self,
        key: &ReleaseKey,
        objects: &[StoredRevision],
    ) -> Vec<ReleaseSecret> {
        let mut admitted = Vec::new();
        for object in objects {
            let decoded = decode(object, &self.stamping, &self.metrics).filter(|d| d.key() == *key);
            if let Some(decoded) = decoded {
                if self.gate.admit(&decoded).await.is_ok() {
                    admitted.push(decoded);
                }
            }
        }
        admitted
    }
}
