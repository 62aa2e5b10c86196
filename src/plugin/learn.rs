//! `kubectl locker learn` and `learn accept`: the rules proposed from what the locker learned
//! ([`crate::core::propose_rules`]), and the ones a person names, as a values snippet for Git
//! or (`--apply`) written into the writers ConfigMap the running replicas watch.
//!
//! The evidence is read from the locker's own namespace only: a learned ConfigMap anywhere else
//! is ignored, so a tenant who may write ConfigMaps in their namespace cannot write evidence a
//! rule would be proposed from. Nothing is accepted unless named.

use std::collections::BTreeMap;
use std::process::ExitCode;

use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};

use super::kube_io::{client, print, releases, PluginError};
use super::writer_rules::{
    fullname, rules_in_force, DEFAULT_LOCKER_NAMESPACE, LEARNED_NAMESPACE_LABEL,
};
use super::Target;
use crate::core::{
    accept_proposals, proposals_text, propose_rules, writer_rule_yaml, writers_values_snippet,
    ChartFiles, Index, LearnInput, Learned, Proposals, ReleaseKey, WriterRule, LEARNED_KEY,
};

/// The label every learned ConfigMap carries.
pub(crate) const LEARNED_COMPONENT: &str = "app.kubernetes.io/component=learned";
/// The field manager of `--apply`'s write.
const FIELD_MANAGER: &str = "kubectl-locker";

/// `learn`'s own flags (after `learn`, or after `learn accept`).
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct LearnArgs {
    #[command(subcommand)]
    pub accept: Option<LearnCommand>,
    /// Only evidence last seen within this long (7d, 24h); default: all of it.
    #[arg(long, global = true, value_parser = humantime::parse_duration)]
    pub since: Option<std::time::Duration>,
    /// A rule in force that no write used for this long is proposed for removal.
    #[arg(long, global = true, value_parser = humantime::parse_duration, default_value = "30d")]
    pub unused_for: std::time::Duration,
    /// The namespace helm-locker runs in, where its evidence and its writers ConfigMap are
    /// (default: the namespace of its own release, else helm-locker).
    #[arg(long, global = true, value_name = "NAMESPACE")]
    pub locker_namespace: Option<String>,
    /// The ConfigMap the running replicas read writer rules from (default:
    /// `<fullname>-writers`, the fullname of the locker's release).
    #[arg(long, global = true, value_name = "NAME")]
    pub writers_configmap: Option<String>,
}

#[derive(clap::Subcommand, Debug, Clone)]
pub(crate) enum LearnCommand {
    /// Take the proposals named (their ids, as `learn` lists them) and print them as a values
    /// snippet (`writers:`) for the locker's values in Git; with --apply, also add each as a
    /// key `<id>.yaml` of the writers ConfigMap, where the running replicas read it without a
    /// rollout. Nothing is accepted unless named; an unknown id is an error.
    ///
    /// Example: kubectl locker learn accept shop-deployment-scaler-1a2b3c4d -A
    Accept {
        /// The ids of the proposals to accept.
        #[arg(required = true)]
        ids: Vec<String>,
        /// Also write them into the writers ConfigMap (created if missing; other keys kept).
        #[arg(long)]
        apply: bool,
        /// The rules stop matching at this RFC 3339 time (2027-03-01T00:00:00Z).
        #[arg(long, value_name = "TIME")]
        until: Option<String>,
        /// Why they are accepted (put before the evidence's sentence).
        #[arg(long, value_name = "TEXT")]
        reason: Option<String>,
    },
}

/// `kubectl locker learn ...`.
pub(crate) async fn run(target: &Target, args: LearnArgs) -> Result<ExitCode, PluginError> {
    if let Some(LearnCommand::Accept {
        until: Some(until), ..
    }) = &args.accept
    {
        if crate::lock_exception::unix_seconds(until).is_none() {
            return Err(PluginError::Usage(format!(
                "--until {until:?} is not an RFC 3339 time (2027-03-01T00:00:00Z)"
            )));
        }
    }
    let (client, default_namespace) = client(target).await?;
    let (client, namespace) = (
        &client,
        target.namespace.as_deref().unwrap_or(&default_namespace),
    );
    // Every release when they can be read (the locker's own is found among them), else the
    // namespace asked about.
    let scope = (!target.all_namespaces).then_some(namespace);
    let index = match releases(client, None, None, None).await {
        Ok(index) => index,
        Err(e) => {
            eprintln!(
                "kubectl-locker: cannot list every release ({}): the locker's release is not looked for",
                crate::error_chain::with_causes(&e)
            );
            releases(client, scope, None, None).await?
        }
    };
    let own = own_release(target, &index)?;
    let locker_namespace = args
        .locker_namespace
        .clone()
        .or_else(|| own.as_ref().map(|k| k.namespace.clone()))
        .unwrap_or_else(|| DEFAULT_LOCKER_NAMESPACE.to_string());

    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &locker_namespace);
    let listed = api
        .list(&ListParams::default().labels(LEARNED_COMPONENT))
        .await
        .map_err(PluginError::api(format!(
            "list the learned ConfigMaps in {locker_namespace} (is helm-locker there? --locker-namespace)"
        )))?;
    let (learned, skipped) = learned_from(&locker_namespace, &listed.items);
    for note in skipped {
        eprintln!("kubectl-locker: {note}");
    }
    let learned: Vec<Learned> = learned
        .into_iter()
        .filter(|l| scope.is_none_or(|ns| l.namespace == ns))
        .collect();

    let writers_name = args.writers_configmap.clone().unwrap_or_else(|| {
        format!(
            "{}-writers",
            fullname(own.as_ref(), &listed.items).unwrap_or_else(|| "helm-locker".into())
        )
    });
    let rules = rules_in_force(
        client,
        &locker_namespace,
        &writers_name,
        target.config.as_deref(),
    )
    .await
    .map_err(PluginError::Usage)?;
    // A rule accepted into a release's HelmRelease is in force as much as the ConfigMap's: not
    // proposed again, and unused when no write uses it.
    let registrations = match &target.registration_namespace {
        Some(ns) => Some(ns.clone()),
        None => crate::config_file::load(target.config.as_deref())?.registration_namespace,
    };
    let mut rules = rules;
    rules.extend(super::writer_rules::helmrelease_rules(client, registrations.as_deref()).await);

    let now = crate::lock_exception::now();
    let seconds = |d: std::time::Duration| i64::try_from(d.as_secs()).unwrap_or(i64::MAX);
    let compute = |charts: &BTreeMap<String, ChartFiles>| {
        propose_rules(&LearnInput {
            learned: &learned,
            rules: &rules,
            charts,
            now,
            since: args.since.map(seconds),
            unused_for: seconds(args.unused_for),
        })
    };
    let first = compute(&BTreeMap::new());
    let charts = charts_of(client, &index, &first).await;
    let proposals = compute(&charts);

    match args.accept {
        None => {
            print(target.output, &proposals, |p| proposals_text(p, now))?;
            Ok(ExitCode::SUCCESS)
        }
        Some(LearnCommand::Accept {
            ids,
            apply,
            until,
            reason,
        }) => {
            let who = accepted_by(client, target).await;
            let accepted = accept(&proposals, &ids, &who, until.as_deref(), reason.as_deref())?;
            print!("{}", writers_values_snippet(&accepted));
            if apply {
                write_rules(&api, &writers_name, &accepted).await?;
                eprintln!(
                    "{}",
                    applied_note(&locker_namespace, &writers_name, &accepted)
                );
            } else {
                eprintln!(
                    "kubectl-locker: not applied: add the snippet above to helm-locker's values in Git (writers:) and helm upgrade it, or run again with --apply to write them now into ConfigMap {locker_namespace}/{writers_name}"
                );
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn accept(
    proposals: &Proposals,
    ids: &[String],
    who: &str,
    until: Option<&str>,
    reason: Option<&str>,
) -> Result<Vec<WriterRule>, PluginError> {
    accept_proposals(proposals, ids, who, until, reason)
        .map_err(|e| PluginError::Usage(e.to_string()))
}

/// `--own-release`, else the release the index shows to be the locker's own.
fn own_release(target: &Target, index: &Index) -> Result<Option<ReleaseKey>, PluginError> {
    match &target.own_release {
        Some(text) => match text.split_once('/') {
            Some((ns, name)) if !ns.is_empty() && !name.is_empty() => {
                Ok(Some(ReleaseKey::new(ns, name)))
            }
            _ => Err(PluginError::Usage(format!(
                "--own-release {text:?} is not NAMESPACE/NAME"
            ))),
        },
        None => Ok(super::declared_own_release(index)),
    }
}

/// Each learned ConfigMap's [`Learned`], only those in the locker's namespace, whose label
/// names the namespace their content is about; and a note for each one skipped.
pub(crate) fn learned_from(
    locker_namespace: &str,
    configmaps: &[ConfigMap],
) -> (Vec<Learned>, Vec<String>) {
    let mut learned = Vec::new();
    let mut skipped = Vec::new();
    for cm in configmaps {
        let name = format!("{}/{}", cm.namespace().unwrap_or_default(), cm.name_any());
        if cm.namespace().as_deref() != Some(locker_namespace) {
            skipped.push(format!(
                "learned ConfigMap {name} ignored: evidence is read only from the locker's namespace {locker_namespace}"
            ));
            continue;
        }
        let labelled = cm.labels().get(LEARNED_NAMESPACE_LABEL).cloned();
        let Some(text) = cm.data.as_ref().and_then(|d| d.get(LEARNED_KEY)) else {
            skipped.push(format!("learned ConfigMap {name} has no {LEARNED_KEY}"));
            continue;
        };
        match serde_json::from_str::<Learned>(text) {
            Ok(one) if labelled.as_deref() == Some(one.namespace.as_str()) => learned.push(one),
            Ok(one) => skipped.push(format!(
                "learned ConfigMap {name} ignored: its label {LEARNED_NAMESPACE_LABEL} ({}) is not the namespace it holds ({})",
                labelled.unwrap_or_default(),
                one.namespace
            )),
            Err(e) => skipped.push(format!(
                "learned ConfigMap {name}: {LEARNED_KEY} is not readable: {e}"
            )),
        }
    }
    learned.sort_by(|a, b| a.namespace.cmp(&b.namespace));
    (learned, skipped)
}

/// The chart files of the releases people wrote to, to tell them the `helm upgrade`.
async fn charts_of(
    client: &Client,
    index: &Index,
    proposals: &Proposals,
) -> BTreeMap<String, ChartFiles> {
    use crate::chart_files::ReadChartFiles;
    let mut charts = BTreeMap::new();
    for release in proposals.not_proposed.iter().map(|n| &n.release) {
        if charts.contains_key(release) {
            continue;
        }
        let Some((ns, name)) = release.split_once('/') else {
            continue;
        };
        let key = ReleaseKey::new(ns, name);
        let Some(newest) = index.release(&key).and_then(|s| s.newest()) else {
            continue;
        };
        let reader = crate::chart_files::KubeChartFiles {
            client: client.clone(),
            drivers: vec![newest.secret.driver],
        };
        if let Ok(Some(files)) = reader.read(&key, newest.revision).await {
            charts.insert(release.clone(), files);
        }
    }
    charts
}

/// Who accepts: the API server's answer to a SelfSubjectReview, else the kubeconfig's user.
async fn accepted_by(client: &Client, target: &Target) -> String {
    let api: Api<SelfSubjectReview> = Api::all(client.clone());
    if let Ok(review) = api
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await
    {
        if let Some(name) = review
            .status
            .and_then(|s| s.user_info)
            .and_then(|u| u.username)
            .filter(|n| !n.is_empty())
        {
            return name;
        }
    }
    kubeconfig_user(target).unwrap_or_default()
}

/// The user of the kubeconfig's context (`--context`, else its current one).
fn kubeconfig_user(target: &Target) -> Option<String> {
    let kubeconfig = match &target.kubeconfig {
        Some(path) => kube::config::Kubeconfig::read_from(path).ok()?,
        None => kube::config::Kubeconfig::read().ok()?,
    };
    let context = target
        .context
        .clone()
        .or_else(|| kubeconfig.current_context.clone())?;
    kubeconfig
        .contexts
        .iter()
        .find(|c| c.name == context)?
        .context
        .as_ref()?
        .user
        .clone()
}

/// The merge patch that adds each rule as a key `<id>.yaml`, keeping the other keys.
pub(crate) fn writers_patch(rules: &[WriterRule]) -> serde_json::Value {
    let data: serde_json::Map<String, serde_json::Value> = rules
        .iter()
        .map(|r| (format!("{}.yaml", r.id), writer_rule_yaml(r).into()))
        .collect();
    serde_json::json!({ "data": data })
}

/// Adds the rules to the writers ConfigMap, creating it when it is missing.
async fn write_rules(
    api: &Api<ConfigMap>,
    name: &str,
    rules: &[WriterRule],
) -> Result<(), PluginError> {
    let what = || format!("write the writer rules into ConfigMap {name}");
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..Default::default()
    };
    let patch = writers_patch(rules);
    match api.patch(name, &params, &Patch::Merge(&patch)).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => {
            let mut cm: ConfigMap = serde_json::from_value(patch).map_err(PluginError::Output)?;
            cm.metadata.name = Some(name.to_string());
            cm.metadata.labels = Some(BTreeMap::from([(
                "app.kubernetes.io/component".to_string(),
                "writers".to_string(),
            )]));
            api.create(
                &PostParams {
                    field_manager: Some(FIELD_MANAGER.into()),
                    ..Default::default()
                },
                &cm,
            )
            .await
            .map(|_| ())
            .map_err(PluginError::api(what()))
        }
        Err(e) => Err(PluginError::Api {
            what: what(),
            source: e,
        }),
    }
}

/// What `--apply` did, and what a later `helm upgrade` of the locker does with it.
pub(crate) fn applied_note(namespace: &str, name: &str, rules: &[WriterRule]) -> String {
    let keys: Vec<String> = rules.iter().map(|r| format!("{}.yaml", r.id)).collect();
    format!(
        "kubectl-locker: written into ConfigMap {namespace}/{name} ({}): the running replicas follow them within seconds, no rollout. They are not in Git yet: add the snippet above to helm-locker's values (writers:). Until then a helm upgrade of the locker leaves these keys alone (Helm 3's three-way merge removes only what its previous manifest had; Helm 4's server-side apply only what its own field manager owns), but helm upgrade --force, a reinstall, or the chart rendering the same key differently replaces them",
        keys.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::api::ObjectMeta;

    fn learned_cm(namespace: &str, name: &str, about: &str, holds: &str) -> ConfigMap {
        let learned = Learned {
            namespace: holds.into(),
            ..Learned::default()
        };
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some(namespace.into()),
                labels: Some(BTreeMap::from([
                    ("app.kubernetes.io/component".into(), "learned".into()),
                    (LEARNED_NAMESPACE_LABEL.into(), about.into()),
                ])),
                ..Default::default()
            },
            data: Some(BTreeMap::from([(
                LEARNED_KEY.to_string(),
                serde_json::to_string(&learned).unwrap(),
            )])),
            ..Default::default()
        }
    }

    #[test]
    fn evidence_is_read_only_from_the_lockers_namespace() {
        let cms = [
            learned_cm("helm-locker", "helm-locker-learned-shop", "shop", "shop"),
            // A tenant's forgery in their own namespace, labelled just the same.
            learned_cm("shop", "helm-locker-learned-bank", "bank", "bank"),
        ];
        let (learned, skipped) = learned_from("helm-locker", &cms);
        assert_eq!(learned.len(), 1);
        assert_eq!(learned[0].namespace, "shop");
        assert_eq!(skipped.len(), 1);
        assert!(
            skipped[0].contains("shop/helm-locker-learned-bank ignored"),
            "{skipped:?}"
        );
        // Control: the same ConfigMap in the locker's namespace is read.
        let cms = [learned_cm(
            "helm-locker",
            "helm-locker-learned-bank",
            "bank",
            "bank",
        )];
        assert_eq!(learned_from("helm-locker", &cms).0.len(), 1);
    }

    #[test]
    fn a_learned_configmap_must_hold_the_namespace_its_label_names() {
        let cms = [learned_cm(
            "helm-locker",
            "helm-locker-learned-shop",
            "shop",
            "bank",
        )];
        let (learned, skipped) = learned_from("helm-locker", &cms);
        assert!(learned.is_empty());
        assert!(
            skipped[0].contains("is not the namespace it holds"),
            "{skipped:?}"
        );
        let mut broken = learned_cm("helm-locker", "x", "shop", "shop");
        broken.data = Some(BTreeMap::from([(LEARNED_KEY.into(), "{".into())]));
        assert!(learned_from("helm-locker", &[broken]).0.is_empty());
    }

    #[test]
    fn applying_adds_keys_and_reads_back() {
        use super::super::writer_rules::rules_from_configmap;
        let rule: WriterRule = serde_saphyr::from_str(
            "id: shop-web-scaler\nwriters:\n  serviceAccounts: [ops/scaler]\nobjects:\n  release: {namespace: shop, name: shop}\n  group: apps\n  kind: Deployment\n  names: [web]\npaths: [/spec/replicas]\nreason: learned\nacceptedBy: alice\n",
        )
        .unwrap();
        let patch = writers_patch(std::slice::from_ref(&rule));
        let cm: ConfigMap = serde_json::from_value(patch.clone()).unwrap();
        assert_eq!(patch["data"].as_object().unwrap().len(), 1);
        let (rules, notes) = rules_from_configmap(Some(&cm));
        assert_eq!((rules, notes.len()), (vec![rule.clone()], 0));
        let mut other = cm.clone();
        other
            .data
            .as_mut()
            .unwrap()
            .insert("junk.yaml".into(), "who: [a]".into());
        assert_eq!(rules_from_configmap(Some(&other)).1.len(), 1);
        assert!(applied_note("helm-locker", "helm-locker-writers", &[rule])
            .contains("shop-web-scaler.yaml"));
    }
}
