//! The plugin's reads from the API server (and `vouch`'s write): the client from the
//! kubeconfig, release Secrets into an [`Index`], discovery, the live objects, the schema; the
//! commands that use them, one function each, in [`commands`].

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use futures::StreamExt;
use kube::api::{Api, DynamicObject, ListParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::{ApiResource, GroupVersionKind};
use kube::discovery::{pinned_kind, Discovery, Scope};
use kube::Client;
use serde::Serialize;

use super::{diff, vouch, Format, Live, LiveObjects, ObjectId};
use crate::core::{
    release_secret_from_parts, Index, LockedObject, ReleaseDriver, ReleaseSecret, Schema, SecretRef,
};
use crate::events::Reason;
use crate::source::release_object::{list_stored, merge_patch_stored, read_stored, StoredRevision};

mod commands;
pub(crate) use commands::run;

const LABELS: &str = "owner=helm";
/// Live objects read at once.
const CONCURRENT_READS: usize = 16;

/// Why a plugin command could not answer. Shown to the person with its causes.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PluginError {
    /// What the person asked cannot be answered as asked; the message says what to do.
    #[error("{0}")]
    Usage(String),
    /// The locker's own answer (a LockException it does not honour).
    #[error("{0}")]
    Refused(String),
    #[error(transparent)]
    Config(#[from] crate::config_file::ConfigFileError),
    #[error("{}: cannot use this kubeconfig", path.display())]
    Kubeconfig {
        path: std::path::PathBuf,
        #[source]
        source: kube::config::KubeconfigError,
    },
    #[error("no usable Kubernetes configuration")]
    NoConfig(#[source] kube::config::InferConfigError),
    #[error("cannot make a Kubernetes client")]
    Client(#[source] kube::Error),
    #[error("cannot {what}")]
    Api {
        what: String,
        #[source]
        source: kube::Error,
    },
    #[error("cannot write the report as JSON")]
    Output(#[source] serde_json::Error),
}

impl PluginError {
    pub(crate) fn api(what: impl Into<String>) -> impl FnOnce(kube::Error) -> Self {
        let what = what.into();
        move |source| Self::Api { what, source }
    }
}

/// A release's newest revision read again for a vouch, straight from its Secret (or
/// ConfigMap): what is shown and what the write is bound to. `None`: gone, or not a revision.
async fn read_candidate(
    client: &Client,
    secret: &SecretRef,
) -> Result<Option<vouch::Candidate>, PluginError> {
    let what = || format!("read the release {} {secret}", secret.driver.kind());
    let Some(StoredRevision { meta, payload, .. }) = read_stored(client, secret)
        .await
        .map_err(PluginError::api(what()))?
    else {
        return Ok(None);
    };
    let labels = meta.labels.clone().unwrap_or_default();
    let Some(revision) = decode(secret.clone(), &labels, payload.as_deref()) else {
        return Ok(None);
    };
    Ok(Some(vouch::Candidate {
        revision,
        annotations: meta.annotations.unwrap_or_default(),
        resource_version: meta.resource_version.unwrap_or_default(),
        content: crate::core::vouch_content(payload.as_deref().unwrap_or_default()),
    }))
}

/// What became of a vouch's write.
enum Vouched {
    /// Stamped: the author the stored object names now.
    Author(String),
    /// Written, but the author webhook did not answer: no stamp.
    NotStamped,
    /// Refused: the revision is no longer the one read (its resourceVersion moved on).
    Changed,
}

/// Writes the vouch annotation on the release Secret (or the release ConfigMap of Helm's
/// ConfigMap driver) as the user, bound to what was read: the patch carries the read
/// `resourceVersion` (the API server refuses it with a conflict once the object changed) and
/// the content's digest (the author webhook refuses a vouch of other content). The webhook
/// stamps the write with the user and takes both annotations off.
async fn write_vouch(
    client: &Client,
    candidate: &vouch::Candidate,
    reason: &str,
) -> Result<Vouched, PluginError> {
    let secret = &candidate.revision.secret;
    let patch = serde_json::json!({"metadata": {
        "resourceVersion": candidate.resource_version,
        "annotations": {
            crate::core::VOUCH_ANNOTATION: reason,
            crate::core::VOUCH_CONTENT_ANNOTATION: candidate.content,
        },
    }});
    let annotations = merge_patch_stored(client, secret, "kubectl-locker", &patch)
        .await
        .map_err(|source| PluginError::Api {
            what: format!("write the release {} {secret}", secret.driver.kind()),
            source,
        })?;
    let Some(annotations) = annotations else {
        return Ok(Vouched::Changed);
    };
    if annotations.contains_key(crate::core::VOUCH_ANNOTATION) {
        return Ok(Vouched::NotStamped);
    }
    Ok(annotations
        .get(crate::core::AUTHOR_ANNOTATION)
        .and_then(|a| serde_json::from_str::<crate::core::Author>(a).ok())
        .map_or(Vouched::NotStamped, |a| Vouched::Author(a.username)))
}

/// The LockExceptions in scope, as the locker reads them (its maximum open time is not known
/// here: a year). None when the CRD is not installed or not readable.
async fn lock_exceptions(client: &Client, namespace: Option<&str>) -> Vec<crate::core::Exception> {
    use crate::lock_exception::LockException;
    let api: Api<LockException> = match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let max = std::time::Duration::from_secs(365 * 24 * 3600);
    // The end the locker honours (its --exception-max-duration), from its LockExceptionOpen
    // Events, where it said so.
    let events: Api<k8s_openapi::api::core::v1::Event> = match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let params =
        ListParams::default().fields(&format!("reason={}", Reason::LockExceptionOpen.as_str()));
    let honoured: BTreeMap<String, i64> = events
        .list(&params)
        .await
        .map(|l| l.items)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|e| {
            let until = honoured_until(e.message.as_deref()?)?;
            let o = e.involved_object;
            Some((format!("{}/{}", o.namespace?, o.name?), until))
        })
        .collect();
    match api.list(&Default::default()).await {
        Ok(list) => list
            .items
            .iter()
            .filter_map(|le| crate::lock_exception::exception(le, max).ok())
            .map(|mut e| {
                if let Some(until) = honoured.get(&e.name) {
                    e.until = e.until.min(*until);
                }
                e
            })
            .collect(),
        Err(e) => {
            tracing::debug!(error = %e, "LockExceptions not read");
            Vec::new()
        }
    }
}

pub(crate) fn print<T: Serialize>(
    format: Format,
    report: &T,
    text: impl Fn(&T) -> String,
) -> Result<(), PluginError> {
    match format {
        Format::Text => print!("{}", text(report)),
        Format::Json => println!(
            "{}",
            serde_json::to_string_pretty(report).map_err(PluginError::Output)?
        ),
    }
    Ok(())
}

/// A client as kubectl would make it (`--kubeconfig`, `--context`, `$KUBECONFIG`,
/// `~/.kube/config`, in-cluster), and the context's namespace.
pub(crate) async fn client(target: &super::Target) -> Result<(Client, String), PluginError> {
    let options = KubeConfigOptions {
        context: target.context.clone(),
        ..KubeConfigOptions::default()
    };
    let config =
        match &target.kubeconfig {
            Some(path) => {
                let unusable = |source| PluginError::Kubeconfig {
                    path: path.clone(),
                    source,
                };
                let kubeconfig = Kubeconfig::read_from(path).map_err(unusable)?;
                kube::Config::from_custom_kubeconfig(kubeconfig, &options)
                    .await
                    .map_err(unusable)?
            }
            None if target.context.is_some() => kube::Config::from_kubeconfig(&options)
                .await
                .map_err(|source| PluginError::Kubeconfig {
                    path: "kubeconfig".into(),
                    source,
                })?,
            None => kube::Config::infer().await.map_err(PluginError::NoConfig)?,
        };
    let namespace = config.default_namespace.clone();
    let client = Client::try_from(config).map_err(PluginError::Client)?;
    Ok((client, namespace))
}

/// The time in a LockExceptionOpen note ("helm-locker honours this LockException until T...").
fn honoured_until(note: &str) -> Option<i64> {
    let rest = note.split_once(" until ")?.1;
    // An RFC 3339 time in UTC, as the locker writes it: up to its zone designator.
    crate::lock_exception::unix_seconds(&rest[..=rest.find('Z')?])
}

/// How long `unlock` waits for the locker to say until when it honours the exception.
const ANSWER_WAIT: std::time::Duration = std::time::Duration::from_secs(15);

/// The locker's answer to a LockException just created: the reason and note of its
/// `LockExceptionOpen` or `LockExceptionInvalid` Event, once one is there (within
/// [`ANSWER_WAIT`]).
async fn locker_answer(client: &Client, namespace: &str, name: &str) -> Option<(Reason, String)> {
    let api: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client.clone(), namespace);
    let params = ListParams::default().fields(&format!(
        "involvedObject.kind=LockException,involvedObject.name={name}"
    ));
    let deadline = tokio::time::Instant::now() + ANSWER_WAIT;
    loop {
        if let Ok(list) = api.list(&params).await {
            let answer = list.items.into_iter().find_map(|e| {
                let reason = Reason::named(e.reason.as_deref()?)?;
                matches!(
                    reason,
                    Reason::LockExceptionOpen | Reason::LockExceptionInvalid
                )
                .then(|| (reason, e.message.unwrap_or_default()))
            });
            if answer.is_some() {
                return answer;
            }
        }
        if tokio::time::Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
}

/// The reverter's Warning Events about refusals and fights in a namespace (all when `None`);
/// none when they cannot be listed (said on stderr: the rest of the status stands).
async fn reverter_events(
    client: &Client,
    namespace: Option<&str>,
) -> Vec<k8s_openapi::api::core::v1::Event> {
    let api: Api<k8s_openapi::api::core::v1::Event> = match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let mut events = Vec::new();
    for reason in [
        Reason::AuthorLacksRights,
        Reason::UnknownAuthor,
        Reason::RevertFight,
    ]
    .map(Reason::as_str)
    {
        let params = ListParams::default().fields(&format!("reason={reason},type=Warning"));
        match api.list(&params).await {
            Ok(list) => events.extend(list.items),
            Err(e) => eprintln!("kubectl-locker: cannot list {reason} events: {e}"),
        }
    }
    events
}

/// The release Secrets of a namespace (all when `None`), of one release when `name` is given,
/// and the release ConfigMaps of Helm's ConfigMap driver (when they cannot be listed, said on
/// stderr: the Secrets' releases stand); with a registration namespace, the HelmReleases there
/// register releases as for the locker.
pub(crate) async fn releases(
    client: &Client,
    namespace: Option<&str>,
    name: Option<&str>,
    registrations: Option<&str>,
) -> Result<Index, PluginError> {
    let labels = match name {
        Some(name) => format!("{LABELS},name={name}"),
        None => LABELS.to_string(),
    };
    let mut secrets: Vec<ReleaseSecret> = Vec::new();
    for &driver in ReleaseDriver::ALL {
        let listed = match list_stored(client, driver, namespace, &labels).await {
            Ok(listed) => listed,
            // Helm's default driver must be readable; another may not be granted.
            Err(e) if driver != ReleaseDriver::default() => {
                eprintln!(
                    "kubectl-locker: cannot list Helm's release {}s: {e}",
                    driver.kind()
                );
                continue;
            }
            Err(e) => {
                return Err(PluginError::api(format!(
                    "list Helm's release {}s",
                    driver.kind()
                ))(e))
            }
        };
        secrets.extend(listed.into_iter().filter_map(|stored| {
            let labels = stored.meta.labels.unwrap_or_default();
            decode(stored.place, &labels, stored.payload.as_deref())
        }));
    }
    let mut index = Index::from_secrets(secrets);
    if let Some(ns) = registrations {
        let api: Api<crate::crd::HelmRelease> = Api::namespaced(client.clone(), ns);
        let hrs = api
            .list(&ListParams::default())
            .await
            .map_err(PluginError::api(format!("list HelmReleases in {ns}")))?;
        let (registered, errors) = crate::crd::registrations(&hrs.items);
        for (hr, error) in errors {
            eprintln!("kubectl-locker: HelmRelease {hr} not honoured: {error}");
        }
        index.replace_registrations(registered);
    }
    Ok(index)
}

/// A release Secret's or ConfigMap's revision, from Helm's layer of its `data.release`.
fn decode(
    reference: SecretRef,
    labels: &BTreeMap<String, String>,
    payload: Option<&[u8]>,
) -> Option<ReleaseSecret> {
    let decoded = payload
        .ok_or_else(|| "no data.release".to_string())
        .and_then(|p| {
            release_secret_from_parts(reference.clone(), labels.clone(), p)
                .map_err(|e| e.to_string())
        });
    match decoded {
        Ok(decoded) => Some(decoded),
        Err(e) => {
            eprintln!("kubectl-locker: release Secret {reference} skipped: {e}");
            None
        }
    }
}

/// The API server's schema (`/openapi/v2`, custom resources included), as the locker's
/// reverter uses it; the embedded Kubernetes 1.20 schema when it cannot be read.
async fn schema(client: &Client) -> Arc<Schema> {
    let read = match crate::source::openapi::fetch(client, None).await {
        Ok(Some((document, _))) => Schema::from_openapi_v2(&document).map_err(|e| e.to_string()),
        Ok(None) => Err("no document".into()),
        Err(e) => Err(crate::error_chain::with_causes(&e)),
    };
    match read {
        Ok(schema) => Arc::new(schema),
        Err(e) => {
            let version = crate::core::KubeVersion::NEWEST;
            eprintln!("kubectl-locker: cannot read /openapi/v2 ({e}); using the embedded schema of Kubernetes {version}");
            Schema::embedded(version)
        }
    }
}

/// Each kind of `objects` as discovery serves it at the chart's group and version (and whether it
/// is namespaced), or why it is not served.
async fn served_kinds(
    client: &Client,
    objects: &[Arc<LockedObject>],
) -> HashMap<GroupVersionKind, Result<(ApiResource, bool), String>> {
    let mut resources = HashMap::new();
    for object in objects {
        let gvk = GroupVersionKind::gvk(&object.group, &object.version, &object.kind);
        if let std::collections::hash_map::Entry::Vacant(slot) = resources.entry(gvk) {
            let found = pinned_kind(client, slot.key())
                .await
                .map(|(ar, caps)| (ar, caps.scope == Scope::Namespaced))
                .map_err(|e| format!("{} is not served: {e}", object.api_version()));
            slot.insert(found);
        }
    }
    resources
}

/// Each object as the API server has it now, in the chart's group and version.
async fn fetch(client: &Client, objects: Vec<Arc<LockedObject>>) -> LiveObjects {
    let resources = &served_kinds(client, &objects).await;
    futures::stream::iter(objects)
        .map(|object| async move {
            let id = ObjectId::of(&object);
            let gvk = GroupVersionKind::gvk(&id.group, &id.version, &id.kind);
            let live = match resources.get(&gvk) {
                Some(Ok((ar, namespaced))) => {
                    get(client, ar, *namespaced, id.namespace.as_deref(), &id.name).await
                }
                Some(Err(e)) => Live::Unreadable(e.clone()),
                None => Live::Unreadable("not resolved".into()),
            };
            (id, live)
        })
        .buffer_unordered(CONCURRENT_READS)
        .collect()
        .await
}

/// [`diff::diff`], where the objects that differ locally are compared with what the API server
/// answers it would store their chart objects as ([`stored_forms`]).
async fn with_stored_forms(
    client: &Client,
    index: &Index,
    config: &crate::core::Config,
    schema: &Schema,
    live: &LiveObjects,
) -> diff::DiffReport {
    let now = crate::lock_exception::now();
    let local = diff::diff(index, config, schema, live, &diff::StoredForms::new(), now);
    let drifted: Vec<Arc<LockedObject>> = index
        .releases()
        .into_iter()
        .filter(|s| diff::compared(s).is_ok())
        .flat_map(|s| s.objects.iter().flatten().cloned())
        .filter(|object| {
            local.differences.iter().any(|d| {
                d.state == "drifted"
                    && d.kind == *object.kind
                    && d.name == *object.name
                    && d.namespace.as_deref() == object.namespace.as_deref()
                    && d.api_version == object.api_version()
            })
        })
        .collect();
    if drifted.is_empty() {
        return local;
    }
    let stored = stored_forms(client, drifted).await;
    diff::diff(index, config, schema, live, &stored, now)
}

/// What the API server would store each object's chart object as: a dry-run create under a
/// generated name ([`crate::core::stored_form_body`]), which needs `create` on the kind in its
/// namespace; nothing is stored. An error says why it did not answer.
async fn stored_forms(client: &Client, objects: Vec<Arc<LockedObject>>) -> diff::StoredForms {
    let resources = &served_kinds(client, &objects).await;
    futures::stream::iter(objects)
        .map(|object| async move {
            let id = ObjectId::of(&object);
            let gvk = GroupVersionKind::gvk(&id.group, &id.version, &id.kind);
            let answer = match resources.get(&gvk) {
                Some(Ok((ar, namespaced))) => {
                    let api: Api<DynamicObject> = match (namespaced, id.namespace.as_deref()) {
                        (true, Some(ns)) => Api::namespaced_with(client.clone(), ns, ar),
                        _ => Api::all_with(client.clone(), ar),
                    };
                    let params = kube::api::PostParams {
                        dry_run: true,
                        field_manager: Some(crate::core::STORED_FORM_MANAGER.into()),
                    };
                    match serde_json::from_value::<DynamicObject>(crate::core::stored_form_body(
                        &object,
                    )) {
                        Ok(body) => match api.create(&params, &body).await {
                            Ok(answer) => serde_json::to_value(answer).map_err(|e| e.to_string()),
                            Err(kube::Error::Api(status)) => Err(format!(
                                "its dry-run create was refused: {}",
                                status.message
                            )),
                            Err(e) => Err(format!("its dry-run create failed: {e}")),
                        },
                        Err(e) => Err(e.to_string()),
                    }
                }
                Some(Err(e)) => Err(e.clone()),
                None => Err("not resolved".into()),
            };
            (id, answer)
        })
        .buffer_unordered(CONCURRENT_READS)
        .collect()
        .await
}

async fn get(
    client: &Client,
    ar: &ApiResource,
    namespaced: bool,
    namespace: Option<&str>,
    name: &str,
) -> Live {
    let api: Api<DynamicObject> = match (namespaced, namespace) {
        (true, Some(ns)) => Api::namespaced_with(client.clone(), ns, ar),
        (true, None) => return Live::Unreadable("a namespaced kind without a namespace".into()),
        (false, _) => Api::all_with(client.clone(), ar),
    };
    match api.get_opt(name).await {
        Ok(Some(object)) => serde_json::to_value(object)
            .map(Live::Found)
            .unwrap_or_else(|e| Live::Unreadable(e.to_string())),
        Ok(None) => Live::Missing,
        Err(e) => Live::Unreadable(e.to_string()),
    }
}

/// kubectl's short names and resource names of common kinds: (group, kind).
const SHORT_NAMES: &[(&[&str], &str, &str)] = &[
    (
        &["deploy", "deployment", "deployments"],
        "apps",
        "Deployment",
    ),
    (
        &["sts", "statefulset", "statefulsets"],
        "apps",
        "StatefulSet",
    ),
    (&["ds", "daemonset", "daemonsets"], "apps", "DaemonSet"),
    (&["rs", "replicaset", "replicasets"], "apps", "ReplicaSet"),
    (&["svc", "service", "services"], "", "Service"),
    (&["cm", "configmap", "configmaps"], "", "ConfigMap"),
    (
        &["sa", "serviceaccount", "serviceaccounts"],
        "",
        "ServiceAccount",
    ),
    (&["secret", "secrets"], "", "Secret"),
    (&["po", "pod", "pods"], "", "Pod"),
    (
        &["pvc", "persistentvolumeclaim", "persistentvolumeclaims"],
        "",
        "PersistentVolumeClaim",
    ),
    (
        &["pv", "persistentvolume", "persistentvolumes"],
        "",
        "PersistentVolume",
    ),
    (&["ns", "namespace", "namespaces"], "", "Namespace"),
    (
        &["ing", "ingress", "ingresses"],
        "networking.k8s.io",
        "Ingress",
    ),
    (
        &["netpol", "networkpolicy", "networkpolicies"],
        "networking.k8s.io",
        "NetworkPolicy",
    ),
    (&["job", "jobs"], "batch", "Job"),
    (&["cj", "cronjob", "cronjobs"], "batch", "CronJob"),
    (&["role", "roles"], "rbac.authorization.k8s.io", "Role"),
    (
        &["rolebinding", "rolebindings"],
        "rbac.authorization.k8s.io",
        "RoleBinding",
    ),
    (
        &["clusterrole", "clusterroles"],
        "rbac.authorization.k8s.io",
        "ClusterRole",
    ),
    (
        &["clusterrolebinding", "clusterrolebindings"],
        "rbac.authorization.k8s.io",
        "ClusterRoleBinding",
    ),
    (
        &["hpa", "horizontalpodautoscaler", "horizontalpodautoscalers"],
        "autoscaling",
        "HorizontalPodAutoscaler",
    ),
    (
        &["pdb", "poddisruptionbudget", "poddisruptionbudgets"],
        "policy",
        "PodDisruptionBudget",
    ),
    (
        &[
            "crd",
            "crds",
            "customresourcedefinition",
            "customresourcedefinitions",
        ],
        "apiextensions.k8s.io",
        "CustomResourceDefinition",
    ),
    (
        &["sc", "storageclass", "storageclasses"],
        "storage.k8s.io",
        "StorageClass",
    ),
    (
        &["pc", "priorityclass", "priorityclasses"],
        "scheduling.k8s.io",
        "PriorityClass",
    ),
];

/// A kind from its kubectl short name (table above, whose scope the core knows), else by
/// discovery: a kind, plural or singular resource name, optionally `.group`.
pub(crate) fn short_name(type_: &str) -> Option<(&'static str, &'static str)> {
    let lower = type_.to_ascii_lowercase();
    let (name, group) = match lower.split_once('.') {
        Some((name, group)) => (name.to_string(), Some(group.to_string())),
        None => (lower, None),
    };
    SHORT_NAMES
        .iter()
        .find(|(names, g, _)| {
            names.contains(&name.as_str()) && group.as_deref().is_none_or(|w| w == *g)
        })
        .map(|(_, g, k)| (*g, *k))
}

/// (group, kind, namespaced) of TYPE.
async fn resolve(client: &Client, type_: &str) -> Result<(String, String, bool), PluginError> {
    use crate::core::{scope_of, KindScope as Known};
    if let Some((group, kind)) = short_name(type_) {
        match scope_of(group, kind) {
            Known::Namespaced => return Ok((group.into(), kind.into(), true)),
            Known::Cluster => return Ok((group.into(), kind.into(), false)),
            Known::Unknown => {}
        }
    }
    let lower = type_.to_ascii_lowercase();
    let (name, group) = match lower.split_once('.') {
        Some((name, group)) => (name.to_string(), Some(group.to_string())),
        None => (lower.clone(), None),
    };
    let mut discovery = Discovery::new(client.clone());
    if let Some(group) = &group {
        discovery = discovery.filter(&[group.as_str()]);
    }
    let discovery = discovery
        .run()
        .await
        .map_err(PluginError::api("discover the API server's resource types"))?;
    for api_group in discovery.groups() {
        for (ar, caps) in api_group.recommended_resources() {
            let kind = ar.kind.to_ascii_lowercase();
            if kind == name || ar.plural == name {
                return Ok((ar.group, ar.kind, caps.scope == Scope::Namespaced));
            }
        }
    }
    Err(PluginError::Usage(format!(
        "the server doesn't have a resource type {type_:?} (give a kind, a resource, or kind.group)"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubectl_short_names_and_resources_name_kinds() {
        assert_eq!(short_name("deploy"), Some(("apps", "Deployment")));
        assert_eq!(short_name("Deployments.apps"), Some(("apps", "Deployment")));
        assert_eq!(short_name("ing"), Some(("networking.k8s.io", "Ingress")));
        assert_eq!(
            short_name("clusterrolebinding"),
            Some(("rbac.authorization.k8s.io", "ClusterRoleBinding"))
        );
        assert_eq!(
            short_name("hpa"),
            Some(("autoscaling", "HorizontalPodAutoscaler"))
        );
        assert_eq!(short_name("deploy.extensions"), None);
        assert_eq!(short_name("widgets.example.com"), None);
    }

    #[test]
    fn the_end_the_locker_honours_is_read_from_its_note() {
        let at = |t: &str| crate::lock_exception::unix_seconds(t).unwrap();
        let capped = "helm-locker honours this LockException until 2026-11-25T16:00:00Z: 1h after its creation, the maximum (--exception-max-duration), not until 2028-01-01T00:00:00Z as asked";
        assert_eq!(honoured_until(capped), Some(at("2026-11-25T16:00:00Z")));
        let plain = "helm-locker honours this LockException until 2026-11-25T00:10:00Z";
        assert_eq!(honoured_until(plain), Some(at("2026-11-25T00:10:00Z")));
        assert_eq!(honoured_until("no time here"), None);
        assert_eq!(honoured_until("until tomorrow"), None);
    }
}
