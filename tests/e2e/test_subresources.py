"""What a write through each built-in subresource does to the parent object, measured on a real
kube-apiserver 1.20 (docs/subresources.md is the summary of these tests).

Each status-like test writes through the subresource an object that changes, at once, the
parent's metadata (a label, an annotation, a finalizer, an owner reference), a spec field and
(where nothing else would show the write took effect) a status field. Then it reads the parent
back and asserts exactly which of them persisted. A small HTTPS validating webhook records the
admission requests about the test's objects, so each test also asserts what a validating webhook
such as helm-locker is sent: operation, kind, resource, subResource, and whether object and oldObject are set. For
status-like writes it also asserts that the object matches what is then stored: the
subresource's strategy has already reset what it drops, so the spec never differs from
oldObject.

No helm-locker here. Run through scripts/e2e.sh, or alone:
  .venv-e2e/bin/python -m unittest discover -s tests/e2e -p test_subresources.py -v
"""

import base64
import json
import os
import ssl
import subprocess
import threading
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from harness import WEBHOOK_HOST, ControlPlane, eventually

NS = "e2e-sub"
PREFIX = "e2e-sub"
GROUP = "e2e-sub.example.com"  # the test CRDs' group
API_GROUP = "e2e-sub-api.example.com"  # the test APIService's group (served by no one)
PROBE = "example.com/probe"
META = ("labels", "annotations", "finalizers", "ownerReferences")
ALL = frozenset(META)
# Pods never get scheduled, even on an existing cluster.
POD_SPEC = {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.2"}],
            "nodeSelector": {"e2e-sub/never": "true"}}
CONDITION = {"type": "Probe", "status": "True", "reason": "Probe", "message": "probe",
             "lastTransitionTime": "2020-01-01T00:00:00Z"}


def template(app):
    return {"metadata": {"labels": {"app": app}}, "spec": POD_SPEC}


def workload(app, replicas=None, **spec):
    out = {"selector": {"matchLabels": {"app": app}}, "template": template(app), **spec}
    if replicas is not None:
        out["replicas"] = replicas
    return out


class Recorder:
    """A validating webhook that allows everything and keeps every AdmissionReview request."""

    def __init__(self, directory):
        key, cert = os.path.join(directory, "recorder.key"), os.path.join(directory, "recorder.crt")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                        "-keyout", key, "-out", cert, "-subj", f"/CN={WEBHOOK_HOST}",
                        "-addext", f"subjectAltName=IP:{WEBHOOK_HOST}",
                        "-addext", "basicConstraints=critical,CA:TRUE"],
                       check=True, capture_output=True)
        with open(cert, "rb") as f:
            self.ca = base64.b64encode(f.read()).decode()
        self.requests, self.lock = [], threading.Lock()
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["request"]
                with recorder.lock:
                    recorder.requests.append(request)
                body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                                   "response": {"uid": request["uid"], "allowed": True}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1" if WEBHOOK_HOST == "127.0.0.1" else "0.0.0.0", 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def find(self, name, operation=None, sub=None):
        """Requests about `name` (sub: the subResource, "" for none, None for any)."""
        with self.lock:
            return [r for r in self.requests if r.get("name") == name
                    and (operation is None or r["operation"] == operation)
                    and (sub is None or (r.get("subResource") or "") == sub)]

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def pointer(obj, path):
    for key in path:
        obj = obj.get(key) if isinstance(obj, dict) else None
    return obj


def put_at(obj, path, value):
    for key in path[:-1]:
        obj = obj.setdefault(key, {})
    obj[path[-1]] = value


def has_condition(obj):
    return any(c.get("type") == "Probe" for c in pointer(obj, ["status", "conditions"]) or [])


# Status-like subresources: (group/version, plural, kind, namespaced, sub, spec (without
# apiVersion/kind/metadata), the spec field the write changes and its new value, the status
# edit (None, "condition", or (path, value)) and the metadata it was measured to keep).
STATUS_CASES = [
    ("v1", "services", "Service", True, "status",
     {"spec": {"ports": [{"port": 80}], "selector": {"app": "svc"}}},
     ["spec", "sessionAffinity"], "ClientIP", (["status", "loadBalancer"], {"ingress": [{"ip": "192.0.2.1"}]}), ALL),
    ("v1", "namespaces", "Namespace", False, "status", {},
     ["spec", "finalizers"], ["kubernetes", PROBE], "condition", ALL),
    ("v1", "pods", "Pod", True, "status", {"spec": POD_SPEC},
     ["spec", "activeDeadlineSeconds"], 30, "condition", ALL - {"ownerReferences"}),
    ("v1", "replicationcontrollers", "ReplicationController", True, "status",
     {"spec": {"replicas": 0, "selector": {"app": "rc"}, "template": template("rc")}},
     ["spec", "minReadySeconds"], 7, None, ALL),
    ("v1", "persistentvolumeclaims", "PersistentVolumeClaim", True, "status",
     {"spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "e2e-sub-none",
               "resources": {"requests": {"storage": "1Gi"}}}},
     ["spec", "resources", "requests", "storage"], "2Gi", None, ALL),
    ("v1", "persistentvolumes", "PersistentVolume", False, "status",
     {"spec": {"accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"},
               "storageClassName": "e2e-sub-none", "hostPath": {"path": "/e2e-sub"}}},
     ["spec", "capacity", "storage"], "2Gi", None, ALL),
    ("v1", "resourcequotas", "ResourceQuota", True, "status", {"spec": {"hard": {"configmaps": "1000"}}},
     ["spec", "hard", "configmaps"], "1001", None, ALL),
    ("apps/v1", "deployments", "Deployment", True, "status", {"spec": workload("deploy", 0)},
     ["spec", "minReadySeconds"], 7, None, ALL - {"labels"}),
    ("apps/v1", "replicasets", "ReplicaSet", True, "status", {"spec": workload("rs", 0)},
     ["spec", "minReadySeconds"], 7, None, ALL),
    ("apps/v1", "statefulsets", "StatefulSet", True, "status", {"spec": workload("sts", 0, serviceName="svc")},
     ["spec", "minReadySeconds"], 7, None, ALL),
    ("apps/v1", "daemonsets", "DaemonSet", True, "status", {"spec": workload("ds")},
     ["spec", "minReadySeconds"], 7, None, ALL),
    ("batch/v1", "jobs", "Job", True, "status",
     {"spec": {"parallelism": 0, "template": {"spec": {**POD_SPEC, "restartPolicy": "Never"}}}},
     ["spec", "parallelism"], 1, None, ALL),
    ("batch/v1beta1", "cronjobs", "CronJob", True, "status",
     {"spec": {"schedule": "0 0 1 1 *", "suspend": True,
               "jobTemplate": {"spec": {"template": {"spec": {**POD_SPEC, "restartPolicy": "Never"}}}}}},
     ["spec", "schedule"], "0 0 2 1 *", None, ALL),
    ("autoscaling/v2beta2", "horizontalpodautoscalers", "HorizontalPodAutoscaler", True, "status",
     {"spec": {"minReplicas": 1, "maxReplicas": 3,
               "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "absent"}}},
     ["spec", "maxReplicas"], 4, None, ALL),
    ("networking.k8s.io/v1", "ingresses", "Ingress", True, "status",
     {"spec": {"defaultBackend": {"service": {"name": "svc", "port": {"number": 80}}}}},
     ["spec", "ingressClassName"], "probe", (["status", "loadBalancer"], {"ingress": [{"ip": "192.0.2.1"}]}), ALL),
    ("policy/v1beta1", "poddisruptionbudgets", "PodDisruptionBudget", True, "status",
     {"spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "pdb"}}}},
     ["spec", "minAvailable"], 2, None, ALL),
    ("certificates.k8s.io/v1", "certificatesigningrequests", "CertificateSigningRequest", False, "approval",
     "csr", ["spec", "usages"], ["digital signature"], "approved", ALL),
    ("certificates.k8s.io/v1", "certificatesigningrequests", "CertificateSigningRequest", False, "status",
     "csr", ["spec", "usages"], ["digital signature"], "condition", ALL),
    ("apiregistration.k8s.io/v1", "apiservices", "APIService", False, "status",
     {"spec": {"group": API_GROUP, "version": "v9", "groupPriorityMinimum": 100, "versionPriority": 10}},
     ["spec", "versionPriority"], 11, "condition", frozenset()),
    ("flowcontrol.apiserver.k8s.io/v1beta1", "flowschemas", "FlowSchema", False, "status",
     {"spec": {"matchingPrecedence": 9000, "priorityLevelConfiguration": {"name": "global-default"}}},
     ["spec", "matchingPrecedence"], 9001, "condition", frozenset()),
    ("flowcontrol.apiserver.k8s.io/v1beta1", "prioritylevelconfigurations", "PriorityLevelConfiguration", False, "status",
     {"spec": {"type": "Limited", "limited": {"assuredConcurrencyShares": 1, "limitResponse": {"type": "Reject"}}}},
     ["spec", "limited", "assuredConcurrencyShares"], 2, "condition", frozenset()),
    ("storage.k8s.io/v1", "volumeattachments", "VolumeAttachment", False, "status",
     {"spec": {"attacher": "e2e-sub.example.com", "nodeName": "e2e-sub-none",
               "source": {"persistentVolumeName": "e2e-sub-none"}}},
     ["spec", "nodeName"], "e2e-sub-other", (["status", "attached"], True), frozenset()),
    ("apiextensions.k8s.io/v1", "customresourcedefinitions", "CustomResourceDefinition", False, "status",
     "crd", ["spec", "names", "categories"], ["probe"], "condition", frozenset({"finalizers"})),
    (f"{GROUP}/v1", "widgets", "Widget", True, "status", {"spec": {"size": 1, "color": "red"}},
     ["spec", "color"], "blue", (["status", "size"], 5), frozenset()),
]


class Subresources(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.plane = ControlPlane()
        cls.created, cls.recorder = [], None
        try:
            cls.recorder = Recorder(cls.plane.dir)
            cls.create({"apiVersion": "v1", "kind": "Namespace",
                        "metadata": {"name": NS, "labels": {"e2e-sub/record": "yes"}}})
            # The owner of every owner reference the tests write: cluster-scoped, so valid for
            # namespaced and cluster-scoped dependents alike (the garbage collector keeps them).
            owner = cls.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                                "metadata": {"name": f"{PREFIX}-owner"}})
            cls.owner = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                         "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"]}
            cls.create({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
                        "metadata": {"name": f"{PREFIX}-recorder"},
                        "webhooks": [{"name": "record.e2e-sub.example.com", "admissionReviewVersions": ["v1"],
                                      "sideEffects": "None", "failurePolicy": "Ignore", "timeoutSeconds": 5,
                                      "clientConfig": {"url": f"https://{WEBHOOK_HOST}:{cls.recorder.port}/",
                                                       "caBundle": cls.recorder.ca},
                                      "namespaceSelector": {"matchLabels": {"e2e-sub/record": "yes"}},
                                      "rules": [{"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["*"],
                                                 "resources": ["*/*"], "scope": "*"}]}]})
            cls.create({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                        "metadata": {"name": f"widgets.{GROUP}"}, "spec": cls.crd_spec()})
            ok = eventually(lambda: cls.get(f"/apis/{GROUP}/v1/namespaces/{NS}/widgets") is not None, 30)
            assert ok, "the CRD's resource is not served"
            # The webhook is in place once it records a write (failurePolicy Ignore hides a miss).
            ok = eventually(lambda: cls.kubectl("annotate", "ns", NS, "--overwrite", "e2e-sub/ping=1").returncode == 0
                            and cls.recorder.find(NS, "UPDATE"), 30, interval=0.5)
            assert ok, "the recording webhook is not called"
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        try:
            if not cls.plane.owned:
                cls.clean_up()
        finally:
            if cls.recorder:
                cls.recorder.stop()
            cls.plane.down()

    @classmethod
    def clean_up(cls):
        """On an existing cluster: the probe's finalizers off, then every object created deleted."""
        for path in reversed(cls.created):
            obj = cls.get(path)
            if obj is None:
                continue
            if obj["metadata"].get("finalizers"):
                obj["metadata"]["finalizers"] = []
                cls.write("replace", path, obj)
            if obj["kind"] == "Namespace" and PROBE in (pointer(obj, ["spec", "finalizers"]) or []):
                obj = cls.get(path)
                obj["spec"]["finalizers"] = [f for f in obj["spec"]["finalizers"] if f != PROBE]
                cls.write("replace", f"{path}/finalize", obj)
            cls.kubectl("delete", "--raw", f"{path}?gracePeriodSeconds=0")  # bound pods: no kubelet

    # --- API access through kubectl ---------------------------------------------------------

    @classmethod
    def kubectl(cls, *args, input=None):
        return cls.plane.kubectl(*args, input=input)

    @classmethod
    def get(cls, path):
        out = cls.kubectl("get", "--raw", path)
        return json.loads(out.stdout) if out.returncode == 0 else None

    @classmethod
    def write(cls, verb, path, body):
        """`replace` (PUT) or `create` (POST) `body` at `path`."""
        return cls.kubectl(verb, "--raw", path, "-f", "-", input=json.dumps(body))

    @staticmethod
    def path(obj, plural=None):
        group_version = obj["apiVersion"]
        base = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
        plural = plural or obj["kind"].lower() + "s"
        ns = obj["metadata"].get("namespace")
        return f"{base}{'/namespaces/' + ns if ns else ''}/{plural}/{obj['metadata']['name']}"

    @classmethod
    def create(cls, obj, plural=None):
        out = cls.kubectl("create", "-f", "-", "-o", "json", input=json.dumps(obj))
        assert out.returncode == 0, out.stderr
        cls.created.append(cls.path(obj, plural))
        return json.loads(out.stdout)

    def edit(self, get_path, put_path, change, verb="replace"):
        """Reads get_path, applies change, writes the result to put_path; again on a conflict
        (controllers write these objects too)."""
        for _ in range(10):
            body = self.get(get_path)
            change(body)
            out = self.write(verb, put_path, body)
            if "Conflict" not in out.stderr:
                break
        self.assertEqual(out.returncode, 0, out.stderr)
        return out

    def probe_metadata(self, obj):
        meta = obj["metadata"]
        meta.setdefault("labels", {})["e2e-sub/probe"] = "yes"
        meta.setdefault("annotations", {})["e2e-sub/probe"] = "yes"
        meta["finalizers"] = (meta.get("finalizers") or []) + [PROBE]
        meta["ownerReferences"] = [self.owner]

    def kept_metadata(self, obj):
        """Which of the probe's metadata changes obj shows."""
        meta = obj["metadata"]
        shown = {"labels": (meta.get("labels") or {}).get("e2e-sub/probe") == "yes",
                 "annotations": (meta.get("annotations") or {}).get("e2e-sub/probe") == "yes",
                 "finalizers": PROBE in (meta.get("finalizers") or []),
                 "ownerReferences": any(r.get("uid") == self.owner["uid"] for r in meta.get("ownerReferences") or [])}
        return frozenset(k for k, v in shown.items() if v)

    @classmethod
    def crd_spec(cls):
        return {"group": GROUP, "scope": "Namespaced",
                "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                "versions": [{"name": "v1", "served": True, "storage": True,
                              "schema": {"openAPIV3Schema": {"type": "object",
                                                             "x-kubernetes-preserve-unknown-fields": True}},
                              "subresources": {"status": {},
                                               "scale": {"specReplicasPath": ".spec.size",
                                                         "statusReplicasPath": ".status.size"}}}]}

    def csr_spec(self):
        key, request = os.path.join(self.plane.dir, "csr.key"), os.path.join(self.plane.dir, "csr.pem")
        subprocess.run(["openssl", "req", "-new", "-newkey", "rsa:2048", "-nodes", "-keyout", key,
                        "-subj", "/CN=e2e-sub", "-out", request], check=True, capture_output=True)
        with open(request, "rb") as f:
            pem = base64.b64encode(f.read()).decode()
        # A signer no controller serves: nothing but the test writes the CSR.
        return {"spec": {"request": pem, "signerName": "e2e-sub.example.com/none", "usages": ["client auth"]}}

    # --- status-like subresources -----------------------------------------------------------

    def check_status(self, group_version, plural, kind, namespaced, sub, body, spec_path, spec_value,
                     status_edit, kept):
        name = f"{PREFIX}-{plural}-{sub}" if plural != "apiservices" else f"v9.{API_GROUP}"
        if body == "csr":
            body = self.csr_spec()
        elif body == "crd":
            name, body = f"gadgets.{GROUP}", {"spec": {**self.crd_spec(), "names": {
                "plural": "gadgets", "singular": "gadget", "kind": "Gadget"}}}
        meta = {"name": name, "namespace": NS} if namespaced else {"name": name}
        if kind == "Namespace":
            meta["labels"] = {"e2e-sub/record": "yes"}
        obj = self.create({"apiVersion": group_version, "kind": kind, "metadata": meta, **body}, plural)
        path = self.path(obj, plural)
        before = self.get(path)
        self.assertNotEqual(pointer(before, spec_path), spec_value)

        def change(b):
            self.probe_metadata(b)
            put_at(b, spec_path, spec_value)
            if status_edit == "condition":
                b.setdefault("status", {}).setdefault("conditions", []).append(CONDITION)
            elif status_edit == "approved":
                b.setdefault("status", {})["conditions"] = [
                    {"type": "Approved", "status": "True", "reason": "Probe", "message": "probe"}]
            elif status_edit:
                put_at(b, *status_edit)

        self.edit(f"{path}/{sub}", f"{path}/{sub}", change)
        after = self.get(path)
        self.assertEqual(self.kept_metadata(after), kept, f"{plural}/{sub}: the metadata kept")
        self.assertEqual(pointer(after, spec_path), pointer(before, spec_path), f"{plural}/{sub}: spec changed")
        if status_edit == "condition":
            self.assertTrue(has_condition(after), f"{plural}/{sub}: status not written")
        elif status_edit == "approved":
            self.assertEqual([c["type"] for c in after["status"]["conditions"]], ["Approved"])
        elif status_edit:
            self.assertEqual(pointer(after, status_edit[0]), status_edit[1])

        # What a validating webhook is sent: the object after the subresource's strategy.
        reviews = self.recorder.find(name, "UPDATE", sub)
        self.assertTrue(reviews, f"{plural}/{sub}: no admission request recorded")
        review = reviews[-1]
        self.assertEqual(review["kind"], {"group": group_version.rpartition("/")[0],
                                          "version": group_version.rpartition("/")[2], "kind": kind})
        self.assertEqual(review["resource"]["resource"], plural)
        self.assertIsNotNone(review.get("oldObject"))
        self.assertEqual(self.kept_metadata(review["object"]), kept)
        self.assertEqual(review["object"].get("spec"), review["oldObject"].get("spec"))

    # --- scale ----------------------------------------------------------------------------------

    def check_scale(self, obj, plural, replicas_path):
        obj = self.create(obj, plural)
        path, name = self.path(obj, plural), obj["metadata"]["name"]
        before = self.get(path)
        scale = self.get(f"{path}/scale")
        self.assertEqual((scale["apiVersion"], scale["kind"]), ("autoscaling/v1", "Scale"))
        self.assertEqual(scale["spec"]["replicas"], pointer(before, replicas_path))

        def change(s):
            s["metadata"].setdefault("labels", {})["e2e-sub/probe"] = "yes"
            s["metadata"].setdefault("annotations", {})["e2e-sub/probe"] = "yes"
            s["spec"]["replicas"] = 4

        self.edit(f"{path}/scale", f"{path}/scale", change)
        after = self.get(path)
        self.assertEqual(pointer(after, replicas_path), 4)
        self.assertEqual(self.kept_metadata(after), frozenset(), "a Scale's metadata reached the parent")
        review = self.recorder.find(name, "UPDATE", "scale")[-1]
        self.assertEqual(review["kind"], {"group": "autoscaling", "version": "v1", "kind": "Scale"})
        self.assertEqual(review["resource"]["resource"], plural)
        self.assertEqual((review["oldObject"]["spec"]["replicas"], review["object"]["spec"]["replicas"]),
                         (pointer(before, replicas_path), 4))
        return before, after

    def test_deployments_scale(self):
        self.check_scale({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "scale-deploy", "namespace": NS},
                          "spec": workload("scale-deploy", 1)}, "deployments", ["spec", "replicas"])

    def test_replicasets_scale(self):
        self.check_scale({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "scale-rs", "namespace": NS},
                          "spec": workload("scale-rs", 1)}, "replicasets", ["spec", "replicas"])

    def test_statefulsets_scale(self):
        self.check_scale({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "scale-sts", "namespace": NS},
                          "spec": workload("scale-sts", 1, serviceName="svc")}, "statefulsets", ["spec", "replicas"])

    def test_replicationcontrollers_scale(self):
        self.check_scale({"apiVersion": "v1", "kind": "ReplicationController", "metadata": {"name": "scale-rc", "namespace": NS},
                          "spec": {"replicas": 1, "selector": {"app": "scale-rc"}, "template": template("scale-rc")}},
                         "replicationcontrollers", ["spec", "replicas"])

    def test_custom_resource_scale_writes_its_spec_replicas_path(self):
        before, after = self.check_scale(
            {"apiVersion": f"{GROUP}/v1", "kind": "Widget", "metadata": {"name": "scale-widget", "namespace": NS},
             "spec": {"size": 1, "replicas": 9}}, "widgets", ["spec", "size"])
        self.assertEqual(after["spec"]["replicas"], 9, ".spec.replicas is not the scale path here")

    # --- namespaces/finalize --------------------------------------------------------------------

    def test_namespaces_finalize_keeps_metadata_and_spec(self):
        name = f"{PREFIX}-finalize"
        self.create({"apiVersion": "v1", "kind": "Namespace",
                     "metadata": {"name": name, "labels": {"e2e-sub/record": "yes"}}})
        path = f"/api/v1/namespaces/{name}"
        self.assertIsNone(self.get(f"{path}/finalize"), "finalize serves GET")

        def change(b):
            self.probe_metadata(b)
            b["spec"]["finalizers"] = ["kubernetes", PROBE]
            b["status"]["phase"] = "Terminating"

        self.edit(path, f"{path}/finalize", change)
        after = self.get(path)
        self.assertEqual(self.kept_metadata(after), ALL)
        self.assertEqual(after["spec"]["finalizers"], ["kubernetes", PROBE])
        self.assertEqual(after["status"]["phase"], "Active", "finalize wrote status")
        review = self.recorder.find(name, "UPDATE", "finalize")[-1]
        self.assertEqual(review["kind"], {"group": "", "version": "v1", "kind": "Namespace"})
        self.assertEqual(self.kept_metadata(review["object"]), ALL)
        self.assertEqual(review["object"]["spec"]["finalizers"], ["kubernetes", PROBE])
        self.assertEqual(review["oldObject"]["spec"]["finalizers"], ["kubernetes"])
        # ... and it removes the API server's own finalizer from a live namespace.
        self.edit(path, f"{path}/finalize", lambda b: b["spec"].update(finalizers=[]))
        self.assertEqual(self.get(path)["spec"], {})
        self.assertIsNone(self.get(path)["metadata"].get("deletionTimestamp"))

    # --- pods/binding, bindings -----------------------------------------------------------------

    def check_binding(self, name, path):
        self.create({"apiVersion": "v1", "kind": "Pod", "spec": POD_SPEC, "metadata": {
            "name": name, "namespace": NS, "labels": {"app": "bound"},
            "annotations": {"e2e-sub/chart": "chart", "e2e-sub/kept": "chart"}}})
        binding = {"apiVersion": "v1", "kind": "Binding",
                   "metadata": {"name": name, "labels": {"e2e-sub/probe": "yes"},
                                "annotations": {"e2e-sub/chart": "binding", "e2e-sub/probe": "yes"}},
                   "target": {"apiVersion": "v1", "kind": "Node", "name": "e2e-sub-node"}}
        out = self.write("create", path, binding)
        self.assertEqual(out.returncode, 0, out.stderr)
        pod = self.get(f"/api/v1/namespaces/{NS}/pods/{name}")
        self.assertEqual(pod["spec"]["nodeName"], "e2e-sub-node")
        annotations = {"e2e-sub/chart": "binding", "e2e-sub/kept": "chart", "e2e-sub/probe": "yes"}
        self.assertEqual(pod["metadata"]["annotations"], annotations, "the Binding's annotations, merged over the pod's")
        self.assertEqual(pod["metadata"]["labels"], {"app": "bound"}, "the Binding's labels are dropped")
        self.assertEqual(self.recorder.find(name, "UPDATE"), [], "the pod's update reached webhooks")
        # A bound pod cannot be bound again: its annotations stay.
        binding["metadata"]["annotations"] = {"e2e-sub/chart": "again"}
        out = self.write("create", path, binding)
        self.assertIn("Conflict", out.stderr)
        self.assertEqual(self.get(f"/api/v1/namespaces/{NS}/pods/{name}")["metadata"]["annotations"], annotations)
        reviews = [r for r in self.recorder.find(name, "CREATE") if r["kind"]["kind"] == "Binding"]
        self.assertTrue(reviews, "no Binding review recorded")
        review = reviews[0]
        self.assertEqual(review["kind"], {"group": "", "version": "v1", "kind": "Binding"})
        self.assertIsNone(review.get("oldObject"))
        self.assertEqual(review["object"]["metadata"]["annotations"], {"e2e-sub/chart": "binding", "e2e-sub/probe": "yes"})
        return review

    def test_pods_binding_sets_node_name_and_annotations(self):
        review = self.check_binding("bind-sub", f"/api/v1/namespaces/{NS}/pods/bind-sub/binding")
        self.assertEqual((review["resource"]["resource"], review["subResource"]), ("pods", "binding"))

    def test_bindings_resource_sets_node_name_and_annotations(self):
        review = self.check_binding("bind-res", f"/api/v1/namespaces/{NS}/bindings")
        self.assertEqual((review["resource"]["resource"], review.get("subResource")), ("bindings", None))

    # --- pods/eviction --------------------------------------------------------------------------

    def evict(self, name, query=""):
        return self.write("create", f"/api/v1/namespaces/{NS}/pods/{name}/eviction{query}",
                          {"apiVersion": "policy/v1beta1", "kind": "Eviction",
                           "metadata": {"name": name, "namespace": NS}})

    def pod(self, name, app):
        return self.create({"apiVersion": "v1", "kind": "Pod", "spec": POD_SPEC,
                            "metadata": {"name": name, "namespace": NS, "labels": {"app": app}}})

    def test_pods_eviction_deletes_the_pod_without_a_delete_review(self):
        # Control: a plain delete of a pod reaches webhooks as DELETE.
        self.pod("evict-control", "evict")
        self.assertEqual(self.kubectl("delete", "pod", "-n", NS, "evict-control", "--wait=false").returncode, 0)
        self.assertTrue(self.recorder.find("evict-control", "DELETE", ""))

        self.pod("evict-dry", "evict")
        out = self.evict("evict-dry", "?dryRun=All")
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIsNotNone(self.get(f"/api/v1/namespaces/{NS}/pods/evict-dry"), "a dry-run eviction deleted")

        self.pod("evict-me", "evict")
        out = self.evict("evict-me")
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIsNone(self.get(f"/api/v1/namespaces/{NS}/pods/evict-me"), "the pod is still there")
        self.assertEqual(self.recorder.find("evict-me", "DELETE"), [], "the eviction's delete reached webhooks")
        self.assertEqual(self.recorder.find("evict-me", "UPDATE"), [])
        [review] = self.recorder.find("evict-me", sub="eviction")
        self.assertEqual(review["operation"], "CREATE")
        self.assertEqual(review["kind"], {"group": "policy", "version": "v1beta1", "kind": "Eviction"})
        self.assertEqual(review["resource"], {"group": "", "version": "v1", "resource": "pods"})
        self.assertEqual((review["namespace"], review["object"]["kind"]), (NS, "Eviction"))
        self.assertIsNone(review.get("oldObject"))

    def test_pods_eviction_respects_a_pdb_only_for_running_pods(self):
        self.create({"apiVersion": "policy/v1beta1", "kind": "PodDisruptionBudget",
                     "metadata": {"name": "guard", "namespace": NS},
                     "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}}})
        self.pod("guarded-running", "guarded")
        path = f"/api/v1/namespaces/{NS}/pods/guarded-running"
        self.edit(f"{path}/status", f"{path}/status", lambda b: b.update(
            status={"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}))
        pdb = f"/apis/policy/v1beta1/namespaces/{NS}/poddisruptionbudgets/guard"
        self.assertTrue(eventually(lambda: (self.get(pdb).get("status") or {}).get("currentHealthy") == 1, 60))
        out = self.evict("guarded-running")
        self.assertIn("TooManyRequests", out.stderr)
        self.assertIsNotNone(self.get(path))
        self.pod("guarded-pending", "guarded")
        out = self.evict("guarded-pending")
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIsNone(self.get(f"/api/v1/namespaces/{NS}/pods/guarded-pending"), "a pending pod is evicted anyway")

    # --- serviceaccounts/token, pods/ephemeralcontainers, discovery ------------------------------

    def test_serviceaccounts_token_writes_nothing(self):
        self.create({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "token", "namespace": NS}})
        path = f"/api/v1/namespaces/{NS}/serviceaccounts/token"
        # The controller manager's tokens controller first adds a token Secret to the account.
        sa = eventually(lambda: (lambda s: s if s.get("secrets") else None)(self.get(path)), 30) or self.get(path)
        updates = len(self.recorder.find("token", "UPDATE"))
        out = self.write("create", f"/api/v1/namespaces/{NS}/serviceaccounts/token/token",
                         {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                          "metadata": {"labels": {"e2e-sub/probe": "yes"}}, "spec": {"audiences": ["e2e"]}})
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertTrue(json.loads(out.stdout)["status"]["token"])
        self.assertEqual(self.get(path)["metadata"]["resourceVersion"], sa["metadata"]["resourceVersion"])
        self.assertEqual(len(self.recorder.find("token", "UPDATE")), updates)
        [review] = self.recorder.find("token", sub="token")
        self.assertEqual((review["operation"], review["kind"]["kind"], review["resource"]["resource"]),
                         ("CREATE", "TokenRequest", "serviceaccounts"))
        self.assertIsNone(review.get("oldObject"))

    def test_pods_ephemeralcontainers_is_not_served(self):
        self.pod("ephemeral", "ephemeral")
        out = self.kubectl("get", "--raw", f"/api/v1/namespaces/{NS}/pods/ephemeral/ephemeralcontainers")
        self.assertIn("NotFound", out.stderr)

    def test_discovery_lists_exactly_the_subresources_measured_here(self):
        served = set()
        paths = ["/api/v1"] + [f"/apis/{v['groupVersion']}" for g in self.get("/apis")["groups"]
                               if not g["name"].endswith(".example.com") for v in g["versions"]]
        for path in paths:
            for resource in self.get(path)["resources"]:
                if "/" in resource["name"]:
                    served.add(f"{path.split('/', 2)[-1]} {resource['name']} {','.join(sorted(resource['verbs']))}")
        self.assertEqual(served, DISCOVERY)


DISCOVERY = {
    # Writes measured above (nodes/status: see docs/subresources.md).
    "v1 namespaces/finalize update", "v1 namespaces/status get,patch,update", "v1 nodes/status get,patch,update",
    "v1 persistentvolumeclaims/status get,patch,update", "v1 persistentvolumes/status get,patch,update",
    "v1 pods/binding create", "v1 pods/eviction create", "v1 pods/status get,patch,update",
    "v1 replicationcontrollers/scale get,patch,update", "v1 replicationcontrollers/status get,patch,update",
    "v1 resourcequotas/status get,patch,update", "v1 serviceaccounts/token create", "v1 services/status get,patch,update",
    "apiregistration.k8s.io/v1 apiservices/status get,patch,update",
    "apiregistration.k8s.io/v1beta1 apiservices/status get,patch,update",
    "apps/v1 daemonsets/status get,patch,update", "apps/v1 deployments/scale get,patch,update",
    "apps/v1 deployments/status get,patch,update", "apps/v1 replicasets/scale get,patch,update",
    "apps/v1 replicasets/status get,patch,update", "apps/v1 statefulsets/scale get,patch,update",
    "apps/v1 statefulsets/status get,patch,update",
    "autoscaling/v1 horizontalpodautoscalers/status get,patch,update",
    "autoscaling/v2beta1 horizontalpodautoscalers/status get,patch,update",
    "autoscaling/v2beta2 horizontalpodautoscalers/status get,patch,update",
    "batch/v1 jobs/status get,patch,update", "batch/v1beta1 cronjobs/status get,patch,update",
    "certificates.k8s.io/v1 certificatesigningrequests/approval get,patch,update",
    "certificates.k8s.io/v1 certificatesigningrequests/status get,patch,update",
    "certificates.k8s.io/v1beta1 certificatesigningrequests/approval get,patch,update",
    "certificates.k8s.io/v1beta1 certificatesigningrequests/status get,patch,update",
    "networking.k8s.io/v1 ingresses/status get,patch,update",
    "networking.k8s.io/v1beta1 ingresses/status get,patch,update",
    "extensions/v1beta1 ingresses/status get,patch,update",
    "policy/v1beta1 poddisruptionbudgets/status get,patch,update",
    "storage.k8s.io/v1 volumeattachments/status get,patch,update",
    "apiextensions.k8s.io/v1 customresourcedefinitions/status get,patch,update",
    "apiextensions.k8s.io/v1beta1 customresourcedefinitions/status get,patch,update",
    "flowcontrol.apiserver.k8s.io/v1beta1 flowschemas/status get,patch,update",
    "flowcontrol.apiserver.k8s.io/v1beta1 prioritylevelconfigurations/status get,patch,update",
    # CONNECT (no object is written) and reads.
    "v1 nodes/proxy create,delete,get,patch,update", "v1 pods/attach create,get", "v1 pods/exec create,get",
    "v1 pods/log get", "v1 pods/portforward create,get", "v1 pods/proxy create,delete,get,patch,update",
    "v1 services/proxy create,delete,get,patch,update",
}


def _status_test(case):
    def test(self):
        self.check_status(*case)
    return test


for _case in STATUS_CASES:
    setattr(Subresources, f"test_{_case[1]}_{_case[4]}", _status_test(_case))


if __name__ == "__main__":
    unittest.main()
