"""What Helm owns, checked against the API server itself (issue 14), on charts written the way
widely used ones are.

Charts, all written in this repository: charts/webapp, charts/metrics-agent and
charts/edge-proxy (helpers, `toYaml` blocks, `range`, capability branches; the kinds and field
shapes of a web service, a cluster-wide agent and an ingress controller, see charts/README.md),
charts/edges (the shapes they lack: stringData, a Namespace, finalizers, a YAML null, octal
modes, a custom resource with set/map/atomic lists) and charts/shop. Helm is real (Helm 4's Go
SDK: server-side apply as field manager "python"), and so is the API server (1.20 and 1.36:
where the outcome of a row differs between them, the row says how, `by_schema` or `served`).

  1. owned-fields: after helm install, `helm-locker owned-fields` compares what it locks in each
     live object with Helm's entry in the object's managedFields (the API server's own answer).
  2. A table of realistic writes (kubectl edit/patch/apply/replace/scale/set/label/annotate/
     delete, server-side apply, dry runs, controllers' writes), each with the outcome the
     ownership rules give. For every row: a denied write leaves the object unchanged; after an
     allowed write, the next `helm upgrade` (same values) succeeds with no conflict and leaves
     every field the chart sets at the chart's value.
  3. The same two invariants for random JSON patches (a fixed seed in CI; E2E_SEED=random draws
     a new one, printed; E2E_SEED=N replays).
  4. The user's story on each chart: install, upgrade, rollback, a denied kubectl edit, drift
     (an exempt user, the webhook away) reverted and the next upgrade clean, uninstall.
  5. A finding about shared ownership (see its docstring).

The rows' expectations come from the rules of issue 14 (what server-side apply attributes to
Helm's field manager, list and map semantics from the API's schema); where the API server
disagrees with a rule as first written, the row's note says so. What the API server taught:
  - a scalar the chart renders as null (webapp's `ingressClassName:`) IS owned by Helm 4: it
    applies the null, managedFields list the field, and another value makes the next upgrade
    conflict; a null map owns nothing;
  - `emptyDir: {}` is NOT in Helm's managedFields on 1.20 (no leaf for an empty map), yet
    replacing it by a hostPath makes the next upgrade fail (two volume sources);
  - `stringData` is owned as `stringData` (never stored), not as `data`;
  - 1.20's OpenAPI marks only LabelSelector atomic: a Service's selector is a granular map
    (atomic from 1.28, and so is a pod's nodeSelector);
  - 1.36 lists a map another manager applies as null (a Secret's stringData) as that manager's
    whole, above Helm's fields in it (the next upgrade conflicts); 1.20 lists nothing (test_3b);
  - the API server never sends webhook configurations to admission webhooks: only the reverter
    can hold them (test_4);
  - a review may come in another version than the chart's (kubectl reads and patches an HPA
    through autoscaling/v1), so the same field has another path;
  - a server-side apply that changes no value still makes its manager a co-owner (test_5).
Run through scripts/e2e.sh, or alone:
  HELM_LOCKER_BIN="$(scripts/target-dir.sh)/debug/helm-locker" \
      .venv-e2e/bin/python -m unittest discover -s tests/e2e -p test_ownership.py -v
(from the repository's root; scripts/target-dir.sh prints where cargo builds, CARGO_TARGET_DIR
included).
"""

import base64
import copy
import inspect
import json
import os
import random
import re
import ssl
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.parse
import urllib.request
from fractions import Fraction

import helm_python as helm

from harness import DENIED, BIN, HERE, ControlPlane, Locker, eventually, register_webhook, release_secret, unregister_webhook

CHARTS = os.path.join(HERE, "charts")
ALLOW, DENY = "allow", "deny"
# Controllers the rows impersonate get their permissions from this group (bound to cluster-admin).
CONTROLLERS = "e2e:controllers"
KCM = "system:kube-controller-manager"  # exempt by default
# Kinds of these charts that are cluster-scoped (everything else lives in a namespace).
CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding", "IngressClass", "APIService",
                  "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration",
                  "CustomResourceDefinition", "PriorityClass", "PodSecurityPolicy"}
# The objects' fields no write by a user decides: left out when "unchanged" is checked.
VOLATILE_META = ("resourceVersion", "managedFields", "generation")
VOLATILE_ANNOTATIONS = (
    "deployment.kubernetes.io/revision",
    # An HPA read through autoscaling/v1 shows its status (written by the HPA controller) as these.
    "autoscaling.alpha.kubernetes.io/conditions",
    "autoscaling.alpha.kubernetes.io/current-metrics",
)

STORY_NAMESPACES = ["own-story-wa", "own-story-ma", "own-story-px", "own-story-ed"]


def chart_values(chart, release):
    """The values each chart is installed with: what makes it render its interesting kinds, and
    what it needs on a control plane where no pod runs (see charts/README.md)."""
    return {
        "shop": {"replicas": 2},
        "edges": {},
        "webapp": {
            "replicaCount": 2,
            "hpa": {"enabled": True, "cpu": 80, "maxReplicas": 4},
            "ingress": {"enabled": True},  # className "" renders `ingressClassName:` (null)
            "serviceAccount": {"enabled": True},
            "cache": {"enabled": True},
            "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "web", "effect": "NoSchedule"}],
            "extraEnvs": [{"name": "OTEL_SERVICE_NAME", "value": "webapp"}],
            "podDisruptionBudget": {"maxUnavailable": 1},
        },
        "metrics-agent": {"args": ["--kubelet-insecure-tls"]},
        "edge-proxy": {
            "controller": {
                "networkPolicy": {"enabled": True},
                "ingressClassResource": {"name": release},
            },
            "dhParam": "ZGg=",
        },
    }[chart]


# A write that must be denied while the release is locked, per chart: `wait_locked` sends it as
# a server-side dry run until the locker denies it at the release's current revision.
PROBES = {
    "shop": ("configmap/{r}-config", {"data": {"greeting": "probe"}}),
    "edges": ("configmap/{r}-settings", {"data": {"level": "probe"}}),
    "webapp": ("deploy/{r}-webapp", {"metadata": {"labels": {"helm.sh/chart": "probe"}}}),
    "metrics-agent": ("deploy/{r}-metrics-agent", {"metadata": {"labels": {"helm.sh/chart": "probe"}}}),
    "edge-proxy": ("configmap/{r}-edge-proxy-controller", {"metadata": {"labels": {"helm.sh/chart": "probe"}}}),
}


# --- manifests and the chart's fields ------------------------------------------------------

def manifest_objects(manifest, namespace):
    """The objects of a release manifest, read as Helm reads them (YAML 1.1, via Helm's own
    parser), each with its namespace filled in."""
    objects = []
    for doc in re.split(r"(?m)^---\s*$", manifest or ""):
        if not any(line.strip() and not line.lstrip().startswith("#") for line in doc.splitlines()):
            continue
        obj = helm.values_from_yaml(doc)
        if not obj:
            continue
        if obj["kind"] not in CLUSTER_SCOPED:
            obj["metadata"].setdefault("namespace", namespace)
        objects.append(obj)
    return objects


def custom(obj):
    """A custom resource (its group is a domain no built-in API group uses)."""
    return obj["apiVersion"].split("/")[0].endswith("example.com")


def ref(obj):
    meta = obj["metadata"]
    return f"{obj['kind']}/{meta.get('namespace') + '/' if meta.get('namespace') else ''}{meta['name']}"


QUANTITY = re.compile(r"^([+-]?[0-9.]+)([eE][+-]?[0-9]+|Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$")
SUFFIX = {None: 1, "n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000), "k": 10**3,
          "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18, "Ki": 2**10, "Mi": 2**20,
          "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}


def quantity(value):
    m = QUANTITY.match(str(value))
    if not m:
        return None
    number, suffix = Fraction(m.group(1)), m.group(2)
    if suffix and suffix[0] in "eE":
        return number * Fraction(10) ** int(suffix[1:])
    return number * SUFFIX[suffix]


def same_scalar(want, have, path):
    if want == have:
        return True
    if have is None and want in (0, False, ""):
        return True  # a zero value the API server does not store (omitempty)
    if isinstance(want, (int, str)) and isinstance(have, (int, str)) and not isinstance(want, bool) \
            and re.search(r"/(limits|requests|averageValue|hard)(/|$)", path):
        q1, q2 = quantity(want), quantity(have)
        return q1 is not None and q1 == q2
    return False


def merge_key(path, items):
    """How a list of the chart's objects pairs with the live list: by key for the lists the
    API's schema makes maps, by position (and length) for atomic lists."""
    field = path.rsplit("/", 1)[-1]
    if not items or not all(isinstance(i, dict) for i in items):
        return None
    if field in ("containers", "initContainers", "env", "volumes", "imagePullSecrets", "webhooks"):
        return ("name",)
    if field == "ports" and all("containerPort" in i for i in items):
        return ("containerPort", "protocol")
    if field == "ports" and path.endswith("/spec/ports") and all("port" in i for i in items):
        return ("port", "protocol")
    if field == "volumeMounts":
        return ("mountPath",)
    if field == "ownerReferences":
        return ("uid",)
    return None


SET_LISTS = ("/metadata/finalizers", "/spec/tags")


def chart_mismatches(want, have, path=""):
    """Where the live object `have` does not hold the chart's value `want`, as
    "path: chart X, live Y" lines. Fields the chart does not set are not looked at."""
    if want is None:
        if isinstance(have, (str, int, float, bool)):
            return [f"{path}: chart null, live {have!r}"]
        return []
    if isinstance(want, dict):
        if not isinstance(have, dict):
            return [] if not want and have is None else [f"{path}: chart {want!r}, live {have!r}"]
        out = []
        for k, v in want.items():
            out += chart_mismatches(v, have.get(k), f"{path}/{k}")
        return out
    if isinstance(want, list):
        if not isinstance(have, list):
            return [] if not want and have is None else [f"{path}: chart {want!r}, live {have!r}"]
        key = merge_key(path, want)
        if key:
            out = []
            for item in want:
                ident = tuple(item.get(k, "TCP" if k == "protocol" else None) for k in key)
                match = [h for h in have if tuple(h.get(k, "TCP" if k == "protocol" else None) for k in key) == ident]
                if not match:
                    out.append(f"{path}: chart item {dict(zip(key, ident))} is missing")
                else:
                    out += chart_mismatches(item, match[0], f"{path}[{','.join(map(str, ident))}]")
            return out
        if path.endswith(SET_LISTS):
            return [f"{path}: chart item {w!r} is missing" for w in want if w not in have]
        if len(want) != len(have):
            return [f"{path}: chart {want!r}, live {have!r}"]
        out = []
        for i, (w, h) in enumerate(zip(want, have)):
            out += chart_mismatches(w, h, f"{path}/{i}")
        return out
    return [] if same_scalar(want, have, path) else [f"{path}: chart {want!r}, live {have!r}"]


def stored_form(obj, release, namespace):
    """The chart's object as the API server stores what Helm applies: stringData folded into
    data, Helm's own annotations and label added."""
    obj = copy.deepcopy(obj)
    if obj["kind"] == "Secret" and obj.get("stringData"):
        data = obj.setdefault("data", {}) or {}
        obj["data"] = data
        for k, v in obj.pop("stringData").items():
            data[k] = base64.b64encode(str(v).encode()).decode()
    meta = obj["metadata"]
    if not isinstance(meta.get("annotations"), dict):
        meta["annotations"] = {}
    meta["annotations"].update({"meta.helm.sh/release-name": release, "meta.helm.sh/release-namespace": namespace})
    if not isinstance(meta.get("labels"), dict):
        meta["labels"] = {}
    meta["labels"]["app.kubernetes.io/managed-by"] = "Helm"
    return obj


def normalized(obj):
    """An object without what changes under a user's feet (status, resourceVersion,
    managedFields, generation, the deployment controller's revision annotation)."""
    if obj is None:
        return None
    obj = copy.deepcopy(obj)
    obj.pop("status", None)
    meta = obj.get("metadata", {})
    for k in VOLATILE_META:
        meta.pop(k, None)
    for k in VOLATILE_ANNOTATIONS:
        (meta.get("annotations") or {}).pop(k, None)
    return obj


def diff_paths(a, b, path=""):
    if a == b:
        return []
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            out += diff_paths(a.get(k), b.get(k), f"{path}/{k}")
        return out
    return [f"{path}: {json.dumps(a)[:80]} -> {json.dumps(b)[:80]}"]


# --- JSON patches with selectors ------------------------------------------------------------

SELECTOR = re.compile(r"^(.*?)\[([^=\]]*)=([^\]]*)\]$")


def resolve(path, obj):
    """A JSON pointer whose segments may pick a list item by a field, `containers[name=web]`,
    or by value, `finalizers[=x]`, resolved against obj into plain indexes."""
    out, node = [], obj
    for seg in path.split("/")[1:]:
        m = SELECTOR.match(seg)
        if m:
            key, field, value = m.groups()
            value = value.replace("~1", "/").replace("~0", "~")
            if key:
                out.append(key)
                node = node[key.replace("~1", "/").replace("~0", "~")]
            index = next((i for i, item in enumerate(node)
                          if str(item.get(field) if field else item) == value), None)
            if index is None:
                raise LookupError(f"no item [{field}={value}] at {'/'.join(out)}")
            out.append(str(index))
            node = node[index]
        else:
            out.append(seg)
            key = seg.replace("~1", "/").replace("~0", "~")
            if isinstance(node, list):
                node = node[int(key)] if key != "-" else None
            elif isinstance(node, dict):
                node = node.get(key)
    return "/" + "/".join(out)


def json_patch(ops, obj):
    return [{"op": op, "path": resolve(path, obj), **({"value": value} if op != "remove" else {})}
            for op, path, *rest in ops for value in [rest[0] if rest else None]]


def apply_patch(obj, patch):
    """A small RFC 6902 (add/replace/remove), lenient: `add` creates missing parents."""
    obj = copy.deepcopy(obj)
    for p in patch:
        keys = [k.replace("~1", "/").replace("~0", "~") for k in p["path"].split("/")[1:]]
        node = obj
        for k in keys[:-1]:
            if isinstance(node, list):
                node = node[int(k)]
            else:
                node = node.setdefault(k, {}) if p["op"] == "add" else node[k]
        last = keys[-1]
        if isinstance(node, list):
            if p["op"] == "remove":
                del node[int(last)]
            elif p["op"] == "add":
                node.insert(len(node) if last == "-" else int(last), p["value"])
            else:
                node[int(last)] = p["value"]
        elif p["op"] == "remove":
            del node[last]
        else:
            node[last] = p["value"]
    return obj


# --- the API server without kubectl (subresources, impersonation) ---------------------------

class Raw:
    """HTTP to the API server with the kubeconfig's credentials, for what kubectl 1.20 cannot
    send (writes to subresources as an impersonated controller)."""

    def __init__(self, plane):
        out = plane.kubectl("config", "view", "--raw", "--minify", "-o", "json")
        config = json.loads(out.stdout)
        cluster, user = config["clusters"][0]["cluster"], config["users"][0]["user"]
        self.server, self.token = cluster["server"], user.get("token")
        self.ssl = ssl.create_default_context()
        if cluster.get("insecure-skip-tls-verify"):
            self.ssl.check_hostname, self.ssl.verify_mode = False, ssl.CERT_NONE
        elif cluster.get("certificate-authority-data"):
            self.ssl.load_verify_locations(cadata=base64.b64decode(cluster["certificate-authority-data"]).decode())
        elif cluster.get("certificate-authority"):
            self.ssl.load_verify_locations(cluster["certificate-authority"])
        if user.get("client-certificate-data"):
            d = tempfile.mkdtemp(prefix="own-raw-")
            for name in ("client-certificate-data", "client-key-data"):
                with open(os.path.join(d, name), "wb") as f:
                    f.write(base64.b64decode(user[name]))
            self.ssl.load_cert_chain(os.path.join(d, "client-certificate-data"), os.path.join(d, "client-key-data"))
        elif user.get("client-certificate"):
            self.ssl.load_cert_chain(user["client-certificate"], user["client-key"])

    def request(self, method, path, body=None, content_type="application/merge-patch+json", user=None):
        headers = {"Content-Type": content_type, "Accept": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        if user:
            headers["Impersonate-User"] = user
            headers["Impersonate-Group"] = CONTROLLERS
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.server + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, context=self.ssl, timeout=30) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()


# --- writes, as the rows describe them ------------------------------------------------------

class K:
    """kubectl with these arguments (in the target's namespace)."""

    def __init__(self, *args, user=None):
        self.args, self.user = args, user

    def dry(self):
        return any(a.startswith("--dry-run") for a in self.args)

    def describe(self):
        return "kubectl " + " ".join(self.args) + (f" (as {self.user})" if self.user else "")


class JP(K):
    """kubectl patch --type=json, the paths resolved against the live object."""

    def __init__(self, *ops, user=None, dry=False):
        super().__init__(user=user)
        self.ops, self.dry_run = ops, dry

    def dry(self):
        return self.dry_run

    def describe(self):
        return f"kubectl patch --type=json {self.ops}" + (" --dry-run=server" if self.dry_run else "")


class MP(K):
    """kubectl patch with a merge (or strategic) patch."""

    def __init__(self, patch, kind="merge", user=None):
        super().__init__(user=user)
        self.patch, self.kind = patch, kind

    def describe(self):
        return f"kubectl patch --type={self.kind} {json.dumps(self.patch)}" + (f" (as {self.user})" if self.user else "")


class Edit(K):
    """kubectl edit, the editor changing the buffer with these JSON patch operations."""

    def __init__(self, *ops):
        super().__init__()
        self.ops = ops

    def describe(self):
        return f"kubectl edit: {self.ops}"


class Apply(K):
    """kubectl apply of the live object changed by ops (client-side), or of a partial object
    (server-side, field manager kubectl)."""

    def __init__(self, *ops, server_side=False, force=False):
        super().__init__()
        self.ops, self.server_side, self.force = ops, server_side, force

    def describe(self):
        return f"kubectl apply{' --server-side' if self.server_side else ''}{' --force-conflicts' if self.force else ''}: {self.ops}"


class Replace(K):
    def __init__(self, *ops):
        super().__init__()
        self.ops = ops

    def describe(self):
        return f"kubectl replace: {self.ops}"


class Sub(K):
    """A merge patch of a subresource (status, scale) through the API, as a controller."""

    def __init__(self, subresource, patch, user):
        super().__init__(user=user)
        self.subresource, self.patch = subresource, patch

    def describe(self):
        return f"PATCH {self.subresource} {json.dumps(self.patch)} as {self.user}"


class Row:
    """One write and its outcome. `expect` is ALLOW, DENY or `by_schema(...)` (the outcome differs
    between Kubernetes versions with the API server's schema); `served`: the group/version the
    row writes through, the row being left out where the API server does not serve it."""

    def __init__(self, chart, target, desc, expect, write, setup=None, upgrade=True, note=None, served=None):
        self.chart, self.target, self.desc, self.expect, self.write = chart, target, desc, expect, write
        self.setup, self.upgrade, self.note, self.served = setup, upgrade, note, served


def by_schema(definition, field, granular, atomic):
    """The outcome of a write that adds a key to a map the chart sets: `granular` where the API
    server's schema leaves the map granular (1.20: a Service's selector, a pod's nodeSelector),
    `atomic` where it marks it `x-kubernetes-map-type: atomic` (1.28 and later): adding a key
    then changes what Helm owns (docs/design.md, "What Helm owns")."""
    return lambda case: atomic if case.atomic_map(definition, field) else granular


def split_target(target):
    """'kind/name@namespace' -> ('kind/name', namespace or None)."""
    if "@" in target:
        t, ns = target.split("@", 1)
        return t, ns
    return target, None


UNSEEN = ("the API server sends no admission review for webhook configurations; the row checks that "
          "the free field leaves the next upgrade clean (locked fields: test_4, the reverter)")

ROWS = [
    # --- shop: Deployment, ConfigMap, Service, ServiceAccount, ClusterRole, a custom resource
    Row("shop", "deploy/{r}-web", "kubectl scale: replicas 2 -> 5 (the chart sets 2)", DENY,
        K("scale", "deploy/{r}-web", "--replicas=5")),
    Row("shop", "deploy/{r}-web", "kubectl scale to the chart's own 2", ALLOW,
        K("scale", "deploy/{r}-web", "--replicas=2")),
    Row("shop", "deploy/{r}-web", "kubectl set image of the chart's container", DENY,
        K("set", "image", "deploy/{r}-web", "web=nginx:1.27")),
    Row("shop", "deploy/{r}-web", "kubectl set env: a new variable (env is a map keyed by name)", ALLOW,
        K("set", "env", "deploy/{r}-web", "-c", "web", "EXTRA=1")),
    Row("shop", "deploy/{r}-web", "json patch: the chart's GREETING from valueFrom to a literal", DENY,
        JP(("replace", "/spec/template/spec/containers[name=web]/env[name=GREETING]", {"name": "GREETING", "value": "hi"}))),
    Row("shop", "deploy/{r}-web", "kubectl set resources: cpu limit 500m, the chart's \"0.5\"", ALLOW,
        K("set", "resources", "deploy/{r}-web", "-c", "web", "--limits=cpu=500m,memory=1Gi")),
    Row("shop", "deploy/{r}-web", "kubectl set resources: cpu limit 750m", DENY,
        K("set", "resources", "deploy/{r}-web", "-c", "web", "--limits=cpu=750m")),
    Row("shop", "deploy/{r}-web", "strategic patch: a sidecar container (containers: keyed by name)", ALLOW,
        MP({"spec": {"template": {"spec": {"containers": [{"name": "sidecar", "image": "busybox:1.36"}]}}}}, "strategic")),
    Row("shop", "deploy/{r}-web", "json patch: the chart's container port removed", DENY,
        JP(("remove", "/spec/template/spec/containers[name=web]/ports[containerPort=80]"))),
    Row("shop", "deploy/{r}-web", "strategic patch: a second port on the chart's container", ALLOW,
        MP({"spec": {"template": {"spec": {"containers": [{"name": "web", "ports": [{"containerPort": 8080, "protocol": "TCP"}]}]}}}}, "strategic")),
    Row("shop", "configmap/{r}-config", "kubectl label: the chart's app.kubernetes.io/name", DENY,
        K("label", "configmap/{r}-config", "app.kubernetes.io/name=other", "--overwrite")),
    Row("shop", "configmap/{r}-config", "kubectl annotate: a new annotation", ALLOW,
        K("annotate", "configmap/{r}-config", "team=payments")),
    Row("shop", "configmap/{r}-config", "kubectl annotate: Helm's meta.helm.sh/release-name", DENY,
        K("annotate", "configmap/{r}-config", "meta.helm.sh/release-name=other", "--overwrite")),
    Row("shop", "configmap/{r}-config", "kubectl label: Helm's app.kubernetes.io/managed-by removed", DENY,
        K("label", "configmap/{r}-config", "app.kubernetes.io/managed-by-")),
    Row("shop", "configmap/{r}-config", "kubectl edit: the chart's data.greeting", DENY,
        Edit(("replace", "/data/greeting", "edited"))),
    Row("shop", "configmap/{r}-config", "kubectl edit: a new data key", ALLOW,
        Edit(("add", "/data/extra", "x"))),
    Row("shop", "configmap/{r}-config", "kubectl apply (client-side): the chart's data and a new label", ALLOW,
        Apply(("add", "/metadata/labels/team", "shop"))),
    Row("shop", "configmap/{r}-config", "kubectl apply --server-side --force-conflicts: data.greeting changed", DENY,
        Apply(("add", "/data/greeting", "applied"), server_side=True, force=True)),
    Row("shop", "configmap/{r}-config", "kubectl apply --server-side: only a new annotation", ALLOW,
        Apply(("add", "/metadata/annotations/owner", "team-a"), server_side=True)),
    Row("shop", "configmap/{r}-config", "kubectl patch --dry-run=server: the chart's data.mode", DENY,
        K("patch", "configmap/{r}-config", "--dry-run=server", "-p", '{"data":{"mode":"dry"}}')),
    Row("shop", "configmap/{r}-config", "kubectl patch --dry-run=server: a new data key", ALLOW,
        K("patch", "configmap/{r}-config", "--dry-run=server", "-p", '{"data":{"dry":"run"}}')),
    Row("shop", "configmap/{r}-config", "data.mode drifted (an exempt controller); an unrelated write is not blocked", ALLOW,
        K("annotate", "configmap/{r}-config", "reviewed=yes"),
        setup=MP({"data": {"mode": "drifted"}}, user=KCM), upgrade=False,
        note="the next row puts data.mode back before the upgrade"),
    Row("shop", "configmap/{r}-config", "data.mode written back from the drift to the chart's value", ALLOW,
        MP({"data": {"mode": "production"}})),
    Row("shop", "service/{r}-svc", "kubectl replace: the Service with port 8080", DENY,
        Replace(("replace", "/spec/ports/0/port", 8080))),
    Row("shop", "service/{r}-svc", "merge patch: one more selector key (a granular map in 1.20's schema, atomic from 1.28)",
        by_schema("io.k8s.api.core.v1.ServiceSpec", "selector", granular=ALLOW, atomic=DENY),
        MP({"spec": {"selector": {"tier": "web"}}}),
        note="issue 14 calls the selector atomic; 1.20's OpenAPI does not (no x-kubernetes-map-type), 1.28's does"),
    Row("shop", "service/{r}-svc", "kubectl delete", DENY, K("delete", "service/{r}-svc")),
    Row("shop", "deploy/{r}-web", "kubectl delete --dry-run=server", DENY, K("delete", "deploy/{r}-web", "--dry-run=server")),
    Row("shop", "clusterrole/{r}-reader", "json patch: one more verb in rules[0] (rules: atomic)", DENY,
        JP(("add", "/rules/0/verbs/-", "watch"))),
    Row("shop", "clusterrole/{r}-reader", "json patch: one more rule", DENY,
        JP(("add", "/rules/-", {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}))),
    Row("shop", "clusterrole/{r}-reader", "kubectl label: a new label", ALLOW, K("label", "clusterrole/{r}-reader", "audited=true")),
    Row("shop", "widget/{r}-widget", "merge patch: the custom resource's spec.size 3 -> 9", DENY, MP({"spec": {"size": 9}})),
    Row("shop", "widget/{r}-widget", "merge patch: spec.owner, which the chart does not set", ALLOW, MP({"spec": {"owner": "team-a"}})),
    Row("shop", "serviceaccount/{r}-sa", "strategic patch: imagePullSecrets (the chart sets none)", ALLOW,
        MP({"imagePullSecrets": [{"name": "registry"}]}, "strategic")),
    Row("shop", "deploy/{r}-web", "a rollout controller writes status (status subresource)", ALLOW,
        Sub("status", {"status": {"conditions": [{"type": "Progressing", "status": "True", "reason": "RolloutBot"}]}},
            user="system:serviceaccount:own-t-shop:rollout-bot")),
    Row("shop", "configmap/{r}-hook", "a hook's ConfigMap (hooks are never locked)", ALLOW, MP({"data": {"note": "edited"}})),

    # --- webapp: Deployments, HPA, Ingress, Service, PDB, ServiceAccount, ConfigMap
    Row("webapp", "deploy/{r}-webapp", "kubectl scale: replicas, which the chart leaves to the HPA", ALLOW,
        K("scale", "deploy/{r}-webapp", "--replicas=3")),
    Row("webapp", "deploy/{r}-webapp", "the HPA controller scales through the scale subresource", ALLOW,
        Sub("scale", {"spec": {"replicas": 2}}, user="system:serviceaccount:kube-system:horizontal-pod-autoscaler")),
    Row("webapp", "horizontalpodautoscalers.{hpa}.autoscaling/{r}-webapp", "merge patch: maxReplicas 4 -> 8", DENY, MP({"spec": {"maxReplicas": 8}})),
    Row("webapp", "horizontalpodautoscalers.{hpa}.autoscaling/{r}-webapp", "merge patch: behavior, which the chart does not set", ALLOW,
        MP({"spec": {"behavior": {"scaleDown": {"stabilizationWindowSeconds": 60}}}})),
    Row("webapp", "horizontalpodautoscalers.{hpa}.autoscaling/{r}-webapp", "json patch: the CPU target 80 -> 50 (metrics: atomic)", DENY,
        JP(("replace", "/spec/metrics/0/resource/target/averageUtilization", 50))),
    Row("webapp", "horizontalpodautoscalers.v1.autoscaling/{r}-webapp", "merge patch through autoscaling/v1 (kubectl's default on 1.20): targetCPUUtilizationPercentage 80 -> 50", DENY,
        MP({"spec": {"targetCPUUtilizationPercentage": 50}}),
        note="the chart writes autoscaling/v2 (v2beta2 before 1.23) metrics; the review comes in autoscaling/v1"),
    Row("webapp", "horizontalpodautoscalers.v1.autoscaling/{r}-webapp", "merge patch through autoscaling/v1: the annotation autoscaling.alpha.kubernetes.io/metrics (a memory target)", DENY,
        MP({"metadata": {"annotations": {"autoscaling.alpha.kubernetes.io/metrics":
            '[{"type":"Resource","resource":{"name":"memory","targetAverageUtilization":500}}]'}}}),
        note="the API server converts this annotation into the v2 spec.metrics the chart sets"),
    Row("webapp", "ingresses.v1beta1.networking.k8s.io/{r}-webapp", "json patch through networking.k8s.io/v1beta1: the backend's servicePort", DENY,
        JP(("replace", "/spec/rules/0/http/paths/0/backend/servicePort", 8081)), served="networking.k8s.io/v1beta1"),
    Row("webapp", "deploy/{r}-webapp", "json patch: one more toleration (tolerations: atomic)", DENY,
        JP(("add", "/spec/template/spec/tolerations/-", {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}))),
    Row("webapp", "deploy/{r}-webapp", "json patch: the chart's toleration removed", DENY,
        JP(("remove", "/spec/template/spec/tolerations/0"))),
    Row("webapp", "deploy/{r}-webapp", "json patch: one more word in the chart's command (atomic)", DENY,
        JP(("add", "/spec/template/spec/containers[name=webapp]/command/-", "--log-level=debug"))),
    Row("webapp", "deploy/{r}-webapp", "json patch: the chart's emptyDir: {} volume replaced by a hostPath", DENY,
        JP(("replace", "/spec/template/spec/volumes[name=data]", {"name": "data", "hostPath": {"path": "/tmp"}})),
        note="the API server's managedFields do not list emptyDir: {} (1.20 records no leaf for an "
             "empty map), yet the next upgrade fails: 'may not specify more than 1 volume type'"),
    Row("webapp", "deploy/{r}-webapp", "json patch: medium: Memory inside the chart's emptyDir: {}", ALLOW,
        JP(("add", "/spec/template/spec/volumes[name=data]/emptyDir/medium", "Memory"))),
    Row("webapp", "deploy/{r}-webapp", "strategic patch: a new volume and its mount", ALLOW,
        MP({"spec": {"template": {"spec": {"volumes": [{"name": "cache", "emptyDir": {}}],
                                           "containers": [{"name": "webapp", "volumeMounts": [{"name": "cache", "mountPath": "/cache"}]}]}}}}, "strategic")),
    Row("webapp", "deploy/{r}-webapp", "json patch: readinessProbe.periodSeconds 10 -> 30", DENY,
        JP(("replace", "/spec/template/spec/containers[name=webapp]/readinessProbe/periodSeconds", 30))),
    Row("webapp", "deploy/{r}-webapp", "kubectl set resources: a memory limit (the chart sets requests only)", ALLOW,
        K("set", "resources", "deploy/{r}-webapp", "-c", "webapp", "--limits=memory=64Mi")),
    Row("webapp", "deploy/{r}-webapp", "json patch: the pod annotation prometheus.io/scrape -> \"false\"", DENY,
        JP(("replace", "/spec/template/metadata/annotations/prometheus.io~1scrape", "false"))),
    Row("webapp", "deploy/{r}-webapp", "kubectl rollout restart (a new pod template annotation)", ALLOW,
        K("rollout", "restart", "deploy/{r}-webapp")),
    Row("webapp", "deploy/{r}-webapp", "merge patch: maxUnavailable 1 -> \"25%\" (int-or-string)", DENY,
        MP({"spec": {"strategy": {"rollingUpdate": {"maxUnavailable": "25%"}}}})),
    Row("webapp", "ingress/{r}-webapp", "json patch: one more rule (rules: atomic)", DENY,
        JP(("add", "/spec/rules/-", {"host": "evil.example", "http": {"paths": [{"path": "/", "pathType": "Prefix",
            "backend": {"service": {"name": "{r}-webapp", "port": {"number": 8080}}}}]}}))),
    Row("webapp", "ingress/{r}-webapp", "merge patch: ingressClassName, which the chart renders as null", DENY,
        MP({"spec": {"ingressClassName": "edge"}}),
        note="against the rule 'a YAML null owns nothing': Helm 4 applies the null, the API server "
             "gives Helm f:ingressClassName, and after this write the next upgrade fails with "
             "conflict with \"kubectl-patch\": .spec.ingressClassName"),
    Row("webapp", "ingress/{r}-webapp", "kubectl annotate: a new annotation", ALLOW,
        K("annotate", "ingress/{r}-webapp", "edge-proxy.example.com/rewrite-target=/")),
    Row("webapp", "ingress/{r}-webapp", "an ingress controller publishes its address (status)", ALLOW,
        Sub("status", {"status": {"loadBalancer": {"ingress": [{"ip": "10.0.0.99"}]}}},
            user="system:serviceaccount:own-t-px:px-edge-proxy")),
    Row("webapp", "service/{r}-webapp", "merge patch: type ClusterIP -> NodePort", DENY, MP({"spec": {"type": "NodePort"}})),
    Row("webapp", "service/{r}-webapp", "json patch: the chart's port renamed http -> web", DENY,
        JP(("replace", "/spec/ports[port=8080]/name", "web"))),
    Row("webapp", "pdb/{r}-webapp", "merge patch: maxUnavailable 1 -> 2", DENY, MP({"spec": {"maxUnavailable": 2}})),
    Row("webapp", "configmap/{r}-webapp-cache", "kubectl edit: cache.conf", DENY,
        Edit(("replace", "/data/cache.conf", "maxmemory 1gb\n"))),
    Row("webapp", "deploy/{r}-webapp-cache", "kubectl set resources: cpu limit 1, the chart's 1000m", ALLOW,
        K("set", "resources", "deploy/{r}-webapp-cache", "-c", "cache", "--limits=cpu=1,memory=128Mi")),
    Row("webapp", "deploy/{r}-webapp-cache", "json patch: a configMap volume's items path (items: atomic)", DENY,
        JP(("replace", "/spec/template/spec/volumes[name=config]/configMap/items/0/path", "other.conf"))),
    Row("webapp", "serviceaccount/{r}-webapp", "kubectl label: a new label", ALLOW, K("label", "serviceaccount/{r}-webapp", "team=web")),
    Row("webapp", "deploy/{r}-webapp", "kubectl set env: the chart's WEBAPP_UI_COLOR", DENY,
        K("set", "env", "deploy/{r}-webapp", "-c", "webapp", "WEBAPP_UI_COLOR=#000000")),

    # --- metrics-agent: RBAC (cluster-wide and in kube-system), Deployment, Service
    Row("metrics-agent", "clusterrolebinding/system:{r}-metrics-agent", "json patch: one more subject (subjects: atomic; an escalation)", DENY,
        JP(("add", "/subjects/-", {"kind": "User", "name": "mallory", "apiGroup": "rbac.authorization.k8s.io"}))),
    Row("metrics-agent", "clusterrolebindings.v1beta1.rbac.authorization.k8s.io/system:{r}-metrics-agent", "json patch through rbac v1beta1: one more subject", DENY,
        JP(("add", "/subjects/-", {"kind": "Group", "name": "system:authenticated", "apiGroup": "rbac.authorization.k8s.io"})),
        served="rbac.authorization.k8s.io/v1beta1"),
    Row("metrics-agent", "clusterrolebinding/system:{r}-metrics-agent", "json patch: the subject's namespace changed", DENY,
        JP(("replace", "/subjects/0/namespace", "default"))),
    Row("metrics-agent", "clusterrolebinding/{r}-metrics-agent:system:auth-delegator", "kubectl label: a new label", ALLOW,
        K("label", "clusterrolebinding/{r}-metrics-agent:system:auth-delegator", "audited=true")),
    Row("metrics-agent", "clusterrole/system:{r}-metrics-agent-aggregated-reader", "kubectl label: the chart's aggregate-to-view removed", DENY,
        K("label", "clusterrole/system:{r}-metrics-agent-aggregated-reader", "rbac.authorization.k8s.io/aggregate-to-view-")),
    Row("metrics-agent", "clusterrole/system:{r}-metrics-agent", "json patch: one more verb", DENY,
        JP(("add", "/rules/1/verbs/-", "delete"))),
    Row("metrics-agent", "rolebinding/{r}-metrics-agent-auth-reader@kube-system", "json patch: one more subject (in kube-system)", DENY,
        JP(("add", "/subjects/-", {"kind": "ServiceAccount", "name": "default", "namespace": "default"}))),
    Row("metrics-agent", "deploy/{r}-metrics-agent", "json patch: --kubelet-insecure-tls dropped from args (atomic)", DENY,
        JP(("remove", "/spec/template/spec/containers[name=metrics-agent]/args[=--kubelet-insecure-tls]"))),
    Row("metrics-agent", "deploy/{r}-metrics-agent", "json patch: NET_RAW added to capabilities.drop (atomic)", DENY,
        JP(("add", "/spec/template/spec/containers[name=metrics-agent]/securityContext/capabilities/drop/-", "NET_RAW"))),
    Row("metrics-agent", "deploy/{r}-metrics-agent", "json patch: priorityClassName system-cluster-critical -> system-node-critical", DENY,
        JP(("replace", "/spec/template/spec/priorityClassName", "system-node-critical"))),
    Row("metrics-agent", "deploy/{r}-metrics-agent", "json patch: livenessProbe.initialDelaySeconds 0 -> 5 (0 is not stored)", DENY,
        JP(("add", "/spec/template/spec/containers[name=metrics-agent]/livenessProbe/initialDelaySeconds", 5))),
    Row("metrics-agent", "deploy/{r}-metrics-agent", "kubectl apply --server-side --force-conflicts: replicas 3", DENY,
        Apply(("add", "/spec/replicas", 3), server_side=True, force=True)),
    Row("metrics-agent", "service/{r}-metrics-agent", "kubectl annotate: a new annotation", ALLOW,
        K("annotate", "service/{r}-metrics-agent", "team=platform")),
    Row("metrics-agent", "serviceaccount/{r}-metrics-agent", "the token controller adds a token Secret", ALLOW,
        MP({"secrets": [{"name": "{r}-metrics-agent-token-x"}]}, user=KCM)),

    # --- edge-proxy: webhook configuration, NetworkPolicy, Role, Secret, IngressClass, ...
    Row("edge-proxy", "validatingwebhookconfiguration/{r}-edge-proxy-admission", "a CA injector fills in caBundle (not in the chart)", ALLOW,
        JP(("add", "/webhooks/0/clientConfig/caBundle", base64.b64encode(b"-----BEGIN CERTIFICATE-----\n").decode()),
           user="system:serviceaccount:cert-manager:cert-manager-cainjector"), note=UNSEEN),
    Row("edge-proxy", "validatingwebhookconfiguration/{r}-edge-proxy-admission", "json patch: namespaceSelector, which the chart leaves to the API's default", ALLOW,
        JP(("add", "/webhooks/0/namespaceSelector", {"matchExpressions": [{"key": "e2e-skip", "operator": "DoesNotExist"}]})), note=UNSEEN),
    Row("edge-proxy", "networkpolicy/{r}-edge-proxy-controller", "json patch: one more ingress port (ingress: atomic)", DENY,
        JP(("add", "/spec/ingress/0/ports/-", {"protocol": "TCP", "port": 22}))),
    Row("edge-proxy", "networkpolicy/{r}-edge-proxy-controller", "json patch: egress [{}] emptied (the {} item removed)", DENY,
        JP(("replace", "/spec/egress", []))),
    Row("edge-proxy", "networkpolicy/{r}-edge-proxy-controller", "json patch: the peer {podSelector: {}} (this namespace) replaced by {namespaceSelector: {}} (every namespace)", DENY,
        JP(("replace", "/spec/ingress/1/from/0", {"namespaceSelector": {}}))),
    Row("edge-proxy", "networkpolicy/{r}-edge-proxy-controller", "merge patch: a podSelector key (LabelSelector: atomic)", DENY,
        MP({"spec": {"podSelector": {"matchLabels": {"extra": "x"}}}})),
    Row("edge-proxy", "networkpolicy/{r}-edge-proxy-controller", "kubectl label: a new label", ALLOW,
        K("label", "networkpolicy/{r}-edge-proxy-controller", "audited=true")),
    Row("edge-proxy", "role/{r}-edge-proxy", "json patch: update granted on secrets (rules: atomic)", DENY,
        JP(("add", "/rules/1/verbs/-", "update"))),
    Row("edge-proxy", "rolebinding/{r}-edge-proxy", "kubectl annotate: a new annotation", ALLOW,
        K("annotate", "rolebinding/{r}-edge-proxy", "team=edge")),
    Row("edge-proxy", "secret/{r}-edge-proxy-controller", "kubectl edit: data dhparam.pem", DENY,
        Edit(("replace", "/data/dhparam.pem", "b3RoZXI="))),
    Row("edge-proxy", "secret/{r}-edge-proxy-controller", "merge patch: a new data key", ALLOW,
        MP({"data": {"extra.pem": "eA=="}})),
    Row("edge-proxy", "ingressclass/{r}", "kubectl annotate: is-default-class", ALLOW,
        K("annotate", "ingressclass/{r}", "ingressclass.kubernetes.io/is-default-class=true")),
    Row("edge-proxy", "deploy/{r}-edge-proxy-controller", "json patch: the preStop hook's command", DENY,
        JP(("replace", "/spec/template/spec/containers[name=controller]/lifecycle/preStop/exec/command", ["/bin/true"]))),
    Row("edge-proxy", "deploy/{r}-edge-proxy-controller", "json patch: the chart's LD_PRELOAD variable removed", DENY,
        JP(("remove", "/spec/template/spec/containers[name=controller]/env[name=LD_PRELOAD]"))),
    Row("edge-proxy", "deploy/{r}-edge-proxy-controller", "strategic patch: one more nodeSelector key (a granular map in 1.20's schema, atomic from 1.28)",
        by_schema("io.k8s.api.core.v1.PodSpec", "nodeSelector", granular=ALLOW, atomic=DENY),
        MP({"spec": {"template": {"spec": {"nodeSelector": {"node-role/edge": "true"}}}}}, "strategic")),
    Row("edge-proxy", "deploy/{r}-edge-proxy-controller", "strategic patch: nodeSelector kubernetes.io/os linux -> windows", DENY,
        MP({"spec": {"template": {"spec": {"nodeSelector": {"kubernetes.io/os": "windows"}}}}}, "strategic")),
    Row("edge-proxy", "service/{r}-edge-proxy-controller", "a load-balancer controller publishes the address (status)", ALLOW,
        Sub("status", {"status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.10"}]}}},
            user="system:serviceaccount:kube-system:service-controller")),
    Row("edge-proxy", "service/{r}-edge-proxy-controller", "json patch: another nodePort (allocated by the API server; the chart sets none)", ALLOW,
        JP(("replace", "/spec/ports[port=80]/nodePort", 31080))),
    Row("edge-proxy", "configmap/{r}-edge-proxy-controller", "merge patch: a new key", ALLOW, MP({"data": {"use-gzip": "true"}})),
    Row("edge-proxy", "configmap/{r}-edge-proxy-controller", "merge patch: the chart's ssl-dh-param", DENY,
        MP({"data": {"ssl-dh-param": "other/secret"}})),

    # --- edges: stringData, finalizers, a null, octal modes, quantities, Namespace, a mutating
    #     webhook configuration, a custom resource with set/map/atomic lists and an atomic map
    Row("edges", "secret/{r}-creds", "merge patch: data.password, which the chart writes with stringData", DENY,
        MP({"data": {"password": base64.b64encode(b"hacked").decode()}})),
    Row("edges", "secret/{r}-creds", "merge patch: stringData.password with the chart's value", ALLOW,
        MP({"stringData": {"password": "s3cret"}})),
    Row("edges", "secret/{r}-creds", "merge patch: stringData.password changed", DENY, MP({"stringData": {"password": "other"}})),
    Row("edges", "secret/{r}-creds", "merge patch: a new data key", ALLOW, MP({"data": {"api-key": "eA=="}})),
    Row("edges", "secret/{r}-creds", "merge patch: data.token, which the chart writes in data", DENY, MP({"data": {"token": "eA=="}})),
    Row("edges", "configmap/{r}-settings", "kubectl annotate (the chart's annotations: is a YAML null)", ALLOW,
        K("annotate", "configmap/{r}-settings", "team=edges")),
    Row("edges", "configmap/{r}-settings", "json patch: one more finalizer (finalizers: a set)", ALLOW,
        JP(("add", "/metadata/finalizers/-", "example.com/audit"))),
    Row("edges", "configmap/{r}-settings", "json patch: that finalizer removed again", ALLOW,
        JP(("remove", "/metadata/finalizers[=example.com~1audit]"))),
    Row("edges", "configmap/{r}-settings", "json patch: the chart's finalizer removed", DENY,
        JP(("remove", "/metadata/finalizers[=edges.example.com~1keep]"))),
    Row("edges", "deploy/{r}-worker", "json patch: defaultMode 493, the chart's YAML 1.1 0755", ALLOW,
        JP(("replace", "/spec/template/spec/volumes[name=scripts]/configMap/defaultMode", 493))),
    Row("edges", "deploy/{r}-worker", "json patch: defaultMode 420", DENY,
        JP(("replace", "/spec/template/spec/volumes[name=scripts]/configMap/defaultMode", 420))),
    Row("edges", "deploy/{r}-worker", "kubectl set resources: cpu request 500m, the chart's \"0.5\"", ALLOW,
        K("set", "resources", "deploy/{r}-worker", "-c", "worker", "--requests=cpu=500m")),
    Row("edges", "deploy/{r}-worker", "kubectl set resources: memory request 64Mi -> 65Mi", DENY,
        K("set", "resources", "deploy/{r}-worker", "-c", "worker", "--requests=memory=65Mi")),
    Row("edges", "deploy/{r}-worker", "kubectl set resources: cpu limit 1, the chart's 1000m", ALLOW,
        K("set", "resources", "deploy/{r}-worker", "-c", "worker", "--limits=cpu=1")),
    Row("edges", "deploy/{r}-worker", "json patch: one more arg (args: atomic)", DENY,
        JP(("add", "/spec/template/spec/containers[name=worker]/args/-", "--debug"))),
    Row("edges", "namespace/{r}-zone", "kubectl label: a new label on the chart's Namespace", ALLOW,
        K("label", "namespace/{r}-zone", "owner=edges")),
    Row("edges", "namespace/{r}-zone", "kubectl label: the chart's team label changed", DENY,
        K("label", "namespace/{r}-zone", "team=other", "--overwrite")),
    Row("edges", "namespace/{r}-zone", "kubectl delete of the chart's Namespace", DENY, K("delete", "namespace/{r}-zone", "--wait=false")),
    Row("edges", "mutatingwebhookconfiguration/{r}-edges-defaults", "kubectl annotate: a new annotation", ALLOW,
        K("annotate", "mutatingwebhookconfiguration/{r}-edges-defaults", "team=edges"), note=UNSEEN),
    Row("edges", "gadget/{r}-gadget", "json patch: one more tag (x-kubernetes-list-type: set)", ALLOW,
        JP(("add", "/spec/tags/-", "new"))),
    Row("edges", "gadget/{r}-gadget", "json patch: the chart's tag removed", DENY, JP(("remove", "/spec/tags[=fast]"))),
    Row("edges", "gadget/{r}-gadget", "json patch: one more step (a list with no type: atomic)", DENY,
        JP(("add", "/spec/steps/-", "deploy"))),
    Row("edges", "gadget/{r}-gadget", "json patch: one more port (x-kubernetes-list-type: map, key name)", ALLOW,
        JP(("add", "/spec/ports/-", {"name": "metrics", "port": 9090}))),
    Row("edges", "gadget/{r}-gadget", "json patch: the chart's port 80 -> 8080", DENY,
        JP(("replace", "/spec/ports[name=http]/port", 8080))),
    Row("edges", "gadget/{r}-gadget", "merge patch: one more key in limits (x-kubernetes-map-type: atomic)", DENY,
        MP({"spec": {"limits": {"memory": "1Gi"}}})),
    Row("edges", "gadget/{r}-gadget", "merge patch: one more key in labels (a granular map)", ALLOW,
        MP({"spec": {"labels": {"env": "prod"}}})),
    Row("edges", "networkpolicy/{r}-worker", "json patch: the namespaceSelector widened to every namespace", DENY,
        JP(("replace", "/spec/ingress/0/from/0/namespaceSelector", {}))),
    Row("edges", "service/{r}-worker", "json patch: targetPort 8080 -> \"http\" (int-or-string)", DENY,
        JP(("replace", "/spec/ports[name=http]/targetPort", "http"))),
]


# --- the test case ----------------------------------------------------------------------------

class Release:
    """One Helm release of a chart in charts/, as the tests drive it."""

    def __init__(self, case, chart, name, namespace):
        self.case, self.chart, self.name, self.namespace = case, chart, name, namespace
        self.path = os.path.join(CHARTS, chart)
        self.values = chart_values(chart, name)
        self.helm = case.plane.helm(namespace)
        self.revision, self.objects = 0, []

    def fmt(self, text):
        """{r}: the release's name; {ns}: its namespace; {hpa}: the version of autoscaling the
        chart writes its HPA in (v2 where served, from 1.23; else v2beta2)."""
        hpa = "v2" if self.case.plane.serves("autoscaling/v2") else "v2beta2"
        return text.replace("{r}", self.name).replace("{ns}", self.namespace).replace("{hpa}", hpa)

    def _record(self, result):
        self.revision = result["revision"]
        self.objects = manifest_objects(result["manifest"], self.namespace)

    def install(self):
        self._record(self.helm.install(self.path, self.name, self.values, create_namespace=True))
        self.case.releases.append(self)
        return self

    def upgrade(self, values=None):
        """None when the upgrade succeeded, else Helm's error."""
        try:
            self._record(self.helm.upgrade(self.path, self.name, values if values is not None else self.values))
            return None
        except helm.HelmError as e:
            return str(e)

    def rollback(self, version):
        self.helm.rollback(self.name, version=version)
        self._record(self.helm.status(self.name))

    def uninstall(self):
        if self in self.case.releases:
            self.case.releases.remove(self)
        try:
            self.helm.uninstall(self.name)
        except helm.HelmError:
            pass
        # A finalizer the chart sets (edges) keeps its object, and the namespace, alive.
        for obj in self.objects:
            if obj["metadata"].get("finalizers"):
                self.case.k("patch", obj["kind"].lower(), obj["metadata"]["name"], "-n", self.namespace,
                            "--type=merge", "-p", '{"metadata":{"finalizers":null}}')

    def live(self):
        """The live objects of the manifest, in its order (None where one is missing)."""
        path = os.path.join(self.case.plane.dir, f"objects-{self.name}.json")
        with open(path, "w") as f:
            json.dump({"apiVersion": "v1", "kind": "List", "items": self.objects}, f)
        out = self.case.k("get", "-f", path, "-o", "json", "--ignore-not-found", *self.case.show_managed)
        got = json.loads(out.stdout) if out.stdout.strip() else {"items": []}
        items = got["items"] if "items" in got else [got]
        found = {ref(o): o for o in items}
        return [found.get(ref(o)) for o in self.objects]

    def mismatches(self):
        """Every field the chart sets that the live objects do not hold at the chart's value."""
        out = []
        for want, have in zip(self.objects, self.live()):
            if have is None:
                out.append(f"{ref(want)} is missing")
            elif have["metadata"].get("deletionTimestamp"):
                out.append(f"{ref(want)} is being deleted")
            else:
                out += [f"{ref(want)} {m}" for m in chart_mismatches(stored_form(want, self.name, self.namespace), have)]
        return out

    def wait_locked(self, timeout=15):
        """Until the locker denies the chart's probe at this revision: it has indexed the release
        as deployed (its watch lags Helm by a moment)."""
        target, patch = PROBES[self.chart]
        marker = f"revision {self.revision}"

        def denied():
            out = self.case.k("patch", self.fmt(target), "-n", self.namespace, "--dry-run=server",
                              "--type=merge", "-p", json.dumps(patch))
            return DENIED in out.stderr and marker in out.stderr

        self.case.assertTrue(eventually(denied, timeout, 0.1),
                             f"{self.name}: the locker never denied {target} at {marker}")


class Ownership(unittest.TestCase):
    plane = None

    @classmethod
    def setUpClass(cls):
        cls.plane = ControlPlane()
        cls.releases = []
        cls.raw = Raw(cls.plane)
        # kubectl from 1.21 hides managedFields unless asked.
        probe = cls.plane.kubectl("get", "namespace", "default", "-o", "json", "--show-managed-fields")
        cls.show_managed = ("--show-managed-fields",) if probe.returncode == 0 else ()
        for args in (("create", "clusterrolebinding", "e2e-controllers", "--clusterrole=cluster-admin", f"--group={CONTROLLERS}"),
                     ("create", "clusterrolebinding", "e2e-alice", "--clusterrole=cluster-admin", "--user=alice")):
            out = cls.plane.kubectl(*args)
            assert out.returncode == 0, out.stderr
        # Two lockers: `strict` (no reverter, so what the webhook lets through stays for the
        # invariants to see) for every release but the story's, `story` (the reverter on, alice
        # exempt) for the story's namespaces.
        cls.strict = Locker(cls.plane, "own-strict", "--revert=false", "--lease-name", "own-strict",
                            "--exclude-namespace", ",".join(STORY_NAMESPACES)).wait_ready()
        cls.story = Locker(cls.plane, "own-story", "--exempt-user", "alice", "--lease-name", "own-story",
                           "--namespace", ",".join(STORY_NAMESPACES)).wait_ready()
        register_webhook(cls.plane, cls.strict, "own-strict")
        register_webhook(cls.plane, cls.story, "own-story")
        cls.editor = os.path.join(cls.plane.dir, "json-editor.py")
        with open(cls.editor, "w") as f:
            f.write("import copy, json, os, sys\n" + inspect.getsource(apply_patch) +
                    "text = open(sys.argv[-1]).read()\n"
                    "body = '\\n'.join(l for l in text.splitlines() if not l.startswith('#'))\n"
                    "obj = apply_patch(json.loads(body), json.loads(os.environ['E2E_EDIT_PATCH']))\n"
                    "open(sys.argv[-1], 'w').write(json.dumps(obj, indent=2))\n")

    @classmethod
    def tearDownClass(cls):
        for release in list(cls.releases):
            release.uninstall()
        for name in ("own-strict", "own-story"):
            unregister_webhook(cls.plane, name)
        cls.strict.stop()
        cls.story.stop()
        cls.plane.down()

    # -- helpers

    def k(self, *args, input=None, env=None):
        if env:
            return self.plane.run(["kubectl", *args], env=env)
        return self.plane.kubectl(*args, input=input)

    def get(self, release, target):
        target, ns = split_target(release.fmt(target))
        return self.fetch(target, ns or release.namespace)

    def fetch(self, target, namespace):
        out = self.k("get", target, "-n", namespace, "-o", "json")
        return json.loads(out.stdout) if out.returncode == 0 else None

    def install(self, chart, name, namespace):
        release = Release(self, chart, name, namespace).install()
        return release

    def cleanup(self, *releases):
        for release in releases:
            release.uninstall()
        namespaces = sorted({r.namespace for r in releases})
        self.k("delete", "namespace", "--wait=false", "--ignore-not-found", *namespaces)

    def write(self, release, target, how):
        """Runs one write; returns (outcome, detail): allow, deny, or error."""
        try:
            return self._write(release, target, how)
        except LookupError as e:  # a path a previous row should have made (see its outcome)
            return "error", f"the row's precondition does not hold: {e}"

    def _write(self, release, target, how):
        target, ns = split_target(release.fmt(target))
        ns = ns or release.namespace
        asuser = ("--as", release.fmt(how.user), "--as-group", CONTROLLERS) if how.user else ()
        live = self.fetch(target, ns)
        if isinstance(how, Sub):
            path = self.api_path(live) + "/" + how.subresource
            code, body = self.raw.request("PATCH", path, json.loads(release.fmt(json.dumps(how.patch))),
                                          user=release.fmt(how.user))
            if 200 <= code < 300:
                return ALLOW, ""
            return (DENY if DENIED in body else "error"), f"HTTP {code}: {body[:300]}"
        if isinstance(how, JP):
            ops = [(op, path, *([json.loads(release.fmt(json.dumps(v)))] if v is not None else []))
                   for op, path, *rest in how.ops for v in [rest[0] if rest else None]]
            patch = json_patch(ops, live)
            out = self.k("patch", target, "-n", ns, "--type=json", "-p", json.dumps(patch), *asuser,
                         *(("--dry-run=server",) if how.dry_run else ()))
        elif isinstance(how, MP):
            out = self.k("patch", target, "-n", ns, f"--type={how.kind}", "-p", release.fmt(json.dumps(how.patch)), *asuser)
        elif isinstance(how, Edit):
            env = dict(self.plane.env, KUBE_EDITOR=f"{sys.executable} {self.editor}", E2E_EDIT_PATCH=json.dumps(json_patch(how.ops, live)))
            out = self.k("edit", target, "-n", ns, "-o", "json", env=env)
        elif isinstance(how, Apply):
            if how.server_side:
                obj = {"apiVersion": live["apiVersion"], "kind": live["kind"],
                       "metadata": {"name": live["metadata"]["name"], "namespace": ns}}
            else:
                obj = normalized(live)
                for k in ("uid", "creationTimestamp", "selfLink"):
                    obj["metadata"].pop(k, None)
            obj = apply_patch(obj, json_patch(how.ops, obj))
            # A partial object: kubectl's client-side schema check would want a whole one.
            flags = (("--server-side", "--validate=false") if how.server_side else ()) + (("--force-conflicts",) if how.force else ())
            out = self.k("apply", "-f", "-", *flags, input=json.dumps(obj))
        elif isinstance(how, Replace):
            obj = normalized(live)
            obj = apply_patch(obj, json_patch(how.ops, obj))
            out = self.k("replace", "-f", "-", input=json.dumps(obj))
        else:
            out = self.k(*[release.fmt(a) for a in how.args], "-n", ns, *asuser)
        if out.returncode == 0:
            return ALLOW, out.stderr.strip()
        return (DENY if DENIED in out.stderr else "error"), out.stderr.strip()[:400]

    def kube_system_skipped(self):
        labels = (self.fetch("namespace/kube-system", "default") or {}).get("metadata", {}).get("labels") or {}
        return "kubernetes.io/metadata.name" in labels

    def api_path(self, obj):
        group_version = obj["apiVersion"]
        base = f"/api/{group_version}" if "/" not in group_version else f"/apis/{group_version}"
        plural = {"Deployment": "deployments", "Service": "services", "Ingress": "ingresses"}[obj["kind"]]
        ns = obj["metadata"].get("namespace")
        return f"{base}{'/namespaces/' + ns if ns else ''}/{plural}/{obj['metadata']['name']}"

    def atomic_map(self, definition, field):
        """Whether the API server's schema marks `field` of `definition` an atomic map."""
        if not hasattr(self, "_openapi"):
            out = self.k("get", "--raw", "/openapi/v2")
            self.assertEqual(out.returncode, 0, out.stderr)
            type(self)._openapi = json.loads(out.stdout)["definitions"]
        return self._openapi[definition]["properties"][field].get("x-kubernetes-map-type") == "atomic"

    def wait_schema(self, *lockers):
        """Until each locker's schema knows every kind the API server's /openapi/v2 describes:
        a custom resource's schema is published a few seconds after its CRD, and the locker
        re-reads the document every few seconds (until then the kind is deduced)."""
        out = self.k("get", "--raw", "/openapi/v2")
        self.assertEqual(out.returncode, 0, out.stderr)
        kinds = {(g.get("group", ""), g.get("kind", "")) for d in json.loads(out.stdout)["definitions"].values()
                 for g in d.get("x-kubernetes-group-version-kind", [])}
        for locker in lockers:
            known = eventually(lambda: (locker.metric("helm_locker_schema_kinds") or 0) >= len(kinds), 30)
            self.assertTrue(known, f"{locker.name} never read the API server's schema ({len(kinds)} kinds)")

    def scaled_by_hpa(self, release, target):
        """Whether one of the release's HPAs targets `target` (its controller writes replicas)."""
        _, name = target.split("/", 1)
        return any(o["kind"] == "HorizontalPodAutoscaler"
                   and o.get("spec", {}).get("scaleTargetRef", {}).get("name") == release.fmt(name)
                   for o in release.objects)

    def check_invariants(self, release, target, outcome, before, dry):
        """The two invariants after a write; a list of what broke."""
        problems = []
        after = normalized(self.get(release, target))
        if outcome != ALLOW or dry:
            changed = diff_paths(normalized(before), after)
            if self.scaled_by_hpa(release, target):
                # The HPA controller (exempt) scales the Deployment meanwhile.
                changed = [c for c in changed if not c.startswith("/spec/replicas")]
            if changed:
                problems.append(f"{'denied' if outcome == DENY else 'refused' if outcome != ALLOW else 'dry-run'} "
                                f"write changed the object: {changed[:4]}")
            return problems
        error = release.upgrade()
        if error:
            problems.append(f"the next helm upgrade failed: {error[:300]}")
            self.repair(release, target)
            return problems
        release.wait_locked()
        left = release.mismatches()
        if left:
            problems += [f"after the upgrade: {m}" for m in left]
            self.repair(release, target)
        return problems

    def repair(self, release, target):
        """After a failed upgrade (the release is then unlocked): delete the object the write
        reached and upgrade again, so the following rows meet a locked, clean release. The same
        when the upgrade succeeded but left the chart's fields otherwise (e.g. the object is
        being deleted)."""
        t, ns = split_target(release.fmt(target))
        exempt = ("-n", ns or release.namespace, "--as", KCM, "--as-group", CONTROLLERS)
        self.k("patch", t, "--type=merge", "-p", '{"metadata":{"finalizers":null}}', *exempt)
        self.k("delete", t, "--wait=true", "--timeout=60s", "--ignore-not-found", *exempt)
        repaired = eventually(lambda: release.upgrade() is None and not release.mismatches(), 60, 1)
        self.assertTrue(repaired, f"{release.name} could not be repaired: {release.mismatches()}")
        release.wait_locked()

    # -- 1. the API server's own attribution

    def test_1_owned_fields_match_what_the_api_server_gives_helm(self):
        """`helm-locker owned-fields` against every object of every chart right after install:
        what it locks must be exactly Helm's managedFields entry."""
        releases = [self.install(chart, name, f"own-of-{name}") for chart, name in
                    (("shop", "osh"), ("webapp", "owa"), ("metrics-agent", "oma"), ("edge-proxy", "opx"), ("edges", "oed"))]
        try:
            folder = tempfile.mkdtemp(prefix="owned-fields-", dir=self.plane.dir)
            # The API server publishes a new CRD's schema in /openapi/v2 a moment after it is
            # established: wait for every custom kind the charts use.
            kinds = {"Widget", "Gadget"}
            document = eventually(lambda: (lambda text: text if all(f'.{kind}"' in text for kind in kinds) else None)(
                self.k("get", "--raw", "/openapi/v2").stdout), 30, 0.5)
            self.assertTrue(document, "the custom resources' schemas never appeared in /openapi/v2")
            openapi = os.path.join(folder, "openapi-v2.json")
            with open(openapi, "w") as f:
                f.write(document)
            failures = []
            for release in releases:
                objects = os.path.join(folder, f"{release.name}-objects.json")
                live = release.live()
                self.assertNotIn(None, live, f"{release.name}: objects missing after install")
                self.assertTrue(all(o["metadata"].get("managedFields") for o in live),
                                "kubectl printed no managedFields")
                with open(objects, "w") as f:
                    json.dump({"apiVersion": "v1", "kind": "List", "items": live}, f)
                secrets = os.path.join(folder, f"{release.name}-releases.json")
                with open(secrets, "w") as f:
                    f.write(self.k("get", "secret", "-n", release.namespace, "-l", f"owner=helm,name={release.name}", "-o", "json").stdout)
                # Without the API server's OpenAPI, only built-in kinds have a schema to go by.
                builtin = os.path.join(folder, f"{release.name}-builtin-objects.json")
                with open(builtin, "w") as f:
                    json.dump({"apiVersion": "v1", "kind": "List", "items": [o for o in live if not custom(o)]}, f)
                # The embedded schema of the control plane's version (1.20, 1.36...).
                kube_version = ("--kube-version", f"1.{self.plane.minor}")
                for variant, objs, extra in (("embedded schema", builtin, kube_version), ("--openapi", objects, ("--openapi", openapi))):
                    expected = len([o for o in live if variant == "--openapi" or not custom(o)])
                    out = self.plane.run([BIN, "owned-fields", objs, "--releases", secrets, *extra])
                    if out.returncode == 2 and ("unrecognized subcommand" in out.stderr or "unexpected argument" in out.stderr):
                        self.fail(f"this helm-locker has no `owned-fields` subcommand yet: {out.stderr.strip()[:200]}")
                    lines = [json.loads(line) for line in out.stdout.splitlines() if line.strip().startswith("{")]
                    differing = [line for line in lines if line.get("missing") or line.get("extra")]
                    print(f"\n  owned-fields {release.chart} ({variant}): {len(lines)} objects, {len(differing)} differ, exit {out.returncode}")
                    for line in differing:
                        print(f"    {line['object']}: missing {line.get('missing')} extra {line.get('extra')}")
                    if out.returncode != 0 or differing or len(lines) != expected:
                        failures.append(f"{release.chart} ({variant}): exit {out.returncode}, {len(lines)}/{expected} objects "
                                        f"reported, {len(differing)} differ; stderr: {out.stderr.strip()[:300]}")
            self.assertEqual(failures, [], "owned-fields disagrees with the API server; objects and releases in " + folder)
        finally:
            self.cleanup(*releases)

    # -- 2. the table

    def test_2_table_of_writes(self):
        """Every row of ROWS on the real control plane, with both invariants."""
        names = {"shop": "sh", "webapp": "wa", "metrics-agent": "ma", "edge-proxy": "px", "edges": "ed"}
        spaces = {"shop": "own-t-shop", "webapp": "own-t-wa", "metrics-agent": "own-t-ma", "edge-proxy": "own-t-px", "edges": "own-t-ed"}
        started = time.time()
        releases = {chart: self.install(chart, names[chart], spaces[chart]) for chart in names}
        try:
            for release in releases.values():
                release.wait_locked()
                self.assertEqual(release.mismatches(), [], f"{release.name} right after install")
            self.wait_schema(self.strict)
            results = []
            for i, row in enumerate(ROWS, 1):
                release = releases[row.chart]
                label = f"{i:3} {row.chart}: {row.desc}"
                with self.subTest(row=label):
                    if row.served and not self.plane.serves(row.served):
                        self.skipTest(f"the API server no longer serves {row.served}")
                    if "@kube-system" in row.target and self.kube_system_skipped():
                        self.skipTest("the webhook configuration leaves kube-system out, by its kubernetes.io/metadata.name "
                                      "label (set by Kubernetes from 1.21)")
                    if row.setup:
                        outcome, detail = self.write(release, row.target, row.setup)
                        self.assertEqual(outcome, ALLOW, f"setup of the row failed: {detail}")
                    before = self.get(release, row.target)
                    self.assertIsNotNone(before, f"{row.target} does not exist")
                    outcome, detail = self.write(release, row.target, row.write)
                    expect = row.expect(self) if callable(row.expect) else row.expect
                    problems = []
                    if outcome not in (ALLOW, DENY):
                        problems.append(f"the write failed for another reason than the webhook: {detail}")
                    elif outcome != expect:
                        problems.append(f"expected {expect}, got {outcome}" + (f": {detail[:200]}" if outcome == DENY else ""))
                    if row.upgrade or outcome != ALLOW:
                        problems += self.check_invariants(release, row.target, outcome, before, row.write.dry())
                    results.append((label, expect, outcome, problems, row.note))
                    self.assertEqual(problems, [], f"{row.write.describe()}" + (f"\n  note: {row.note}" if row.note else ""))
            print(f"\n  {len(ROWS)} writes in {time.time() - started:.0f}s: "
                  f"{sum(1 for r in results if r[2] == ALLOW)} allowed, {sum(1 for r in results if r[2] == DENY)} denied, "
                  f"{sum(1 for r in results if r[3])} failing")
            for label, expect, outcome, problems, note in results:
                if problems:
                    print(f"  FAIL {label} [expected {expect}, got {outcome}]")
                    for p in problems:
                        print(f"       {p[:300]}")
        finally:
            self.cleanup(*releases.values())

    # -- 3. random JSON patches

    def test_3_random_json_patches(self):
        """Random add/replace/remove at random paths of the charts' objects; denied writes
        change nothing, allowed ones leave the next helm upgrade clean."""
        # CI replays one seed (a red CI must mean a regression, not a new draw); E2E_SEED=random
        # explores (each session runs it several times and fixes what it finds), E2E_SEED=N replays.
        wanted = os.environ.get("E2E_SEED") or "1795367194"
        seed = int(time.time() * 1000) % 2**32 if wanted == "random" else int(wanted)
        count = int(os.environ.get("E2E_RANDOM_PATCHES") or 30)
        print(f"\n  random JSON patches: E2E_SEED={seed} E2E_RANDOM_PATCHES={count}")
        rng = random.Random(seed)
        releases = [self.install(chart, name, f"own-r-{name}") for chart, name in
                    (("shop", "rsh"), ("webapp", "rwa"), ("edges", "red"))]
        try:
            for release in releases:
                release.wait_locked()
            self.wait_schema(self.strict)
            tally, failures = {ALLOW: 0, DENY: 0, "error": 0}, []
            for n in range(count):
                release = rng.choice(releases)
                # Webhook configurations never reach admission (test_4 covers them with the reverter).
                obj = rng.choice([o for o in release.objects if not o["kind"].endswith("WebhookConfiguration")])
                target = f"{obj['kind'].lower()}/{obj['metadata']['name']}"
                live = self.get(release, target)
                op, path, value = random_operation(rng, obj, normalized(live))
                patch = [{"op": op, "path": path, **({"value": value} if op != "remove" else {})}]
                out = self.k("patch", target, "-n", release.namespace, "--type=json", "-p", json.dumps(patch))
                outcome = ALLOW if out.returncode == 0 else DENY if DENIED in out.stderr else "error"
                tally[outcome] += 1
                problems = self.check_invariants(release, target, outcome, live, False)
                line = f"{n:2} {outcome:5} {release.name} {target} {json.dumps(patch)[:160]}"
                print("  " + line + (f"\n       {problems}" if problems else ""))
                if problems:
                    failures.append(f"{line}: {problems}")
            print(f"  random: {tally} (error: the API server refused the patch itself)")
            self.assertEqual(failures, [], f"E2E_SEED={seed}")
        finally:
            self.cleanup(*releases)

    def test_3b_random_restores_and_escaped_co_owners(self):
        """Random restores (an exempt delete, then a create, the chart's content or changed, by a
        user the lock applies to) and server-side applies by field managers whose names Go's
        encoder escapes (`&`, `<`, `>`), of chart fields or of a label of their own, some of them
        on a release whose newest revision failed. A denied create leaves the object missing and the next
        helm upgrade brings it back; after an allowed create or apply the next helm upgrade is
        clean and no other manager co-owns a field Helm's entry owns."""
        wanted = os.environ.get("E2E_SEED") or "2718281828"
        seed = int(time.time() * 1000) % 2**32 if wanted == "random" else int(wanted)
        count = int(os.environ.get("E2E_RANDOM_RESTORES") or 16)
        print(f"\n  random restores and applies: E2E_SEED={seed} E2E_RANDOM_RESTORES={count}")
        rng = random.Random(seed)
        kinds = {"ConfigMap", "Secret", "ServiceAccount", "Service", "Deployment", "ClusterRole", "Role",
                 "RoleBinding"}
        managers = ["ops&sre", "<ops>", "a&b<c>d"]
        exempt = ("--as", KCM, "--as-group", CONTROLLERS)
        releases = [self.install(chart, name, f"own-rr-{name}") for chart, name in
                    (("shop", "qsh"), ("edges", "qed"))]
        try:
            for release in releases:
                release.wait_locked()
            self.wait_schema(self.strict)
            tally, failures = {ALLOW: 0, DENY: 0, "error": 0}, []
            for n in range(count):
                release = rng.choice(releases)
                # An object the chart gives a finalizer would wait for it to go.
                obj = rng.choice([o for o in release.objects
                                  if o["kind"] in kinds and not o["metadata"].get("finalizers")])
                target = f"{obj['kind'].lower()}/{obj['metadata']['name']}"
                t, ns = split_target(release.fmt(target))
                ns = ns or release.namespace
                state = ""
                if release.chart == "shop" and rng.random() < 0.4:
                    # A failed newest revision (the API server refuses a container with no
                    # image): the release stays locked at it, and the next upgrade goes through.
                    error = release.upgrade({**release.values, "image": ""})
                    self.assertTrue(error, "an upgrade with no image succeeded")
                    release.revision += 1
                    release.wait_locked()
                    state = " (newest revision failed)"
                live = self.get(release, target)
                problems = []
                if rng.random() < 0.5:
                    body = backup(live)
                    if rng.random() < 0.5:
                        op, path, value = random_operation(rng, obj, normalized(live))
                        try:
                            body = apply_patch(body, [{"op": op, "path": path, **({"value": value} if op != "remove" else {})}])
                        except (KeyError, IndexError, ValueError, TypeError):
                            pass
                    self.k("delete", t, "-n", ns, "--wait=true", "--timeout=60s", *exempt)
                    out = self.k("create", "-n", ns, "-f", "-", input=json.dumps(body))
                    write = f"restore {json.dumps(body)[:120]}"
                    outcome = ALLOW if out.returncode == 0 else DENY if DENIED in out.stderr else "error"
                    if outcome == ALLOW:
                        problems = self.check_invariants(release, target, outcome, live, False)
                        problems += self.co_owners(t, ns)
                    else:
                        if self.get(release, target) is not None:
                            problems.append("a refused create left an object")
                        error = release.upgrade()
                        if error or self.get(release, target) is None:
                            problems.append(f"helm upgrade did not bring it back: {(error or '')[:200]}")
                            self.repair(release, target)
                        release.wait_locked()
                else:
                    manager = rng.choice(managers)
                    key = rng.choice([k for k in obj if k not in ("apiVersion", "kind", "metadata", "status")]
                                     or ["metadata"])
                    value = copy.deepcopy(live.get(key))
                    if key == "metadata":
                        labels = live["metadata"].get("labels") or {}
                        shape = rng.choice(["all", "own", "own and one of the chart's"])
                        if shape == "all":
                            value = {"labels": copy.deepcopy(labels)}
                        else:
                            # A label of the writer's own (allowed), alone or beside one the
                            # chart sets (a co-owner: denied).
                            value = {"labels": {f"e2e.example/tag-{n}": "x"}}
                            if shape != "own" and labels:
                                chart_label = rng.choice(sorted(labels))
                                value["labels"][chart_label] = labels[chart_label]
                    if rng.random() < 0.5 and not (key == "metadata" and shape == "own"):
                        value = mutate(rng, value)
                    meta = {"name": live["metadata"]["name"], **({"namespace": ns} if obj["kind"] != "ClusterRole" else {})}
                    body = {"apiVersion": live["apiVersion"], "kind": live["kind"],
                            "metadata": {**meta, **(value if key == "metadata" else {})}}
                    if key != "metadata":
                        body[key] = value
                    force = rng.random() < 0.5
                    out = self.k("apply", "--server-side", f"--field-manager={manager}",
                                 *(["--force-conflicts"] if force else []), "-f", "-", input=json.dumps(body))
                    write = f"apply as {manager}{' (force)' if force else ''} {json.dumps(body)[:120]}"
                    outcome = ALLOW if out.returncode == 0 else DENY if DENIED in out.stderr else "error"
                    problems = self.check_invariants(release, target, outcome, live, False)
                    if outcome == ALLOW:
                        problems += self.co_owners(t, ns)
                tally[outcome] += 1
                if outcome == "error":
                    write += f"\n       the API server: {out.stderr.strip()[-200:]}"
                line = f"{n:2} {outcome:5} {release.name}{state} {target} {write}"
                print("  " + line + (f"\n       {problems}" if problems else ""))
                if problems:
                    failures.append(f"{line}: {problems}")
            print(f"  random restores and applies: {tally} (error: the API server refused the write itself)")
            self.assertEqual(failures, [], f"E2E_SEED={seed}")
        finally:
            self.cleanup(*releases)

    def co_owners(self, target, namespace):
        """Fields Helm's Apply entry owns that another manager owns too: each breaks the next
        helm upgrade that changes it."""
        out = self.k("get", target, "-n", namespace, "-o", "json", "--show-managed-fields")
        if out.returncode != 0:
            return []
        entries = json.loads(out.stdout)["metadata"].get("managedFields") or []
        helm_entry = next((e for e in entries if e["operation"] == "Apply" and "f:meta.helm.sh/release-name" in
                           e.get("fieldsV1", {}).get("f:metadata", {}).get("f:annotations", {})), None)
        if helm_entry is None:
            return []
        helms = set(leaf_paths(helm_entry["fieldsV1"]))
        shared = []
        for e in entries:
            if e is helm_entry:
                continue
            both = helms & set(leaf_paths(e.get("fieldsV1", {})))
            if both:
                shared.append(f"{e['manager']} ({e['operation']}) co-owns {sorted(both)[:3]}")
        return shared

    # -- 4. the story on each chart

    def test_4_story_on_each_chart(self):
        """install, upgrade with a changed value, rollback, a denied kubectl edit, drift by an
        exempt user and with the webhook away (reverted; the next upgrade clean), uninstall.
        Writes to webhook configurations never reach an admission webhook (the API server does
        not send them), so for those the reverter is the lock: they land, and are put back."""
        stories = [
            dict(chart="webapp", name="swa", namespace="own-story-wa",
                 changed={"ui": {"color": "#ff0000"}},
                 field=("deploy/{r}-webapp", '{.spec.template.spec.containers[0].env[?(@.name=="WEBAPP_UI_COLOR")].value}', "#3a6ea5", "#ff0000"),
                 edit=("deploy/{r}-webapp", [("replace", "/spec/template/spec/containers[name=webapp]/image", "ghcr.io/evil/webapp:1")]),
                 exempt_drift=("horizontalpodautoscalers.{hpa}.autoscaling/{r}-webapp", {"spec": {"maxReplicas": 9}}),
                 away_drift=("configmap/{r}-webapp-cache", {"data": {"cache.conf": "maxmemory 1gb\n"}})),
            dict(chart="metrics-agent", name="sma", namespace="own-story-ma",
                 changed={"replicas": 2}, field=("deploy/{r}-metrics-agent", "{.spec.replicas}", "1", "2"),
                 edit=("clusterrolebinding/system:{r}-metrics-agent",
                       [("add", "/subjects/-", {"kind": "User", "name": "mallory", "apiGroup": "rbac.authorization.k8s.io"})]),
                 exempt_drift=("deploy/{r}-metrics-agent", {"spec": {"replicas": 5}}),
                 away_drift=("clusterrole/system:{r}-metrics-agent", {"rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]})),
            dict(chart="edge-proxy", name="spx", namespace="own-story-px",
                 changed={"controller": dict(chart_values("edge-proxy", "spx")["controller"], config={"use-gzip": "true"})},
                 field=("configmap/{r}-edge-proxy-controller", "{.data.use-gzip}", "", "true"),
                 edit=("networkpolicy/{r}-edge-proxy-controller", [("replace", "/spec/podSelector", {})]),
                 exempt_drift=("networkpolicy/{r}-edge-proxy-controller", {"spec": {"policyTypes": ["Ingress"]}}),
                 away_drift=("secret/{r}-edge-proxy-controller", {"data": {"dhparam.pem": "b3RoZXI="}}),
                 unseen=[("validatingwebhookconfiguration/{r}-edge-proxy-admission",
                          [("replace", "/webhooks/0/failurePolicy", "Fail")]),
                         ("validatingwebhookconfiguration/{r}-edge-proxy-admission",
                          [("add", "/webhooks/0/rules/0/operations/-", "DELETE")])]),
            dict(chart="edges", name="sed", namespace="own-story-ed",
                 changed={"level": "debug"}, field=("configmap/{r}-settings", "{.data.level}", "info", "debug"),
                 edit=("secret/{r}-creds", [("replace", "/data/password", base64.b64encode(b"edited").decode())]),
                 exempt_drift=("configmap/{r}-settings", {"data": {"level": "trace"}}),
                 away_drift=("gadget/{r}-gadget", {"spec": {"size": 42}}),
                 unseen=[("mutatingwebhookconfiguration/{r}-edges-defaults",
                          [("add", "/webhooks/0/objectSelector/matchLabels/extra", "x")]),
                         ("mutatingwebhookconfiguration/{r}-edges-defaults", [("replace", "/webhooks/0/timeoutSeconds", 10)])]),
        ]
        for story in stories:
            with self.subTest(chart=story["chart"]):
                release = self.install(story["chart"], story["name"], story["namespace"])
                try:
                    self.story_of(release, **story)
                finally:
                    self.cleanup(release)

    def story_of(self, release, changed, field, edit, exempt_drift, away_drift, unseen=(), **_):
        r, ns = release, release.namespace
        probe, jsonpath, first, second = field

        def value():
            return self.k("get", r.fmt(probe), "-n", ns, "-o", f"jsonpath={jsonpath}").stdout

        def reverted(what):
            self.assertTrue(eventually(lambda: release.mismatches() == [], 30),
                            f"{what} was not reverted: {release.mismatches()}")

        release.wait_locked()
        self.assertEqual(value(), first)
        reverts = self.story.metric("helm_locker_reverts_total") or 0
        # upgrade with a changed value, then rollback
        self.assertIsNone(release.upgrade(dict(release.values, **changed)), "helm upgrade was blocked")
        self.assertEqual(value(), second)
        release.wait_locked()
        release.rollback(1)
        self.assertEqual(value(), first)
        release.wait_locked()
        self.assertEqual(release.mismatches(), [])
        # What Helm wrote, nobody reverted: not at install, upgrade or rollback.
        self.assertEqual(self.story.metric("helm_locker_reverts_total") or 0, reverts,
                         "the reverter rewrote what Helm had just written")
        # a kubectl edit of a chart field is denied and changes nothing
        target, ops = edit
        before = normalized(self.get(release, target))
        outcome, detail = self.write(release, target, Edit(*ops))
        self.assertEqual(outcome, DENY, f"kubectl edit of {r.fmt(target)}: {detail}")
        self.assertEqual(diff_paths(before, normalized(self.get(release, target))), [])
        # drift by an exempt user: allowed, then reverted
        target, patch = exempt_drift
        out = self.k("patch", r.fmt(target), "-n", ns, "--as=alice", "--type=merge", "-p", json.dumps(patch))
        self.assertEqual(out.returncode, 0, out.stderr)
        reverted(f"alice's write to {r.fmt(target)}")
        # drift while the webhook is away: reverted too
        target, patch = away_drift
        unregister_webhook(self.plane, "own-story")
        try:
            out = self.k("patch", r.fmt(target), "-n", ns, "--type=merge", "-p", json.dumps(patch))
            self.assertEqual(out.returncode, 0, out.stderr)
        finally:
            register_webhook(self.plane, self.story, "own-story")
        reverted(f"the write to {r.fmt(target)} without the webhook")
        # webhook configurations: no admission review is sent for them; the reverter puts them back
        for target, ops in unseen:
            outcome, detail = self.write(release, target, JP(*ops))
            self.assertEqual(outcome, ALLOW, f"{r.fmt(target)}: {detail}")
            reverted(f"the write {ops} to {r.fmt(target)}")
        # Helm still owns its fields: the next upgrade is clean
        self.assertIsNone(release.upgrade(), "helm upgrade after the reverted drift")
        self.assertEqual(release.mismatches(), [])
        # uninstall removes everything
        release.uninstall()
        gone = eventually(lambda: all(o is None for o in release.live()), 30)
        self.assertTrue(gone, f"left after uninstall: {[ref(o) for o, l in zip(release.objects, release.live()) if l]}")

    # -- 5. a finding

    def test_5_a_server_side_apply_that_changes_nothing_is_denied(self):
        """Server-side apply of the chart's own value by another manager changes no value, but the
        API server then records that manager as a co-owner, and the next `helm upgrade` that
        changes the value fails with a conflict (found by this suite). Such an apply is a locked
        change: denied, the object unchanged, and the upgrade lands."""
        release = self.install("shop", "fsh", "own-f-shop")
        try:
            release.wait_locked()
            target = "configmap/fsh-config"
            before = normalized(self.get(release, target))
            applied = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "fsh-config", "namespace": "own-f-shop"},
                       "data": {"greeting": "hello"}}
            out = self.k("apply", "--server-side", "-f", "-", input=json.dumps(applied))
            self.assertNotEqual(out.returncode, 0, out.stdout)
            self.assertIn(DENIED, out.stderr)
            self.assertIn('server-side apply by field manager "kubectl" claims /data/greeting', out.stderr)
            self.assertEqual(diff_paths(before, normalized(self.get(release, target))), [])
            out = self.k("get", target, "-n", release.namespace, "-o", "json", "--show-managed-fields")
            managers = [m["manager"] for m in json.loads(out.stdout)["metadata"]["managedFields"]]
            self.assertNotIn("kubectl", managers)
            # Its own key is free: no co-ownership of anything Helm owns.
            applied["data"] = {"note": "mine"}
            out = self.k("apply", "--server-side", "-f", "-", input=json.dumps(applied))
            self.assertEqual(out.returncode, 0, out.stderr)
            self.assertIsNone(release.upgrade(dict(release.values, greeting="changed")),
                              "helm upgrade after the denied apply")
        finally:
            self.cleanup(release)


    def apply_through_scale(self, namespace, deployment, replicas, manager):
        """A server-side apply to a Deployment's /scale, as client-go sends it (kubectl has no
        REST mapping for a Scale): the HTTP status and body."""
        def config(path):
            return self.k("config", "view", "--minify", "--raw", "-o", f"jsonpath={path}").stdout
        body = {"apiVersion": "autoscaling/v1", "kind": "Scale",
                "metadata": {"name": deployment, "namespace": namespace}, "spec": {"replicas": replicas}}
        url = (f"{config('{.clusters[0].cluster.server}')}/apis/apps/v1/namespaces/{namespace}"
               f"/deployments/{deployment}/scale?fieldManager={urllib.parse.quote(manager)}")
        request = urllib.request.Request(url, data=json.dumps(body).encode(), method="PATCH", headers={
            "Content-Type": "application/apply-patch+yaml",
            "Authorization": f"Bearer {config('{.users[0].user.token}')}"})
        try:
            with urllib.request.urlopen(request, context=ssl._create_unverified_context(), timeout=30) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def test_5b_a_server_side_apply_through_scale_that_changes_nothing_is_denied(self):
        """From Kubernetes 1.22 the API server keeps managedFields for /scale writes, so a
        server-side apply there of the chart's own replicas makes its manager a co-owner, as in
        test_5, and the next upgrade that changes them fails. Admission cannot tell that apply
        from a merge patch, so a /scale write to the same value that names a field manager is
        denied. (1.20 keeps no managedFields for /scale at all: the harm cannot be shown here,
        the decision can.) `kubectl scale` to the same value names none and stays allowed."""
        release = self.install("shop", "fss", "own-fs-shop")
        try:
            release.wait_locked()
            web, replicas = release.fmt("{r}-web"), release.values["replicas"]
            status, body = self.apply_through_scale(release.namespace, web, replicas, "ops&sre")
            self.assertEqual(status, 403, body)
            message = json.loads(body)["message"]
            self.assertIn(DENIED, message)
            self.assertIn('through /scale names field manager "ops&sre"', message)
            self.assertEqual(self.get(release, f"deployment/{web}")["spec"]["replicas"], replicas)
            out = self.k("scale", "deployment", web, "-n", release.namespace, f"--replicas={replicas}")
            self.assertEqual(out.returncode, 0, out.stderr)
            # The price: a merge patch to the same value (it would change nothing) names one too.
            out = self.k("patch", "deployment", web, "-n", release.namespace, "--subresource=scale",
                         "--type=merge", "-p", json.dumps({"spec": {"replicas": replicas}}))
            self.assertIn('through /scale names field manager "kubectl-patch"', out.stderr)
            self.assertIsNone(release.upgrade(dict(release.values, replicas=replicas + 1)),
                              "helm upgrade after the denied apply")
            self.assertEqual(self.get(release, f"deployment/{web}")["spec"]["replicas"], replicas + 1)
        finally:
            self.cleanup(release)


    # -- 6. which release owns it, and deletes by other means (issue 15, the parts built so far)

    def test_6_a_pending_release_cannot_take_over_and_an_owner_reference_is_a_delete(self):
        """`helm install other --take-ownership` of an object a deployed release holds: the other
        release is pending (which opens its own objects) and applies the object with its own
        release annotations. The helm-python SDK has no --take-ownership, so the test does what
        Helm does: a pending release Secret claiming the object, then Helm's server-side apply
        (field manager `python`) with the new annotations. Denied: the object belongs to the
        release its annotations name. And an owner reference added by kubectl is denied like a
        delete (the garbage collector would delete the object once that owner is gone)."""
        release = self.install("shop", "tk", "own-k-shop")
        try:
            release.wait_locked()
            target = "configmap/tk-config"
            before = normalized(self.get(release, target))
            gone = {"metadata": {"ownerReferences": [
                {"apiVersion": "v1", "kind": "ConfigMap", "name": "gone", "uid": "9e0c2f4a-0000-4000-8000-000000000001"}]}}
            out = self.k("patch", target, "-n", release.namespace, "--type=merge", "-p", json.dumps(gone))
            self.assertIn(DENIED, out.stderr)
            self.assertIn("adds an owner reference the chart does not set", out.stderr)
            self.assertEqual(diff_paths(before, normalized(self.get(release, target))), [])
            # The thief: pending-install, rendering the same ConfigMap.
            live = self.get(release, target)
            claimed = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "tk-config"},
                       "data": dict(live.get("data", {}), greeting="stolen")}
            secret = release_secret("thief", release.namespace, [claimed], status="pending-install")
            # Its author, bob, may write Secrets here but not delete them: he could not uninstall
            # tk, so his release takes nothing over from it (an author who could is a hand-over:
            # test_flux_layout).
            ns = release.namespace
            self.k("-n", ns, "create", "role", "bob-secrets", "--verb=get,create,patch,update", "--resource=secrets")
            self.k("-n", ns, "create", "rolebinding", "bob-secrets", "--role=bob-secrets", "--user=bob")
            self.assertTrue(eventually(lambda: self.k("auth", "can-i", "--as=bob", "-n", ns, "create", "secrets")
                                       .stdout.strip() == "yes", 20))
            indexed = self.strict.metric("helm_locker_releases_indexed")
            out = self.k("--as=bob", "apply", "-f", "-", input=json.dumps(secret))
            self.assertEqual(out.returncode, 0, out.stderr)
            self.assertTrue(eventually(lambda: self.strict.metric("helm_locker_releases_indexed") > indexed, 30),
                            "the pending release was never indexed")
            takeover = dict(claimed, metadata={"name": "tk-config", "namespace": release.namespace,
                                               "labels": {"app.kubernetes.io/managed-by": "Helm"},
                                               "annotations": {"meta.helm.sh/release-name": "thief",
                                                               "meta.helm.sh/release-namespace": release.namespace}})
            out = self.k("apply", "--server-side", "--force-conflicts", "--field-manager=python", "-f", "-",
                         input=json.dumps(takeover))
            self.assertIn(DENIED, out.stderr)
            self.assertIn(f"Helm release {release.namespace}/tk", out.stderr)
            self.assertEqual(diff_paths(before, normalized(self.get(release, target))), [])
            self.k("delete", "secret", "sh.helm.release.v1.thief.v1", "-n", release.namespace)
            self.assertIsNone(release.upgrade(dict(release.values, greeting="changed")),
                              "helm upgrade of the rightful release")
        finally:
            self.cleanup(release)


    def test_7_metadata_written_through_status_is_locked(self):
        """kube-apiserver 1.20 keeps the labels and annotations a Service's (and a Namespace's)
        status write carries, and a Deployment's annotations: a chart's metadata could be changed
        through /status. Such a write is compared on metadata; a free label stays free."""
        release = self.install("shop", "st", "own-s-shop")
        try:
            release.wait_locked()
            target = "service/st-svc"
            before = normalized(self.get(release, target))
            stolen = {"metadata": {"annotations": {"meta.helm.sh/release-name": "other"}}}
            out = self.k("patch", target, "-n", release.namespace, "--subresource=status", "--type=merge",
                         "-p", json.dumps(stolen))
            self.assertIn(DENIED, out.stderr)
            self.assertIn("/metadata/annotations/meta.helm.sh~1release-name", out.stderr)
            self.assertEqual(diff_paths(before, normalized(self.get(release, target))), [])
            free = {"metadata": {"labels": {"team": "payments"}}}
            out = self.k("patch", target, "-n", release.namespace, "--subresource=status", "--type=merge",
                         "-p", json.dumps(free))
            self.assertEqual(out.returncode, 0, out.stderr)
            # The API server kept it: the write through status is real, and it was free.
            self.assertEqual(self.get(release, target)["metadata"]["labels"].get("team"), "payments")
            # A server-side apply through status of Helm's own label, value unchanged: a
            # co-owner, as through the object itself (test_5).
            same = {"apiVersion": "v1", "kind": "Service",
                    "metadata": {"name": "st-svc", "namespace": release.namespace,
                                 "labels": {"app.kubernetes.io/managed-by": "Helm"}}}
            out = self.k("apply", "--server-side", "--subresource=status", "--field-manager=ops", "-f", "-",
                         input=json.dumps(same))
            self.assertIn('server-side apply by field manager "ops" claims /metadata/labels/app.kubernetes.io~1managed-by',
                          out.stderr)
            self.assertIsNone(release.upgrade(dict(release.values, greeting="changed")),
                              "helm upgrade after the status write")
        finally:
            self.cleanup(release)


def random_operation(rng, chart_obj, live):
    """One random JSON patch operation on live: half of the time at a field the chart sets."""
    skip = re.compile(r"^/(apiVersion|kind|status)|^/metadata/(name|namespace|uid|creationTimestamp|selfLink)"
                      r"|^/spec/selector|^/spec/clusterIPs?$|^/spec/clusterIPs/|^/roleRef|^/type$")
    chart_paths, live_paths = [], []

    def walk(node, path, into):
        if path and not skip.search(path):
            into.append(path)
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, f"{path}/{k.replace('~', '~0').replace('/', '~1')}", into)
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, f"{path}/{i}", into)

    walk(chart_obj, "", chart_paths)
    walk(live, "", live_paths)
    chart_paths = [p for p in chart_paths if p in set(live_paths)]
    path = rng.choice(chart_paths if chart_paths and rng.random() < 0.5 else live_paths)
    value = live
    for key in path.split("/")[1:]:
        key = key.replace("~1", "/").replace("~0", "~")
        value = value[int(key)] if isinstance(value, list) else value[key]
    roll = rng.random()
    if roll < 0.3:
        return "remove", path, None
    if roll < 0.6 and isinstance(value, (dict, list)):
        if isinstance(value, list):
            item = copy.deepcopy(rng.choice(value)) if value else "e2e"
            return "add", path + "/-", mutate(rng, item)
        return "add", f"{path}/e2e-{rng.randrange(1000)}", "e2e"
    return "replace", path, mutate(rng, copy.deepcopy(value))


def backup(live):
    """What a backup tool restores of a live object: no identity, version, status or managedFields,
    and no allocated cluster IP."""
    obj = copy.deepcopy(live)
    for key in ("uid", "resourceVersion", "creationTimestamp", "managedFields", "selfLink", "generation"):
        obj["metadata"].pop(key, None)
    obj.pop("status", None)
    if obj["kind"] == "Service":
        for key in ("clusterIP", "clusterIPs"):
            obj.get("spec", {}).pop(key, None)
    return obj


def leaf_paths(fields, path=""):
    """The leaves of a fieldsV1 set (`f:data.f:greeting`); `.` marks a node owned as such."""
    if not fields:
        yield path
        return
    for key, below in fields.items():
        if key == ".":
            continue
        yield from leaf_paths(below, f"{path}.{key}" if path else key)


def mutate(rng, value):
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + rng.choice([1, 2, 100])
    if isinstance(value, str):
        return value + rng.choice(["-x", "1", ""]) if value else "e2e"
    if isinstance(value, list):
        return [mutate(rng, v) for v in value] if value and rng.random() < 0.5 else value + (copy.deepcopy(value[:1]) or ["e2e"])
    if isinstance(value, dict):
        if value and rng.random() < 0.7:
            k = rng.choice(list(value))
            value[k] = mutate(rng, value[k])
        else:
            value[f"e2e-{rng.randrange(1000)}"] = "e2e"
        return value
    return "e2e"


if __name__ == "__main__":
    unittest.main(verbosity=2)
