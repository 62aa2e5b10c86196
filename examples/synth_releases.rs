//! Writes a synthetic cluster's Helm release Secrets for scale benchmarks, encoded exactly as
//! Helm 3/4 stores them (release JSON, gzip, base64, then the Secret's own base64 of
//! `data.release`), as a `List` that `helm-locker serve --releases-dir` reads. Also writes the
//! AdmissionReviews scripts/scale.sh sends (for objects of release `app-0`, present at every
//! size). Prints the total size of the manifests, decompressed.
//!
//!   cargo run --release --example synth_releases -- DIR RELEASES [OBJECTS_PER_RELEASE]

use serde_json::{json, Value};

/// One object of release `rel` (namespace `ns`), the `j`th of its chart: the kinds a typical
/// chart has, in the sizes they usually are.
fn object(rel: &str, j: usize) -> (String, String) {
    let name = format!("{rel}-{j}");
    let labels = format!(
        "  labels:\n    app.kubernetes.io/name: {rel}\n    app.kubernetes.io/instance: {rel}\n    app.kubernetes.io/version: \"1.{j}.0\"\n    app.kubernetes.io/managed-by: Helm\n    helm.sh/chart: {rel}-1.0.{j}\n"
    );
    let yaml = match j % 6 {
        0 => format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\n{labels}spec:\n  replicas: 2\n  selector:\n    matchLabels:\n      app.kubernetes.io/name: {rel}\n      app.kubernetes.io/component: c{j}\n  template:\n    metadata:\n      labels:\n        app.kubernetes.io/name: {rel}\n        app.kubernetes.io/component: c{j}\n      annotations:\n        checksum/config: 0f{j:062x}\n    spec:\n      serviceAccountName: {rel}-{sa}\n      securityContext:\n        runAsNonRoot: true\n        fsGroup: 2000\n      containers:\n      - name: app\n        image: \"registry.example.com/{rel}/app:1.{j}.3\"\n        imagePullPolicy: IfNotPresent\n        args: [\"--port=8080\", \"--log-level=info\"]\n        ports:\n        - name: http\n          containerPort: 8080\n          protocol: TCP\n        env:\n        - name: RELEASE\n          value: {rel}\n        - name: CONFIG\n          valueFrom:\n            configMapKeyRef: {{name: {rel}-{cm}, key: settings}}\n        livenessProbe:\n          httpGet: {{path: /healthz, port: http}}\n        readinessProbe:\n          httpGet: {{path: /readyz, port: http}}\n        resources:\n          limits: {{cpu: \"1\", memory: 512Mi}}\n          requests: {{cpu: 100m, memory: 128Mi}}\n",
            sa = j + 3,
            cm = j + 1
        ),
        1 => format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n{labels}data:\n  settings: |\n    listen = \":8080\"\n    upstream = \"http://{rel}-{up}:8080\"\n    timeout = \"30s\"\n    release = \"{rel}\"\n  feature-flags: \"a,b,c{j}\"\n",
            up = j + 1
        ),
        2 => format!(
            "apiVersion: v1\nkind: Service\nmetadata:\n  name: {name}\n{labels}spec:\n  type: ClusterIP\n  ports:\n  - port: 80\n    targetPort: http\n    protocol: TCP\n    name: http\n  selector:\n    app.kubernetes.io/name: {rel}\n    app.kubernetes.io/component: c{c}\n",
            c = j - 2
        ),
        3 => format!("apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: {name}\n{labels}automountServiceAccountToken: false\n"),
        4 => format!(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: {name}\n{labels}rules:\n- apiGroups: [\"\"]\n  resources: [configmaps, secrets]\n  verbs: [get, list, watch]\n- apiGroups: [apps]\n  resources: [deployments]\n  verbs: [get]\n"
        ),
        _ => format!(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: {name}\n{labels}roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: Role\n  name: {rel}-{role}\nsubjects:\n- kind: ServiceAccount\n  name: {rel}-{sa}\n",
            role = j - 1,
            sa = j - 2
        ),
    };
    (format!("templates/object-{j}.yaml"), yaml)
}

fn release_secret(rel: &str, ns: &str, objects: usize, manifest_bytes: &mut usize) -> Value {
    let mut manifest = String::new();
    for j in 0..objects {
        let (source, yaml) = object(rel, j);
        manifest.push_str(&format!("---\n# Source: {rel}/{source}\n{yaml}"));
    }
    *manifest_bytes += manifest.len();
    let release = json!({
        "name": rel, "namespace": ns, "version": 1,
        "info": {"status": "deployed", "description": "Install complete",
                 "first_deployed": "2026-11-01T10:00:00Z", "last_deployed": "2026-11-01T10:00:00Z"},
        "chart": {"metadata": {"name": rel, "version": "1.0.0", "apiVersion": "v2"},
                  "values": {"replicaCount": 2, "image": {"repository": "registry.example.com/app", "tag": "1.0.3"}}},
        "config": {"replicaCount": 2},
        "manifest": manifest,
    });
    helm_locker_core::test_util::release_secret_json(&release)
}

/// An AdmissionReview (v1) of an UPDATE from `old` to `object` by `user`.
fn review(uid: &str, object: Value, old: Value, user: &str, manager: &str) -> Value {
    let (group, version) = match object["apiVersion"]
        .as_str()
        .unwrap_or("v1")
        .split_once('/')
    {
        Some((g, v)) => (g.to_string(), v.to_string()),
        None => (
            String::new(),
            object["apiVersion"].as_str().unwrap_or("v1").to_string(),
        ),
    };
    let kind = object["kind"].as_str().unwrap_or_default().to_string();
    let resource = format!("{}s", kind.to_lowercase());
    json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": group, "version": version, "kind": kind},
            "resource": {"group": group, "version": version, "resource": resource},
            "requestKind": {"group": group, "version": version, "kind": kind},
            "requestResource": {"group": group, "version": version, "resource": resource},
            "name": object["metadata"]["name"], "namespace": object["metadata"]["namespace"],
            "operation": "UPDATE",
            "userInfo": {"username": user, "groups": ["system:authenticated"]},
            "object": object, "oldObject": old,
            "dryRun": false,
            "options": {"kind": "UpdateOptions", "apiVersion": "meta.k8s.io/v1", "fieldManager": manager}
        }
    })
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (dir, releases, objects) = match args.as_slice() {
        [_, dir, n] => (dir, n.parse::<usize>().expect("RELEASES"), 30),
        [_, dir, n, m] => (
            dir,
            n.parse().expect("RELEASES"),
            m.parse().expect("OBJECTS"),
        ),
        _ => {
            eprintln!("usage: synth_releases DIR RELEASES [OBJECTS_PER_RELEASE]");
            std::process::exit(2);
        }
    };
    let dir = std::path::Path::new(dir);
    std::fs::create_dir_all(dir.join("releases")).expect("create DIR/releases");
    let mut manifest_bytes = 0;
    let items: Vec<Value> = (0..releases)
        .map(|i| {
            release_secret(
                &format!("app-{i}"),
                &format!("team-{}", i % 100),
                objects,
                &mut manifest_bytes,
            )
        })
        .collect();
    let list = json!({"apiVersion": "v1", "kind": "List", "items": items});
    std::fs::write(dir.join("releases/releases.json"), list.to_string()).expect("write releases");

    // Reviews for release app-0 (namespace team-0): a controller-style write that changes no
    // chart field (allowed after the full comparison), and a user's change (denied).
    let mut configmap: Value = serde_saphyr::from_str(&object("app-0", 1).1).expect("the template");
    configmap["metadata"]["namespace"] = json!("team-0");
    configmap["metadata"]["annotations"] =
        json!({"meta.helm.sh/release-name": "app-0", "meta.helm.sh/release-namespace": "team-0"});
    let mut seen = configmap.clone();
    seen["metadata"]["annotations"]["controller/seen"] = json!("true");
    let allowed = review(
        "00000000-0000-0000-0000-000000000001",
        seen,
        configmap.clone(),
        "system:serviceaccount:tools:labeler",
        "labeler",
    );
    let mut edited = configmap.clone();
    edited["data"]["feature-flags"] = json!("a,b");
    let denied = review(
        "00000000-0000-0000-0000-000000000002",
        edited,
        configmap,
        "alice",
        "kubectl-edit",
    );
    std::fs::write(dir.join("review-locked-allowed.json"), allowed.to_string()).expect("write");
    std::fs::write(dir.join("review-denied.json"), denied.to_string()).expect("write");
    println!("{manifest_bytes}");
}
