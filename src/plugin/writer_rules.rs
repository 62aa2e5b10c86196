//! The writer rules in force as the plugin reads them: the `<fullname>-writers` ConfigMap in the
//! locker's namespace (one key `<id>.yaml` per rule, what the running replicas watch) and the
//! `writers:` of the `--config` file.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use kube::{Client, ResourceExt};
use serde::Deserialize;

use crate::core::{ReleaseKey, WriterRule};

/// The label naming the namespace a learned ConfigMap is about.
pub(crate) const LEARNED_NAMESPACE_LABEL: &str = "helm-locker.io/learned-namespace";
/// Where the locker is looked for when nothing says.
pub(crate) const DEFAULT_LOCKER_NAMESPACE: &str = "helm-locker";

/// The rules of the writers ConfigMap `name` in `namespace` (none when it is missing or cannot
/// be read: said on stderr) and of the `--config` file.
pub(crate) async fn rules_in_force(
    client: &Client,
    namespace: &str,
    name: &str,
    config: Option<&std::path::Path>,
) -> Result<Vec<WriterRule>, String> {
    let mut rules = configmap_rules(client, namespace, name).await;
    rules.extend(config_rules(config)?);
    Ok(rules)
}

/// Where the locker keeps its writers ConfigMap, as the plugin guesses it without being told:
/// the namespace of its own release (else `helm-locker`), `<fullname>-writers`.
pub(crate) fn writers_configmap(own: Option<&ReleaseKey>) -> (String, String) {
    let namespace = own.map_or(DEFAULT_LOCKER_NAMESPACE, |k| k.namespace.as_str());
    let name = format!(
        "{}-writers",
        fullname(own, &[]).unwrap_or_else(|| "helm-locker".into())
    );
    (namespace.to_string(), name)
}

/// `config` with the writers ConfigMap's rules added to its own (`--config`'s), checked together
/// as the locker checks them (a rule refused is said on stderr and left out): the rules that
/// `diff` and `why` see held, as the reverter does. The HelmReleases' rules come with the
/// index's registrations.
pub(crate) async fn with_configmap_rules(
    client: &Client,
    own: Option<&ReleaseKey>,
    config: &mut crate::core::Config,
) {
    let (namespace, name) = writers_configmap(own);
    let mut rules = std::mem::take(&mut config.writers);
    rules.extend(configmap_rules(client, &namespace, &name).await);
    let (good, refused) = crate::core::validate_rules(rules);
    for why in refused {
        eprintln!("kubectl-locker: {why}: not in force");
    }
    config.writers = good;
}

/// The rules of the writers ConfigMap `name` in `namespace` (none when it is missing or cannot
/// be read: said on stderr).
pub(crate) async fn configmap_rules(
    client: &Client,
    namespace: &str,
    name: &str,
) -> Vec<WriterRule> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let found = match api.get_opt(name).await {
        Ok(found) => found,
        Err(e) => {
            eprintln!(
                "kubectl-locker: cannot read the writer rules of ConfigMap {namespace}/{name}: {e}"
            );
            None
        }
    };
    let (rules, notes) = rules_from_configmap(found.as_ref());
    for note in notes {
        eprintln!("kubectl-locker: ConfigMap {namespace}/{name}: {note}");
    }
    rules
}

/// The writer rules the HelmReleases of the registration namespace give, each bound to its own
/// release (`spec.writers`, as the locker reads them: a HelmRelease not honoured gives none).
/// None when there is no registration namespace or it cannot be listed (said on stderr).
pub(crate) async fn helmrelease_rules(
    client: &Client,
    registrations: Option<&str>,
) -> Vec<WriterRule> {
    let Some(ns) = registrations else {
        return Vec::new();
    };
    let api: Api<crate::crd::HelmRelease> = Api::namespaced(client.clone(), ns);
    match api.list(&kube::api::ListParams::default()).await {
        Ok(list) => registered_rules(&list.items),
        Err(e) => {
            eprintln!(
                "kubectl-locker: cannot read the writer rules of the HelmReleases in {ns}: {e}"
            );
            Vec::new()
        }
    }
}

/// The rules of the HelmReleases the locker honours, bound to their releases.
pub(crate) fn registered_rules(hrs: &[crate::crd::HelmRelease]) -> Vec<WriterRule> {
    let (registered, _errors) = crate::crd::registrations(hrs);
    registered.into_values().flat_map(|r| r.writers).collect()
}

/// The locker's fullname, as its chart makes it: from its own release (the release name when
/// it contains `helm-locker`, else `<release>-helm-locker`), else from the names of its learned
/// ConfigMaps (`<fullname>-learned-<namespace>`).
pub(crate) fn fullname(own: Option<&ReleaseKey>, learned: &[ConfigMap]) -> Option<String> {
    if let Some(own) = own {
        let name = if own.name.contains("helm-locker") {
            own.name.to_string()
        } else {
            format!("{}-helm-locker", own.name)
        };
        let cut: String = name.chars().take(63).collect();
        return Some(cut.trim_end_matches('-').to_string());
    }
    learned.iter().find_map(|cm| {
        let ns = cm.labels().get(LEARNED_NAMESPACE_LABEL)?;
        cm.name_any()
            .strip_suffix(&format!("-learned-{ns}"))
            .map(str::to_string)
    })
}

/// The rules of the writers ConfigMap, one per `<id>.yaml` key; a note for each key that is
/// not a rule.
pub(crate) fn rules_from_configmap(cm: Option<&ConfigMap>) -> (Vec<WriterRule>, Vec<String>) {
    let mut rules = Vec::new();
    let mut notes = Vec::new();
    for (key, text) in cm.and_then(|c| c.data.as_ref()).into_iter().flatten() {
        match serde_saphyr::from_str::<WriterRule>(text) {
            Ok(rule) => rules.push(rule),
            Err(e) => notes.push(format!("key {key} is not a writer rule: {e}")),
        }
    }
    (rules, notes)
}

/// The `writers:` of the `--config` file.
pub(crate) fn config_rules(path: Option<&std::path::Path>) -> Result<Vec<WriterRule>, String> {
    #[derive(Deserialize)]
    struct WritersOf {
        #[serde(default)]
        writers: Vec<WriterRule>,
    }
    let Some(path) = path else {
        return Ok(Vec::new());
    };
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    serde_saphyr::from_str::<WritersOf>(&text)
        .map(|w| w.writers)
        .map_err(|e| format!("{}: writers: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::api::ObjectMeta;
    use std::collections::BTreeMap;

    fn learned_cm(name: &str, about: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some(BTreeMap::from([(
                    LEARNED_NAMESPACE_LABEL.into(),
                    about.into(),
                )])),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn the_fullname_is_the_charts() {
        let key = |name: &str| ReleaseKey::new("helm-locker", name);
        assert_eq!(
            fullname(Some(&key("helm-locker")), &[]).as_deref(),
            Some("helm-locker")
        );
        assert_eq!(
            fullname(Some(&key("locker")), &[]).as_deref(),
            Some("locker-helm-locker")
        );
        let cm = learned_cm("lk-helm-locker-learned-shop", "shop");
        assert_eq!(fullname(None, &[cm]).as_deref(), Some("lk-helm-locker"));
        assert_eq!(fullname(None, &[]), None);
    }

    #[test]
    fn the_configs_writers_are_read_and_a_bad_one_is_an_error() {
        let dir = std::env::temp_dir().join(format!("writers-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("config.yaml");
        std::fs::write(&path, "mode: warn\nwriters:\n- id: a\n  writers: {serviceAccounts: [ops/a]}\n  objects: {kind: Deployment}\n  paths: [/spec/replicas]\n  reason: r\n").unwrap();
        let rules = config_rules(Some(&path)).unwrap();
        assert_eq!(rules[0].id, "a");
        std::fs::write(&path, "writers:\n- who: [a]\n").unwrap();
        assert!(config_rules(Some(&path)).is_err());
        assert!(config_rules(None).unwrap().is_empty());
        std::fs::remove_dir_all(&dir).ok();
    }

    /// A rule accepted into a release's HelmRelease is in force for that release only, and
    /// `status` lists it with the ConfigMap's (learn takes the same list as rules in force).
    #[test]
    fn a_helmreleases_rules_are_read_bound_to_its_release() {
        use crate::crd::{HelmRelease, HelmReleaseSpec, ReleaseRef};
        let rule: WriterRule = serde_saphyr::from_str(
            "id: web-scaler\nwriters: {serviceAccounts: [ops/scaler]}\nobjects: {group: apps, kind: Deployment}\npaths: [/spec/replicas]\nreason: r\n",
        )
        .unwrap();
        let mut hr = HelmRelease::new(
            "shop",
            HelmReleaseSpec {
                release: ReleaseRef {
                    name: "shop".into(),
                    namespace: "shop".into(),
                },
                writers: vec![rule],
                ..HelmReleaseSpec::default()
            },
        );
        hr.metadata.namespace = Some("registrations".into());
        let rules = registered_rules(&[hr]);
        assert_eq!(rules.len(), 1);
        let bound = &rules[0].objects.release;
        assert_eq!(
            (bound.namespace.as_deref(), bound.name.as_deref()),
            (Some("shop"), Some("shop"))
        );
        let index = crate::plugin::tests::index(crate::core::Status::Deployed);
        let live = crate::plugin::tests::live(
            &index,
            crate::plugin::tests::live_deployment(3, "nginx:1.25"),
        );
        let mut report = crate::plugin::status::status(
            &index,
            &crate::core::Config::default(),
            &crate::core::Schema::builtin(),
            &live,
            0,
        );
        crate::plugin::status::add_writer_rules(&mut report, &rules, 0);
        let listed: Vec<(&str, &str)> = report
            .writer_rules
            .iter()
            .map(|w| (w.release.as_str(), w.id.as_str()))
            .collect();
        assert_eq!(listed, [("shop/shop", "web-scaler")]);
    }
}
