//! The switches ConfigMap (`--switches-configmap`, in the locker's own namespace): a watch on
//! that one object that applies its `mode` and `revert` to the policy in force as soon as they
//! change ([`crate::live_config`]). Independent of the release watches, so a replica that cannot
//! list releases (not ready) still obeys a switch. A ConfigMap that does not read as switches
//! is logged and reported as a Warning Event on it, and the switches in force stay.

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use kube::runtime::events::{Recorder, Reporter};

use crate::events::Reason;
use kube::runtime::watcher::{self, Event as WatchEvent};
use kube::runtime::WatchStreamExt;
use kube::{Client, Resource};

use crate::live_config::{parse_switches, LiveConfig, Switches};
use crate::metrics::Metrics;
use crate::readiness::Readiness;

pub(crate) struct SwitchesConfigMap {
    pub client: Client,
    pub namespace: String,
    pub name: String,
    pub config: Arc<LiveConfig>,
    pub metrics: Arc<Metrics>,
    pub readiness: Arc<Readiness>,
}

impl SwitchesConfigMap {
    pub(crate) async fn run(self) {
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), &self.namespace);
        let config = watcher::Config::default().fields(&format!("metadata.name={}", self.name));
        let mut stream = watcher::watcher(api, config).default_backoff().boxed();
        let recorder = Recorder::new(
            self.client.clone(),
            Reporter {
                controller: "helm-locker".into(),
                instance: std::env::var("HOSTNAME").ok(),
            },
        );
        let mut seen = false;
        let mut listed = false;
        while let Some(event) = stream.next().await {
            match event {
                Ok(WatchEvent::Init) => seen = false,
                Ok(WatchEvent::InitApply(map) | WatchEvent::Apply(map)) => {
                    seen = true;
                    self.apply(&map, &recorder).await;
                }
                Ok(WatchEvent::Delete(_)) => {
                    self.switch(&Switches::default(), "deleted");
                }
                Ok(WatchEvent::InitDone) => {
                    if !seen {
                        self.switch(&Switches::default(), "absent");
                    }
                    if !listed {
                        listed = true;
                        self.readiness.scope_listed();
                    }
                }
                Err(e) => {
                    self.metrics.watch_restarts.inc();
                    tracing::warn!(configmap = %format!("{}/{}", self.namespace, self.name), error = %e, "switches watch failed; retrying with backoff");
                }
            }
        }
    }

    async fn apply(&self, map: &ConfigMap, recorder: &Recorder) {
        let data = map.data.clone().unwrap_or_default();
        match parse_switches(&data) {
            Ok(switches) => self.switch(&switches, "read"),
            Err(why) => {
                tracing::warn!(configmap = %format!("{}/{}", self.namespace, self.name), error = %why, "switches not applied; those in force stay");
                crate::events::publish(
                    recorder,
                    &map.object_ref(&()),
                    Reason::SwitchesInvalid,
                    crate::core::notes::switches_invalid(&why),
                )
                .await;
            }
        }
    }

    fn switch(&self, switches: &Switches, how: &str) {
        let before = self.config.load();
        let now = self.config.apply(switches);
        if (before.mode, before.ownership_returned) != (now.mode, now.ownership_returned) {
            tracing::info!(configmap = %format!("{}/{}", self.namespace, self.name), how, mode = now.mode.as_str(), reverting = now.ownership_returned, "switches applied");
        }
    }
}
