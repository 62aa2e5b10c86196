"""Issue 60, attacks 4 and 5, on a real control plane, with the locker run as the chart runs it
(its ServiceAccount and the chart's rendered RBAC: tests/e2e/chart_rbac.py).

4. A claim from another namespace never becomes the owner. The admin installs the ops-agent chart
   as `team/ops`. alice writes release Secrets in her own namespace `a-tenant` (it sorts before
   `team`) whose manifest names team/ops's objects: its ConfigMap (which she may patch) with her
   value, its ClusterRole, its Deployment. Her value is not written, drift of the admin's
   ClusterRole is still reverted, and a `pending-install` revision of hers does not let
   `kubectl scale` of team's Deployment through.
5a. alice holds `admin` in `dept` (no `bind`). Her revision of a release there narrows the
   ClusterRole the release binds in dept and adds her to the RoleBinding: the reverter asks about
   the role as it is live (what the API server binds), so she does not gain `patch
   resourcequotas`.
5b. alice holds `cluster-admin` through a RoleBinding in `own` only. Her revision of a release
   there changes a cluster-scoped custom resource: the reverter asks about it cluster-wide (the
   scope discovery gives), so it is not patched.

Each test shows its control (what alice could not do herself, or what the wrong question would
have granted) and ends with the admin's `helm upgrade` succeeding.

    HELM_LOCKER_BIN=/work/bin-owners .venv-e2e/bin/python -m unittest discover -s tests/e2e -p 'test_trust_owners.py' -v
"""

import base64
import gzip
import json
import os
import re
import tempfile
import time
import unittest

from chart_rbac import bind, chart_rbac_env, locked, unlock
from harness import PlaneTest, HERE, ControlPlane, eventually

OPS_CHART = os.path.join(HERE, "charts", "ops-agent")
# Writes drift by hand; exempt at admission (--exempt-user ops).
OPS = "ops"
SETTLE = 15.0
RBAC = "rbac.authorization.k8s.io"


def encode(release):
    payload = base64.b64encode(gzip.compress(json.dumps(release).encode()))
    return base64.b64encode(payload).decode()


def decode(secret):
    return json.loads(gzip.decompress(base64.b64decode(base64.b64decode(secret["data"]["release"]))))


def write_chart(root, name, templates):
    """A chart in `root/name` with these templates (file name -> text)."""
    path = os.path.join(root, name)
    os.makedirs(os.path.join(path, "templates"))
    with open(os.path.join(path, "Chart.yaml"), "w") as f:
        f.write(f"apiVersion: v2\nname: {name}\nversion: 0.1.0\n")
    for file, text in templates.items():
        with open(os.path.join(path, "templates", file), "w") as f:
            f.write(text)
    return path


DEPT_CHART = {
    "rbac.yaml": """apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {{ .Release.Name }}-quota
rules:
- apiGroups: [""]
  resources: [configmaps]
  verbs: [get]
- apiGroups: [""]
  resources: [resourcequotas]
  verbs: [get, patch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {{ .Release.Name }}-quota
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: {{ .Release.Name }}-quota
subjects:
- apiGroup: rbac.authorization.k8s.io
  kind: Group
  name: quota-admins
""",
}

WIDGET_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "gadgets.trust.example.com"},
    "spec": {"group": "trust.example.com", "scope": "Cluster",
             "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
             "versions": [{"name": "v1", "served": True, "storage": True,
                           "schema": {"openAPIV3Schema": {"type": "object",
                                                          "x-kubernetes-preserve-unknown-fields": True}}}]},
}

OWN_CHART = {
    "gadget.yaml": """apiVersion: trust.example.com/v1
kind: Gadget
metadata:
  name: {{ .Release.Name }}-gadget
spec:
  size: 1
""",
}


class TrustOwners(PlaneTest):
    @classmethod
    def setUpClass(cls):
        cls.plane = ControlPlane()
        k = cls.plane.kubectl
        for ns in ("team", "a-tenant", "dept", "own"):
            assert k("create", "namespace", ns).returncode == 0
        grants = [("team", "alice-edit", "edit"), ("a-tenant", "alice-admin", "admin"),
                  ("dept", "alice-admin", "admin"), ("own", "alice-all", "cluster-admin")]
        for ns, name, role in grants:
            bind(cls.plane, "alice", role, ns, name=name)
        bind(cls.plane, OPS, "cluster-admin", name="ops-admin")
        out = k("apply", "-f", "-", input=json.dumps(WIDGET_CRD))
        assert out.returncode == 0, out.stderr
        cls.charts = tempfile.mkdtemp(prefix="trust-owners-")
        cls.dept_chart = write_chart(cls.charts, "dept-ops", DEPT_CHART)
        cls.own_chart = write_chart(cls.charts, "gadgets", OWN_CHART)
        cls.env = chart_rbac_env(cls.plane)
        cls.locker = locked(cls.plane, cls.env, "owners", "--exempt-user", OPS)
        # RBAC takes a moment to see the bindings made above.
        assert eventually(lambda: cls.can_i_as("alice", "create", "secrets", "-n", "a-tenant") == "yes", 20)

    @classmethod
    def tearDownClass(cls):
        unlock(cls.plane, cls.locker, "owners")
        cls.plane.down()

    def can_i(self, *args):
        return self.can_i_as("alice", *args)

    def log(self):
        return self.locker.log_text()[-4000:]

    def release_of(self, ns, name, revision):
        out = self.ok(self.k("-n", ns, "get", "secret", f"sh.helm.release.v1.{name}.v{revision}", "-o", "json"))
        return decode(json.loads(out.stdout))

    def write_release(self, ns, name, revision, body, status, as_user="alice"):
        """Revision `revision` of release `ns/name` holding `body` (a Helm release), written by
        `as_user` through the API server (the author webhook stamps it with her)."""
        body = dict(body, version=revision, namespace=ns, name=name)
        body["info"] = dict(body.get("info") or {}, status=status)
        secret = {"apiVersion": "v1", "kind": "Secret", "type": "helm.sh/release.v1",
                  "metadata": {"name": f"sh.helm.release.v1.{name}.v{revision}", "namespace": ns,
                               "labels": {"owner": "helm", "name": name, "status": status,
                                          "version": str(revision)}},
                  "data": {"release": encode(body)}}
        return self.ok(self.k(f"--as={as_user}", "-n", ns, "create", "-f", "-", input=json.dumps(secret)))

    # -- attack 4 -------------------------------------------------------------------------

    def test_a_claim_from_another_namespace_never_becomes_the_owner(self):
        helm = self.plane.helm("team")
        helm.install(OPS_CHART, "ops", {})
        rules = self.get("clusterrole", "ops-agent-read")["rules"]

        def setting():
            return (self.get("-n", "team", "configmap", "ops-settings") or {}).get("data", {}).get("setting")

        # Control: alice may patch the ConfigMap in team herself, so the reverter's author check
        # would let her value through: only the owner rule keeps her release from being followed.
        self.assertEqual(self.can_i("patch", "configmaps", "-n", "team"), "yes")
        self.assertEqual(self.can_i("patch", "clusterroles"), "no")
        self.assertEqual(self.can_i("patch", "deployments", "--subresource=scale", "-n", "team"), "yes")
        # The reverter's watches see the admin's objects carry team/ops's annotations (what once
        # made a claim of another release on the same object pass for proven).
        time.sleep(2)

        # alice's release in her own namespace names team/ops's objects: her value, the
        # ClusterRole as the chart has it, the Deployment.
        body = self.release_of("team", "ops", 1)
        manifest = []
        for doc in body["manifest"].split("\n---\n"):
            kind = re.search(r"(?m)^kind: (\w+)$", doc).group(1)
            if kind == "ConfigMap":
                manifest.append("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ops-settings\n"
                                "  namespace: team\ndata:\n  setting: from-alice\n")
            elif kind == "ClusterRole":
                manifest.append(doc)
            elif kind == "Deployment":
                manifest.append(doc.replace("name: ops-agent\n", "name: ops-agent\n  namespace: team\n", 1))
        self.assertEqual(len(manifest), 3, body["manifest"])
        body["manifest"] = "---\n" + "\n---\n".join(manifest)
        self.write_release("a-tenant", "x", 1, body, "deployed")
        # The locker indexes her claims next to the admin's: each object is claimed twice.
        self.assertTrue(eventually(lambda: "claimed by several releases" in self.locker.log_text(), 20),
                        self.log())

        # Drift of both (by an exempt writer, as while the webhook is away): the admin's values
        # come back, hers are never written.
        self.ok(self.k(f"--as={OPS}", "-n", "team", "patch", "configmap", "ops-settings", "--type=merge",
                       "-p", json.dumps({"data": {"setting": "drifted"}})))
        self.ok(self.k(f"--as={OPS}", "patch", "clusterrole", "ops-agent-read", "--type=json", "-p",
                       json.dumps([{"op": "add", "path": "/rules/-",
                                    "value": {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}}])))
        self.assertTrue(eventually(lambda: self.get("clusterrole", "ops-agent-read")["rules"] == rules, SETTLE),
                        f"drift of the admin's ClusterRole not reverted:\n{self.log()}")
        self.assertTrue(eventually(lambda: setting() == "from-the-chart", SETTLE),
                        f"the ConfigMap is {setting()!r}:\n{self.log()}")
        time.sleep(3)
        self.assertEqual(setting(), "from-the-chart")
        # Her own write of her value is denied: the lock is team/ops's.
        out = self.k("--as=alice", "-n", "team", "patch", "configmap", "ops-settings", "--type=merge",
                     "-p", json.dumps({"data": {"setting": "from-alice"}}))
        self.assertNotEqual(out.returncode, 0)
        self.assertIn("ops", out.stderr)

        # A pending-install revision of hers: a Scale carries no annotations, and does not get
        # through on her pending status.
        self.write_release("a-tenant", "x", 2, body, "pending-install")
        time.sleep(2)
        out = self.k("--as=alice", "-n", "team", "scale", "deployment", "ops-agent", "--replicas=3")
        self.assertNotEqual(out.returncode, 0, f"scale let through:\n{self.log()}")
        self.assertIn("is locked by Helm release team/ops", out.stderr)
        self.assertEqual(self.get("-n", "team", "deployment", "ops-agent")["spec"]["replicas"], 1)
        # Control: the release of the object's own namespace at work does open it (Helm's own
        # upgrade is never blocked): a pending revision of team/ops lets the same scale through.
        admin_body = self.release_of("team", "ops", 1)
        self.write_release("team", "ops", 2, admin_body, "pending-upgrade", as_user=OPS)
        self.assertTrue(eventually(lambda: self.k("--as=alice", "-n", "team", "scale", "deployment", "ops-agent",
                                                  "--replicas=1", "--dry-run=server").returncode == 0, 10),
                        self.log())
        self.ok(self.k(f"--as={OPS}", "-n", "team", "delete", "secret", "sh.helm.release.v1.ops.v2"))

        # The conflict the locker reports names the release of the object's own namespace as
        # the one holding each object.
        claimed = [l for l in self.locker.log_text().splitlines() if "claimed by several releases" in l]
        for name in ("ConfigMap team/ops-settings", "Deployment team/ops-agent"):
            self.assertTrue(any(name in l and "winner=team/ops " in l for l in claimed), claimed)

        # The admin's next upgrade succeeds.
        helm.upgrade(OPS_CHART, "ops", {})
        self.assertEqual(setting(), "from-the-chart")
        self.assertEqual(self.get("clusterrole", "ops-agent-read")["rules"], rules)

    # -- attack 5a ------------------------------------------------------------------------

    def test_a_binding_is_checked_against_the_role_as_it_is_live(self):
        helm = self.plane.helm("dept")
        helm.install(self.dept_chart, "quota", {})
        wide = self.get("clusterrole", "quota-quota")["rules"]
        subjects = self.get("-n", "dept", "rolebinding", "quota-quota")["subjects"]
        # Control: alice may not patch resourcequotas in dept, nor bind the role herself (the API
        # server refuses the binding), yet she holds everything the narrowed role grants there,
        # so the chart's role would have passed the check.
        self.assertEqual(self.can_i("patch", "resourcequotas", "-n", "dept"), "no")
        out = self.k("--as=alice", "-n", "dept", "create", "rolebinding", "mine", "--clusterrole=quota-quota",
                     "--user=alice", "--dry-run=server")
        self.assertNotEqual(out.returncode, 0)
        self.assertIn("forbidden", out.stderr)
        self.assertEqual(self.can_i("get", "configmaps", "-n", "dept"), "yes")

        body = self.release_of("dept", "quota", 1)
        docs = body["manifest"].split("\n---\n")
        narrowed = []
        for doc in docs:
            kind = re.search(r"(?m)^kind: (\w+)$", doc).group(1)
            if kind == "ClusterRole":
                doc = doc.split("rules:")[0] + "rules:\n- apiGroups: [\"\"]\n  resources: [configmaps]\n  verbs: [get]\n"
            if kind == "RoleBinding":
                doc = doc.rstrip("\n") + "\n- apiGroup: rbac.authorization.k8s.io\n  kind: User\n  name: alice\n"
            narrowed.append(doc)
        body["manifest"] = "\n---\n".join(narrowed)
        self.write_release("dept", "quota", 2, body, "deployed")
        secret = "sh.helm.release.v1.quota.v2"
        wanted = "bind clusterroles.rbac.authorization.k8s.io quota-quota in dept"

        def settled():
            notes = self.event_notes("dept", secret, "AuthorLacksRights")
            return any(wanted in n for n in notes) or (
                self.get("-n", "dept", "rolebinding", "quota-quota")["subjects"] != subjects)
        self.assertTrue(eventually(settled, SETTLE), self.log())
        time.sleep(3)
        self.assertEqual(self.get("-n", "dept", "rolebinding", "quota-quota")["subjects"], subjects,
                         "the reverter added alice to the binding")
        self.assertEqual(self.can_i("patch", "resourcequotas", "-n", "dept"), "no")
        self.assertEqual(self.get("clusterrole", "quota-quota")["rules"], wide)
        notes = self.event_notes("dept", secret, "AuthorLacksRights")
        self.assertTrue(any(wanted in n for n in notes), notes)

        helm.upgrade(self.dept_chart, "quota", {})
        self.assertEqual(self.get("-n", "dept", "rolebinding", "quota-quota")["subjects"], subjects)

    # -- attack 5b ------------------------------------------------------------------------

    def test_a_cluster_scoped_object_is_asked_about_cluster_wide(self):
        helm = self.plane.helm("own")
        helm.install(self.own_chart, "gadgets", {})

        def size():
            return (self.get("gadget", "gadgets-gadget") or {}).get("spec", {}).get("size")

        self.assertEqual(size(), 1)
        # Control: asked in the namespace the chart gives, the patch would pass; the API server
        # refuses her the same write on the cluster-scoped object.
        self.assertEqual(self.can_i("patch", "gadgets.trust.example.com", "-n", "own"), "yes")
        out = self.k("--as=alice", "patch", "gadget", "gadgets-gadget", "--type=merge",
                     "-p", json.dumps({"spec": {"size": 99}}))
        self.assertNotEqual(out.returncode, 0)
        self.assertIn("forbidden", out.stderr)

        body = self.release_of("own", "gadgets", 1)
        body["manifest"] = body["manifest"].replace("size: 1", "size: 99")
        self.assertIn("size: 99", body["manifest"])
        self.write_release("own", "gadgets", 2, body, "deployed")
        secret = "sh.helm.release.v1.gadgets.v2"
        wanted = "patch gadgets.trust.example.com gadgets-gadget cluster-wide"

        def settled():
            return any(wanted in n for n in self.event_notes("own", secret, "AuthorLacksRights")) or size() != 1
        self.assertTrue(eventually(settled, SETTLE), self.log())
        time.sleep(3)
        self.assertEqual(size(), 1, "the reverter patched the cluster-scoped object")
        notes = self.event_notes("own", secret, "AuthorLacksRights")
        self.assertTrue(any(wanted in n for n in notes), notes)

        helm.upgrade(self.own_chart, "gadgets", {})
        self.assertEqual(size(), 1)


if __name__ == "__main__":
    unittest.main()
