//! HelmReleases in the registration namespace: every replica turns them into registrations in
//! the index (so admission knows which releases are locked); the leader keeps their status
//! current and records `Locked` / `Transitioning` Events.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::events::Recorder;
use kube::runtime::watcher::{self, Event as WatchEvent};
use kube::runtime::WatchStreamExt;
use kube::{Client, Resource, ResourceExt};
use serde_json::json;
use tokio::sync::watch;

use crate::core::{Mode, Status};
use crate::crd::{desired_status, registrations, target_release, transition_event, HelmRelease};
use crate::index_store::IndexStore;
use crate::metrics::Metrics;
use crate::readiness::Readiness;

pub(crate) struct HelmReleases {
    pub client: Client,
    pub namespace: String,
    pub index: Arc<IndexStore>,
    pub config: Arc<crate::live_config::LiveConfig>,
    pub leader: watch::Receiver<bool>,
    pub recorder: Recorder,
    pub metrics: Arc<Metrics>,
    /// Readiness: this watch is one more scope that must list before admission is ready.
    pub readiness: Arc<Readiness>,
}

impl HelmReleases {
    pub(crate) async fn run(self) {
        let api: Api<HelmRelease> = Api::namespaced(self.client.clone(), &self.namespace);
        let mut stream = watcher::watcher(api.clone(), watcher::Config::default())
            .default_backoff()
            .boxed();
        let mut hrs: BTreeMap<String, HelmRelease> = BTreeMap::new();
        let mut listing: Option<BTreeMap<String, HelmRelease>> = None;
        let mut errors: BTreeMap<String, String> = BTreeMap::new();
        let mut updates = self.index.subscribe();
        let mut leader = self.leader.clone();
        let mut first_list = true;
        loop {
            tokio::select! {
                event = stream.next() => {
                    let Some(event) = event else { return };
                    let changed = match event {
                        Ok(WatchEvent::Init) => { listing = Some(BTreeMap::new()); false }
                        Ok(WatchEvent::InitApply(hr)) => {
                            if let Some(l) = listing.as_mut() { l.insert(hr.name_any(), hr); }
                            false
                        }
                        Ok(WatchEvent::InitDone) => {
                            hrs = listing.take().unwrap_or_default();
                            true
                        }
                        Ok(WatchEvent::Apply(hr)) => { hrs.insert(hr.name_any(), hr); true }
                        Ok(WatchEvent::Delete(hr)) => { hrs.remove(&hr.name_any()); true }
                        Err(e) => {
                            self.metrics.watch_restarts.inc();
                            tracing::warn!(namespace = %self.namespace, error = %e, "HelmRelease watch failed; retrying with backoff");
                            false
                        }
                    };
                    if changed {
                        let list: Vec<HelmRelease> = hrs.values().cloned().collect();
                        let (registered, errs) = registrations(&list);
                        for (hr, error) in &errs {
                            if errors.get(hr) != Some(error) {
                                tracing::warn!(helmrelease = %hr, error = %error, "HelmRelease not honoured");
                            }
                        }
                        errors = errs;
                        self.index
                            .update(|index| index.replace_registrations(registered))
                            .await;
                        if std::mem::take(&mut first_list) {
                            tracing::info!(namespace = %self.namespace, helmreleases = hrs.len(), "HelmReleases listed");
                            self.readiness.scope_listed();
                        }
                    }
                }
                changed = updates.changed() => { if changed.is_err() { return; } }
                changed = leader.changed() => { if changed.is_err() { return; } }
            }
            if *leader.borrow() && !first_list {
                self.update_statuses(&api, &mut hrs, &errors).await;
            }
        }
    }

    /// Writes the status each HelmRelease should show, where it differs.
    async fn update_statuses(
        &self,
        api: &Api<HelmRelease>,
        hrs: &mut BTreeMap<String, HelmRelease>,
        errors: &BTreeMap<String, String>,
    ) {
        let index = self.index.snapshot();
        let now = Timestamp::now().to_string();
        for hr in hrs.values_mut() {
            let key = target_release(hr);
            let id = format!("{}/{}", self.namespace, hr.name_any());
            let state = index.release(&key).map(|s| &**s);
            let locked = match state.and_then(|s| s.newest()) {
                Some(newest) if newest.status == Status::Deployed => {
                    let config = self.config.load();
                    let policy = config.policy(&key, &newest.labels, index.registration(&key));
                    if policy.mode == Mode::Off {
                        Err(policy.unlocked_because)
                    } else {
                        Ok(())
                    }
                }
                _ => Ok(()),
            };
            let desired = desired_status(
                &key,
                state,
                errors.get(&id).map(String::as_str),
                locked.as_ref().map(|_| ()).map_err(String::as_str),
                hr.status.as_ref(),
                &now,
            );
            if hr.status.as_ref() == Some(&desired) {
                continue;
            }
            let mut status = serde_json::to_value(&desired).unwrap_or_default();
            // A merge patch keeps keys it does not mention: clear what is now empty (empty
            // strings are not sent at all; some API servers read them as null).
            for key in ["version", "description", "notes"] {
                if status.get(key).is_none() {
                    status[key] = serde_json::Value::Null;
                }
            }
            let patch = json!({ "status": status });
            match api
                .patch_status(
                    &hr.name_any(),
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await
            {
                Ok(_) => {
                    if let Some((reason, note)) = transition_event(hr.status.as_ref(), &desired) {
                        crate::events::publish(&self.recorder, &hr.object_ref(&()), reason, note)
                            .await;
                    }
                    hr.status = Some(desired);
                }
                Err(e) => {
                    tracing::warn!(helmrelease = %id, error = %e, "cannot update HelmRelease status")
                }
            }
        }
    }
}
