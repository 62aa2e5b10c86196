//! Builders shared by the tests, benches, examples and fuzz targets (feature `test-util`): a
//! release as Helm stores it in its Secret, a decoded release Secret for the index, and an
//! AdmissionReview. One encoder, so every test exercises the format Helm writes.

use std::collections::BTreeMap;
use std::io::Write;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use serde_json::{json, Value};

use crate::release::{Release, ReleaseSecret, SecretRef, Status};

/// Helm's layer of `data.release`: base64 of gzip of the release JSON.
pub fn helm_payload(release: &Value) -> String {
    let mut gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gzip.write_all(release.to_string().as_bytes())
        .expect("writing to memory");
    STANDARD.encode(gzip.finish().expect("writing to memory"))
}

/// A release's JSON as Helm writes it (`helm.sh/helm/v3/pkg/release.Release`), with the fields
/// helm-locker reads.
pub fn release_json(
    namespace: &str,
    name: &str,
    revision: u64,
    status: Status,
    manifest: &str,
) -> Value {
    json!({
        "name": name, "namespace": namespace, "version": revision,
        "info": {"status": status.to_string(), "description": "Install complete"},
        "chart": {"metadata": {"name": name, "version": "1.0.0"}},
        "manifest": manifest,
    })
}

/// A release Secret as the API server returns it: `data.release` is the Secret's base64 of
/// [`helm_payload`], and the labels are Helm's.
pub fn release_secret_json(release: &Value) -> Value {
    let text = |field: &str| release[field].as_str().unwrap_or_default().to_string();
    let (name, namespace) = (text("name"), text("namespace"));
    let revision = release["version"].as_u64().unwrap_or(1);
    let status = release["info"]["status"].as_str().unwrap_or("deployed");
    json!({
        "apiVersion": "v1", "kind": "Secret", "type": "helm.sh/release.v1",
        "metadata": {"name": format!("sh.helm.release.v1.{name}.v{revision}"), "namespace": namespace,
                     "labels": {"owner": "helm", "name": name, "status": status, "version": revision.to_string()}},
        "data": {"release": STANDARD.encode(helm_payload(release))},
    })
}

/// A decoded release Secret, for building an index directly.
pub fn release_secret(
    namespace: &str,
    name: &str,
    revision: u64,
    status: Status,
    manifest: &str,
) -> ReleaseSecret {
    ReleaseSecret {
        secret: SecretRef::secret(namespace, format!("sh.helm.release.v1.{name}.v{revision}")),
        labels: BTreeMap::new(),
        author: crate::author::Authorship::Unknown(crate::author::Unknown::NotRead),
        created: None,
        counts_beside: false,
        release: Release {
            name: name.into(),
            namespace: namespace.into(),
            revision,
            status,
            description: String::new(),
            notes: String::new(),
            chart: format!("{name}-1.0.0"),
            apply_method: None,
            manifest: manifest.into(),
            hooks: vec![],
        },
    }
}

/// One object of release `rel`, the `j`th of its chart, and its template's path: the kinds a
/// typical chart has (Deployment, ConfigMap, Service, ServiceAccount, Role, RoleBinding, in turn),
/// in the sizes they usually are. The synthetic clusters of `scripts/scale.sh` and the start-up
/// benchmark are made of these.
pub fn synthetic_object(rel: &str, j: usize) -> (String, String) {
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

/// The manifest Helm renders for release `rel` of `objects` [`synthetic_object`]s (30 of them are
/// about 21 kB, the size `scripts/scale.sh` and `test_history` measure at).
pub fn synthetic_manifest(rel: &str, objects: usize) -> String {
    let mut manifest = String::new();
    for j in 0..objects {
        let (source, yaml) = synthetic_object(rel, j);
        manifest.push_str(&format!("---\n# Source: {rel}/{source}\n{yaml}"));
    }
    manifest
}

/// An AdmissionReview (v1) request, as kube-apiserver sends it. Defaults: an UPDATE by
/// `admin` with no object; set what the test varies.
#[derive(Clone, Debug)]
pub struct ReviewBuilder {
    request: Value,
}

/// The bytes the index keeps of its objects' contents (each release's manifest frame and
/// packed trees, counted once, and each object's place in them): what the benchmarks compare
/// with the manifests' bytes.
pub fn packed_tree_bytes(index: &crate::index::Index) -> usize {
    let mut seen = std::collections::HashSet::new();
    index
        .releases()
        .iter()
        .flat_map(|s| s.objects.iter().flatten())
        .map(|o| {
            let shared = o.held.shared();
            let once = if seen.insert(std::sync::Arc::as_ptr(shared)) {
                shared.heap_bytes()
            } else {
                0
            };
            once + std::mem::size_of_val(&o.held)
        })
        .sum()
}

/// Starts a review of `operation` on `group/version` `kind`, whose resource is `resource`.
pub fn review(operation: &str, api_version: &str, kind: &str, resource: &str) -> ReviewBuilder {
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    ReviewBuilder {
        request: json!({
            "uid": format!("uid-{operation}-{kind}").to_lowercase(),
            "kind": {"group": group, "version": version, "kind": kind},
            "resource": {"group": group, "version": version, "resource": resource},
            "operation": operation,
            "userInfo": {"username": "admin", "groups": ["system:authenticated"]},
        }),
    }
}

impl ReviewBuilder {
    pub fn uid(mut self, uid: &str) -> Self {
        self.request["uid"] = json!(uid);
        self
    }

    pub fn name(mut self, namespace: Option<&str>, name: &str) -> Self {
        self.request["name"] = json!(name);
        if let Some(namespace) = namespace {
            self.request["namespace"] = json!(namespace);
        }
        self
    }

    pub fn user(mut self, username: &str) -> Self {
        self.request["userInfo"]["username"] = json!(username);
        self
    }

    /// The kind of the object sent when it differs from the resource's (a Scale).
    pub fn kind(mut self, api_version: &str, kind: &str) -> Self {
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        self.request["kind"] = json!({"group": group, "version": version, "kind": kind});
        self
    }

    pub fn sub_resource(mut self, sub: &str) -> Self {
        self.request["subResource"] = json!(sub);
        self
    }

    pub fn object(mut self, object: Value) -> Self {
        self.request["object"] = object;
        self
    }

    pub fn old_object(mut self, old: Value) -> Self {
        self.request["oldObject"] = old;
        self
    }

    pub fn dry_run(mut self) -> Self {
        self.request["dryRun"] = json!(true);
        self
    }

    pub fn field_manager(mut self, manager: &str) -> Self {
        self.request["options"] = json!({"fieldManager": manager});
        self
    }

    pub fn json(&self) -> Value {
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": self.request})
    }

    pub fn body(&self) -> Vec<u8> {
        self.json().to_string().into_bytes()
    }
}

/// A review as kube-apiserver writes it: the review's and the request's keys in Go's field
/// order, compact (the recorded fixtures have sorted keys). `scripts/go_order.py` does the same
/// for the load runs.
pub fn go_order(body: &str) -> String {
    fn ordered(map: &serde_json::Map<String, Value>, order: &[&str]) -> String {
        let mut keys: Vec<&String> = map.keys().collect();
        keys.sort_by_key(|k| order.iter().position(|o| o == k).unwrap_or(order.len()));
        let members: Vec<String> = keys
            .into_iter()
            .map(|k| {
                let value = match &map[k] {
                    Value::Object(m) if k == "request" => ordered(m, crate::review::GO_ORDER),
                    // metav1.GroupVersionKind / GroupVersionResource, authenticationv1.UserInfo.
                    Value::Object(m) if matches!(k.as_str(), "kind" | "requestKind") => {
                        ordered(m, &["group", "version", "kind"])
                    }
                    Value::Object(m) if matches!(k.as_str(), "resource" | "requestResource") => {
                        ordered(m, &["group", "version", "resource"])
                    }
                    Value::Object(m) if k == "userInfo" => {
                        ordered(m, &["username", "uid", "groups", "extra"])
                    }
                    v => v.to_string(),
                };
                format!("{}:{value}", serde_json::to_string(k).expect("a string"))
            })
            .collect();
        format!("{{{}}}", members.join(","))
    }
    let review: Value = serde_json::from_str(body).expect("a JSON review");
    go_escape(&match review.as_object() {
        Some(map) => ordered(map, &["kind", "apiVersion", "request"]),
        None => review.to_string(),
    })
}

/// JSON text as Go's `encoding/json` writes it (what kube-apiserver sends): `<`, `>` and `&`
/// as `\u003c`, `\u003e`, `\u0026`, and U+2028/U+2029 escaped. These characters only occur
/// inside strings, so the whole text can be rewritten.
pub fn go_escape(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

/// An object as a manifest reader saw it: apiVersion, kind, namespace as written, name, and
/// its content as JSON (`None`: unreadable).
pub type ObjectSeen = (String, String, Option<String>, String, Option<Value>);

/// The objects of `manifest` as the index reads them at start (identity only where it can,
/// [`crate::identity`]) and then parses them on first need, beside [`crate::parse_manifest`]'s
/// whole parse; and how many documents were left unparsed at start.
pub fn objects_read_lazily_and_whole(manifest: &str) -> (Vec<ObjectSeen>, Vec<ObjectSeen>, usize) {
    use crate::object_content::{Held, ObjectContent, ReleaseContents};
    let (mut scanned, _) = crate::manifest::scan_manifest(manifest);
    let lazy = scanned
        .iter()
        .filter(|o| matches!(o.held, Held::Document { .. }))
        .count();
    let held = scanned
        .iter_mut()
        .map(|o| std::mem::replace(&mut o.held, Held::Document { start: 0, end: 0 }))
        .collect();
    let contents = ReleaseContents::new(manifest, held);
    let read = scanned
        .into_iter()
        .enumerate()
        .map(|(at, o)| {
            let api_version = crate::manifest::api_version(&o.group, &o.version);
            let tree = ObjectContent::new(&contents, at).tree();
            (
                api_version,
                o.kind,
                o.namespace,
                o.name,
                tree.map(|t| t.to_json()),
            )
        })
        .collect();
    let whole = crate::parse_manifest(manifest)
        .objects
        .into_iter()
        .map(|o| {
            let content = o.content.unpack().to_json();
            (o.api_version(), o.kind, o.namespace, o.name, Some(content))
        })
        .collect();
    (read, whole, lazy)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_the_builders_encode_decodes_as_helms_own_secrets_do() {
        let release = release_json(
            "shop",
            "web",
            3,
            Status::Deployed,
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n",
        );
        let decoded = crate::release::decode_secret(&release_secret_json(&release)).unwrap();
        assert_eq!(decoded.secret.name, "sh.helm.release.v1.web.v3");
        assert_eq!(decoded.release.revision, 3);
        assert_eq!(decoded.release.status, Status::Deployed);
        assert!(decoded.release.manifest.contains("ConfigMap"));
        let review =
            review("DELETE", "apps/v1", "Deployment", "deployments").name(Some("shop"), "web");
        let parsed = crate::review::parse_review(&review.body())
            .map(|r| r.request.name().map(str::to_string));
        assert_eq!(parsed.unwrap().as_deref(), Some("web"));
    }
}
