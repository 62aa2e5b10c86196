#!/usr/bin/env python3
"""Writes the Helm 3 release Secret fixtures of tests/fixtures/helm3-style/.

    python3 scripts/make-release-fixtures.py           # (re)writes the files
    python3 scripts/make-release-fixtures.py --check   # exits 1 if a committed file differs

Every release, chart and manifest here was written for this repository. The Secrets follow Helm's
storage format (one Secret per revision, `type: helm.sh/release.v1`, labels `owner`, `name`,
`status`, `version`): `data.release` is base64 (the Secret's) of base64 (Helm's) of gzip of the
release JSON, or of the JSON itself for the release stored without gzip. The JSON has the field
order and escaping of Helm 3's Go structs (`encoding/json`: `<`, `>`, `&` as `\\u003c`...; zero
times as `""`; no `apply_method`, which only Helm 4 writes). The files look as
`kubectl get secret -o yaml` prints them. The output is deterministic: fixed times, uids derived
from the names, gzip with mtime 0 at level 9 (Helm's `gzip.BestCompression`). Standard library only.
Each fixture's quirk is described in tests/fixtures/helm3-style/README.md.
"""
import base64
import gzip
import json
import pathlib
import sys
import uuid

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "helm3-style"


# ---- Helm's encoding ---------------------------------------------------------------------------


def go_json(value):
    """Compact JSON as Go's encoding/json writes it (HTML-safe escapes)."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    for ch, esc in (("&", "\\u0026"), ("<", "\\u003c"), (">", "\\u003e"),
                    ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(ch, esc)
    return text.encode()


def data_release(release, use_gzip=True):
    payload = go_json(release)
    if use_gzip:
        payload = gzip.compress(payload, compresslevel=9, mtime=0)
    helm_layer = base64.b64encode(payload)
    return base64.b64encode(helm_layer).decode()


def manifest(docs):
    """Helm's manifest string: each rendered template after `---` and a `# Source:` line."""
    return "".join(f"---\n# Source: {path}\n{content.strip()}\n" for path, content in docs)


def chart(name, version, app_version, templates, values=None, description=None):
    meta = {"name": name, "version": version}
    if description:
        meta["description"] = description
    meta["apiVersion"] = "v2"
    meta["appVersion"] = app_version
    meta["type"] = "application"
    return {
        "metadata": meta,
        "lock": None,
        "templates": [{"name": path, "data": base64.b64encode(text.encode()).decode()}
                      for path, text in templates],
        "values": values,
        "schema": None,
        "files": None,
    }


def release(name, namespace, version, status, description, chart_, docs, times=("", ""),
            config=None, hooks=None, notes=None):
    info = {"first_deployed": times[0], "last_deployed": times[1], "deleted": "",
            "description": description, "status": status}
    if notes:
        info["notes"] = notes
    out = {"name": name, "info": info, "chart": chart_}
    if config:
        out["config"] = config
    out["manifest"] = manifest(docs)
    if hooks:
        out["hooks"] = hooks
    out["version"] = version
    out["namespace"] = namespace
    return out


def hook(name, kind, path, content, events, delete_policies=()):
    """A hook as Helm 3 stores it: its own manifest (not part of the release's), never run here."""
    return {"name": name, "kind": kind, "path": path, "manifest": content,
            "events": list(events), "last_run": {"started_at": "", "completed_at": "", "phase": ""},
            "delete_policies": list(delete_policies)}


# ---- kubectl's YAML ----------------------------------------------------------------------------


def scalar(value):
    """A label value as kubectl prints it: quoted when YAML would read it as something else."""
    if value == "" or value.isdigit() or value.lower() in ("true", "false", "null", "yes", "no"):
        return f'"{value}"'
    return value


def secret(release_json, secret_namespace, labels, created, resource_version, use_gzip=True,
           name=None):
    name = name or f"sh.helm.release.v1.{release_json['name']}.v{release_json['version']}"
    return {
        "data": data_release(release_json, use_gzip),
        "labels": labels,
        "name": name,
        "namespace": secret_namespace,
        "created": created,
        "resourceVersion": resource_version,
        "uid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"helm-locker-fixture:{secret_namespace}/{name}")),
    }


def secret_yaml(s, indent=""):
    lines = [
        "apiVersion: v1",
        "data:",
        f"  release: {s['data']}",
        "kind: Secret",
        "metadata:",
        f"  creationTimestamp: \"{s['created']}\"",
        "  labels:",
        *(f"    {k}: {scalar(v)}" for k, v in sorted(s["labels"].items())),
        f"  name: {s['name']}",
        f"  namespace: {s['namespace']}",
        f"  resourceVersion: \"{s['resourceVersion']}\"",
        f"  uid: {s['uid']}",
        "type: helm.sh/release.v1",
    ]
    return "".join(f"{indent}{line}\n" for line in lines)


def list_yaml(secrets):
    items = []
    for s in secrets:
        body = secret_yaml(s, "  ")
        items.append("- " + body[2:])
    return "apiVersion: v1\nitems:\n" + "".join(items) + 'kind: List\nmetadata:\n  resourceVersion: ""\n'


def labels(name, status, version=None, created_at=None, modified_at=None):
    out = {"name": name, "owner": "helm", "status": status}
    if version is not None:
        out["version"] = str(version)
    if created_at is not None:
        out["createdAt"] = str(created_at)
    if modified_at is not None:
        out["modifiedAt"] = str(modified_at)
    return out


# ---- The fixtures ------------------------------------------------------------------------------


def namespace_mismatch():
    """Secret in `finance`, release JSON says `books`."""
    config = """apiVersion: v1
kind: ConfigMap
metadata:
  name: ledger-settings
  labels:
    app.kubernetes.io/name: ledger-api
    app.kubernetes.io/managed-by: Helm
data:
  currency: EUR
  rounding: half-even
"""
    service = """apiVersion: v1
kind: Service
metadata:
  name: ledger-api
  labels:
    app.kubernetes.io/name: ledger-api
    app.kubernetes.io/managed-by: Helm
spec:
  type: ClusterIP
  selector:
    app.kubernetes.io/name: ledger-api
  ports:
    - name: http
      port: 8080
      targetPort: http
      protocol: TCP
"""
    docs = [("ledger-api/templates/configmap.yaml", config), ("ledger-api/templates/service.yaml", service)]
    rel = release("ledger", "books", 1, "deployed", "Install complete",
                  chart("ledger-api", "1.4.0", "1.4.0", [(p[len("ledger-api/"):], t) for p, t in docs],
                        values={"currency": "EUR"}, description="Bookkeeping API"),
                  docs, times=("2024-03-05T09:12:44.118305521Z", "2024-03-05T09:12:44.118305521Z"))
    s = secret(rel, "finance", labels("ledger", "deployed"), "2024-03-05T09:12:44Z", "48213")
    return secret_yaml(s)


def labels_disagree():
    """Two revisions; both Secrets' labels say deployed, the payloads say superseded and failed."""

    def docs(limit, tag):
        cm = f"""apiVersion: v1
kind: ConfigMap
metadata:
  name: tally-limits
data:
  limit: "{limit}"
  window: 1m
"""
        deploy = f"""apiVersion: apps/v1
kind: Deployment
metadata:
  name: tally-worker
spec:
  replicas: 2
  selector:
    matchLabels:
      app: tally-worker
  template:
    metadata:
      labels:
        app: tally-worker
    spec:
      containers:
        - name: worker
          image: registry.invalid/tally/worker:{tag}
          resources:
            requests:
              cpu: 250m
              memory: 128Mi
            limits:
              memory: 256Mi
"""
        return [("tally/templates/limits.yaml", cm), ("tally/templates/worker.yaml", deploy)]

    def tally_chart(version, limit, tag):
        return chart("tally", version, tag, [(p[len("tally/"):], t) for p, t in docs(limit, tag)],
                     values={"limit": limit})

    v1 = release("tally", "counting", 1, "superseded", "Install complete", tally_chart("1.1.0", 10, "1.1.0"),
                 docs(10, "1.1.0"), times=("2024-06-11T07:40:02.5513Z", "2024-06-11T07:40:02.5513Z"))
    v2 = release("tally", "counting", 2, "failed",
                 'Upgrade "tally" failed: timed out waiting for the condition',
                 tally_chart("1.2.0", 25, "1.2.0"), docs(25, "1.2.0"),
                 times=("2024-06-11T07:40:02.5513Z", "2024-06-12T16:03:19.90871Z"),
                 config={"limit": 25})
    s1 = secret(v1, "counting", labels("tally", "deployed", 1, 1718091602, 1718208199),
                "2024-06-11T07:40:02Z", "90114")
    s2 = secret(v2, "counting", labels("tally", "deployed", 2, 1718208199), "2024-06-12T16:03:19Z", "90871")
    return list_yaml([s1, s2])


def duplicate_key():
    """A ConfigMap with `data:` twice and a Service with `spec:` twice (templates that write a
    default block and then an override)."""
    config = """apiVersion: v1
kind: ConfigMap
metadata:
  name: relay-config
data:
  upstream: legacy.relay.svc
  retries: "1"
data:
  upstream: relay-backend.edge.svc
  retries: "5"
  timeout: 30s
"""
    service = """apiVersion: v1
kind: Service
metadata:
  name: relay
spec:
  type: ClusterIP
  ports:
  - name: legacy
    port: 80
spec:
  type: NodePort
  selector:
    app: relay
  ports:
  - name: relay
    port: 8080
    nodePort: 30080
"""
    docs = [("relay/templates/config.yaml", config), ("relay/templates/service.yaml", service)]
    rel = release("relay", "edge", 2, "deployed", "Upgrade complete",
                  chart("relay", "2.0.1", "2.0", [(p[len("relay/"):], t) for p, t in docs]),
                  docs, times=("2024-01-15T10:00:00.000000001Z", "2024-02-02T13:31:07.4402Z"))
    s = secret(rel, "edge", labels("relay", "deployed", 2, modified_at=1706880667),
               "2024-02-02T13:31:07Z", "7731")
    return secret_yaml(s)


def deprecated_apis():
    """APIs removed from Kubernetes: extensions/v1beta1, apiextensions.k8s.io/v1beta1, policy/v1beta1."""
    crd = """# Written for Kubernetes 1.15; the API server stopped serving this version in 1.22.
apiVersion: apiextensions.k8s.io/v1beta1
kind: CustomResourceDefinition
metadata:
  name: snapshots.records.example.org
spec:
  group: records.example.org
  version: v1alpha1
  names:
    kind: Snapshot
    listKind: SnapshotList
    plural: snapshots
    singular: snapshot
    shortNames: [snap]
  scope: Namespaced
  additionalPrinterColumns:
  - name: Retention
    type: integer
    JSONPath: .spec.retentionDays
  validation:  # v1beta1 only: a single schema shared by every served version
    openAPIV3Schema:
      required: [spec]
      properties:
        spec:
          required: [retentionDays]
          properties:
            retentionDays: {type: integer, minimum: 1}
"""
    deployment = """apiVersion: extensions/v1beta1
kind: Deployment
metadata:
  name: archive-web
spec:
  replicas: 1
  template:
    metadata:
      labels:
        app: archive-web
    spec:
      containers:
      - name: web
        image: registry.invalid/archive/web:0.9
        ports:
        - containerPort: 8000
"""
    ingress = """apiVersion: extensions/v1beta1
kind: Ingress
metadata:
  name: archive-web
spec:
  tls:
  - hosts: [archive.example.org]
    secretName: archive-tls
  backend:
    serviceName: archive-web
    servicePort: http
  rules:
  - host: archive.example.org
    http:
      paths:
      - path: /api
        backend: {serviceName: archive-api, servicePort: 9000}
      - path: /
        backend: {serviceName: archive-web, servicePort: 8000}
"""
    pdb = """apiVersion: policy/v1beta1
kind: PodDisruptionBudget
metadata:
  name: archive-web
spec:
  minAvailable: 1
  selector:
    matchLabels:
      app: archive-web
"""
    docs = [("archive-web/templates/crd.yaml", crd), ("archive-web/templates/deployment.yaml", deployment),
            ("archive-web/templates/ingress.yaml", ingress), ("archive-web/templates/pdb.yaml", pdb)]
    rel = release("archive", "records", 3, "deployed", "Upgrade complete",
                  chart("archive-web", "0.9.0", "0.9", [(p[len("archive-web/"):], t) for p, t in docs]),
                  docs, times=("2020-08-03T11:20:45.112233445Z", "2020-09-14T08:02:11.998877665Z"))
    s = secret(rel, "records", labels("archive", "deployed", 3), "2020-09-14T08:02:11Z", "3301")
    # A leading empty line, as when the YAML is kept in a Go raw string.
    return "\n" + secret_yaml(s)


def crd_in_manifest():
    """A CRD rendered from templates/ (so it is in the manifest), a resource of it, and objects
    whose namespace is not the release's."""
    crd = """apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gauges.metrics.example.org
spec:
  group: metrics.example.org
  scope: Namespaced
  names:
    plural: gauges
    singular: gauge
    kind: Gauge
  versions:
    - name: v1alpha1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              properties:
                query:
                  type: string
                threshold:
                  type: number
"""
    gauge = """apiVersion: metrics.example.org/v1alpha1
kind: Gauge
metadata:
  name: queue-depth
spec:
  query: sum(queue_messages)
  threshold: 1000
"""
    role = """apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: gauges-reader
rules:
  - apiGroups: ["metrics.example.org"]
    resources: ["gauges"]
    verbs: ["get", "list", "watch"]
"""
    operator = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: gauge-operator
  namespace: metrics-system
spec:
  replicas: 1
  selector:
    matchLabels:
      app: gauge-operator
  template:
    metadata:
      labels:
        app: gauge-operator
    spec:
      containers:
        - name: operator
          image: registry.invalid/gauges/operator:0.3.2
          resources:
            requests:
              cpu: 50m
              memory: 64Mi
"""
    docs = [("gauge-operator/templates/crd.yaml", crd), ("gauge-operator/templates/clusterrole.yaml", role),
            ("gauge-operator/templates/operator.yaml", operator), ("gauge-operator/templates/gauge.yaml", gauge)]
    rel = release("gauges", "metrics", 1, "deployed", "Install complete",
                  chart("gauge-operator", "0.3.2", "0.3.2", [(p[len("gauge-operator/"):], t) for p, t in docs]),
                  docs)
    s = secret(rel, "metrics", labels("gauges", "deployed", 1, created_at=1), "2024-04-01T00:00:00Z", "1202")
    return secret_yaml(s)


def block_scalars():
    """Multi-line ConfigMap values in every block style, from a template without a final newline."""
    cm = """apiVersion: v1
kind: ConfigMap
metadata:
  name: notes-text
data:
  motd: |
    Welcome to the notes service.
    Be kind to each other.
  banner: >-
    Notes are kept
    for thirty days.
  script: |-
    #!/bin/sh
    set -eu

    exec notes-server --port 7070
  trailing: |+
    kept

  footer: |
    last line
    of the manifest"""
    # The template ends without a newline; Helm's manifest adds one after every document.
    rel = release("notes", "docs", 1, "deployed", "Install complete",
                  chart("notes", "0.1.0", "0.1.0", [("templates/text.yaml", cm)]),
                  [("notes/templates/text.yaml", cm)])
    s = secret(rel, "docs", labels("notes", "deployed", 1, created_at=1), "2024-05-20T12:00:00Z", "5120")
    return secret_yaml(s)


def plain_json():
    """Stored without gzip: Helm's base64 holds the JSON itself. Has a hook."""
    sa = """apiVersion: v1
kind: ServiceAccount
metadata:
  name: pilot
"""
    role = """apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: pilot-reader
rules:
  - apiGroups: [""]
    resources: ["pods", "pods/log"]
    verbs: ["get", "list"]
"""
    binding = """apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: pilot-reader
  namespace: lab
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: pilot-reader
subjects:
  - kind: ServiceAccount
    name: pilot
    namespace: lab
"""
    job = """apiVersion: batch/v1
kind: Job
metadata:
  name: pilot-preflight
  annotations:
    "helm.sh/hook": pre-install
    "helm.sh/hook-delete-policy": before-hook-creation
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
        - name: check
          image: registry.invalid/pilot/preflight:0.0.1
          args: ["--expect", "pods>0 && logs<10Mi"]
"""
    docs = [("pilot/templates/serviceaccount.yaml", sa), ("pilot/templates/role.yaml", role),
            ("pilot/templates/rolebinding.yaml", binding)]
    rel = release("pilot", "lab", 1, "deployed", "Install complete",
                  chart("pilot", "0.0.1", "0.0.1",
                        [(p[len("pilot/"):], t) for p, t in docs] + [("templates/preflight.yaml", job)]),
                  docs, notes="Pilot reads pod logs in <lab> & reports them.",
                  hooks=[hook("pilot-preflight", "Job", "pilot/templates/preflight.yaml",
                              job, ["pre-install"],
                              delete_policies=["before-hook-creation"])])
    s = secret(rel, "lab", labels("pilot", "deployed", 1, created_at=1), "2024-07-07T07:07:07Z", "777",
               use_gzip=False)
    return secret_yaml(s)


def failed_install():
    """A first install that failed: status `failed` in payload and labels, user values in config."""
    service = """apiVersion: v1
kind: Service
metadata:
  name: beacon
spec:
  clusterIP: None
  selector:
    app: beacon
  ports:
    - port: 9100
"""
    daemonset = """apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: beacon
spec:
  selector:
    matchLabels:
      app: beacon
  template:
    metadata:
      labels:
        app: beacon
    spec:
      tolerations:
        - operator: Exists
      containers:
        - name: beacon
          image: registry.invalid/beacon/agent:0.2.0
          resources:
            requests:
              cpu: 100m
              memory: 64Mi
            limits:
              cpu: "0.5"
              memory: 256Mi
"""
    docs = [("beacon/templates/service.yaml", service), ("beacon/templates/daemonset.yaml", daemonset)]
    rel = release("beacon", "ops", 1, "failed",
                  'Release "beacon" failed: timed out waiting for the condition',
                  chart("beacon", "0.2.0", "0.2.0", [(p[len("beacon/"):], t) for p, t in docs],
                        values={"image": {"tag": "0.2.0"}}),
                  docs, times=("2024-08-19T22:10:05.000123Z", "2024-08-19T22:15:05.61003Z"),
                  config={"image": {"tag": "0.2.0-rc1"}})
    s = secret(rel, "ops", labels("beacon", "failed", 1, created_at=1724105405, modified_at=1724105705),
               "2024-08-19T22:10:05Z", "66012")
    return secret_yaml(s)


FIXTURES = {
    "namespace-mismatch.yaml": namespace_mismatch,
    "labels-disagree.yaml": labels_disagree,
    "duplicate-key.yaml": duplicate_key,
    "deprecated-apis.yaml": deprecated_apis,
    "crd-in-manifest.yaml": crd_in_manifest,
    "block-scalars.yaml": block_scalars,
    "plain-json.yaml": plain_json,
    "failed-install.yaml": failed_install,
}


def main():
    check = "--check" in sys.argv[1:]
    differ = []
    OUT.mkdir(parents=True, exist_ok=True)
    for name, build in FIXTURES.items():
        text = build()
        path = OUT / name
        if check:
            if not path.exists() or path.read_text() != text:
                differ.append(name)
        else:
            path.write_text(text)
    if differ:
        print("differ from the builder's output:", ", ".join(differ), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
