//! The webhooks' `matchConditions` (Kubernetes 1.28+) skip only writes the locker allows.
//!
//! The API server evaluates the CEL expressions of
//! `webhook-config/match-conditions/match-conditions.yaml` (the file certs-gen and
//! webhook-config-1.28 emit; the chart renders a byte-for-byte copy) before it calls the webhook,
//! and calls it only when all are true. Here the same expressions run in cel-rust, with the variables bound as
//! kube-apiserver binds them (`object`, `oldObject` and `request`, the AdmissionRequest turned
//! into JSON with its empty fields left out), on:
//!
//! - every AdmissionReview recorded on kube-apiserver 1.20 and 1.36.3 (tests/fixtures), decided
//!   with the release state of their moment and with every recorded release snapshot;
//! - the review inputs of the fuzz corpus;
//! - adversarial reviews: a Scale, an Eviction, an UPDATE that strips Helm's annotations, a
//!   DELETE, a CREATE of a locked object, `--take-ownership`, a Namespace, a custom resource,
//!   a release Secret, the locker's own objects, a request without an object.
//!
//! Every expression must give a boolean on every input (an error would skip the webhook under
//! failurePolicy Ignore and reject the write under Fail), and every review they skip must be
//! one the locker's decision allows without a patch, with the default exemptions and with
//! none. The first counter-example fails the test, named.
//!
//! cel-rust is stricter than cel-go where it differs for these expressions: its `&&` and `||`
//! evaluate left to right (cel-go's absorb an error on either side), so an expression that never
//! errors here never errors in kube-apiserver, with the same value. One difference the other
//! way, `has()` on a value that is not a map (false here, an error in cel-go), is ruled out by
//! writing every `has()` after a test that its operand exists and is an object the API server
//! always sends as one (an object's `metadata`).

use std::path::{Path, PathBuf};

use helm_locker_core::test_util::{release_secret, review};
use helm_locker_core::{
    decide, decode_secret, parse_release_file, parse_review, Config, Decision, Exemptions, Index,
    KubeVersion, Schema, SecretRef, Status,
};
use serde_json::{json, Value};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The conditions as shipped: (name, compiled expression).
fn conditions() -> Vec<(String, cel::Program)> {
    let path = repo().join("webhook-config/match-conditions/match-conditions.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    let doc: Value = serde_saphyr::from_str(&text).unwrap();
    let list = doc["conditions"].as_array().expect("a conditions list");
    assert!(!list.is_empty() && list.len() <= 64, "1 to 64 conditions");
    list.iter()
        .map(|c| {
            let name = c["name"].as_str().unwrap().to_string();
            let expression = c["expression"].as_str().unwrap();
            let program = cel::Program::compile(expression)
                .unwrap_or_else(|e| panic!("{name} does not compile: {e:?}"));
            (name, program)
        })
        .collect()
}

/// Whether the API server calls the webhook for this review: every condition true. `Err` names
/// a condition that does not give a boolean.
fn called(conditions: &[(String, cel::Program)], body: &Value) -> Result<bool, String> {
    let mut request = body["request"].clone();
    let fields = request.as_object_mut().expect("request is an object");
    // kube-apiserver binds the objects as their own variables (null when absent) and leaves
    // them out of `request`.
    let object = fields.remove("object").unwrap_or(Value::Null);
    let old_object = fields.remove("oldObject").unwrap_or(Value::Null);
    let mut context = cel::Context::default();
    for (name, value) in [
        ("object", object),
        ("oldObject", old_object),
        ("request", request),
    ] {
        context.add_variable_from_value(name, cel::to_value(value).unwrap());
    }
    let mut all = true;
    for (name, program) in conditions {
        match program.execute(&context) {
            Ok(cel::Value::Bool(b)) => all &= b,
            Ok(other) => return Err(format!("{name} gave {other:?}, not a boolean")),
            Err(e) => return Err(format!("{name} failed: {e:?}")),
        }
    }
    Ok(all)
}

/// The configurations a skipped review is decided with: the default, and one exempting nobody
/// (the control plane's writes included), so that no exemption hides a write the conditions
/// should have sent.
fn configs() -> [Config; 2] {
    let none = Exemptions {
        users: vec![],
        groups: vec![],
        service_account_namespaces: vec![],
        service_accounts: vec![],
    };
    [
        Config::default(),
        Config {
            exempt: none,
            ..Config::default()
        },
    ]
}

/// The condition that skips the control plane's own writes: sound for a locker that keeps its
/// default exemptions (the chart leaves it out when a config replaces them).
const CONTROL_PLANE: &str = "helm-locker.io/not-the-control-plane";

/// The configurations a skipped review must be allowed under: both of [`configs`] when the
/// other conditions skip it, the default alone when only [`CONTROL_PLANE`] does.
fn configs_for(body: &[u8]) -> Vec<Config> {
    let others: Vec<_> = conditions()
        .into_iter()
        .filter(|(name, _)| name != CONTROL_PLANE)
        .collect();
    let skipped_by_others = serde_json::from_slice::<Value>(body)
        .ok()
        .is_some_and(|value| called(&others, &value) == Ok(false));
    if skipped_by_others {
        configs().to_vec()
    } else {
        vec![Config::default()]
    }
}

/// The first decision that is not a plain allow, for a review the conditions skip.
fn counter_example(indexes: &[&Index], schemas: &[&Schema], body: &[u8]) -> Option<String> {
    let parsed = parse_review(body).ok()?;
    let configs = configs_for(body);
    for index in indexes {
        for schema in schemas {
            for config in &configs {
                // A review the locker cannot read is answered 400, which the API server treats
                // as a failed call: with failurePolicy Fail it is rejected, so it counts.
                let decision = match decide(index, schema, config, &parsed.request) {
                    Ok(decision) => decision,
                    Err(e) => return Some(format!("malformed: {e}")),
                };
                if !matches!(decision, Decision::Allow(_)) {
                    return Some(decision.explain());
                }
            }
        }
    }
    None
}

fn sorted_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files
}

/// After the API server admitted a write to a release Secret, the watch sees it (as in
/// fixtures.rs).
fn observe(index: &mut Index, body: &Value) {
    let request = &body["request"];
    let delete = request["operation"] == "DELETE";
    let object = if delete {
        &request["oldObject"]
    } else {
        &request["object"]
    };
    if request["kind"]["kind"] != "Secret" || object["type"] != "helm.sh/release.v1" {
        return;
    }
    if delete {
        index.remove_secret(&SecretRef::secret(
            object["metadata"]["namespace"].as_str().unwrap(),
            object["metadata"]["name"].as_str().unwrap(),
        ));
    } else {
        index.upsert(decode_secret(object).unwrap());
    }
}

/// The release states recorded at points of a capture's story.
fn snapshots(capture: &str) -> Vec<Index> {
    sorted_files(&repo().join("tests/fixtures").join(capture).join("releases"))
        .iter()
        .map(|file| {
            let text = std::fs::read_to_string(file).unwrap();
            Index::from_secrets(parse_release_file(&text).unwrap().into_iter().flatten())
        })
        .collect()
}

struct Share {
    reviews: usize,
    skipped: Vec<String>,
    /// Reviews outside the namespaces the webhooks' namespaceSelector leaves out
    /// (kube-system, kube-node-lease): those the API server sends without matchConditions.
    selected: usize,
    selected_skipped: usize,
}

/// Replays a capture: each review is evaluated against the conditions and, when skipped,
/// decided with the release state of its moment and with every recorded snapshot.
fn replay(capture: &str, schema: &Schema) -> Share {
    let conditions = conditions();
    let snapshots = snapshots(capture);
    let mut index = Index::new();
    let mut share = Share {
        reviews: 0,
        skipped: Vec::new(),
        selected: 0,
        selected_skipped: 0,
    };
    for file in sorted_files(&repo().join("tests/fixtures").join(capture).join("reviews")) {
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&file).unwrap();
        let body: Value = serde_json::from_str(&text).unwrap();
        share.reviews += 1;
        let request = &body["request"];
        let selected = request["kind"]["kind"] == "Namespace"
            || !["kube-system", "kube-node-lease"]
                .contains(&request["namespace"].as_str().unwrap_or(""));
        share.selected += usize::from(selected);
        let call = called(&conditions, &body).unwrap_or_else(|e| panic!("{capture}/{name}: {e}"));
        share.selected_skipped += usize::from(selected && !call);
        if !call {
            let mut indexes: Vec<&Index> = vec![&index];
            indexes.extend(snapshots.iter());
            if let Some(decision) = counter_example(&indexes, &[schema], text.as_bytes()) {
                panic!("{capture}/{name} is skipped by the matchConditions, yet the locker decides: {decision}");
            }
            share.skipped.push(name);
        }
        observe(&mut index, &body);
    }
    share
}

fn report(capture: &str, share: &Share) {
    let percent = |part: usize, whole: usize| 100.0 * part as f64 / whole as f64;
    eprintln!(
        "{capture}: matchConditions skip {} of {} recorded reviews ({:.0}%); {} of the {} outside kube-system and kube-node-lease ({:.0}%)",
        share.skipped.len(),
        share.reviews,
        percent(share.skipped.len(), share.reviews),
        share.selected_skipped,
        share.selected,
        percent(share.selected_skipped, share.selected),
    );
}

/// The chart renders its own copy (a chart reads only its own files; the image build sees
/// webhook-config/ but not charts/): it must be the same file.
#[test]
fn the_charts_copy_of_the_conditions_is_the_shipped_file() {
    let read = |path: &str| std::fs::read_to_string(repo().join(path)).unwrap();
    assert!(
        read("charts/helm-locker/files/match-conditions.yaml")
            == read("webhook-config/match-conditions/match-conditions.yaml"),
        "copy webhook-config/match-conditions/match-conditions.yaml to charts/helm-locker/files/"
    );
}

#[test]
fn every_review_recorded_on_1_20_that_the_conditions_skip_is_allowed() {
    let share = replay("cluster-capture", &Schema::builtin());
    report("cluster-capture (1.20)", &share);
    assert_eq!(share.reviews, 167);
    // What a user notices: the writes that never concerned a release no longer wait on the
    // locker. The controllers' service accounts and their token Secrets, the aggregated
    // ClusterRoles, Helm's own release Secret updates, the uninstall's and namespace deletion's
    // deletes of objects no release annotates.
    for skipped in [
        "002-start-update-serviceaccount-horizontal-pod-autoscaler.json",
        "022-start-update-clusterrole-edit.json",
        "042-helm-install-update-secret-sh.helm.release.v1.shop.v1.json",
        "059-helm-upgrade-delete-configmap-shop-hook.json",
        "125-helm-uninstall-delete-secret-shop-sa-token-tj2sf.json",
    ] {
        assert!(share.skipped.iter().any(|s| s == skipped), "{skipped}");
    }
    // Measured: 44 (26%). Namespaced CREATEs all go to the locker (a release locks what it
    // renders in its own namespace, annotated or not): most of what is still sent.
    assert!(share.skipped.len() >= 44, "{}", share.skipped.len());
}

#[test]
fn every_review_recorded_on_1_36_that_the_conditions_skip_is_allowed() {
    let share = replay(
        "cluster-capture-1.36",
        &Schema::embedded(KubeVersion::V1_36),
    );
    report("cluster-capture-1.36", &share);
    assert_eq!(share.reviews, 159);
    for skipped in [
        "035-helm-install-update-clusterrole-admin.json",
        "058-helm-upgrade-update-secret-sh.helm.release.v1.shop.v2.json",
        "154-ns-delete-delete-configmap-noname.json",
    ] {
        assert!(share.skipped.iter().any(|s| s == skipped), "{skipped}");
    }
    // Measured: 32 (20%).
    assert!(share.skipped.len() >= 32, "{}", share.skipped.len());
}

/// What a writer controls in her request (the new object's annotations, the operation she
/// sends) and what the stored object may carry, varied on every recorded review: each variant
/// gives a boolean, and each variant skipped is allowed against every recorded release state.
#[test]
fn variants_of_every_recorded_review_that_the_conditions_skip_are_allowed() {
    let conditions = conditions();
    let mut checked = 0;
    for (capture, schema) in [
        ("cluster-capture", Schema::builtin()),
        ("cluster-capture-1.36", Schema::embedded(KubeVersion::V1_36)),
    ] {
        let states = snapshots(capture);
        let indexes: Vec<&Index> = states.iter().collect();
        for file in sorted_files(&repo().join("tests/fixtures").join(capture).join("reviews")) {
            let body: Value =
                serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
            for (how, variant) in variants(&body) {
                checked += 1;
                let call = called(&conditions, &variant)
                    .unwrap_or_else(|e| panic!("{} {how}: {e}", file.display()));
                if !call {
                    let text = variant.to_string();
                    if let Some(decision) = counter_example(&indexes, &[&schema], text.as_bytes()) {
                        panic!(
                            "{} {how} is skipped, yet decided: {decision}",
                            file.display()
                        );
                    }
                }
            }
        }
    }
    assert!(checked > 1500, "{checked}");
}

/// Variants of a recorded review: Helm's annotations (of release shop/shop, or tmp/temp for
/// the namespace deletion's) taken out of or put on the new and the stored object, the
/// stored object absent, and each write sent as the other operations.
fn variants(body: &Value) -> Vec<(String, Value)> {
    let request = &body["request"];
    let release = if request["namespace"] == "temp" {
        ("temp", "tmp")
    } else {
        ("shop", "shop")
    };
    let mut out = Vec::new();
    let mut push = |how: &str, change: &dyn Fn(&mut Value)| {
        let mut variant = body.clone();
        change(&mut variant["request"]);
        out.push((how.to_string(), variant));
    };
    for field in ["object", "oldObject"] {
        if request[field].is_object() {
            push(&format!("without {field}'s annotations"), &|r| {
                if let Some(meta) = r[field]["metadata"].as_object_mut() {
                    meta.remove("annotations");
                }
            });
            push(&format!("with {field} claiming the release"), &|r| {
                let claimed = owned(r[field].clone(), release);
                r[field] = claimed;
            });
        }
    }
    push("without oldObject", &|r| {
        r["oldObject"] = Value::Null;
    });
    for operation in ["CREATE", "UPDATE", "DELETE"] {
        push(&format!("as a {operation}"), &|r| {
            r["operation"] = json!(operation);
            match operation {
                "CREATE" => r["oldObject"] = Value::Null,
                "DELETE" => {
                    if r["oldObject"].is_null() {
                        r["oldObject"] = r["object"].clone();
                    }
                    r["object"] = Value::Null;
                }
                _ => {
                    if r["oldObject"].is_null() {
                        r["oldObject"] = r["object"].clone();
                    }
                    if r["object"].is_null() {
                        r["object"] = r["oldObject"].clone();
                    }
                }
            }
        });
    }
    out
}

/// The fuzz corpus's review inputs that kube-apiserver could send (objects absent, null, or
/// with an object as `metadata` and `metadata.annotations`): each gives a boolean, and each
/// one skipped is allowed against every recorded release state.
#[test]
fn the_fuzz_corpus_reviews_the_conditions_skip_are_allowed() {
    let conditions = conditions();
    let mut states = snapshots("cluster-capture");
    states.extend(snapshots("cluster-capture-1.36"));
    let indexes: Vec<&Index> = states.iter().collect();
    let (v1_20, v1_36) = (Schema::builtin(), Schema::embedded(KubeVersion::V1_36));
    let mut evaluated = 0;
    for dir in ["corpus/review", "regressions/review"] {
        for file in sorted_files(&repo().join("fuzz").join(dir)) {
            let bytes = std::fs::read(&file).unwrap();
            let Ok(body) = serde_json::from_slice::<Value>(&bytes) else {
                continue;
            };
            if !body["request"].is_object() || !api_server_shaped(&body["request"]) {
                continue;
            }
            evaluated += 1;
            let call =
                called(&conditions, &body).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            if !call {
                if let Some(decision) = counter_example(&indexes, &[&v1_20, &v1_36], &bytes) {
                    panic!("{} is skipped, yet decided: {decision}", file.display());
                }
            }
        }
    }
    assert!(evaluated > 0, "no review input in the fuzz corpus");
}

fn api_server_shaped(request: &Value) -> bool {
    let object_ok = |o: &Value| match o {
        Value::Null => true,
        Value::Object(fields) => match fields.get("metadata") {
            Some(Value::Object(meta)) => match meta.get("annotations") {
                None => true,
                Some(Value::Object(a)) => a.values().all(Value::is_string),
                Some(_) => false,
            },
            None => true,
            Some(_) => false,
        },
        _ => false,
    };
    let strings = ["operation", "namespace", "subResource", "name"]
        .iter()
        .all(|k| request.get(*k).is_none_or(Value::is_string));
    strings
        && request["operation"].is_string()
        && object_ok(request.get("object").unwrap_or(&Value::Null))
        && object_ok(request.get("oldObject").unwrap_or(&Value::Null))
}

// Adversarial reviews, against a deployed release `shop` (namespace `shop`) that renders
// objects of every shape the conditions must not lose.

const SHOP: &str = r#"---
apiVersion: v1
kind: ConfigMap
metadata:
  name: shop-config
  namespace: shop
data:
  greeting: hi
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: shop-remote
  namespace: other
data:
  where: other
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: shop-web
  namespace: shop
spec:
  replicas: 3
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: nginx:1.25
---
apiVersion: v1
kind: Pod
metadata:
  name: shop-pod
  namespace: shop
spec:
  containers:
  - name: main
    image: busybox
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: shop-reader
rules:
- apiGroups: [""]
  resources: [configmaps]
  verbs: [get]
---
apiVersion: v1
kind: Namespace
metadata:
  name: shop-extra
  labels:
    team: shop
---
apiVersion: example.com/v1
kind: Widget
metadata:
  name: shop-widget
  namespace: shop
spec:
  size: 3
---
apiVersion: v1
kind: Secret
metadata:
  name: shop-secret
  namespace: shop
stringData:
  token: abc
"#;

/// The locker's own release, in its namespace: its cluster-scoped objects are locked like any.
const LOCKER: &str = r#"---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: helm-locker
rules:
- apiGroups: [""]
  resources: [secrets]
  verbs: [get, list, watch]
"#;

/// A second release that also renders `shop-config`, being installed with
/// `helm install --take-ownership`.
const THIEF: &str = r#"---
apiVersion: v1
kind: ConfigMap
metadata:
  name: shop-config
  namespace: shop
data:
  greeting: stolen
"#;

fn adversarial_index() -> Index {
    Index::from_secrets([
        release_secret("shop", "shop", 1, Status::Deployed, SHOP),
        release_secret("helm-locker", "helm-locker", 1, Status::Deployed, LOCKER),
        release_secret("shop", "thief", 1, Status::PendingInstall, THIEF),
    ])
}

/// `object` with Helm's ownership annotations for release `namespace/name`.
fn owned(mut object: Value, (namespace, name): (&str, &str)) -> Value {
    object["metadata"]["annotations"] = json!({
        "meta.helm.sh/release-name": name,
        "meta.helm.sh/release-namespace": namespace,
    });
    object["metadata"]["labels"]["app.kubernetes.io/managed-by"] = json!("Helm");
    object
}

fn config_map(name: &str, namespace: &str, greeting: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": namespace}, "data": {"greeting": greeting}})
}

fn deployment(replicas: i64, labels: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
           "metadata": {"name": "shop-web", "namespace": "shop", "labels": labels},
           "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                    "template": {"metadata": {"labels": {"app": "web"}},
                                 "spec": {"containers": [{"name": "web", "image": "nginx:1.25"}]}}}})
}

fn cluster_role(name: &str, verbs: &[&str]) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
           "metadata": {"name": name},
           "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": verbs}]})
}

fn scale(replicas: i64) -> Value {
    json!({"apiVersion": "autoscaling/v1", "kind": "Scale",
           "metadata": {"name": "shop-web", "namespace": "shop"},
           "spec": {"replicas": replicas}})
}

fn namespace_object(labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace",
           "metadata": {"name": "shop-extra", "labels": labels}})
}

fn widget(size: i64) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Widget",
           "metadata": {"name": "shop-widget", "namespace": "shop"}, "spec": {"size": size}})
}

/// Each adversarial review: what it tries, the review, and whether the conditions send it.
fn adversarial() -> Vec<(&'static str, Value, bool)> {
    let shop = ("shop", "shop");
    let config = || config_map("shop-config", "shop", "hi");
    let cm = |op| review(op, "v1", "ConfigMap", "configmaps");
    vec![
        (
            "kubectl scale: a Scale carries no annotations",
            review("UPDATE", "apps/v1", "Deployment", "deployments")
                .kind("autoscaling/v1", "Scale")
                .sub_resource("scale")
                .name(Some("shop"), "shop-web")
                .object(scale(7))
                .old_object(scale(3))
                .json(),
            true,
        ),
        (
            "a custom resource's scale",
            review("UPDATE", "example.com/v1", "Widget", "widgets")
                .kind("autoscaling/v1", "Scale")
                .sub_resource("scale")
                .name(Some("shop"), "shop-widget")
                .object(json!({"apiVersion": "autoscaling/v1", "kind": "Scale",
                               "metadata": {"name": "shop-widget", "namespace": "shop"},
                               "spec": {"replicas": 9}}))
                .old_object(json!({"apiVersion": "autoscaling/v1", "kind": "Scale",
                                   "metadata": {"name": "shop-widget", "namespace": "shop"},
                                   "spec": {"replicas": 3}}))
                .json(),
            true,
        ),
        (
            "evicting a chart's Pod (an Eviction carries no annotations)",
            review("CREATE", "v1", "Pod", "pods")
                .kind("policy/v1", "Eviction")
                .sub_resource("eviction")
                .name(Some("shop"), "shop-pod")
                .object(json!({"apiVersion": "policy/v1", "kind": "Eviction",
                               "metadata": {"name": "shop-pod", "namespace": "shop"}}))
                .json(),
            true,
        ),
        (
            "an UPDATE that strips Helm's annotations (oldObject has them)",
            cm("UPDATE")
                .name(Some("shop"), "shop-config")
                .object(config_map("shop-config", "shop", "hacked"))
                .old_object(owned(config(), shop))
                .json(),
            true,
        ),
        (
            "an UPDATE that keeps the annotations and changes a chart value",
            cm("UPDATE")
                .name(Some("shop"), "shop-config")
                .object(owned(config_map("shop-config", "shop", "hacked"), shop))
                .old_object(owned(config(), shop))
                .json(),
            true,
        ),
        (
            "an UPDATE of an object Helm never made its own, annotations added",
            cm("UPDATE")
                .name(Some("shop"), "shop-config")
                .object(owned(config_map("shop-config", "shop", "hacked"), shop))
                .old_object(config())
                .json(),
            false,
        ),
        (
            "an object carrying only the release-name annotation",
            cm("UPDATE")
                .name(Some("shop"), "shop-config")
                .object(config_map("shop-config", "shop", "hacked"))
                .old_object({
                    let mut o = config();
                    o["metadata"]["annotations"] = json!({"meta.helm.sh/release-name": "shop"});
                    o
                })
                .json(),
            false,
        ),
        (
            "a DELETE: only oldObject",
            cm("DELETE")
                .name(Some("shop"), "shop-config")
                .old_object(owned(config(), shop))
                .json(),
            true,
        ),
        (
            "a collection DELETE: the name only in oldObject",
            cm("DELETE")
                .name(Some("shop"), "")
                .old_object(owned(config(), shop))
                .json(),
            true,
        ),
        (
            "a DELETE with neither object nor oldObject",
            cm("DELETE")
                .name(Some("shop"), "shop-config")
                .object(Value::Null)
                .old_object(Value::Null)
                .json(),
            false,
        ),
        (
            "a CREATE of a locked object in the release's namespace, without annotations",
            cm("CREATE")
                .name(Some("shop"), "shop-config")
                .object(config_map("shop-config", "shop", "mine"))
                .json(),
            true,
        ),
        (
            "a CREATE of a locked object elsewhere, without annotations",
            cm("CREATE")
                .name(Some("other"), "shop-remote")
                .object(config_map("shop-remote", "other", "mine"))
                .json(),
            true,
        ),
        (
            "a CREATE of a locked object elsewhere, claiming the release",
            cm("CREATE")
                .name(Some("other"), "shop-remote")
                .object(owned(config_map("shop-remote", "other", "mine"), shop))
                .json(),
            true,
        ),
        (
            "a CREATE of a locked cluster-scoped object, claiming the release",
            review("CREATE", "rbac.authorization.k8s.io/v1", "ClusterRole", "clusterroles")
                .name(None, "shop-reader")
                .object(owned(cluster_role("shop-reader", &["get", "delete"]), shop))
                .json(),
            true,
        ),
        (
            "a CREATE of a cluster-scoped object a release renders, without annotations",
            review("CREATE", "rbac.authorization.k8s.io/v1", "ClusterRole", "clusterroles")
                .name(None, "shop-reader")
                .object(cluster_role("shop-reader", &["get", "delete"]))
                .json(),
            false,
        ),
        (
            "helm install --take-ownership of an object another release holds",
            cm("UPDATE")
                .name(Some("shop"), "shop-config")
                .field_manager("helm")
                .object(owned(
                    config_map("shop-config", "shop", "stolen"),
                    ("shop", "thief"),
                ))
                .old_object(owned(config(), shop))
                .json(),
            true,
        ),
        (
            "a Namespace's CREATE (its request carries its own name as namespace)",
            review("CREATE", "v1", "Namespace", "namespaces")
                .name(Some("shop-extra"), "shop-extra")
                .object(namespace_object(json!({"team": "thieves"})))
                .json(),
            true,
        ),
        (
            "a Namespace's label change",
            review("UPDATE", "v1", "Namespace", "namespaces")
                .name(Some("shop-extra"), "shop-extra")
                .object(owned(namespace_object(json!({"team": "thieves"})), shop))
                .old_object(owned(namespace_object(json!({"team": "shop"})), shop))
                .json(),
            true,
        ),
        (
            "namespaces/finalize keeps the metadata it is sent",
            review("UPDATE", "v1", "Namespace", "namespaces")
                .sub_resource("finalize")
                .name(Some("shop-extra"), "shop-extra")
                .object(owned(namespace_object(json!({"team": "thieves"})), shop))
                .old_object(owned(namespace_object(json!({"team": "shop"})), shop))
                .json(),
            true,
        ),
        (
            "a custom resource's change",
            review("UPDATE", "example.com/v1", "Widget", "widgets")
                .name(Some("shop"), "shop-widget")
                .object(owned(widget(9), shop))
                .old_object(owned(widget(3), shop))
                .json(),
            true,
        ),
        (
            "a status write changing a chart label",
            review("UPDATE", "apps/v1", "Deployment", "deployments")
                .sub_resource("status")
                .name(Some("shop"), "shop-web")
                .object(owned(deployment(3, json!({"tier": "hacked"})), shop))
                .old_object(owned(deployment(3, json!({})), shop))
                .json(),
            true,
        ),
        (
            "the same Deployment through extensions/v1beta1",
            review("UPDATE", "extensions/v1beta1", "Deployment", "deployments")
                .name(Some("shop"), "shop-web")
                .object(owned(deployment(7, json!({})), shop))
                .old_object(owned(deployment(3, json!({})), shop))
                .json(),
            true,
        ),
        (
            "a chart Secret's value (the locker never quotes it)",
            review("UPDATE", "v1", "Secret", "secrets")
                .name(Some("shop"), "shop-secret")
                .object(owned(json!({"apiVersion": "v1", "kind": "Secret",
                                     "metadata": {"name": "shop-secret", "namespace": "shop"},
                                     "data": {"token": "eHl6"}}), shop))
                .old_object(owned(json!({"apiVersion": "v1", "kind": "Secret",
                                         "metadata": {"name": "shop-secret", "namespace": "shop"},
                                         "data": {"token": "YWJj"}}), shop))
                .json(),
            true,
        ),
        (
            "Helm's own release Secret updated (read by the watch, not by admission)",
            review("UPDATE", "v1", "Secret", "secrets")
                .name(Some("shop"), "sh.helm.release.v1.shop.v1")
                .object(json!({"apiVersion": "v1", "kind": "Secret", "type": "helm.sh/release.v1",
                               "metadata": {"name": "sh.helm.release.v1.shop.v1", "namespace": "shop",
                                            "labels": {"owner": "helm", "status": "superseded"}}}))
                .old_object(json!({"apiVersion": "v1", "kind": "Secret", "type": "helm.sh/release.v1",
                                   "metadata": {"name": "sh.helm.release.v1.shop.v1", "namespace": "shop",
                                                "labels": {"owner": "helm", "status": "deployed"}}}))
                .json(),
            false,
        ),
        (
            "the locker's own ClusterRole, widened",
            review("UPDATE", "rbac.authorization.k8s.io/v1", "ClusterRole", "clusterroles")
                .name(None, "helm-locker")
                .object(owned(cluster_role("helm-locker", &["get", "create"]), ("helm-locker", "helm-locker")))
                .old_object(owned(cluster_role("helm-locker", &["get"]), ("helm-locker", "helm-locker")))
                .json(),
            true,
        ),
        (
            "a LockException created in a release's namespace",
            review("CREATE", "helm-locker.io/v1alpha1", "LockException", "lockexceptions")
                .name(Some("shop"), "unlock-shop")
                .object(json!({"apiVersion": "helm-locker.io/v1alpha1", "kind": "LockException",
                               "metadata": {"name": "unlock-shop", "namespace": "shop"},
                               "spec": {"until": "2026-11-24T04:00:00Z"}}))
                .json(),
            true,
        ),
        (
            "a controller's aggregated ClusterRole",
            review("UPDATE", "rbac.authorization.k8s.io/v1", "ClusterRole", "clusterroles")
                .name(None, "edit")
                .user("system:serviceaccount:kube-system:clusterrole-aggregation-controller")
                .object(cluster_role("edit", &["get", "list"]))
                .old_object(cluster_role("edit", &["get"]))
                .json(),
            false,
        ),
        (
            "the garbage collector (kube-system) deletes a locked object: exempt, skipped",
            cm("DELETE")
                .name(Some("shop"), "shop-config")
                .user("system:serviceaccount:kube-system:generic-garbage-collector")
                .old_object(owned(config(), shop))
                .json(),
            false,
        ),
        (
            "the controller manager scales a locked Deployment (an HPA): exempt, skipped",
            review("UPDATE", "apps/v1", "Deployment", "deployments")
                .kind("autoscaling/v1", "Scale")
                .sub_resource("scale")
                .name(Some("shop"), "shop-web")
                .user("system:kube-controller-manager")
                .object(scale(7))
                .old_object(scale(3))
                .json(),
            false,
        ),
        (
            "a service account of a namespace named like kube-system: sent",
            cm("UPDATE")
                .name(Some("shop"), "shop-config")
                .user("system:serviceaccount:kube-system-tools:editor")
                .object(owned(config_map("shop-config", "shop", "changed"), shop))
                .old_object(owned(config(), shop))
                .json(),
            true,
        ),
        (
            "a user named like the controller manager: sent",
            cm("UPDATE")
                .name(Some("shop"), "shop-config")
                .user("system:kube-controller-manager-ish")
                .object(owned(config_map("shop-config", "shop", "changed"), shop))
                .old_object(owned(config(), shop))
                .json(),
            true,
        ),
        (
            "an object without metadata.annotations at all",
            review("UPDATE", "v1", "ServiceAccount", "serviceaccounts")
                .name(Some("shop"), "default")
                .object(json!({"apiVersion": "v1", "kind": "ServiceAccount",
                               "metadata": {"name": "default", "namespace": "shop"},
                               "secrets": [{"name": "default-token-x"}]}))
                .old_object(json!({"apiVersion": "v1", "kind": "ServiceAccount",
                                   "metadata": {"name": "default", "namespace": "shop"}}))
                .json(),
            false,
        ),
        (
            "a CONNECT (kubectl exec) whose object has no metadata",
            review("CONNECT", "v1", "PodExecOptions", "pods")
                .sub_resource("exec")
                .name(Some("shop"), "shop-pod")
                .object(json!({"apiVersion": "v1", "kind": "PodExecOptions", "command": ["sh"]}))
                .json(),
            false,
        ),
    ]
}

#[test]
fn adversarial_reviews_reach_the_locker_whenever_it_would_deny_or_patch() {
    let conditions = conditions();
    let index = adversarial_index();
    let schemas = [Schema::builtin(), Schema::embedded(KubeVersion::V1_36)];
    let schemas: Vec<&Schema> = schemas.iter().map(|s| &**s).collect();
    let mut denied = 0;
    for (what, body, expected) in adversarial() {
        let call = called(&conditions, &body).unwrap_or_else(|e| panic!("{what}: {e}"));
        let text = body.to_string();
        let decision = counter_example(&[&index], &schemas, text.as_bytes());
        if !call {
            assert_eq!(
                decision, None,
                "{what}: skipped, yet the locker decides otherwise"
            );
        }
        denied += usize::from(decision.is_some());
        assert_eq!(call, expected, "{what}: sent to the webhook?");
    }
    // The cases are sharp: most are writes the locker denies (so the conditions must send
    // them), not writes it allows anyway.
    assert!(denied >= 12, "only {denied} adversarial reviews are denied");
}

/// A condition that errors would skip the webhook (failurePolicy Ignore) or reject the write
/// (Fail): every condition gives a boolean whatever is absent or null.
#[test]
fn the_conditions_never_fail_on_absent_or_null_fields() {
    let conditions = conditions();
    let object = json!({"metadata": {"name": "x"}});
    let annotated = owned(json!({"metadata": {"name": "x"}}), ("a", "b"));
    let shapes = [
        Value::Null,
        json!({}),
        json!({"metadata": {}}),
        object,
        annotated,
    ];
    for operation in ["CREATE", "UPDATE", "DELETE", "CONNECT"] {
        for new in &shapes {
            for old in &shapes {
                for (namespace, sub) in [
                    (None, None),
                    (Some("ns"), Some("scale")),
                    (Some(""), Some("")),
                ] {
                    let mut request = json!({"uid": "u", "operation": operation,
                        "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
                        "resource": {"group": "", "version": "v1", "resource": "configmaps"},
                        "userInfo": {"username": "admin"}});
                    if let Some(n) = namespace {
                        request["namespace"] = json!(n);
                    }
                    if let Some(s) = sub {
                        request["subResource"] = json!(s);
                    }
                    request["object"] = new.clone();
                    request["oldObject"] = old.clone();
                    let body = json!({"request": request});
                    called(&conditions, &body).unwrap_or_else(|e| panic!("{body}: {e}"));
                }
            }
        }
    }
}
