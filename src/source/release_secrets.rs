//! Release Secrets from the API server: a watch on `owner=helm` Secrets of type
//! `helm.sh/release.v1` (all namespaces, or the configured ones), and the fresh read of rule 7.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ListParams};
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::Client;

use crate::confirm::{BoxFuture, Confirm};
use crate::index::ReleaseKey;
use crate::index_store::IndexStore;
use crate::metrics::Metrics;
use crate::readiness::Readiness;
use crate::release::{release_secret_from_parts, ReleaseSecret, SecretRef, Status};

const LABELS: &str = "owner=helm";
const FIELDS: &str = "type=helm.sh/release.v1";

fn secret_ref(secret: &Secret) -> SecretRef {
    SecretRef {
        namespace: secret.metadata.namespace.clone().unwrap_or_default(),
        name: secret.metadata.name.clone().unwrap_or_default(),
    }
}

/// Decodes a watched Secret; failures are logged by name only, never with content.
fn decode(secret: &Secret, metrics: &Metrics) -> Option<ReleaseSecret> {
    let reference = secret_ref(secret);
    let labels: BTreeMap<String, String> = secret.metadata.labels.clone().unwrap_or_default();
    let Some(payload) = secret.data.as_ref().and_then(|d| d.get("release")) else {
        metrics.release_decode_errors.inc();
        tracing::warn!(secret = %reference, "release Secret has no data.release; skipped");
        return None;
    };
    match release_secret_from_parts(reference.clone(), labels, &payload.0) {
        Ok(decoded) => Some(decoded),
        Err(e) => {
            metrics.release_decode_errors.inc();
            tracing::warn!(secret = %reference, error = %e, "release Secret does not decode; skipped (its release keeps its other revisions)");
            None
        }
    }
}

fn log_report(report: &crate::index::UpdateReport) {
    for conflict in &report.conflicts {
        tracing::warn!(object = %conflict.object, winner = %conflict.winner, losers = ?conflict.losers, "object claimed by several releases");
    }
}

/// Watches release Secrets in `namespace` (all when `None`) and keeps `shared` current.
/// Tells `readiness` once, after its first complete list. Returns only if the watch stream
/// ends, which the server treats as a failure.
pub async fn watch(
    client: Client,
    namespace: Option<String>,
    shared: Arc<IndexStore>,
    metrics: Arc<Metrics>,
    readiness: Arc<Readiness>,
) {
    let api: Api<Secret> = match &namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let config = watcher::Config::default().labels(LABELS).fields(FIELDS);
    let mut stream = watcher::watcher(api, config).default_backoff().boxed();
    let mut listing: Option<Vec<ReleaseSecret>> = None;
    let mut first_list_done = false;
    loop {
        let event = match stream.next().await {
            Some(Ok(event)) => event,
            Some(Err(e)) => {
                metrics.watch_restarts.inc();
                tracing::warn!(namespace = ?namespace, error = %e, "release Secret watch failed; retrying with backoff");
                continue;
            }
            None => return,
        };
        match event {
            Event::Init => listing = Some(Vec::new()),
            Event::InitApply(secret) => {
                if let (Some(list), Some(decoded)) = (listing.as_mut(), decode(&secret, &metrics)) {
                    list.push(decoded);
                }
            }
            Event::InitDone => {
                let list = listing.take().unwrap_or_default();
                let count = list.len();
                let scope = namespace.clone();
                let reports = shared
                    .update(move |index| {
                        // A re-list replaces everything in scope: releases deleted while the
                        // watch was down disappear.
                        let stale: Vec<ReleaseKey> = index
                            .releases()
                            .iter()
                            .filter(|s| scope.as_ref().is_none_or(|ns| &s.key.namespace == ns))
                            .map(|s| s.key.clone())
                            .collect();
                        for key in stale {
                            index.remove_release(&key);
                        }
                        index.upsert_many(list)
                    })
                    .await;
                for report in &reports {
                    log_report(report);
                }
                crate::source::return_freed_memory();
                let index = shared.snapshot();
                tracing::info!(namespace = ?namespace, secrets = count, releases = index.release_count(), objects = index.object_count(), "release Secrets listed");
                if !first_list_done {
                    first_list_done = true;
                    readiness.scope_listed();
                }
            }
            Event::Apply(secret) => {
                if let Some(decoded) = decode(&secret, &metrics) {
                    tracing::debug!(secret = %decoded.secret, status = %decoded.release.status, "release revision updated");
                    let report = shared.update(|index| index.upsert(decoded)).await;
                    log_report(&report);
                }
            }
            Event::Delete(secret) => {
                let reference = secret_ref(&secret);
                let report = shared
                    .update(move |index| index.remove_secret(&reference))
                    .await;
                if let Some(key) = report.needs_reload {
                    reload_release(&client, &key, &shared, &metrics).await;
                }
            }
        }
    }
}

/// The newest revision's Secret of a release vanished while older ones remain: index the
/// newest remaining revision again.
async fn reload_release(
    client: &Client,
    key: &ReleaseKey,
    shared: &Arc<IndexStore>,
    metrics: &Metrics,
) {
    let api: Api<Secret> = Api::namespaced(client.clone(), &key.namespace);
    let params = ListParams::default()
        .labels(&format!("{LABELS},name={}", key.name))
        .fields(FIELDS);
    match api.list(&params).await {
        Ok(list) => {
            let newest = list
                .items
                .iter()
                .filter_map(|s| decode(s, metrics))
                .max_by_key(|s| s.release.revision);
            if let Some(newest) = newest {
                shared.update(|index| index.upsert(newest)).await;
            }
        }
        Err(e) => {
            tracing::warn!(release = %key, error = %e, "could not re-read release after its newest revision was deleted")
        }
    }
}

/// Rule 7 against the API server: the `status` label of the highest `version` Secret.
pub struct KubeConfirm {
    pub client: Client,
}

impl Confirm for KubeConfirm {
    fn newest_revision<'a>(
        &'a self,
        release: &'a ReleaseKey,
    ) -> BoxFuture<'a, Result<Option<(u64, Status)>, String>> {
        Box::pin(async move {
            let api: Api<Secret> = Api::namespaced(self.client.clone(), &release.namespace);
            let params = ListParams::default()
                .labels(&format!("{LABELS},name={}", release.name))
                .fields(FIELDS);
            let list = api
                .list_metadata(&params)
                .await
                .map_err(|e| e.to_string())?;
            let newest = list
                .items
                .iter()
                .filter_map(|s| {
                    let labels = s.metadata.labels.as_ref()?;
                    Some((
                        labels.get("version")?.parse::<u64>().ok()?,
                        labels.get("status")?.clone(),
                    ))
                })
                .max_by_key(|(version, _)| *version);
            Ok(newest.map(|(version, status)| (version, Status::parse(&status))))
        })
    }
}

/// Fails fast when the API server cannot be reached at all (bad kubeconfig); a transient
/// outage is retried by the watch.
pub async fn client() -> Result<Client, String> {
    Client::try_default()
        .await
        .map_err(|e| format!("no usable Kubernetes configuration: {e}"))
}
