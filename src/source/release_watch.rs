//! A release watch's state, changed one watcher event at a time ([`ReleaseWatch::apply`]): how
//! it starts (a streamed list, or a paged one once the API server refuses to stream), what the
//! list under way has gathered, and which version of each of its objects it put in the index.
//! What an event changes in the index goes through a [`ReleaseIndexWriter`]: the state does no
//! I/O, so a test drives it with events and a writer of its own, without a cluster.
//!
//! The shape is kube-runtime's reflector (a `Writer` that buffers a list between `Init` and
//! `InitDone` and swaps it in whole) and linkerd's policy indexes (`apply`, `delete`, `reset`
//! over an index that one generic loop feeds).

use std::collections::{HashMap, HashSet};

use kube::runtime::watcher::{self, Event as WatchEvent};

use crate::confirm::BoxFuture;
use crate::core::{ListingBound, PreparedSecret, SecretRef, UpdateReport};
use crate::source::initial_list::{self, InitialList};
use crate::source::release_object::{resource_version, secret_ref, ReleaseObject};

/// How many listed objects are decoded and parsed together (on every core): a few pages' worth
/// of releases in memory at a time, not a cluster's.
pub(crate) const DECODED_TOGETHER: usize = 256;

/// A part of a list, decoded, admitted and parsed into what it locks.
#[derive(Default)]
pub(crate) struct ListedPart {
    pub(crate) prepared: Vec<PreparedSecret>,
    /// The resourceVersion of each object in `prepared`.
    pub(crate) versions: Vec<(SecretRef, String)>,
}

/// Where a release watch's events go: the index, through decoding and the storage gate. The
/// watch is the only writer of its scope's objects of its kind.
pub(crate) trait ReleaseIndexWriter<K>: Send {
    /// Whether the index holds the revision `secret` held.
    fn holds(&self, secret: &SecretRef) -> bool;
    /// Decodes and admits a part of a list and parses what it locks.
    fn decode_part(&mut self, part: Vec<K>) -> BoxFuture<'_, ListedPart>;
    /// An object listed as the index holds it was kept, undecoded.
    fn kept_unchanged(&mut self) {}
    /// A list completed: the scope's objects of this kind are `listed` and `unchanged` (held
    /// as they are), and nothing else.
    fn relist(
        &mut self,
        listed: Vec<PreparedSecret>,
        unchanged: HashSet<SecretRef>,
    ) -> BoxFuture<'_, Vec<UpdateReport>>;
    /// What a list's `reports` leave to do: releases whose revisions are read again.
    fn read_again(&mut self, reports: Vec<UpdateReport>) -> BoxFuture<'_, ()>;
    /// `secret` was written: index it. Whether it was decoded (and so is what the index
    /// holds of it, as far as this watch knows).
    fn upsert(&mut self, secret: K) -> BoxFuture<'_, bool>;
    /// `secret` was deleted, or left the watch's selection.
    fn remove(&mut self, secret: K) -> BoxFuture<'_, ()>;
}

/// A list this watch completed, for its log line and the readiness.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Listed {
    /// The objects decoded.
    pub(crate) decoded: usize,
    /// The objects found as the index holds them, and kept without decoding.
    pub(crate) unchanged: usize,
    /// Whether it was streamed.
    pub(crate) streamed: bool,
    /// Whether it is this watch's first complete list.
    pub(crate) first: bool,
}

/// What the watch's loop does after one input.
#[derive(Debug)]
pub(crate) enum Step {
    /// The event is applied; wait for the next.
    Applied,
    /// A list completed.
    Listed(Listed),
    /// The watch failed; the watcher retries with backoff.
    Retry(watcher::Error),
    /// The API server refuses a streamed list: start the watch again, with a paged list.
    ListInstead(watcher::Error),
}

/// What a list gathers between `Init` and `InitDone`.
struct Listing<K> {
    /// Objects to decode, at most [`DECODED_TOGETHER`].
    undecoded: Vec<K>,
    /// What the list's decoded parts lock.
    prepared: Vec<PreparedSecret>,
    /// The resourceVersion of each object in `prepared`.
    versions: Vec<(SecretRef, String)>,
    /// Objects found with the version the index holds them at.
    unchanged: HashSet<SecretRef>,
    /// What a namespace's bound will not keep, let go as the list goes.
    bound: ListingBound,
}

impl<K> Default for Listing<K> {
    fn default() -> Self {
        Listing {
            undecoded: Vec::new(),
            prepared: Vec::new(),
            versions: Vec::new(),
            unchanged: HashSet::new(),
            bound: crate::core::Index::default().listing_bound(),
        }
    }
}

impl<K> Listing<K> {
    fn add(&mut self, part: ListedPart) {
        let from = self.prepared.len();
        self.prepared.extend(part.prepared);
        self.versions.extend(part.versions);
        // A list holds about a bound's worth of parsed objects per namespace
        // (--max-namespace-objects), not all a tenant wrote, and walks only the namespaces
        // this part takes over it.
        self.bound.add(&mut self.prepared, from);
    }
}

/// One release watch's state.
pub(crate) struct ReleaseWatch<K> {
    mode: InitialList,
    /// Whether the watch streams its lists.
    streaming: bool,
    /// Whether a streamed list completed: then the server streams, and an error later is not a
    /// refusal.
    streamed_once: bool,
    /// The list under way, between `Init` and `InitDone`.
    listing: Option<Listing<K>>,
    /// The resourceVersion of each object this watch put in the index: a list again (after
    /// the watch expired) keeps an object found at the same version as it is, undecoded.
    versions: HashMap<SecretRef, String>,
    listed_once: bool,
}

impl<K: ReleaseObject> ReleaseWatch<K> {
    /// A watch started by `mode`, streaming its first list when `streaming`.
    pub(crate) fn new(mode: InitialList, streaming: bool) -> Self {
        ReleaseWatch {
            mode,
            streaming,
            streamed_once: false,
            listing: None,
            versions: HashMap::new(),
            listed_once: false,
        }
    }

    /// Whether the watch (as started now) streams its lists.
    pub(crate) fn streaming(&self) -> bool {
        self.streaming
    }

    /// Applies one of the watcher's items to the index through `index`.
    pub(crate) async fn apply(
        &mut self,
        item: Result<WatchEvent<K>, watcher::Error>,
        index: &mut impl ReleaseIndexWriter<K>,
    ) -> Step {
        let event = match item {
            Ok(event) => event,
            Err(error) => return self.failed(error),
        };
        match event {
            WatchEvent::Init => self.listing = Some(Listing::default()),
            WatchEvent::InitApply(secret) => self.listed(secret, index).await,
            WatchEvent::InitDone => return Step::Listed(self.list_done(index).await),
            WatchEvent::Apply(secret) => {
                let (reference, version) = (secret_ref(&secret), resource_version(&secret));
                self.versions.remove(&reference);
                if index.upsert(secret).await {
                    if let Some(version) = version {
                        self.versions.insert(reference, version);
                    }
                }
            }
            WatchEvent::Delete(secret) => {
                self.versions.remove(&secret_ref(&secret));
                index.remove(secret).await;
            }
        }
        Step::Applied
    }

    /// The watch failed with `error`: a streamed start the server refuses (in `auto`, before
    /// one completed) starts again with a list, from now on; anything else is retried.
    fn failed(&mut self, error: watcher::Error) -> Step {
        if self.streaming
            && !self.streamed_once
            && self.mode == InitialList::Auto
            && initial_list::refuses_streaming(&error)
        {
            // The server's version said WatchList, its answer says not (the feature gate
            // turned off, an etcd without progress requests).
            self.streaming = false;
            return Step::ListInstead(error);
        }
        Step::Retry(error)
    }

    /// An object of the list under way: kept as it is when the index holds it at the version
    /// listed, else decoded with the [`DECODED_TOGETHER`] before it.
    async fn listed(&mut self, secret: K, index: &mut impl ReleaseIndexWriter<K>) {
        let listing = self.listing.get_or_insert_with(Listing::default);
        let (reference, version) = (secret_ref(&secret), resource_version(&secret));
        let same = version.is_some() && self.versions.get(&reference) == version.as_ref();
        if same && index.holds(&reference) {
            index.kept_unchanged();
            listing.unchanged.insert(reference);
            return;
        }
        listing.undecoded.push(secret);
        if listing.undecoded.len() >= DECODED_TOGETHER {
            let part = std::mem::take(&mut listing.undecoded);
            listing.add(index.decode_part(part).await);
        }
    }

    /// The list under way is complete: it replaces what the index held of this watch's scope
    /// and kind.
    async fn list_done(&mut self, index: &mut impl ReleaseIndexWriter<K>) -> Listed {
        let mut listing = self.listing.take().unwrap_or_default();
        let part = std::mem::take(&mut listing.undecoded);
        listing.add(index.decode_part(part).await);
        let (decoded, unchanged) = (listing.prepared.len(), listing.unchanged.len());
        let reports = index.relist(listing.prepared, listing.unchanged).await;
        // What the list kept keeps its version; what it decoded has its new one.
        self.versions.retain(|reference, _| index.holds(reference));
        self.versions.extend(listing.versions);
        index.read_again(reports).await;
        let listed = Listed {
            decoded,
            unchanged,
            streamed: self.streaming,
            first: !self.listed_once,
        };
        self.streamed_once |= self.streaming;
        self.listed_once = true;
        listed
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use k8s_openapi::api::core::v1::{ConfigMap, Secret};
    use kube::core::Status as ApiStatus;
    use serde_json::json;

    use kube::ResourceExt;

    use super::*;
    use crate::core::test_util::{helm_payload, release_json, release_secret_json};
    use crate::core::{release_secret_from_parts, Index, ReleaseDriver, Status};
    use crate::readiness::{Readiness, ReadyState};

    /// The index a watch writes, without the cluster: objects decode as they would, and every
    /// release is stored in its own namespace, so the storage gate has nothing to ask.
    #[derive(Default)]
    struct TestIndex {
        index: Arc<Mutex<Index>>,
        /// The objects decoded, by name, in order.
        decoded: Vec<String>,
    }

    impl TestIndex {
        /// Another watch's writer on the same index.
        fn beside(&self) -> TestIndex {
            TestIndex {
                index: self.index.clone(),
                decoded: Vec::new(),
            }
        }

        fn holds(&self, name: &str) -> bool {
            let index = self.index.lock().unwrap();
            ReleaseDriver::ALL.iter().any(|&driver| {
                index.holds_secret(&SecretRef {
                    namespace: "apps".into(),
                    name: name.into(),
                    driver,
                })
            })
        }

        fn decode<K: ReleaseObject>(&mut self, secret: &K) -> Option<crate::core::ReleaseSecret> {
            let reference = secret_ref(secret);
            self.decoded.push(reference.name.clone());
            release_secret_from_parts(reference, secret.labels().clone(), secret.payload()?).ok()
        }
    }

    impl<K: ReleaseObject> ReleaseIndexWriter<K> for TestIndex {
        fn holds(&self, secret: &SecretRef) -> bool {
            self.index.lock().unwrap().holds_secret(secret)
        }

        fn decode_part(&mut self, part: Vec<K>) -> BoxFuture<'_, ListedPart> {
            let mut listed = ListedPart::default();
            let mut releases = Vec::new();
            for secret in &part {
                if let Some(release) = self.decode(secret) {
                    let version = resource_version(secret).unwrap_or_default();
                    listed.versions.push((release.secret.clone(), version));
                    releases.push(release);
                }
            }
            listed.prepared = Index::prepare(releases);
            Box::pin(async move { listed })
        }

        fn relist(
            &mut self,
            listed: Vec<PreparedSecret>,
            unchanged: HashSet<SecretRef>,
        ) -> BoxFuture<'_, Vec<UpdateReport>> {
            let reports = self
                .index
                .lock()
                .unwrap()
                .relist(None, K::DRIVER, &unchanged, listed);
            Box::pin(async move { reports })
        }

        fn read_again(&mut self, _: Vec<UpdateReport>) -> BoxFuture<'_, ()> {
            Box::pin(async {})
        }

        fn upsert(&mut self, secret: K) -> BoxFuture<'_, bool> {
            let decoded = self.decode(&secret);
            let mut index = self.index.lock().unwrap();
            let indexed = decoded.is_some();
            let _report = match decoded {
                Some(release) => index.upsert(release),
                None => index.remove_secret(&secret_ref(&secret)),
            };
            Box::pin(async move { indexed })
        }

        fn remove(&mut self, secret: K) -> BoxFuture<'_, ()> {
            self.index
                .lock()
                .unwrap()
                .remove_secret(&secret_ref(&secret));
            Box::pin(async {})
        }
    }

    /// Revision 1 of release `name` in `apps`, as a Secret at resourceVersion `version`.
    fn secret(name: &str, version: &str) -> Secret {
        let release = release_json("apps", name, 1, Status::Deployed, "");
        let mut secret: Secret = serde_json::from_value(release_secret_json(&release)).unwrap();
        secret.metadata.resource_version = Some(version.into());
        secret
    }

    /// Revision 1 of release `name` in `apps`, as Helm's ConfigMap driver keeps it.
    fn config_map(name: &str, version: &str) -> ConfigMap {
        let release = release_json("apps", name, 1, Status::Deployed, "");
        serde_json::from_value(json!({
            "metadata": {"name": format!("sh.helm.release.v1.{name}.v1"), "namespace": "apps",
                         "resourceVersion": version,
                         "labels": {"owner": "helm", "name": name, "status": "deployed", "version": "1"}},
            "data": {"release": helm_payload(&release)},
        }))
        .unwrap()
    }

    fn name(release: &str) -> String {
        format!("sh.helm.release.v1.{release}.v1")
    }

    fn gone() -> watcher::Error {
        watcher::Error::WatchError(
            ApiStatus::failure("too old resource version", "Expired")
                .with_code(410)
                .boxed(),
        )
    }

    fn refused() -> watcher::Error {
        watcher::Error::WatchStartFailed(kube::Error::Api(
            ApiStatus::failure("sendInitialEvents is forbidden", "Invalid")
                .with_code(422)
                .boxed(),
        ))
    }

    /// Applies `events` in order; the steps they made.
    async fn run<K: ReleaseObject>(
        watch: &mut ReleaseWatch<K>,
        index: &mut TestIndex,
        events: Vec<Result<WatchEvent<K>, watcher::Error>>,
    ) -> Vec<Step> {
        let mut steps = Vec::new();
        for event in events {
            steps.push(watch.apply(event, index).await);
        }
        steps
    }

    fn listed(steps: &[Step]) -> Vec<Listed> {
        steps
            .iter()
            .filter_map(|s| match s {
                Step::Listed(listed) => Some(*listed),
                _ => None,
            })
            .collect()
    }

    #[tokio::test]
    async fn a_list_interrupted_by_a_410_is_listed_again_from_the_start() {
        let mut watch = ReleaseWatch::<Secret>::new(InitialList::Auto, true);
        let mut index = TestIndex::default();
        let steps = run(
            &mut watch,
            &mut index,
            vec![
                Ok(WatchEvent::Init),
                Ok(WatchEvent::InitApply(secret("web", "1"))),
                Err(gone()),
                Ok(WatchEvent::Init),
                Ok(WatchEvent::InitApply(secret("db", "2"))),
                Ok(WatchEvent::InitDone),
            ],
        )
        .await;
        // A 410 asks for a start again, even before a streamed list completed: not a refusal.
        assert!(matches!(steps[2], Step::Retry(_)));
        assert!(watch.streaming());
        // Only the list that completed counts: what the interrupted one saw is not indexed.
        assert!(index.holds(&name("db")));
        assert!(!index.holds(&name("web")));
        let listed = listed(&steps);
        assert_eq!(listed.len(), 1);
        assert_eq!((listed[0].decoded, listed[0].first), (1, true));
        assert!(listed[0].streamed);
    }

    #[tokio::test]
    async fn nothing_is_indexed_before_the_list_completes() {
        let mut watch = ReleaseWatch::<Secret>::new(InitialList::List, false);
        let mut index = TestIndex::default();
        let steps = run(
            &mut watch,
            &mut index,
            vec![
                Ok(WatchEvent::Init),
                Ok(WatchEvent::InitApply(secret("web", "1"))),
            ],
        )
        .await;
        assert!(listed(&steps).is_empty());
        assert!(!index.holds(&name("web")));
        // Control: the list completes, and the release is indexed.
        let steps = run(&mut watch, &mut index, vec![Ok(WatchEvent::InitDone)]).await;
        assert_eq!(listed(&steps).len(), 1);
        assert!(index.holds(&name("web")));
    }

    #[tokio::test]
    async fn a_refused_stream_starts_again_with_a_list_and_lists_from_then_on() {
        let mut watch = ReleaseWatch::<Secret>::new(InitialList::Auto, true);
        let mut index = TestIndex::default();
        let steps = run(&mut watch, &mut index, vec![Err(refused())]).await;
        assert!(matches!(steps[0], Step::ListInstead(_)));
        assert!(!watch.streaming());
        // Listing, a 422 is only a failure to retry.
        let steps = run(
            &mut watch,
            &mut index,
            vec![
                Err(refused()),
                Ok(WatchEvent::Init),
                Ok(WatchEvent::InitApply(secret("web", "1"))),
                Ok(WatchEvent::InitDone),
            ],
        )
        .await;
        assert!(matches!(steps[0], Step::Retry(_)));
        let listed = listed(&steps);
        assert_eq!(listed.len(), 1);
        assert!(!listed[0].streamed && listed[0].first);
        assert!(index.holds(&name("web")));
    }

    #[tokio::test]
    async fn a_server_that_streamed_once_or_a_stream_asked_for_is_not_refusing() {
        // Control for the refusal: after a streamed list completed, a 422 is retried.
        let mut watch = ReleaseWatch::<Secret>::new(InitialList::Auto, true);
        let mut index = TestIndex::default();
        let steps = run(
            &mut watch,
            &mut index,
            vec![
                Ok(WatchEvent::Init),
                Ok(WatchEvent::InitDone),
                Err(refused()),
            ],
        )
        .await;
        assert!(matches!(steps[2], Step::Retry(_)));
        assert!(watch.streaming());
        // `--initial-list=stream` keeps streaming whatever the server answers.
        let mut watch = ReleaseWatch::<Secret>::new(InitialList::Stream, true);
        let steps = run(&mut watch, &mut index, vec![Err(refused())]).await;
        assert!(matches!(steps[0], Step::Retry(_)));
        assert!(watch.streaming());
    }

    #[tokio::test]
    async fn a_relist_drops_a_secret_gone_and_keeps_unchanged_ones_undecoded() {
        let mut watch = ReleaseWatch::<Secret>::new(InitialList::List, false);
        let mut index = TestIndex::default();
        run(
            &mut watch,
            &mut index,
            vec![
                Ok(WatchEvent::Init),
                Ok(WatchEvent::InitApply(secret("web", "1"))),
                Ok(WatchEvent::InitApply(secret("db", "2"))),
                Ok(WatchEvent::InitDone),
            ],
        )
        .await;
        assert!(index.holds(&name("web")) && index.holds(&name("db")));
        index.decoded.clear();
        // The watch expired; `db` was deleted while it was down, `web` is as it was.
        let steps = run(
            &mut watch,
            &mut index,
            vec![
                Err(gone()),
                Ok(WatchEvent::Init),
                Ok(WatchEvent::InitApply(secret("web", "1"))),
                Ok(WatchEvent::InitDone),
            ],
        )
        .await;
        assert!(index.holds(&name("web")));
        assert!(!index.holds(&name("db")));
        assert!(index.decoded.is_empty(), "web is kept, not decoded again");
        let listed = listed(&steps);
        assert_eq!((listed[0].decoded, listed[0].unchanged), (0, 1));
        assert!(!listed[0].first);
        // Control: an object listed at a new version is decoded again.
        run(
            &mut watch,
            &mut index,
            vec![
                Ok(WatchEvent::Init),
                Ok(WatchEvent::InitApply(secret("web", "3"))),
                Ok(WatchEvent::InitDone),
            ],
        )
        .await;
        assert_eq!(index.decoded, vec![name("web")]);
    }

    #[tokio::test]
    async fn an_object_written_since_the_list_is_decoded_again_when_listed() {
        let mut watch = ReleaseWatch::<Secret>::new(InitialList::List, false);
        let mut index = TestIndex::default();
        run(
            &mut watch,
            &mut index,
            vec![
                Ok(WatchEvent::Init),
                Ok(WatchEvent::InitApply(secret("web", "1"))),
                Ok(WatchEvent::InitDone),
                Ok(WatchEvent::Apply(secret("web", "5"))),
                Ok(WatchEvent::Init),
                Ok(WatchEvent::InitApply(secret("web", "5"))),
                Ok(WatchEvent::InitDone),
            ],
        )
        .await;
        // Listed at 1, written at 5, listed at 5: the write's version is the one kept.
        assert_eq!(index.decoded, vec![name("web"), name("web")]);
        // A delete forgets the version: listed again, it is decoded.
        run(
            &mut watch,
            &mut index,
            vec![
                Ok(WatchEvent::Delete(secret("web", "5"))),
                Ok(WatchEvent::Init),
                Ok(WatchEvent::InitApply(secret("web", "5"))),
                Ok(WatchEvent::InitDone),
            ],
        )
        .await;
        assert_eq!(index.decoded.len(), 3);
        assert!(index.holds(&name("web")));
    }

    #[tokio::test]
    async fn a_config_map_list_that_finishes_first_neither_drops_secrets_nor_makes_ready() {
        let readiness = Readiness::new(2);
        let mut secrets = ReleaseWatch::<Secret>::new(InitialList::List, false);
        let mut secret_index = TestIndex::default();
        let mut config_maps = ReleaseWatch::<ConfigMap>::new(InitialList::List, false);
        let mut config_map_index = secret_index.beside();
        let ready_after = |steps: Vec<Step>| {
            for listed in listed(&steps) {
                if listed.first {
                    readiness.scope_listed();
                }
            }
            readiness.current() == ReadyState::Ready
        };
        // The Secrets' list starts; the ConfigMaps' starts and completes before it.
        let steps = run(
            &mut secrets,
            &mut secret_index,
            vec![
                Ok(WatchEvent::Init),
                Ok(WatchEvent::InitApply(secret("web", "1"))),
            ],
        )
        .await;
        assert!(!ready_after(steps));
        let steps = run(
            &mut config_maps,
            &mut config_map_index,
            vec![
                Ok(WatchEvent::Init),
                Ok(WatchEvent::InitApply(config_map("db", "2"))),
                Ok(WatchEvent::InitDone),
            ],
        )
        .await;
        assert!(!ready_after(steps), "the Secrets are not listed yet");
        assert!(config_map_index.holds(&name("db")));
        let steps = run(
            &mut secrets,
            &mut secret_index,
            vec![Ok(WatchEvent::InitDone)],
        )
        .await;
        assert!(ready_after(steps));
        // Each list replaced its own kind only.
        assert!(secret_index.holds(&name("web")) && secret_index.holds(&name("db")));
        // A ConfigMap relist again drops its own kind's, not the Secrets'.
        let steps = run(
            &mut config_maps,
            &mut config_map_index,
            vec![Ok(WatchEvent::Init), Ok(WatchEvent::InitDone)],
        )
        .await;
        assert!(ready_after(steps));
        assert!(secret_index.holds(&name("web")));
        assert!(!secret_index.holds(&name("db")));
    }
}
