"""Zero is absent only where the API server omits it (issue 67, attack 3; docs/security.md), on
a real control plane with the locker run under the chart's own ServiceAccount and RBAC
(chart_rbac.py).

A pointer field of a built-in kind (`allowPrivilegeEscalation *bool`, `hostUsers *bool`,
`automountServiceAccountToken *bool`) keeps its zero when stored, and its absence means the
default, which is the less safe one; a plain field (`hostNetwork bool`, `omitempty`) is stored
as nothing at its zero. The locker knows which is which from the Go types
(core/src/schema/pointer-fields.txt, made by scripts/pointer_fields.py):

  1. The table is what the API server does: a server-side dry-run create of a Deployment and a
     ServiceAccount with every boolean field of the pod spec, container, security contexts and
     the ServiceAccount at `false` keeps exactly the fields the table names (and leaves out the
     others, `hostNetwork` among them).
  2. A chart locks `allowPrivilegeEscalation: false`, `hostUsers: false` and
     `automountServiceAccountToken: false` (pod template and ServiceAccount). During an outage
     (the locker down, so no webhook and no reverter) alice (`edit` in the namespace) removes
     the four and changes the chart's ConfigMap. `kubectl locker diff` reports all five; when
     the locker is back, the reverter puts back the ConfigMap (the control: what worked before)
     and the four `false`s (the defence: before, "No drift" and nothing put back). The admin's
     `helm upgrade` then succeeds.

Runs on the newest Kubernetes only (the fields' pointer-ness does not change between versions;
`hostUsers` is from 1.25). From tests/e2e:
  KUBEBUILDER_ASSETS=/root/.cache/kube-testenv/unpacked/v1.36.2 \\
  HELM_LOCKER_BIN=<target>/debug/helm-locker .venv-e2e/bin/python -m unittest -v test_trust_pointers
"""

import json
import os
import time
import unittest

from chart_rbac import bind, chart_rbac_env, locked, unlock
from harness import BIN, ROOT, PlaneTest, ControlPlane, eventually, register_webhook, write_files

NS = "ptr"
RELEASE = "web"
OPS = "ops"
TABLE = os.path.join(ROOT, "core", "src", "schema", "pointer-fields.txt")

CHART = {
    "Chart.yaml": "apiVersion: v2\nname: web\nversion: 0.1.0\n",
    "templates/settings.yaml": """apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-settings
data:
  colour: {{ .Values.colour | default "blue" | quote }}
""",
    "templates/account.yaml": """apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ .Release.Name }}
automountServiceAccountToken: false
""",
    "templates/deployment.yaml": """apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}
spec:
  replicas: 1
  selector:
    matchLabels: {app: {{ .Release.Name }}}
  template:
    metadata:
      labels: {app: {{ .Release.Name }}}
    spec:
      serviceAccountName: {{ .Release.Name }}
      automountServiceAccountToken: false
      hostUsers: false
      hostNetwork: false
      containers:
      - name: app
        image: {{ .Values.image | default "registry.example/app:1" }}
        securityContext:
          allowPrivilegeEscalation: false
""",
}

# The JSON patches alice makes during the outage: the chart's four `false`s removed.
REMOVED = {
    "deployment": [
        {"op": "remove", "path": "/spec/template/spec/automountServiceAccountToken"},
        {"op": "remove", "path": "/spec/template/spec/hostUsers"},
        {"op": "remove", "path": "/spec/template/spec/containers/0/securityContext/allowPrivilegeEscalation"},
    ],
    "serviceaccount": [{"op": "remove", "path": "/automountServiceAccountToken"}],
}

# The Go types whose boolean fields test 1 writes at false, and where they sit in the objects.
POD_TYPES = {
    "io.k8s.api.core.v1.PodSpec": "/spec/template/spec",
    "io.k8s.api.core.v1.PodSecurityContext": "/spec/template/spec/securityContext",
    "io.k8s.api.core.v1.Container": "/spec/template/spec/containers/0",
    "io.k8s.api.core.v1.SecurityContext": "/spec/template/spec/containers/0/securityContext",
}
ACCOUNT = "io.k8s.api.core.v1.ServiceAccount"


def pointer_table():
    with open(TABLE) as f:
        return {line.split()[0]: set(line.split()[1:]) for line in f if line.strip()}


def at(obj, pointer):
    for part in pointer.strip("/").split("/"):
        obj = obj[int(part)] if isinstance(obj, list) else obj.setdefault(part, {})
    return obj


class TrustPointers(PlaneTest):
    @classmethod
    def setUpClass(cls):
        cls.plane = ControlPlane()
        try:
            k = cls.plane.kubectl
            assert k("create", "namespace", NS).returncode == 0
            bind(cls.plane, OPS, "cluster-admin", name="ops-admin")
            bind(cls.plane, "alice", "edit", NS)
            cls.chart = write_files("ptr-chart-", CHART)
            assert eventually(lambda: cls.can_i_as("alice", "patch", "deployments", "-n", NS) == "yes", 20)
            env = chart_rbac_env(cls.plane)
            cls.locker = locked(cls.plane, env, "pointers", "--exempt-user", OPS)
        except BaseException:
            cls.plane.down()
            raise

    @classmethod
    def tearDownClass(cls):
        unlock(cls.plane, cls.locker, "pointers")
        cls.plane.down()

    def log(self):
        return self.locker.log_text()[-4000:]

    def definitions(self):
        out = self.ok(self.k("get", "--raw", "/openapi/v2"))
        return json.loads(out.stdout)["definitions"]

    def test_1_the_api_server_keeps_a_zero_exactly_where_the_table_says(self):
        table, definitions = pointer_table(), self.definitions()
        booleans = {name: sorted(f for f, s in definitions[name]["properties"].items() if s.get("type") == "boolean")
                    for name in [*POD_TYPES, ACCOUNT]}
        deployment = {"apiVersion": "apps/v1", "kind": "Deployment",
                      "metadata": {"name": "probe", "namespace": NS},
                      "spec": {"selector": {"matchLabels": {"app": "probe"}},
                               "template": {"metadata": {"labels": {"app": "probe"}},
                                            "spec": {"containers": [{"name": "app", "image": "app:1"}]}}}}
        for name, pointer in POD_TYPES.items():
            at(deployment, pointer).update({f: False for f in booleans[name]})
        account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "probe", "namespace": NS},
                   **{f: False for f in booleans[ACCOUNT]}}
        stored = {}
        for obj in (deployment, account):
            out = self.ok(self.k("create", "--dry-run=server", "-o", "json", "-f", "-", input=json.dumps(obj)))
            stored[obj["kind"]] = json.loads(out.stdout)
        checked = 0
        for name in [*POD_TYPES, ACCOUNT]:
            if name == ACCOUNT:
                kept = stored["ServiceAccount"]
            else:
                kept = at(stored["Deployment"], POD_TYPES[name])
            for field in booleans[name]:
                pointer = field in table.get(name, set())
                self.assertEqual(kept.get(field) is False, pointer,
                                 f"{name}.{field}: table says pointer={pointer}, stored {kept.get(field)!r}")
                checked += 1
        # The sample the issue names, as stored.
        spec = stored["Deployment"]["spec"]["template"]["spec"]
        self.assertIs(spec["containers"][0]["securityContext"]["allowPrivilegeEscalation"], False)
        self.assertIs(spec["hostUsers"], False)
        self.assertIs(spec["automountServiceAccountToken"], False)
        self.assertNotIn("hostNetwork", spec)
        self.assertIs(stored["ServiceAccount"]["automountServiceAccountToken"], False)
        self.assertGreater(checked, 10)
        print(f"\n  {checked} boolean fields of {len(booleans)} types: kept at false exactly where the table says")

    def diff(self):
        return self.plane.run([BIN, "kubectl", "diff", "-n", NS])

    def test_2_a_locked_false_removed_in_an_outage_is_put_back(self):
        helm = self.plane.helm(NS)
        helm.install(self.chart, RELEASE, {})
        self.assertTrue(eventually(lambda: self.diff().returncode == 0, 30), self.diff().stdout + self.log())
        deployment = self.get("-n", NS, "deployment", RELEASE)
        self.assertIs(deployment["spec"]["template"]["spec"]["hostUsers"], False)
        # Admission: alice may not remove a locked false.
        denied = self.k("--as=alice", "-n", NS, "patch", "deployment", RELEASE, "--type=json",
                        "-p", json.dumps(REMOVED["deployment"]))
        self.assertNotEqual(denied.returncode, 0, denied.stdout)

        # The outage: no locker, so no webhook and no reverter. alice changes the ConfigMap and
        # removes the four falses.
        unlock(self.plane, self.locker, "pointers")
        self.ok(self.k("--as=alice", "-n", NS, "patch", "configmap", f"{RELEASE}-settings", "--type=merge",
                       "-p", json.dumps({"data": {"colour": "red"}})))
        for kind, patch in REMOVED.items():
            self.ok(self.k("--as=alice", "-n", NS, "patch", kind, RELEASE, "--type=json", "-p", json.dumps(patch)))
        spec = self.get("-n", NS, "deployment", RELEASE)["spec"]["template"]["spec"]
        self.assertNotIn("hostUsers", spec)
        self.assertNotIn("automountServiceAccountToken", spec)
        self.assertNotIn("automountServiceAccountToken", self.get("-n", NS, "serviceaccount", RELEASE))

        # kubectl locker diff names each of them (before: only the ConfigMap, the rest "in sync").
        out = self.diff()
        self.assertEqual(out.returncode, 1, out.stdout + out.stderr)
        for path in ("/data/colour", "/spec/template/spec/automountServiceAccountToken",
                     "/spec/template/spec/hostUsers",
                     "/spec/template/spec/containers/0/securityContext/allowPrivilegeEscalation",
                     "/automountServiceAccountToken"):
            self.assertIn(path, out.stdout)

        # The locker is back: the reverter puts back the ConfigMap (the control) and the four.
        started = time.time()
        self.locker.start()
        self.locker.wait_ready()
        register_webhook(self.plane, self.locker, "pointers")

        def restored():
            spec = self.get("-n", NS, "deployment", RELEASE)["spec"]["template"]["spec"]
            return (self.get("-n", NS, "configmap", f"{RELEASE}-settings")["data"]["colour"] == "blue"
                    and spec.get("hostUsers") is False
                    and spec.get("automountServiceAccountToken") is False
                    and spec["containers"][0].get("securityContext", {}).get("allowPrivilegeEscalation") is False
                    and self.get("-n", NS, "serviceaccount", RELEASE).get("automountServiceAccountToken") is False)
        self.assertTrue(eventually(restored, 60, 0.5), self.diff().stdout + self.log())
        print(f"\n  put back {time.time() - started:.1f}s after the locker started")
        out = self.diff()
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)

        # The admin's helm upgrade succeeds.
        helm.upgrade(self.chart, RELEASE, {"colour": "green"})
        self.assertTrue(eventually(
            lambda: self.get("-n", NS, "configmap", f"{RELEASE}-settings")["data"]["colour"] == "green", 10))
        out = self.diff()
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr + self.log())


if __name__ == "__main__":
    unittest.main()
