//! The learning recorder's shell (issue 68): each warned or denied write that is not a dry run
//! is observed on the request path ([`Recorder::observe`], a short lock and the entry's key),
//! and every `--learn-interval` (a minute) the namespaces changed since are merged into their ConfigMaps
//! in the locker's own namespace ([`LearnedConfigMaps`]): `<prefix><namespace>`, data key
//! [`crate::core::LEARNED_KEY`], labelled for `kubectl locker learn`. What is kept, and never
//! kept, is core's ([`crate::core::Learning`], docs/learning.md).
//!
//! Every replica writes what it saw: a review goes to any replica, and a replica that is not
//! the leader answers as many as the leader does. Each merges its own delta into what is
//! stored, with the resourceVersion as precondition (another replica's write in between is a
//! 409: read again, merge again), so no count is lost or counted twice; a write that fails is
//! kept for the next flush. What a replica saw in its last interval is written once more on
//! shutdown.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, ObjectMeta, PostParams};
use kube::Client;

use crate::core::{merge_learned, Learned, Learning, LearningObservation, LEARNED_KEY};
use crate::metrics::{LearnedWrite, Metrics};

/// Reads and merges again after another replica's write, this many times per flush.
const WRITE_ATTEMPTS: usize = 4;

/// The label every learned ConfigMap carries, and its value.
pub(crate) const COMPONENT_LABEL: (&str, &str) = ("app.kubernetes.io/component", "learned");
/// The label naming the namespace whose releases a learned ConfigMap is about.
pub(crate) const NAMESPACE_LABEL: &str = "helm-locker.io/learned-namespace";

/// The request handlers' end: what was learned since the last flush, behind a lock held for
/// one observation.
pub(crate) struct Recorder {
    learning: Mutex<Learning>,
}

impl Recorder {
    pub(crate) fn new() -> Self {
        Recorder {
            learning: Mutex::new(Learning::new()),
        }
    }

    /// Records one would-be denial, now.
    pub(crate) fn observe(&self, observation: &LearningObservation<'_>) {
        let now = crate::lock_exception::now();
        self.lock().observe(observation, now);
    }

    /// Records that writer rule `id` let a write to a release of `namespace` through.
    pub(crate) fn use_rule(&self, namespace: &str, id: &str) {
        let now = crate::lock_exception::now();
        self.lock().use_rule(namespace, id, now);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Learning> {
        // A panic while the lock was held leaves counts, never a broken invariant.
        self.learning.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Where the learned evidence is kept: one ConfigMap per namespace written to, in `namespace`
/// (the locker's own), named `<prefix><namespace written to>`.
#[derive(Clone)]
pub(crate) struct LearnedConfigMaps {
    pub client: Client,
    pub namespace: String,
    pub prefix: String,
}

impl LearnedConfigMaps {
    fn api(&self) -> Api<ConfigMap> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    pub(crate) fn name(&self, namespace: &str) -> String {
        format!("{}{namespace}", self.prefix)
    }

    /// Entries stored per namespace written to, from the labelled ConfigMaps.
    async fn stored_entries(&self) -> Result<HashMap<String, usize>, kube::Error> {
        let selector = format!("{}={}", COMPONENT_LABEL.0, COMPONENT_LABEL.1);
        let list = self
            .api()
            .list(&ListParams::default().labels(&selector))
            .await?;
        Ok(list
            .items
            .iter()
            .filter_map(|cm| {
                let learned = stored_learned(cm)?;
                (cm.metadata.name.as_deref() == Some(&self.name(&learned.namespace)))
                    .then_some((learned.namespace, learned.entries.len()))
            })
            .collect())
    }

    /// Merges `learned` into its namespace's ConfigMap (made when missing); the entries the
    /// ConfigMap holds after.
    async fn write(&self, learned: &Learned, metrics: &Metrics) -> Result<usize, kube::Error> {
        let api = self.api();
        let name = self.name(&learned.namespace);
        let mut attempt = 0;
        loop {
            attempt += 1;
            let existing = api.get_opt(&name).await?;
            let stored = existing
                .as_ref()
                .and_then(stored_learned)
                .filter(|stored| stored.namespace == learned.namespace)
                .unwrap_or_else(|| Learned {
                    namespace: learned.namespace.clone(),
                    ..Learned::default()
                });
            let (merged, dropped) = merge_learned(stored, learned.clone());
            metrics.learned_dropped.inc_by(dropped);
            let entries = merged.entries.len();
            let object = configmap(
                &name,
                &merged,
                existing.and_then(|cm| cm.metadata.resource_version),
            );
            let post = PostParams {
                field_manager: Some("helm-locker".into()),
                ..PostParams::default()
            };
            let written = match object.metadata.resource_version {
                Some(_) => api.replace(&name, &post, &object).await,
                None => api.create(&post, &object).await,
            };
            match written {
                Ok(_) => return Ok(entries),
                // Another replica wrote (or created) it first: merge into what it wrote.
                Err(kube::Error::Api(status))
                    if (status.is_conflict() || status.is_already_exists())
                        && attempt < WRITE_ATTEMPTS =>
                {
                    metrics.learned_writes.inc(LearnedWrite::Conflict);
                }
                Err(e) => return Err(e),
            }
        }
    }
}

/// A stored ConfigMap's evidence; `None` when it holds none that reads (a hand-edited one is
/// then written anew).
fn stored_learned(cm: &ConfigMap) -> Option<Learned> {
    let text = cm.data.as_ref()?.get(LEARNED_KEY)?;
    match serde_json::from_str(text) {
        Ok(learned) => Some(learned),
        Err(e) => {
            tracing::warn!(configmap = cm.metadata.name.as_deref().unwrap_or_default(), error = %e, "learned evidence that does not read: written anew");
            None
        }
    }
}

/// The ConfigMap that holds `learned`, at `resource_version` (none: to be created).
fn configmap(name: &str, learned: &Learned, resource_version: Option<String>) -> ConfigMap {
    let text = serde_json::to_string(learned).expect("learned evidence is plain data");
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            resource_version,
            labels: Some(BTreeMap::from([
                (COMPONENT_LABEL.0.to_string(), COMPONENT_LABEL.1.to_string()),
                (NAMESPACE_LABEL.to_string(), learned.namespace.clone()),
                (
                    "app.kubernetes.io/managed-by".to_string(),
                    "helm-locker".to_string(),
                ),
            ])),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([(LEARNED_KEY.to_string(), text)])),
        ..ConfigMap::default()
    }
}

/// Writes what the recorder learned, every `interval`, and once more when asked
/// ([`Flusher::flush`] on shutdown).
#[derive(Clone)]
pub(crate) struct Flusher {
    pub recorder: Arc<Recorder>,
    pub store: LearnedConfigMaps,
    pub metrics: Arc<Metrics>,
    /// Entries stored, by namespace written to (`helm_locker_learned_entries` is their sum).
    stored: Arc<Mutex<HashMap<String, usize>>>,
}

impl Flusher {
    pub(crate) fn new(
        recorder: Arc<Recorder>,
        store: LearnedConfigMaps,
        metrics: Arc<Metrics>,
    ) -> Self {
        Flusher {
            recorder,
            store,
            metrics,
            stored: Arc::default(),
        }
    }

    /// Flushes every `interval`, for ever; first reads how much is stored, for the gauge.
    pub(crate) async fn run(self, interval: Duration) {
        match self.store.stored_entries().await {
            Ok(stored) => {
                *self.stored.lock().unwrap_or_else(PoisonError::into_inner) = stored;
                self.set_gauge();
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot list the learned ConfigMaps (the gauge counts what is written from now)");
            }
        }
        let mut tick = tokio::time::interval(interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            tick.tick().await;
            self.flush().await;
        }
    }

    /// Writes every namespace changed since the last flush; what cannot be written is kept
    /// for the next.
    pub(crate) async fn flush(&self) {
        use tracing::Instrument as _;
        let (dirty, dropped) = {
            let mut learning = self.recorder.lock();
            (learning.take_dirty(), learning.take_dropped())
        };
        self.metrics.learned_dropped.inc_by(dropped);
        if dirty.is_empty() {
            return;
        }
        let span = tracing::info_span!("learned_flush", namespaces = dirty.len());
        async {
            let mut failed = Vec::new();
            for learned in dirty {
                match self.store.write(&learned, &self.metrics).await {
                    Ok(entries) => {
                        self.metrics.learned_writes.inc(LearnedWrite::Written);
                        self.stored
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .insert(learned.namespace.clone(), entries);
                    }
                    Err(e) => {
                        self.metrics.learned_writes.inc(LearnedWrite::Failed);
                        tracing::warn!(configmap = %self.store.name(&learned.namespace), error = %e, "cannot write the learned evidence: kept for the next flush");
                        failed.push(learned);
                    }
                }
            }
            if !failed.is_empty() {
                let mut learning = self.recorder.lock();
                for learned in failed {
                    learning.give_back(learned);
                }
            }
            self.set_gauge();
        }
        .instrument(span)
        .await
    }

    fn set_gauge(&self) {
        let stored = self.stored.lock().unwrap_or_else(PoisonError::into_inner);
        let entries: usize = stored.values().sum();
        self.metrics
            .learned_entries
            .set(i64::try_from(entries).unwrap_or(i64::MAX));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_learned_configmap_is_labelled_for_learn_and_holds_the_json() {
        let learned = Learned {
            namespace: "shop".into(),
            ..Learned::default()
        };
        let cm = configmap("helm-locker-learned-shop", &learned, None);
        let labels = cm.metadata.labels.as_ref().unwrap();
        assert_eq!(labels["app.kubernetes.io/component"], "learned");
        assert_eq!(labels["helm-locker.io/learned-namespace"], "shop");
        assert_eq!(stored_learned(&cm), Some(learned));
        // A ConfigMap edited by hand into something else is no evidence, and no panic.
        let mut edited = cm.clone();
        edited
            .data
            .as_mut()
            .unwrap()
            .insert(LEARNED_KEY.into(), "{not json".into());
        assert_eq!(stored_learned(&edited), None);
    }
}
