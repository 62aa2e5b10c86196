//! LockExceptions from the API server: a watch on every namespace (or the configured ones)
//! that keeps the index's open exceptions current. An exception leaves the index when it closes
//! (its time is up, or it is deleted), so the index changes then too and the reverter looks again
//! at the drift it left behind. One that cannot be honoured is logged and gets one Warning Event.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::api::Api;
use kube::runtime::events::{Recorder, Reporter};

use crate::events::Reason;
use kube::runtime::watcher::{self, Event as WatchEvent};
use kube::runtime::WatchStreamExt;
use kube::{Client, Resource, ResourceExt};

use crate::core::Exception;
use crate::index_store::IndexStore;
use crate::lock_exception::{exception, now, LockException};
use crate::metrics::Metrics;

/// How often open exceptions are looked at for their end and the gauges refreshed.
const TICK: Duration = Duration::from_secs(1);

pub(crate) struct LockExceptions {
    pub client: Client,
    /// `None`: every namespace.
    pub namespace: Option<String>,
    pub index: Arc<IndexStore>,
    pub metrics: Arc<Metrics>,
    /// The longest an exception may stay open from its creation (`--exception-max-duration`).
    pub max: Duration,
    /// Close an exception when its release's next revision is deployed (a successful
    /// `helm upgrade` or `helm rollback`; `--exceptions-end-on-upgrade`).
    pub end_on_upgrade: bool,
}

impl LockExceptions {
    pub(crate) async fn run(self) {
        let api: Api<LockException> = match &self.namespace {
            Some(ns) => Api::namespaced(self.client.clone(), ns),
            None => Api::all(self.client.clone()),
        };
        let recorder = Recorder::new(
            self.client.clone(),
            Reporter {
                controller: "helm-locker".into(),
                instance: std::env::var("HOSTNAME").ok(),
            },
        );
        let mut stream = watcher::watcher(api, watcher::Config::default())
            .default_backoff()
            .boxed();
        let mut all: BTreeMap<String, Exception> = BTreeMap::new();
        let mut listing: Option<BTreeMap<String, Exception>> = None;
        let mut warned: HashSet<String> = HashSet::new();
        // The release's newest revision when each exception was first seen.
        let mut revisions: BTreeMap<String, u64> = BTreeMap::new();
        let mut tick = tokio::time::interval(TICK);
        loop {
            tokio::select! {
                event = stream.next() => {
                    let Some(event) = event else { return };
                    match event {
                        Ok(WatchEvent::Init) => listing = Some(BTreeMap::new()),
                        Ok(WatchEvent::InitApply(le)) => {
                            if let (Some(list), Some(e)) = (listing.as_mut(), self.read(&le, &recorder, &mut warned).await) {
                                list.insert(e.name.clone(), e);
                            }
                        }
                        Ok(WatchEvent::InitDone) => {
                            all = listing.take().unwrap_or_default();
                            tracing::info!(exceptions = all.len(), "LockExceptions listed");
                        }
                        Ok(WatchEvent::Apply(le)) => {
                            let name = format!("{}/{}", le.namespace().unwrap_or_default(), le.name_any());
                            match self.read(&le, &recorder, &mut warned).await {
                                Some(e) => {
                                    tracing::info!(exception = %e.name, release = %e.release, users = ?e.users, groups = ?e.groups, paths = ?e.paths, until = e.until, reason = %e.reason, "LockException seen");
                                    all.insert(name, e);
                                }
                                None => { all.remove(&name); }
                            }
                        }
                        Ok(WatchEvent::Delete(le)) => {
                            all.remove(&format!("{}/{}", le.namespace().unwrap_or_default(), le.name_any()));
                        }
                        Err(e) => {
                            self.metrics.watch_restarts.inc();
                            tracing::warn!(error = %e, "LockException watch failed (is the CRD installed?); retrying with backoff");
                            continue;
                        }
                    }
                }
                _ = tick.tick() => {}
            }
            self.publish(&all, &mut revisions).await;
        }
    }

    /// A LockException as the core reads it; one that cannot be honoured is logged and gets a
    /// Warning Event, once per version of it.
    async fn read(
        &self,
        le: &LockException,
        recorder: &Recorder,
        warned: &mut HashSet<String>,
    ) -> Option<Exception> {
        match exception(le, self.max) {
            Ok(e) => {
                self.confirm(le, &e, recorder, warned).await;
                Some(e)
            }
            Err(why) => {
                let id = format!(
                    "{}/{}@{}",
                    le.namespace().unwrap_or_default(),
                    le.name_any(),
                    le.resource_version().unwrap_or_default()
                );
                if warned.insert(id) {
                    tracing::warn!(exception = %le.name_any(), namespace = ?le.namespace(), why = %why, "LockException not honoured");
                    crate::events::publish(
                        recorder,
                        &le.object_ref(&()),
                        Reason::LockExceptionInvalid,
                        crate::core::notes::exception_invalid(&why),
                    )
                    .await;
                }
                None
            }
        }
    }

    /// A Normal Event `LockExceptionOpen` on a LockException the locker honours, once per
    /// version of it: until when it is open, as the locker will close it (its `until`, or
    /// `--exception-max-duration` after its creation when that is sooner, said so).
    /// `kubectl locker unlock` waits for it and prints it.
    async fn confirm(
        &self,
        le: &LockException,
        e: &Exception,
        recorder: &Recorder,
        seen: &mut HashSet<String>,
    ) {
        let id = format!(
            "open:{}/{}@{}",
            le.namespace().unwrap_or_default(),
            le.name_any(),
            le.resource_version().unwrap_or_default()
        );
        if !seen.insert(id) {
            return;
        }
        let end = |t: i64| {
            humantime::format_rfc3339_seconds(
                std::time::UNIX_EPOCH + std::time::Duration::from_secs(t.max(0) as u64),
            )
            .to_string()
        };
        let requested = crate::lock_exception::unix_seconds(&le.spec.until);
        let capped = requested
            .filter(|requested| *requested > e.until)
            .map(|requested| (humantime::format_duration(self.max), end(requested)));
        let note = crate::core::notes::exception_open(end(e.until), capped);
        crate::events::publish(
            recorder,
            &le.object_ref(&()),
            Reason::LockExceptionOpen,
            note,
        )
        .await;
    }

    /// Puts the open exceptions in the index when they differ from what it holds (a closed
    /// one leaves it), and refreshes the gauges.
    async fn publish(
        &self,
        all: &BTreeMap<String, Exception>,
        revisions: &mut BTreeMap<String, u64>,
    ) {
        let now = now();
        let index = self.index.snapshot();
        revisions.retain(|name, _| all.contains_key(name));
        let newest = |e: &Exception| {
            index
                .release(&e.release)
                .and_then(|s| s.newest().map(|r| (r.revision, r.status)))
        };
        for e in all.values() {
            if let (false, Some((revision, _))) = (revisions.contains_key(&e.name), newest(e)) {
                revisions.insert(e.name.clone(), revision);
            }
        }
        // With --exceptions-end-on-upgrade, Helm deploying a newer revision ends it.
        let upgraded = |e: &Exception| {
            self.end_on_upgrade
                && matches!(
                    (newest(e), revisions.get(&e.name)),
                    (Some((revision, crate::core::Status::Deployed)), Some(seen)) if revision > *seen
                )
        };
        let open: Vec<Exception> = all
            .values()
            .filter(|e| e.is_open(now) && !upgraded(e))
            .cloned()
            .collect();
        let held: Vec<&Exception> = index.all_exceptions();
        if held.len() != open.len() || held.iter().zip(&open).any(|(a, b)| *a != b) {
            for closed in held
                .iter()
                .filter(|h| !open.iter().any(|o| o.name == h.name))
            {
                tracing::info!(exception = %closed.name, release = %closed.release, "LockException closed: the lock is back");
            }
            self.index
                .update(move |index| index.replace_exceptions(open))
                .await;
        }
        let index = self.index.snapshot();
        let open = index.all_exceptions();
        self.metrics.exceptions_open.set(open.len() as i64);
        self.metrics
            .exception_longest_open_seconds
            .set(open.iter().map(|e| now - e.opened).max().unwrap_or(0));
    }
}
