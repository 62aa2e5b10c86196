//! What the index knows about built-in kinds before any API server is asked: which are
//! cluster-scoped, which are namespaced, and which groups serve the same objects.
//!
//! Neither table decides what is locked on its own. The API server states the scope of every
//! request itself (a cluster-scoped request has no namespace; a Namespace's names itself, see
//! [`decide`](crate::decide)), so a kind missing here (newer than the table, a custom
//! resource) is indexed under both scopes and matched by whichever the request has. The
//! tables only save that second entry for the kinds whose scope is certain.

use std::collections::HashMap;
use std::sync::LazyLock;

use foldhash::fast::FixedState;

/// Where an object of a kind lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    Namespaced,
    Cluster,
    /// Not in the tables (custom resources, kinds newer than them): indexed in the chart's (or
    /// release's) namespace and also matched by a cluster-scoped request, whatever namespace
    /// the chart gives (Helm ignores it for cluster-scoped kinds).
    Unknown,
}

/// Built-in cluster-scoped kinds (Kubernetes 1.20 through 1.33).
const CLUSTER: &[(&str, &str)] = &[
    ("", "Namespace"),
    ("", "Node"),
    ("", "PersistentVolume"),
    ("", "ComponentStatus"),
    ("rbac.authorization.k8s.io", "ClusterRole"),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
    ("apiextensions.k8s.io", "CustomResourceDefinition"),
    ("apiregistration.k8s.io", "APIService"),
    (
        "admissionregistration.k8s.io",
        "ValidatingWebhookConfiguration",
    ),
    (
        "admissionregistration.k8s.io",
        "MutatingWebhookConfiguration",
    ),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"),
    (
        "admissionregistration.k8s.io",
        "ValidatingAdmissionPolicyBinding",
    ),
    ("admissionregistration.k8s.io", "MutatingAdmissionPolicy"),
    (
        "admissionregistration.k8s.io",
        "MutatingAdmissionPolicyBinding",
    ),
    ("storage.k8s.io", "StorageClass"),
    ("storage.k8s.io", "CSIDriver"),
    ("storage.k8s.io", "CSINode"),
    ("storage.k8s.io", "VolumeAttachment"),
    ("storage.k8s.io", "VolumeAttributesClass"),
    ("scheduling.k8s.io", "PriorityClass"),
    ("networking.k8s.io", "IngressClass"),
    ("networking.k8s.io", "IPAddress"),
    ("networking.k8s.io", "ServiceCIDR"),
    ("node.k8s.io", "RuntimeClass"),
    ("policy", "PodSecurityPolicy"),
    ("extensions", "PodSecurityPolicy"),
    ("certificates.k8s.io", "CertificateSigningRequest"),
    ("certificates.k8s.io", "ClusterTrustBundle"),
    ("flowcontrol.apiserver.k8s.io", "FlowSchema"),
    ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration"),
    ("resource.k8s.io", "DeviceClass"),
    ("resource.k8s.io", "ResourceSlice"),
];

/// Built-in namespaced kinds (Kubernetes 1.20 through 1.33), by kind rather than by group: a
/// group gains cluster-scoped kinds over time (`storage.k8s.io` got VolumeAttributesClass).
const NAMESPACED: &[(&str, &str)] = &[
    ("", "Binding"),
    ("", "ConfigMap"),
    ("", "Endpoints"),
    ("", "Event"),
    ("", "LimitRange"),
    ("", "PersistentVolumeClaim"),
    ("", "Pod"),
    ("", "PodTemplate"),
    ("", "ReplicationController"),
    ("", "ResourceQuota"),
    ("", "Secret"),
    ("", "Service"),
    ("", "ServiceAccount"),
    ("apps", "ControllerRevision"),
    ("apps", "DaemonSet"),
    ("apps", "Deployment"),
    ("apps", "ReplicaSet"),
    ("apps", "StatefulSet"),
    ("autoscaling", "HorizontalPodAutoscaler"),
    ("batch", "CronJob"),
    ("batch", "Job"),
    ("coordination.k8s.io", "Lease"),
    ("discovery.k8s.io", "EndpointSlice"),
    ("events.k8s.io", "Event"),
    ("extensions", "DaemonSet"),
    ("extensions", "Deployment"),
    ("extensions", "Ingress"),
    ("extensions", "NetworkPolicy"),
    ("extensions", "ReplicaSet"),
    ("networking.k8s.io", "Ingress"),
    ("networking.k8s.io", "NetworkPolicy"),
    ("policy", "PodDisruptionBudget"),
    ("rbac.authorization.k8s.io", "Role"),
    ("rbac.authorization.k8s.io", "RoleBinding"),
    ("resource.k8s.io", "ResourceClaim"),
    ("resource.k8s.io", "ResourceClaimTemplate"),
    ("storage.k8s.io", "CSIStorageCapacity"),
];

/// The scope of a kind, when this build is certain of it. Every object the index builds asks,
/// so the tables are read through a map by kind (a kind is in one or two groups), not scanned.
pub fn scope_of(group: &str, kind: &str) -> Scope {
    type ByKind = HashMap<&'static str, Vec<(&'static str, Scope)>, FixedState>;
    static BY_KIND: LazyLock<ByKind> = LazyLock::new(|| {
        let mut by_kind = ByKind::default();
        let tables = [(CLUSTER, Scope::Cluster), (NAMESPACED, Scope::Namespaced)];
        for (table, scope) in tables {
            for (g, k) in table {
                by_kind.entry(k).or_default().push((g, scope));
            }
        }
        by_kind
    });
    BY_KIND
        .get(kind)
        .and_then(|groups| groups.iter().find(|(g, _)| *g == group))
        .map_or(Scope::Unknown, |(_, scope)| *scope)
}

/// Kinds the API server serves under two groups, from one storage: a write through either
/// changes the same object. Keyed by the older group; the value is the group the object is
/// indexed under. (`extensions/v1beta1` served Ingress until 1.22, NetworkPolicy until 1.16 and
/// the workloads until 1.16; `events.k8s.io` serves the core Event.)
const GROUP_ALIASES: &[(&str, &str, &str)] = &[
    ("extensions", "Deployment", "apps"),
    ("extensions", "DaemonSet", "apps"),
    ("extensions", "ReplicaSet", "apps"),
    ("extensions", "Ingress", "networking.k8s.io"),
    ("extensions", "NetworkPolicy", "networking.k8s.io"),
    ("extensions", "PodSecurityPolicy", "policy"),
    ("events.k8s.io", "Event", ""),
];

/// The group an object of `group`/`kind` is indexed under: the same for every group that
/// serves it, so a write through `extensions` finds the chart's `networking.k8s.io` Ingress.
/// `kind` may be the lower-case singular a `scale` request gives.
pub(crate) fn canonical_group<'g>(group: &'g str, kind: &str) -> &'g str {
    GROUP_ALIASES
        .iter()
        .find(|(g, k, _)| *g == group && k.eq_ignore_ascii_case(kind))
        .map_or(group, |(_, _, canonical)| canonical)
}

/// Whether two groups serve the same objects of `kind`.
pub(crate) fn same_group(a: &str, b: &str, kind: &str) -> bool {
    a == b || canonical_group(a, kind) == canonical_group(b, kind)
}

/// The built-in kinds served with a `scale` subresource, by (group, plural resource): what a
/// `scale` request names when the schema has no `/openapi/v2` paths (the embedded snapshot).
pub(crate) fn builtin_kind_of_resource(group: &str, resource: &str) -> Option<&'static str> {
    Some(match (group, resource) {
        ("apps" | "extensions", "deployments") => "Deployment",
        ("apps" | "extensions", "replicasets") => "ReplicaSet",
        ("apps", "statefulsets") => "StatefulSet",
        ("", "replicationcontrollers") => "ReplicationController",
        _ => return None,
    })
}

/// Annotations the API server converts into fields when an object is written through an older
/// version: (group, kind, version written, annotation, the field's JSON pointer in the versions
/// that have it). Through `autoscaling/v1` an HPA carries its `v2` metrics and behavior as JSON
/// in these annotations (kube-apiserver's v1 conversion reads them back into the fields).
pub(crate) const CONVERSION_ANNOTATIONS: &[(&str, &str, &str, &str, &str)] = &[
    (
        "autoscaling",
        "HorizontalPodAutoscaler",
        "v1",
        "autoscaling.alpha.kubernetes.io/metrics",
        "/spec/metrics",
    ),
    (
        "autoscaling",
        "HorizontalPodAutoscaler",
        "v1",
        "autoscaling.alpha.kubernetes.io/behavior",
        "/spec/behavior",
    ),
    // v2beta1 has no `behavior` either (measured on 1.20: a behavior's stabilization window
    // written through v2beta1's annotation is the v2beta2 `spec.behavior` read back).
    (
        "autoscaling",
        "HorizontalPodAutoscaler",
        "v2beta1",
        "autoscaling.alpha.kubernetes.io/behavior",
        "/spec/behavior",
    ),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_do_not_contradict_each_other() {
        for (g, k) in CLUSTER {
            assert!(!NAMESPACED.contains(&(g, k)), "{g}/{k} is in both tables");
        }
    }

    #[test]
    fn a_kind_is_scoped_by_kind_not_by_group() {
        assert_eq!(scope_of("storage.k8s.io", "StorageClass"), Scope::Cluster);
        assert_eq!(
            scope_of("storage.k8s.io", "VolumeAttributesClass"),
            Scope::Cluster
        );
        assert_eq!(
            scope_of("storage.k8s.io", "CSIStorageCapacity"),
            Scope::Namespaced
        );
        assert_eq!(scope_of("", "Namespace"), Scope::Cluster);
        assert_eq!(scope_of("apps", "Deployment"), Scope::Namespaced);
        // Newer than the tables, or a custom resource: both scopes.
        assert_eq!(scope_of("storage.k8s.io", "SomethingNew"), Scope::Unknown);
        assert_eq!(scope_of("example.com", "Widget"), Scope::Unknown);
    }

    #[test]
    fn every_table_entry_has_its_scope_and_only_under_its_own_group() {
        for (table, scope) in [(CLUSTER, Scope::Cluster), (NAMESPACED, Scope::Namespaced)] {
            for (g, k) in table {
                assert_eq!(scope_of(g, k), scope, "{g}/{k}");
                assert_eq!(
                    scope_of("example.com", k),
                    Scope::Unknown,
                    "{k} in another group"
                );
                assert_eq!(
                    scope_of(g, &k.to_lowercase()),
                    Scope::Unknown,
                    "{g}/{k} lower-case"
                );
            }
        }
    }

    #[test]
    fn older_groups_resolve_to_the_group_the_chart_uses_today() {
        assert_eq!(
            canonical_group("extensions", "Ingress"),
            "networking.k8s.io"
        );
        assert_eq!(canonical_group("extensions", "deployment"), "apps");
        assert_eq!(canonical_group("events.k8s.io", "Event"), "");
        assert_eq!(
            canonical_group("networking.k8s.io", "Ingress"),
            "networking.k8s.io"
        );
        assert_eq!(canonical_group("extensions", "Widget"), "extensions");
        assert!(same_group("extensions", "networking.k8s.io", "Ingress"));
        assert!(!same_group("extensions", "apps", "Ingress"));
        assert!(!same_group("example.com", "example.org", "Widget"));
    }
}
