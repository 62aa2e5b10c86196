//! The writers ConfigMap (`--writers-configmap`, in the locker's own namespace): a watch on that
//! one object whose keys (`<id>.yaml`, one writer rule each) are added to the configuration's
//! own rules as soon as they change ([`crate::live_config::LiveConfig::apply_rules`]). The watch
//! is namespaced, so a ConfigMap of the same name in a tenant's namespace is never read. A key
//! that is not a valid rule is logged, counted and reported as a Warning Event on the
//! ConfigMap, and skipped; the other rules load. Deleted, the ConfigMap's rules go.

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use kube::runtime::events::{Recorder, Reporter};

use crate::events::Reason;
use kube::runtime::watcher::{self, Event as WatchEvent};
use kube::runtime::WatchStreamExt;
use kube::{Client, Resource};

use crate::live_config::LiveConfig;
use crate::metrics::Metrics;

pub(crate) struct WriterRulesConfigMap {
    pub client: Client,
    pub namespace: String,
    pub name: String,
    pub config: Arc<LiveConfig>,
    pub metrics: Arc<Metrics>,
}

impl WriterRulesConfigMap {
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
        while let Some(event) = stream.next().await {
            match event {
                Ok(WatchEvent::Init) => seen = false,
                Ok(WatchEvent::InitApply(map) | WatchEvent::Apply(map)) => {
                    seen = true;
                    self.apply(&map, &recorder).await;
                }
                Ok(WatchEvent::Delete(_)) => {
                    self.load(Vec::new(), "deleted");
                }
                Ok(WatchEvent::InitDone) => {
                    if !seen {
                        self.load(Vec::new(), "absent");
                    }
                }
                Err(e) => {
                    self.metrics.watch_restarts.inc();
                    tracing::warn!(configmap = %self.id(), error = %e, "writer rules watch failed; retrying with backoff");
                }
            }
        }
    }

    fn id(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    async fn apply(&self, map: &ConfigMap, recorder: &Recorder) {
        let data = map.data.clone().unwrap_or_default();
        let (rules, invalid) = crate::core::rules_of_configmap(&data);
        let refused = self.load(rules, "read");
        for why in invalid.iter().chain(&refused) {
            self.metrics.writer_rules_refused.inc();
            tracing::warn!(configmap = %self.id(), error = %why, "writer rule not loaded; the others stay");
            crate::events::publish(
                recorder,
                &map.object_ref(&()),
                Reason::WriterRuleInvalid,
                crate::core::notes::writer_rule_invalid(why),
            )
            .await;
        }
    }

    /// Puts `rules` in force; returns those refused beside the configuration's own.
    fn load(
        &self,
        rules: Vec<crate::core::WriterRule>,
        how: &str,
    ) -> Vec<crate::core::WriterRuleError> {
        let before: Vec<String> = self
            .config
            .load()
            .writers
            .iter()
            .map(|r| r.id.clone())
            .collect();
        let (now, refused) = self.config.apply_rules(rules);
        let ids: Vec<&str> = now.writers.iter().map(|r| r.id.as_str()).collect();
        if before != ids {
            tracing::info!(configmap = %self.id(), how, rules = ?ids, "writer rules in force");
        }
        refused
    }
}
