//! The one writer of the index. Requests read lock-free snapshots; every change (a release
//! Secret watched in any namespace, a re-list, the HelmRelease registrations, a folder reload)
//! goes through [`IndexStore::update`], which applies it to a copy under one lock held across
//! the whole load-change-publish, so no writer's change is lost to another's. The change runs
//! on tokio's blocking pool: a re-list parses every manifest (on every core).

use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;

use crate::core::{Authorship, Index, ReleaseKey, Status};

/// The index, shared between its writers (the sources, the HelmRelease controller) and many
/// readers (requests). Background tasks (the reverter, the HelmRelease status)
/// [`subscribe`](Self::subscribe) to hear about updates.
pub(crate) struct IndexStore {
    current: ArcSwap<Index>,
    /// Held across a whole update: one writer at a time.
    writer: Mutex<()>,
    updates: tokio::sync::watch::Sender<u64>,
    /// The census of the index for /metrics, and the update it was taken at.
    census: Mutex<Option<(u64, Arc<Census>)>>,
}

/// A pending release as the index holds it: its key, newest revision and status, and when the
/// API server created that revision's Secret (Unix seconds).
pub(crate) type Pending = (ReleaseKey, u64, Status, Option<i64>);

/// What /metrics reports of the index as a whole, taken in one walk over its releases and its
/// objects.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Census {
    /// Releases by their newest revision's status, in [`Status::ALL`]'s order.
    pub(crate) by_status: [usize; Status::ALL.len()],
    /// Releases whose newest revision's author is unknown.
    pub(crate) unknown_authors: usize,
    /// The releases Helm is at work on.
    pub(crate) pending: Vec<Pending>,
    /// Objects several releases claim (`helm_locker_claim_conflicts`).
    pub(crate) conflicts: usize,
}

impl Census {
    fn of(index: &Index) -> Census {
        let mut census = Census {
            conflicts: index.conflicts().len(),
            ..Census::default()
        };
        // In the index's own order: a count needs no sort of 50,000 keys.
        for release in index.releases_unordered() {
            let Some(newest) = release.newest() else {
                continue;
            };
            if matches!(newest.author, Authorship::Unknown(_)) {
                census.unknown_authors += 1;
            }
            if let Some(i) = Status::ALL.iter().position(|s| *s == newest.status) {
                census.by_status[i] += 1;
            }
            if newest.status.is_helm_at_work() {
                census.pending.push((
                    release.key.clone(),
                    newest.revision,
                    newest.status,
                    newest.created,
                ));
            }
        }
        census
    }
}

impl Default for IndexStore {
    fn default() -> Self {
        IndexStore::new(Index::default())
    }
}

impl IndexStore {
    pub(crate) fn new(index: Index) -> Self {
        IndexStore {
            current: ArcSwap::from_pointee(index),
            writer: Mutex::new(()),
            updates: tokio::sync::watch::channel(0).0,
            census: Mutex::new(None),
        }
    }

    /// The census of the current index: a walk over every release and object, made once per
    /// update of the index, not once per scrape (at 50,000 releases of 30 objects, the count of
    /// conflicts alone was a fifth of the CPU time of a `test_history` run that read `/metrics`
    /// while it waited). Blocking: async callers run it on the blocking pool.
    pub(crate) fn census(&self) -> Arc<Census> {
        let generation = *self.updates.borrow();
        // Held while counting: a second scrape waits for the first's census, not a walk of its own.
        let mut taken = self.census.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((at, census)) = &*taken {
            if *at == generation {
                return census.clone();
            }
        }
        let census = Arc::new(Census::of(&self.snapshot()));
        *taken = Some((generation, census.clone()));
        census
    }

    /// A receiver that changes after every update (the value counts updates).
    pub(crate) fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.updates.subscribe()
    }

    /// The current index for a short synchronous read (the head's fast path): lock-free, and
    /// it takes no reference count, which two cores answering reviews would contend for. Not to
    /// be held across an `.await` or for long: [`snapshot`](Self::snapshot) is for that.
    pub(crate) fn current(&self) -> arc_swap::Guard<Arc<Index>> {
        self.current.load()
    }

    /// The current snapshot; cheap, lock-free, and unaffected by later updates.
    pub(crate) fn snapshot(&self) -> Arc<Index> {
        self.current.load_full()
    }

    /// Applies a change to a copy of the current index and publishes it, all under the writer
    /// lock, on the calling thread: for synchronous callers and for changes too small to be
    /// worth a thread (async code uses [`update`](Self::update)).
    pub(crate) fn update_now<T>(&self, change: impl FnOnce(&mut Index) -> T) -> T {
        // A writer that panicked left the published index as it was: carry on.
        let _writer = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let mut next = Index::clone(&self.current.load());
        let out = change(&mut next);
        self.current.store(Arc::new(next));
        self.updates.send_modify(|n| *n += 1);
        out
    }

    /// [`update_now`](Self::update_now) on the blocking pool, so neither the wait for the
    /// writer lock nor a long change (a re-list parsing thousands of manifests) holds up the
    /// runtime's workers. The change runs in the caller's span: its log lines say whose it is.
    pub(crate) async fn update<T: Send + 'static>(
        self: &Arc<Self>,
        change: impl FnOnce(&mut Index) -> T + Send + 'static,
    ) -> T {
        let store = self.clone();
        let span = tracing::Span::current();
        match tokio::task::spawn_blocking(move || span.in_scope(|| store.update_now(change))).await
        {
            Ok(out) => out,
            Err(e) => std::panic::resume_unwind(e.into_panic()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::{ReleaseSecret, Status};

    use std::time::Duration;

    fn secret(ns: &str, name: &str) -> ReleaseSecret {
        helm_locker_core::test_util::release_secret(
            ns,
            name,
            1,
            Status::Deployed,
            &format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n"),
        )
    }

    #[test]
    fn the_census_is_of_the_index_now_and_taken_once_per_update() {
        let claiming = |release: &str| {
            helm_locker_core::test_util::release_secret(
                "a",
                release,
                1,
                Status::Deployed,
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: shared\n",
            )
        };
        let store = IndexStore::new(Index::new());
        store.update_now(|index| index.upsert(claiming("one")));
        assert_eq!(store.census().conflicts, 0);
        store.update_now(|index| index.upsert(claiming("two")));
        let census = store.census();
        assert_eq!(census.conflicts, 1);
        let deployed = Status::ALL
            .iter()
            .position(|s| *s == Status::Deployed)
            .unwrap();
        assert_eq!(census.by_status[deployed], 2);
        assert_eq!(census.by_status.iter().sum::<usize>(), 2);
        assert!(Arc::ptr_eq(&census, &store.census()), "the census kept");
        store.update_now(|index| {
            index.remove_secret(&crate::core::SecretRef::secret(
                "a",
                "sh.helm.release.v1.two.v1",
            ))
        });
        assert_eq!(store.census().conflicts, 0);
        assert_eq!(store.census().by_status.iter().sum::<usize>(), 1);
    }

    #[test]
    fn snapshots_are_stable_across_updates() {
        let store = IndexStore::new(Index::new());
        let before = store.snapshot();
        store.update_now(|index| index.upsert(secret("a", "a")));
        assert_eq!(before.release_count(), 0);
        assert_eq!(store.snapshot().release_count(), 1);
    }

    /// A slow re-list of namespace `a` races single updates from namespace `b`'s watch and
    /// registrations from the HelmRelease controller: each writer's change survives.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_slow_relist_loses_no_concurrent_change() {
        let store = Arc::new(IndexStore::new(Index::new()));
        let relist = {
            let store = store.clone();
            tokio::spawn(async move {
                store
                    .update(|index| {
                        let listed: Vec<_> =
                            (0..200).map(|i| secret("a", &format!("r{i}"))).collect();
                        index.upsert_many(listed);
                        // A re-list of thousands of releases takes a while.
                        std::thread::sleep(Duration::from_millis(300));
                    })
                    .await
            })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        let mut others = Vec::new();
        for i in 0..20 {
            let store = store.clone();
            others.push(tokio::spawn(async move {
                store
                    .update(move |index| index.upsert(secret("b", &format!("w{i}"))))
                    .await;
                store
                    .update(move |index| {
                        index.set_registration(
                            crate::core::ReleaseKey::new("a", format!("r{i}")),
                            Some(Default::default()),
                        )
                    })
                    .await;
            }));
        }
        relist.await.unwrap();
        for other in others {
            other.await.unwrap();
        }
        let index = store.snapshot();
        assert_eq!(index.release_count(), 220, "a writer's releases were lost");
        for i in 0..20 {
            let key = crate::core::ReleaseKey::new("a", format!("r{i}"));
            assert!(
                index.registration(&key).is_some(),
                "registration of {key} lost"
            );
        }
    }
}
