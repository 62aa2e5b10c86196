//! The HelmRelease custom resource (`helm.cattle.io/v1alpha1`), compatible with
//! rancher/helm-locker: `spec.release.{name,namespace}` names a Helm release to lock, and
//! `status` tells what the locker sees of it. helm-locker adds `spec.mode`, `spec.suspend`,
//! `spec.ignore` and `spec.exempt`.
//!
//! Everything here is pure: from HelmReleases to [`Registration`]s for the index, and from the
//! index's view of a release to the status a HelmRelease should show. The controller in
//! `crate::controller::helmreleases` applies the results.

use std::collections::BTreeMap;

use kube::{CustomResource, CustomResourceExt, ResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::core::notes;
use crate::core::{
    Exemptions, IgnoreRule, Mode, Registration, ReleaseKey, ReleaseState, RuleTarget, Status,
};
use crate::events::Reason;

/// Locks one Helm release: writes to its objects by anyone but Helm are denied (or warned
/// about, or repaired, per `mode`), and drift is reverted.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "helm.cattle.io",
    version = "v1alpha1",
    kind = "HelmRelease",
    namespaced,
    status = "HelmReleaseStatus",
    shortname = "hr",
    printcolumn = r#"{"name":"Release Name","type":"string","jsonPath":".spec.release.name"}"#,
    printcolumn = r#"{"name":"Release Namespace","type":"string","jsonPath":".spec.release.namespace"}"#,
    printcolumn = r#"{"name":"Version","type":"integer","jsonPath":".status.version"}"#,
    printcolumn = r#"{"name":"State","type":"string","jsonPath":".status.state"}"#,
    printcolumn = r#"{"name":"Mode","type":"string","jsonPath":".spec.mode","priority":1}"#,
    printcolumn = r#"{"name":"Suspended","type":"boolean","jsonPath":".spec.suspend","priority":1}"#
)]
#[serde(rename_all = "camelCase")]
pub(crate) struct HelmReleaseSpec {
    /// The Helm release to lock.
    pub release: ReleaseRef,
    /// How writes that change locked fields are handled (default: the locker's `--mode`):
    /// deny, warn (allowed with a warning), repair (allowed with the fields put back) or off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<Mode>,
    /// Unlock the release without deleting anything.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub suspend: bool,
    /// Fields left free, as JSON pointers (`*` matches any key or list index), optionally only
    /// for some objects, like Flux's drift-detection ignore rules.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ignore: Vec<IgnoreSpec>,
    /// Identities whose writes to this release's objects are never blocked nor reverted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exempt: Option<ExemptSpec>,
    /// Scoped writer rules for this release only (docs/writer-rules.md): named writers may
    /// change named locked paths of its objects. A rule naming another release is refused.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub writers: Vec<crate::core::WriterRule>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub(crate) struct ReleaseRef {
    /// The release name (`helm install NAME`).
    pub name: String,
    /// The namespace of the release's Secrets (`helm install --namespace`); defaults to the
    /// HelmRelease's own namespace.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub(crate) struct IgnoreSpec {
    /// JSON pointers, e.g. `/spec/replicas` or `/spec/template/spec/containers/*/image`.
    pub paths: Vec<String>,
    /// Objects the paths apply to (all of the release's when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<TargetSpec>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub(crate) struct TargetSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ExemptSpec {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub users: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
    /// Service accounts as `namespace/name`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub service_accounts: Vec<String>,
}

/// What the locker sees of the release (rancher/helm-locker's states).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub(crate) enum State {
    /// No release Secret exists for the release.
    SecretNotFound,
    #[default]
    Unknown,
    /// Deployed: locked (unless suspended or mode off).
    Deployed,
    /// Uninstalled with `--keep-history`.
    Uninstalled,
    /// The HelmRelease cannot be honoured (another one registers the release, or it is
    /// invalid).
    Error,
    /// Helm's last operation failed.
    Failed,
    /// Helm is installing, upgrading, rolling back or uninstalling.
    Transitioning,
}

// Missing fields read as empty; the schema carries no `default`s ([`crd_yaml`] drops them).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct HelmReleaseStatus {
    pub state: State,
    /// The release's newest revision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<i64>,
    /// Helm's description of the newest revision, or why the state is what it is.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// The release's notes (NOTES.txt).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub notes: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct Condition {
    /// `Locked`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True` or `False`.
    pub status: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reason: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// RFC 3339.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<String>,
}

/// Drops every `default` in a structural schema, nested ones included (the writer rules'
/// `objects.group` carried `default: ""`, and kube-apiserver 1.20 refused the whole CRD for it).
fn strip_defaults(schema: &mut serde_json::Value) {
    let Some(object) = schema.as_object_mut() else {
        return;
    };
    object.remove("default");
    if let Some(properties) = object.get_mut("properties").and_then(|p| p.as_object_mut()) {
        properties.values_mut().for_each(strip_defaults);
    }
    for key in ["items", "additionalProperties", "not"] {
        if let Some(nested) = object.get_mut(key) {
            strip_defaults(nested);
        }
    }
    for key in ["allOf", "anyOf", "oneOf"] {
        if let Some(list) = object.get_mut(key).and_then(|l| l.as_array_mut()) {
            list.iter_mut().for_each(strip_defaults);
        }
    }
}

/// The CRD as YAML, as checked in under `charts/helm-locker/crds/`.
pub(crate) fn crd_yaml() -> String {
    let mut crd = serde_json::to_value(HelmRelease::crd()).expect("the CRD serializes");
    if let Some(versions) = crd
        .pointer_mut("/spec/versions")
        .and_then(|v| v.as_array_mut())
    {
        for version in versions {
            if let Some(schema) = version.pointer_mut("/schema/openAPIV3Schema") {
                strip_defaults(schema);
            }
        }
    }
    let body = serde_saphyr::to_string(&crd).expect("the CRD serializes");
    format!("# Generated by `helm-locker crd` from src/helmrelease.rs; do not edit.\n{body}")
}

/// The release a HelmRelease names (its namespace defaults to the HelmRelease's).
pub(crate) fn target_release(hr: &HelmRelease) -> ReleaseKey {
    let namespace = if hr.spec.release.namespace.is_empty() {
        hr.namespace().unwrap_or_default()
    } else {
        hr.spec.release.namespace.clone()
    };
    ReleaseKey::new(namespace, hr.spec.release.name.clone())
}

fn hr_id(hr: &HelmRelease) -> String {
    format!("{}/{}", hr.namespace().unwrap_or_default(), hr.name_any())
}

/// A HelmRelease's spec as the lock's policy, or why it cannot be one.
pub(crate) fn registration(hr: &HelmRelease) -> Result<Registration, String> {
    if hr.spec.release.name.is_empty() {
        return Err("spec.release.name is empty".into());
    }
    let mut ignore = Vec::new();
    for rule in &hr.spec.ignore {
        if let Some(bad) = rule.paths.iter().find(|p| !p.starts_with('/')) {
            return Err(format!(
                "spec.ignore path {bad:?} is not a JSON pointer (it must start with /)"
            ));
        }
        let target = rule.target.clone().unwrap_or_default();
        ignore.push(IgnoreRule {
            paths: rule.paths.clone(),
            target: RuleTarget {
                group: target.group,
                kind: target.kind,
                namespace: target.namespace,
                name: target.name,
            },
        });
    }
    let exempt = hr.spec.exempt.as_ref().map(|e| Exemptions {
        users: e.users.clone(),
        groups: e.groups.clone(),
        service_account_namespaces: vec![],
        service_accounts: e.service_accounts.clone(),
    });
    // A rule of a HelmRelease reaches its own release only: one naming another is logged and
    // left out (the registration stands; the HelmRelease's author controls its release anyway).
    let (writers, refused) = crate::core::registration_rules(&target_release(hr), &hr.spec.writers);
    for why in &refused {
        tracing::warn!(helmrelease = %hr_id(hr), error = %why, "writer rule refused");
    }
    Ok(Registration {
        helmrelease: hr_id(hr),
        mode: hr.spec.mode,
        suspend: hr.spec.suspend,
        ignore,
        exempt,
        writers,
    })
}

/// The registrations a set of HelmReleases makes, and the HelmReleases that cannot register
/// (by `namespace/name`, with the reason). When several name one release, the first by
/// namespace and name wins.
pub(crate) fn registrations(
    hrs: &[HelmRelease],
) -> (BTreeMap<ReleaseKey, Registration>, BTreeMap<String, String>) {
    let mut sorted: Vec<&HelmRelease> = hrs.iter().collect();
    sorted.sort_by_key(|hr| hr_id(hr));
    let mut registered = BTreeMap::new();
    let mut errors = BTreeMap::new();
    for hr in sorted {
        let key = target_release(hr);
        match registration(hr) {
            Err(e) => {
                errors.insert(hr_id(hr), e);
            }
            Ok(_) if registered.contains_key(&key) => {
                let winner: &Registration = &registered[&key];
                errors.insert(
                    hr_id(hr),
                    format!(
                        "release {key} is already registered by HelmRelease {}",
                        winner.helmrelease
                    ),
                );
            }
            Ok(r) => {
                registered.insert(key, r);
            }
        }
    }
    (registered, errors)
}

/// The status a HelmRelease should show. `error` is why it cannot register (see
/// [`registrations`]); `locked` whether the lock applies (deployed, not suspended, mode not
/// off); `previous` keeps condition transition times; `now` is RFC 3339.
pub(crate) fn desired_status(
    release: &ReleaseKey,
    state: Option<&ReleaseState>,
    error: Option<&str>,
    locked: Result<(), &str>,
    previous: Option<&HelmReleaseStatus>,
    now: &str,
) -> HelmReleaseStatus {
    let newest = state.and_then(|s| s.newest());
    let (state_value, description) = match (error, newest) {
        (Some(e), _) => (State::Error, e.to_string()),
        (None, None) => (
            State::SecretNotFound,
            format!("no release Secret of {release} exists"),
        ),
        (None, Some(revision)) => {
            let state = match revision.status {
                Status::Deployed => State::Deployed,
                Status::Failed => State::Failed,
                Status::Uninstalled => State::Uninstalled,
                s if s.is_helm_at_work() => State::Transitioning,
                _ => State::Unknown,
            };
            (state, revision.description.clone())
        }
    };
    let (status, reason, message) = match (state_value, locked) {
        (State::Deployed, Ok(())) => (
            "True",
            "Deployed",
            format!("writes to the objects of {release} by anyone but Helm are locked"),
        ),
        (State::Deployed, Err(why)) => ("False", "NotLocked", why.to_string()),
        (other, _) => (
            "False",
            state_name(other),
            format!("{release} is not locked while {}", state_phrase(other)),
        ),
    };
    let transition = previous
        .and_then(|p| p.conditions.iter().find(|c| c.type_ == "Locked"))
        .filter(|c| c.status == status)
        .and_then(|c| c.last_transition_time.clone())
        .unwrap_or_else(|| now.to_string());
    HelmReleaseStatus {
        state: state_value,
        version: newest.map(|r| i64::try_from(r.revision).unwrap_or(i64::MAX)),
        description,
        notes: newest.map(|r| r.notes.clone()).unwrap_or_default(),
        conditions: vec![Condition {
            type_: "Locked".into(),
            status: status.into(),
            reason: reason.into(),
            message,
            last_transition_time: Some(transition),
        }],
    }
}

pub(crate) fn state_name(state: State) -> &'static str {
    match state {
        State::SecretNotFound => "SecretNotFound",
        State::Unknown => "Unknown",
        State::Deployed => "Deployed",
        State::Uninstalled => "Uninstalled",
        State::Error => "Error",
        State::Failed => "Failed",
        State::Transitioning => "Transitioning",
    }
}

fn state_phrase(state: State) -> &'static str {
    match state {
        State::SecretNotFound => "it has no release Secret",
        State::Unknown => "its state is unknown",
        State::Deployed => "deployed",
        State::Uninstalled => "it is uninstalled",
        State::Error => "its HelmRelease is in error",
        State::Failed => "Helm's last operation on it failed",
        State::Transitioning => "Helm is working on it",
    }
}

/// The Event a status change deserves, as (reason, note): `Locked` when the release becomes
/// locked, `Transitioning` when Helm starts working on it.
pub(crate) fn transition_event(
    before: Option<&HelmReleaseStatus>,
    after: &HelmReleaseStatus,
) -> Option<(Reason, String)> {
    let locked = |s: &HelmReleaseStatus| {
        s.conditions
            .iter()
            .any(|c| c.type_ == "Locked" && c.status == "True")
    };
    let was_locked = before.is_some_and(locked);
    let was_transitioning = before.is_some_and(|b| b.state == State::Transitioning);
    if locked(after) && !was_locked {
        Some((Reason::Locked, notes::release_locked(after.version)))
    } else if after.state == State::Transitioning && !was_transitioning {
        Some((
            Reason::Transitioning,
            notes::release_transitioning(after.version, &after.description),
        ))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::Index;

    fn hr(ns: &str, name: &str, spec: HelmReleaseSpec) -> HelmRelease {
        let mut hr = HelmRelease::new(name, spec);
        hr.metadata.namespace = Some(ns.into());
        hr
    }

    fn spec(release: &str, namespace: &str) -> HelmReleaseSpec {
        HelmReleaseSpec {
            release: ReleaseRef {
                name: release.into(),
                namespace: namespace.into(),
            },
            ..HelmReleaseSpec::default()
        }
    }

    fn index_with(status: Status, revision: u64) -> Index {
        let mut secret = helm_locker_core::test_util::release_secret(
            "shop",
            "shop",
            revision,
            status,
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n",
        );
        secret.release.description = "Upgrade complete".into();
        secret.release.notes = "Thanks for installing shop".into();
        secret.release.chart = "shop-1.0.0".into();
        Index::from_secrets([secret])
    }

    #[test]
    fn rancher_style_yaml_deserializes_and_helm_locker_fields_are_optional() {
        let rancher: HelmRelease = serde_saphyr::from_str(
            "apiVersion: helm.cattle.io/v1alpha1\nkind: HelmRelease\nmetadata: {name: shop, namespace: cattle-helm-system}\nspec:\n  release: {name: shop, namespace: shop}\n",
        )
        .unwrap();
        assert_eq!(target_release(&rancher), ReleaseKey::new("shop", "shop"));
        let r = registration(&rancher).unwrap();
        assert_eq!(r.helmrelease, "cattle-helm-system/shop");
        assert_eq!((r.mode, r.suspend), (None, false));

        let ours: HelmRelease = serde_saphyr::from_str(
            "apiVersion: helm.cattle.io/v1alpha1\nkind: HelmRelease\nmetadata: {name: web, namespace: apps}\nspec:\n  release: {name: web}\n  mode: repair\n  suspend: true\n  ignore:\n  - paths: [/spec/replicas]\n    target: {kind: Deployment}\n  exempt: {users: [ci], serviceAccounts: [argo/argocd]}\n",
        )
        .unwrap();
        assert_eq!(target_release(&ours), ReleaseKey::new("apps", "web"));
        let r = registration(&ours).unwrap();
        assert_eq!(r.mode, Some(Mode::Repair));
        assert!(r.suspend);
        assert_eq!(r.ignore[0].target.kind.as_deref(), Some("Deployment"));
        let exempt = r.exempt.unwrap();
        assert!(exempt.exempts("ci", &[] as &[&str]));
        assert!(exempt.exempts("system:serviceaccount:argo:argocd", &[] as &[&str]));
        assert!(!exempt.exempts("system:serviceaccount:kube-system:x", &[] as &[&str]));
    }

    /// A HelmRelease's writer rule reaches its own release only: one naming another namespace's
    /// release is left out (the attack), the same rule naming none is bound to its release (the
    /// control), and the registration stands.
    #[test]
    fn a_helmreleases_writer_rule_naming_another_release_is_refused() {
        let rule = |id: &str, release: &str| -> crate::core::WriterRule {
            serde_saphyr::from_str(&format!("id: {id}\nwriters: {{serviceAccounts: [ops/scaler]}}\nobjects: {{release: {release}, group: apps, kind: Deployment}}\npaths: [/spec/replicas]\nreason: r\n")).unwrap()
        };
        let mut with_rules = spec("shop", "shop");
        with_rules.writers = vec![
            rule("foreign", "{namespace: payments, name: payments}"),
            rule("own", "{}"),
        ];
        let registration = registration(&hr("reg", "shop", with_rules)).unwrap();
        let ids: Vec<&str> = registration.writers.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(ids, ["own"]);
        let bound = &registration.writers[0].objects.release;
        assert_eq!(
            (bound.namespace.as_deref(), bound.name.as_deref()),
            (Some("shop"), Some("shop"))
        );
    }

    #[test]
    fn invalid_and_duplicate_helmreleases_are_errors_and_the_first_wins() {
        let mut bad = spec("shop", "shop");
        bad.ignore = vec![IgnoreSpec {
            paths: vec!["spec.replicas".into()],
            target: None,
        }];
        let hrs = vec![
            hr("reg", "shop-b", spec("shop", "shop")),
            hr("reg", "shop-a", spec("shop", "shop")),
            hr("reg", "broken", bad),
            hr("reg", "nameless", spec("", "shop")),
        ];
        let (registered, errors) = registrations(&hrs);
        assert_eq!(registered.len(), 1);
        assert_eq!(
            registered[&ReleaseKey::new("shop", "shop")].helmrelease,
            "reg/shop-a"
        );
        assert_eq!(
            errors["reg/shop-b"],
            "release shop/shop is already registered by HelmRelease reg/shop-a"
        );
        assert!(errors["reg/broken"].contains("not a JSON pointer"));
        assert_eq!(errors["reg/nameless"], "spec.release.name is empty");
    }

    #[test]
    fn status_follows_the_release() {
        let key = ReleaseKey::new("shop", "shop");
        let now = "2026-11-21T10:00:00Z";
        let deployed = index_with(Status::Deployed, 3);
        let s = desired_status(
            &key,
            deployed.release(&key).map(|s| &**s),
            None,
            Ok(()),
            None,
            now,
        );
        assert_eq!(s.state, State::Deployed);
        assert_eq!(s.version, Some(3));
        assert_eq!(s.notes, "Thanks for installing shop");
        assert_eq!(s.description, "Upgrade complete");
        assert_eq!(s.conditions[0].status, "True");
        assert_eq!(
            transition_event(None, &s).map(|e| e.0),
            Some(Reason::Locked)
        );
        // Unchanged condition keeps its transition time; no second event.
        let later = desired_status(
            &key,
            deployed.release(&key).map(|s| &**s),
            None,
            Ok(()),
            Some(&s),
            "2026-11-21T11:00:00Z",
        );
        assert_eq!(
            later.conditions[0].last_transition_time.as_deref(),
            Some(now)
        );
        assert_eq!(transition_event(Some(&s), &later), None);

        let upgrading = index_with(Status::PendingUpgrade, 4);
        let t = desired_status(
            &key,
            upgrading.release(&key).map(|s| &**s),
            None,
            Ok(()),
            Some(&s),
            now,
        );
        assert_eq!(t.state, State::Transitioning);
        assert_eq!(t.conditions[0].status, "False");
        assert_eq!(
            transition_event(Some(&s), &t).map(|e| e.0),
            Some(Reason::Transitioning)
        );

        let suspended = desired_status(
            &key,
            deployed.release(&key).map(|s| &**s),
            None,
            Err("its HelmRelease reg/shop is suspended"),
            None,
            now,
        );
        assert_eq!(suspended.state, State::Deployed);
        assert_eq!(suspended.conditions[0].reason, "NotLocked");

        let gone = desired_status(&key, None, None, Ok(()), Some(&s), now);
        assert_eq!(gone.state, State::SecretNotFound);
        assert_eq!(gone.version, None);

        for (status, state) in [
            (Status::Failed, State::Failed),
            (Status::Uninstalled, State::Uninstalled),
            (Status::Uninstalling, State::Transitioning),
            (Status::PendingInstall, State::Transitioning),
            (Status::PendingRollback, State::Transitioning),
            (Status::Superseded, State::Unknown),
        ] {
            let idx = index_with(status, 2);
            let got = desired_status(
                &key,
                idx.release(&key).map(|s| &**s),
                None,
                Ok(()),
                None,
                now,
            );
            assert_eq!(got.state, state, "{status}");
        }
        let err = desired_status(
            &key,
            deployed.release(&key).map(|s| &**s),
            Some("release shop/shop is already registered by HelmRelease reg/a"),
            Ok(()),
            None,
            now,
        );
        assert_eq!(err.state, State::Error);
        assert!(err.description.contains("already registered"));
    }

    #[test]
    fn the_crd_schema_carries_no_default_anywhere() {
        let yaml = crd_yaml();
        let defaults: Vec<&str> = yaml
            .lines()
            .filter(|l| l.trim_start().starts_with("default:"))
            .collect();
        assert!(
            defaults.is_empty(),
            "kube-apiserver 1.20 refuses these: {defaults:?}"
        );
        let writers = yaml
            .find("writers:")
            .expect("spec.writers is in the schema");
        assert!(
            yaml[writers..].contains("group:"),
            "the nested rule fields are kept"
        );
    }

    #[test]
    fn checked_in_crd_is_current() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/charts/helm-locker/crds/helmreleases.helm.cattle.io.yaml"
        );
        let checked_in = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            checked_in == crd_yaml(),
            "{path} is out of date: run `cargo run -- crd > {path}`"
        );
    }
}
