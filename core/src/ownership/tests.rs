use super::*;
use crate::schema::KubeVersion;
use serde_json::json;
use std::sync::Arc;

fn schema() -> Arc<Schema> {
    Schema::builtin()
}

fn paths(
    api_version: &str,
    kind: &str,
    chart: Value,
    new: Value,
    old: Option<Value>,
) -> Vec<String> {
    let schema = schema();
    let root = schema.root_or_deduced(api_version, kind);
    locked_changes(&schema, root, &Tree::from(&chart), &new, old.as_ref(), &[])
        .into_iter()
        .map(|c| c.path)
        .collect()
}

fn deployment(containers: Value) -> Value {
    json!({"spec": {"replicas": 2, "template": {"spec": {"containers": containers}}}})
}

/// `{}` of a struct inside an atomic value is a value: a NetworkPolicy peer
/// `{podSelector: {}}` (every pod of the namespace) replaced by `{namespaceSelector: {}}`
/// (every namespace) opens the database to the cluster.
#[test]
fn an_empty_struct_inside_an_atomic_value_is_a_value() {
    let policy = |peer: Value| {
        json!({"spec": {"podSelector": {"matchLabels": {"app": "db"}},
            "ingress": [{"from": [peer]}]}})
    };
    let chart = policy(json!({"podSelector": {}}));
    let opened = paths(
        "networking.k8s.io/v1",
        "NetworkPolicy",
        chart.clone(),
        policy(json!({"namespaceSelector": {}})),
        Some(chart.clone()),
    );
    assert_eq!(opened, ["/spec/ingress"]);
    let same = paths(
        "networking.k8s.io/v1",
        "NetworkPolicy",
        chart.clone(),
        chart.clone(),
        Some(chart.clone()),
    );
    assert!(same.is_empty());
}

#[test]
fn an_atomic_list_is_one_value_adding_a_subject_is_a_change() {
    let chart =
        json!({"subjects": [{"kind": "ServiceAccount", "name": "web", "namespace": "shop"}]});
    let mut new = chart.clone();
    new["subjects"]
        .as_array_mut()
        .unwrap()
        .push(json!({"kind": "User", "name": "mallory"}));
    let changes = paths(
        "rbac.authorization.k8s.io/v1",
        "ClusterRoleBinding",
        chart.clone(),
        new,
        Some(chart.clone()),
    );
    assert_eq!(changes, ["/subjects"]);
    // Same subject, more fields the API server does not add: still a different list.
    let rules =
        json!({"rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]});
    let mut more = rules.clone();
    more["rules"][0]["verbs"] = json!(["get", "list"]);
    assert_eq!(
        paths(
            "rbac.authorization.k8s.io/v1",
            "ClusterRole",
            rules.clone(),
            more,
            Some(rules)
        ),
        ["/rules"]
    );
}

#[test]
fn map_lists_own_their_items_by_key_and_what_the_chart_sets_inside() {
    let chart = deployment(
        json!([{"name": "web", "image": "nginx:1.25", "args": ["a"], "env": [{"name": "A", "value": "1"}]}]),
    );
    let live = deployment(json!([
        {"name": "debug", "image": "busybox"},
        {"name": "web", "image": "nginx:1.25", "args": ["a"], "imagePullPolicy": "Always",
         "env": [{"name": "B", "value": "2"}, {"name": "A", "value": "1"}]}
    ]));
    assert!(paths("apps/v1", "Deployment", chart.clone(), live.clone(), None).is_empty());
    let mut new = live.clone();
    new["spec"]["template"]["spec"]["containers"][1]["image"] = json!("nginx:1.27");
    new["spec"]["template"]["spec"]["containers"][1]["args"] = json!(["a", "--debug"]);
    new["spec"]["template"]["spec"]["containers"][1]["env"][1]["value"] = json!("9");
    assert_eq!(
        paths(
            "apps/v1",
            "Deployment",
            chart.clone(),
            new,
            Some(live.clone())
        ),
        [
            "/spec/template/spec/containers/1/args",
            "/spec/template/spec/containers/1/env/1/value",
            "/spec/template/spec/containers/1/image"
        ]
    );
    // Removing the chart's container is a change; removing the injected one is not.
    let mut removed = live.clone();
    removed["spec"]["template"]["spec"]["containers"] =
        json!([live["spec"]["template"]["spec"]["containers"][0]]);
    assert_eq!(
        paths(
            "apps/v1",
            "Deployment",
            chart.clone(),
            removed,
            Some(live.clone())
        ),
        ["/spec/template/spec/containers/-"]
    );
    let mut without_debug = live.clone();
    without_debug["spec"]["template"]["spec"]["containers"] =
        json!([live["spec"]["template"]["spec"]["containers"][1]]);
    assert!(paths("apps/v1", "Deployment", chart, without_debug, Some(live)).is_empty());
}

#[test]
fn repeating_a_chart_items_key_shadows_it_and_is_a_change() {
    let chart = deployment(json!([{"name": "web", "env": [{"name": "MODE", "value": "safe"}]}]));
    let live = chart.clone();
    let mut shadowed = live.clone();
    shadowed["spec"]["template"]["spec"]["containers"][0]["env"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "MODE", "value": "debug"}));
    assert_eq!(
        paths(
            "apps/v1",
            "Deployment",
            chart.clone(),
            shadowed.clone(),
            Some(live.clone())
        ),
        ["/spec/template/spec/containers/0/env/1"]
    );
    // Repair removes the shadowing item.
    let schema = schema();
    let root = schema.root_or_deduced("apps/v1", "Deployment");
    let changes = locked_changes(
        &schema,
        root,
        &Tree::from(&chart),
        &shadowed,
        Some(&live),
        &[],
    );
    let mut repaired = shadowed.clone();
    json_patch::patch(&mut repaired, &repair_patch(&changes)).unwrap();
    assert_eq!(repaired, live);
    // Already there before the write: not this write's doing.
    assert!(paths(
        "apps/v1",
        "Deployment",
        chart,
        shadowed.clone(),
        Some(shadowed)
    )
    .is_empty());
}

#[test]
fn through_another_version_every_change_outside_metadata_counts() {
    let schema = schema();
    // The chart writes autoscaling/v2beta2 `metrics`; kubectl edits autoscaling/v1.
    let chart = Tree::from(
        &json!({"metadata": {"name": "web", "labels": {"app": "web"}},
            "spec": {"minReplicas": 2, "metrics": [{"type": "Resource"}]}}),
    );
    let root = schema.root_or_deduced("autoscaling/v1", "HorizontalPodAutoscaler");
    let old = json!({"metadata": {"name": "web", "labels": {"app": "web"}},
            "spec": {"minReplicas": 2, "targetCPUUtilizationPercentage": 80}});
    let mut new = old.clone();
    new["spec"]["targetCPUUtilizationPercentage"] = json!(50);
    let changes = cross_version_changes(&schema, root, &chart, &new, Some(&old), &[]);
    assert_eq!(
        changes.iter().map(|c| c.path.as_str()).collect::<Vec<_>>(),
        ["/spec"]
    );
    // Labels are the same in every version: a new one is free, the chart's is locked.
    let mut labelled = old.clone();
    labelled["metadata"]["labels"]["team"] = json!("a");
    assert!(cross_version_changes(&schema, root, &chart, &labelled, Some(&old), &[]).is_empty());
    labelled["metadata"]["labels"]["app"] = json!("x");
    let changes = cross_version_changes(&schema, root, &chart, &labelled, Some(&old), &[]);
    assert_eq!(changes[0].path, "/metadata/labels/app");
}

#[test]
fn a_repeated_key_anywhere_is_found_where_the_old_object_had_none() {
    let schema = schema();
    let root = schema.root_or_deduced("v1", "ServiceAccount");
    let old = json!({"metadata": {"name": "sa"}, "secrets": [{"name": "sa-token-1"}]});
    let mut new = old.clone();
    new["secrets"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "sa-token-1"}));
    let found = duplicate_keys(&schema, root, &new, Some(&old));
    assert_eq!(
        found.iter().map(|c| c.path.as_str()).collect::<Vec<_>>(),
        ["/secrets/1"]
    );
    // Already repeated before: not this write's doing. A new distinct item: fine.
    assert!(duplicate_keys(&schema, root, &new, Some(&new)).is_empty());
    let mut other = old.clone();
    other["secrets"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "sa-token-2"}));
    assert!(duplicate_keys(&schema, root, &other, Some(&old)).is_empty());
    // Nested: a repeated env name in a container, and a repeated finalizer (a set).
    let root = schema.root_or_deduced("apps/v1", "Deployment");
    let old = deployment(json!([{"name": "web", "env": [{"name": "A", "value": "1"}]}]));
    let mut new = old.clone();
    new["spec"]["template"]["spec"]["containers"][0]["env"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "A", "value": "2"}));
    new["metadata"] = json!({"finalizers": ["x", "x"]});
    let found = duplicate_keys(&schema, root, &new, Some(&old));
    assert_eq!(
        found.iter().map(|c| c.path.as_str()).collect::<Vec<_>>(),
        [
            "/metadata/finalizers/1",
            "/spec/template/spec/containers/0/env/1"
        ]
    );
}

#[test]
fn an_empty_struct_is_an_owned_value_but_what_goes_inside_is_free() {
    let chart =
        json!({"spec": {"template": {"spec": {"volumes": [{"name": "tmp", "emptyDir": {}}]}}}});
    let live = chart.clone();
    let mut host = live.clone();
    host["spec"]["template"]["spec"]["volumes"][0] =
        json!({"name": "tmp", "hostPath": {"path": "/"}});
    assert_eq!(
        paths(
            "apps/v1",
            "Deployment",
            chart.clone(),
            host,
            Some(live.clone())
        ),
        ["/spec/template/spec/volumes/0/emptyDir"]
    );
    let mut memory = live.clone();
    memory["spec"]["template"]["spec"]["volumes"][0]["emptyDir"] = json!({"medium": "Memory"});
    assert!(paths("apps/v1", "Deployment", chart, memory, Some(live)).is_empty());
}

#[test]
fn a_null_owns_nothing_and_annotations_stay_free_under_it() {
    let chart = json!({"metadata": {"name": "x", "annotations": null}, "data": {"a": "1"}});
    let new = json!({"metadata": {"name": "x", "annotations": {"team": "a"}}, "data": {"a": "1"}});
    assert!(paths("v1", "ConfigMap", chart.clone(), new.clone(), Some(chart)).is_empty());
}

#[test]
fn sets_own_each_item_adding_is_free_removing_is_a_change() {
    let chart = json!({"metadata": {"finalizers": ["example.com/keep"]}});
    let live = json!({"metadata": {"finalizers": ["kubernetes", "example.com/keep"]}});
    assert!(paths(
        "v1",
        "ConfigMap",
        chart.clone(),
        live.clone(),
        Some(json!({"metadata": {"finalizers": ["example.com/keep"]}}))
    )
    .is_empty());
    let removed = json!({"metadata": {"finalizers": ["kubernetes"]}});
    assert_eq!(
        paths("v1", "ConfigMap", chart, removed, Some(live)),
        ["/metadata/finalizers/-"]
    );
}

#[test]
fn atomic_structs_are_one_value() {
    let chart = json!({"spec": {"selector": {"matchLabels": {"app": "web"}}}});
    let mut widened = chart.clone();
    widened["spec"]["selector"]["matchExpressions"] =
        json!([{"key": "tier", "operator": "Exists"}]);
    assert_eq!(
        paths(
            "apps/v1",
            "Deployment",
            chart.clone(),
            widened,
            Some(chart.clone())
        ),
        ["/spec/selector"]
    );
    let policy = json!({"spec": {"podSelector": {"matchLabels": {"app": "db"}}, "ingress": [{"from": [{"podSelector": {"matchLabels": {"app": "web"}}}]}]}});
    let mut opened = policy.clone();
    opened["spec"]["ingress"] = json!([{}]);
    assert_eq!(
        paths(
            "networking.k8s.io/v1",
            "NetworkPolicy",
            policy.clone(),
            opened,
            Some(policy)
        ),
        ["/spec/ingress"]
    );
}

#[test]
fn quantities_compare_canonically_only_where_the_schema_says_quantity() {
    let chart = deployment(
        json!([{"name": "web", "resources": {"limits": {"cpu": "0.5", "memory": "1Gi"}, "requests": {"cpu": 1}}}]),
    );
    let live = deployment(
        json!([{"name": "web", "resources": {"limits": {"cpu": "500m", "memory": "1073741824"}, "requests": {"cpu": "1"}}}]),
    );
    assert!(paths("apps/v1", "Deployment", chart.clone(), live.clone(), None).is_empty());
    let mut changed = live.clone();
    changed["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["cpu"] =
        json!("600m");
    assert_eq!(
        paths("apps/v1", "Deployment", chart, changed, Some(live)),
        ["/spec/template/spec/containers/0/resources/limits/cpu"]
    );
    // In a ConfigMap "0.5" and "500m" are different strings.
    assert_eq!(
        paths(
            "v1",
            "ConfigMap",
            json!({"data": {"x": "0.5"}}),
            json!({"data": {"x": "500m"}}),
            None
        ),
        ["/data/x"]
    );
}

#[test]
fn string_data_locks_data_and_helm_metadata_is_owned() {
    let schema = schema();
    let chart = Tree::from(
        &json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "stringData": {"password": "hunter2"}}),
    );
    let stored = stored_form(&chart, "", "Secret");
    let root = schema.root_or_deduced("v1", "Secret");
    let helm = ("shop", "prod");
    let locked_changes =
        |schema: &Schema, root, chart: &Tree, new: &Value, old: Option<&Value>, ignore: &[&str]| {
            let mut changes = super::locked_changes(schema, root, chart, new, old, ignore);
            changes.extend(helm_metadata_changes(chart, helm, new, old, ignore));
            changes
        };
    let applied = stored.into_owned();
    let live = json!({"metadata": {"name": "s", "labels": {MANAGED_BY_LABEL: "Helm"},
            "annotations": {RELEASE_NAME_ANNOTATION: "shop", RELEASE_NAMESPACE_ANNOTATION: "prod"}},
            "data": {"password": "aHVudGVyMg=="}, "type": "Opaque"});
    assert!(locked_changes(&schema, root, &applied, &live, Some(&live), &[]).is_empty());
    let mut edited = live.clone();
    edited["data"]["password"] = json!("b3RoZXI=");
    edited["metadata"]["annotations"][RELEASE_NAME_ANNOTATION] = json!("other");
    let changed: Vec<_> = locked_changes(&schema, root, &applied, &edited, Some(&live), &[])
        .into_iter()
        .map(|c| c.path)
        .collect();
    assert_eq!(
        changed,
        [
            "/data/password",
            "/metadata/annotations/meta.helm.sh~1release-name"
        ]
    );
}

#[test]
fn drift_moving_back_and_unrelated_writes() {
    let chart = json!({"spec": {"replicas": 3, "paused": false}});
    let old = json!({"spec": {"replicas": 5, "paused": false}});
    assert!(paths(
        "apps/v1",
        "Deployment",
        chart.clone(),
        json!({"spec": {"replicas": 5, "paused": false, "x": 1}}),
        Some(old.clone())
    )
    .is_empty());
    assert!(paths(
        "apps/v1",
        "Deployment",
        chart.clone(),
        json!({"spec": {"replicas": 3, "paused": false}}),
        Some(old.clone())
    )
    .is_empty());
    assert_eq!(
        paths(
            "apps/v1",
            "Deployment",
            chart.clone(),
            json!({"spec": {"replicas": 6, "paused": false}}),
            Some(old)
        ),
        ["/spec/replicas"]
    );
    let schema = schema();
    let root = schema.root_or_deduced("apps/v1", "Deployment");
    let drift = drifted_fields(
        &schema,
        root,
        &Tree::from(&chart),
        &json!({"spec": {"replicas": 5}}),
        &[],
    );
    // `paused: false` is what the API server stores as no `paused` at all.
    assert_eq!(drift.len(), 1, "{drift:?}");
    assert_eq!(drift[0].path, "/spec/replicas");
}

/// A DaemonSet as a node-exporter chart renders it: `hostIPC: false`, an env var's
/// `value: ""`, a probe's `initialDelaySeconds: 0` and `httpHeaders: null`, ports with their
/// protocol.
fn node_exporter_rendered() -> Value {
    json!({"apiVersion": "apps/v1", "kind": "DaemonSet",
    "metadata": {"name": "ne", "namespace": "monitoring", "labels": {"app": "ne"}},
    "spec": {
        "selector": {"matchLabels": {"app": "ne"}},
        "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}},
        "template": {"metadata": {"labels": {"app": "ne"}}, "spec": {
            "automountServiceAccountToken": false,
            "hostIPC": false, "hostNetwork": true, "hostPID": true,
            "securityContext": {"fsGroup": 65534, "runAsGroup": 65534, "runAsNonRoot": true, "runAsUser": 65534},
            "containers": [{
                "name": "node-exporter",
                "image": "quay.io/prometheus/node-exporter:v1.8.2",
                "imagePullPolicy": "IfNotPresent",
                "args": ["--path.procfs=/host/proc", "--web.listen-address=[$(HOST_IP)]:9100"],
                "securityContext": {"readOnlyRootFilesystem": true, "allowPrivilegeEscalation": false},
                "env": [{"name": "HOST_IP", "value": "0.0.0.0"}, {"name": "EMPTY", "value": ""}],
                "ports": [{"name": "metrics", "containerPort": 9100, "protocol": "TCP"}],
                "livenessProbe": {"failureThreshold": 3,
                    "httpGet": {"httpHeaders": null, "path": "/", "port": 9100, "scheme": "HTTP"},
                    "initialDelaySeconds": 0, "periodSeconds": 10, "successThreshold": 1, "timeoutSeconds": 1},
                "resources": {"limits": {"memory": "64Mi"}, "requests": {"cpu": "10m"}},
                "volumeMounts": [{"name": "proc", "mountPath": "/host/proc", "readOnly": true}]
            }],
            "volumes": [{"name": "proc", "hostPath": {"path": "/proc"}}],
            "tolerations": [{"effect": "NoSchedule", "operator": "Exists"}]
        }}
    }})
}

/// [`node_exporter_rendered`] as kube-apiserver 1.36.2 stores it (`kubectl create
/// --dry-run=server -o json`; 1.20.15 stores the same spec): the zero values left out, the
/// defaults filled in.
fn node_exporter_stored() -> Value {
    json!({"apiVersion": "apps/v1", "kind": "DaemonSet",
    "metadata": {"name": "ne", "namespace": "monitoring", "labels": {"app": "ne"},
        "annotations": {"deprecated.daemonset.template.generation": "1"}},
    "spec": {
        "revisionHistoryLimit": 10,
        "selector": {"matchLabels": {"app": "ne"}},
        "template": {"metadata": {"labels": {"app": "ne"}}, "spec": {
            "automountServiceAccountToken": false,
            "containers": [{
                "args": ["--path.procfs=/host/proc", "--web.listen-address=[$(HOST_IP)]:9100"],
                "env": [{"name": "HOST_IP", "value": "0.0.0.0"}, {"name": "EMPTY"}],
                "image": "quay.io/prometheus/node-exporter:v1.8.2",
                "imagePullPolicy": "IfNotPresent",
                "livenessProbe": {"failureThreshold": 3,
                    "httpGet": {"path": "/", "port": 9100, "scheme": "HTTP"},
                    "periodSeconds": 10, "successThreshold": 1, "timeoutSeconds": 1},
                "name": "node-exporter",
                "ports": [{"containerPort": 9100, "name": "metrics", "protocol": "TCP"}],
                "resources": {"limits": {"memory": "64Mi"}, "requests": {"cpu": "10m"}},
                "securityContext": {"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true},
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File",
                "volumeMounts": [{"mountPath": "/host/proc", "name": "proc", "readOnly": true}]
            }],
            "dnsPolicy": "ClusterFirst", "hostNetwork": true, "hostPID": true,
            "restartPolicy": "Always", "schedulerName": "default-scheduler",
            "securityContext": {"fsGroup": 65534, "runAsGroup": 65534, "runAsNonRoot": true, "runAsUser": 65534},
            "terminationGracePeriodSeconds": 30,
            "tolerations": [{"effect": "NoSchedule", "operator": "Exists"}],
            "volumes": [{"hostPath": {"path": "/proc", "type": ""}, "name": "proc"}]
        }},
        "updateStrategy": {"rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}, "type": "RollingUpdate"}
    }})
}

fn drift_paths(api_version: &str, kind: &str, chart: &Value, live: &Value) -> Vec<String> {
    let schema = schema();
    let root = schema.root_or_deduced(api_version, kind);
    drifted_fields(&schema, root, &Tree::from(chart), live, &[])
        .into_iter()
        .map(|c| c.path)
        .collect()
}

/// What the API server stores for the chart's object is the chart's object: a CREATE of it (a
/// restore) changes nothing, and it has not drifted.
#[test]
fn the_chart_as_the_api_server_stores_it_is_the_chart() {
    let (rendered, stored) = (node_exporter_rendered(), node_exporter_stored());
    assert_eq!(
        paths(
            "apps/v1",
            "DaemonSet",
            rendered.clone(),
            stored.clone(),
            None
        ),
        Vec::<String>::new()
    );
    assert_eq!(
        drift_paths("apps/v1", "DaemonSet", &rendered, &stored),
        Vec::<String>::new()
    );
    // An UPDATE that leaves the normalised fields alone.
    let mut scaled = stored.clone();
    scaled["spec"]["revisionHistoryLimit"] = json!(5);
    assert!(paths("apps/v1", "DaemonSet", rendered, scaled, Some(stored)).is_empty());
}

/// The same comparison still sees every change of a value the chart sets.
#[test]
fn a_change_away_from_the_chart_is_still_a_change_as_stored() {
    let rendered = node_exporter_rendered();
    let changed = |pointer: &str, value: Value| {
        let mut live = node_exporter_stored();
        let (parent, key) = pointer.rsplit_once('/').unwrap();
        live.pointer_mut(parent).unwrap()[key] = value;
        live
    };
    let spec = "/spec/template/spec";
    let container = "/spec/template/spec/containers/0";
    for (pointer, value) in [
        (format!("{container}/resources/limits/memory"), json!("1Gi")),
        (format!("{spec}/hostIPC"), json!(true)),
        (format!("{container}/env/1/value"), json!("set")),
        (
            format!("{container}/livenessProbe/initialDelaySeconds"),
            json!(30),
        ),
        (format!("{spec}/automountServiceAccountToken"), json!(true)),
    ] {
        let live = changed(&pointer, value);
        assert_eq!(
            drift_paths("apps/v1", "DaemonSet", &rendered, &live),
            std::slice::from_ref(&pointer),
            "drift"
        );
        assert_eq!(
            paths("apps/v1", "DaemonSet", rendered.clone(), live, None),
            [pointer],
            "a CREATE"
        );
    }
    // An item more in an atomic list, or a field the API server does not fill in.
    let live = changed(
        &format!("{spec}/tolerations/0/tolerationSeconds"),
        json!(300),
    );
    assert_eq!(
        drift_paths("apps/v1", "DaemonSet", &rendered, &live),
        [format!("{spec}/tolerations")]
    );
}

/// A pointer field keeps its zero (`automountServiceAccountToken: false` is stored, unlike
/// `hostIPC: false`), and the schema cannot tell the two apart; the stored object of an UPDATE
/// can: removing the `false` it holds is a change.
#[test]
fn removing_a_stored_zero_is_a_change() {
    let rendered = node_exporter_rendered();
    let stored = node_exporter_stored();
    let mut removed = stored.clone();
    removed["spec"]["template"]["spec"]
        .as_object_mut()
        .unwrap()
        .remove("automountServiceAccountToken");
    assert_eq!(
        paths(
            "apps/v1",
            "DaemonSet",
            rendered.clone(),
            removed.clone(),
            Some(stored.clone())
        ),
        ["/spec/template/spec/automountServiceAccountToken"]
    );
    // Putting it back, and writing `hostIPC: false` (stored as nothing), are not.
    assert!(paths(
        "apps/v1",
        "DaemonSet",
        rendered.clone(),
        stored.clone(),
        Some(removed)
    )
    .is_empty());
    let mut with_false = stored.clone();
    with_false["spec"]["template"]["spec"]["hostIPC"] = json!(false);
    assert!(paths(
        "apps/v1",
        "DaemonSet",
        rendered.clone(),
        with_false,
        Some(stored.clone())
    )
    .is_empty());
    // Setting it back to the chart's after a drift is allowed.
    let mut drifted = stored.clone();
    drifted["spec"]["template"]["spec"]["hostIPC"] = json!(true);
    assert!(paths("apps/v1", "DaemonSet", rendered, stored, Some(drifted)).is_empty());
}

/// Issue 67, attack 3: a locked `false` on a pointer field (`allowPrivilegeEscalation`,
/// `hostUsers`, `automountServiceAccountToken` of a pod template and of a ServiceAccount),
/// removed while the webhook was away, is drift: the API server keeps a pointer's zero, and its
/// absence is the (less safe) default. `hostNetwork: false` is still stored as nothing.
#[test]
fn a_removed_zero_of_a_pointer_field_is_drift() {
    let template = |pod: Value| json!({"spec": {"template": {"spec": pod}}});
    let chart = template(json!({
        "hostNetwork": false,
        "hostUsers": false,
        "automountServiceAccountToken": false,
        "containers": [{"name": "app", "image": "app:1",
            "securityContext": {"allowPrivilegeEscalation": false, "runAsUser": 0}}],
    }));
    let stored = template(json!({
        "hostUsers": false,
        "automountServiceAccountToken": false,
        "containers": [{"name": "app", "image": "app:1",
            "securityContext": {"allowPrivilegeEscalation": false, "runAsUser": 0}}],
    }));
    let removed = template(json!({"containers": [{"name": "app", "image": "app:1"}]}));
    let container = "/spec/template/spec/containers/0/securityContext";
    for version in [KubeVersion::V1_20, KubeVersion::V1_36] {
        let schema = Schema::embedded(version);
        let root = schema.root_or_deduced("apps/v1", "Deployment");
        let drift = |live: &Value| -> Vec<String> {
            drifted_fields(&schema, root, &Tree::from(&chart), live, &[])
                .into_iter()
                .map(|c| c.path)
                .collect()
        };
        // Control: as the API server stores the chart's object (no `hostNetwork`), no drift.
        assert!(drift(&stored).is_empty(), "{version}: {:?}", drift(&stored));
        // (`hostUsers` is a field from 1.25: 1.20's schema does not know it, and compares an
        // undeclared field as written.)
        assert_eq!(
            drift(&removed),
            [
                "/spec/template/spec/automountServiceAccountToken".to_string(),
                format!("{container}/allowPrivilegeEscalation"),
                format!("{container}/runAsUser"),
                "/spec/template/spec/hostUsers".to_string(),
            ],
            "{version}"
        );
        // Each one alone, inside the container's securityContext too.
        let mut one = stored.clone();
        one["spec"]["template"]["spec"]["containers"][0]["securityContext"]
            .as_object_mut()
            .unwrap()
            .remove("allowPrivilegeEscalation");
        assert_eq!(
            drift(&one),
            [format!("{container}/allowPrivilegeEscalation")],
            "{version}"
        );
        let root = schema.root_or_deduced("v1", "ServiceAccount");
        let account = json!({"automountServiceAccountToken": false});
        assert_eq!(
            drifted_fields(&schema, root, &Tree::from(&account), &json!({}), &[])
                .into_iter()
                .map(|c| c.path)
                .collect::<Vec<_>>(),
            ["/automountServiceAccountToken"],
            "{version}"
        );
    }
}

/// An Endpoints restored from what the API server stored: the port's `protocol: TCP`, filled
/// in inside the atomic `subsets`, is the chart's port; another protocol or another field is not.
#[test]
fn a_default_filled_in_inside_an_atomic_list_is_the_charts_value() {
    let endpoints =
        |port: Value| json!({"subsets": [{"addresses": [{"ip": "10.0.0.1"}], "ports": [port]}]});
    let chart = endpoints(json!({"name": "http", "port": 80}));
    let stored = endpoints(json!({"name": "http", "port": 80, "protocol": "TCP"}));
    assert!(paths("v1", "Endpoints", chart.clone(), stored.clone(), None).is_empty());
    assert!(drift_paths("v1", "Endpoints", &chart, &stored).is_empty());
    for other in [
        json!({"name": "http", "port": 80, "protocol": "UDP"}),
        json!({"name": "http", "port": 80, "protocol": "TCP", "appProtocol": "http"}),
        json!({"name": "http", "port": 81, "protocol": "TCP"}),
    ] {
        assert_eq!(
            paths(
                "v1",
                "Endpoints",
                chart.clone(),
                endpoints(other.clone()),
                None
            ),
            ["/subsets"],
            "{other}"
        );
    }
}

/// Only a built-in kind's Go struct leaves zero values out: a ConfigMap's `data` entry `""` and
/// a custom resource's `false` are stored as written, so their absence is a change.
#[test]
fn zero_values_of_maps_and_custom_resources_are_values() {
    let chart = json!({"data": {"empty": ""}});
    assert_eq!(
        paths("v1", "ConfigMap", chart, json!({"data": {}}), None),
        ["/data/empty"]
    );
    let chart = json!({"spec": {"enabled": false, "name": ""}});
    assert_eq!(
        paths("example.com/v1", "Widget", chart, json!({"spec": {}}), None),
        ["/spec/enabled", "/spec/name"]
    );
}
