"""Issue 67, attack 1: one driver per release, on a real control plane, with the locker run as the
chart runs it (its ServiceAccount and the chart's rendered RBAC: tests/e2e/chart_rbac.py), both
drivers on (the default).

The admin installs `team/ops` with real Helm and its default driver (Secrets): a ConfigMap
`ops-settings` and a Role `ops-reader`. alice may write ConfigMaps and Deployments in `team`, no
Secrets (a Role, not `edit`); carol has `edit` there (Secrets and ConfigMaps).

1. The control: carol's release ConfigMap `sh.helm.release.v1.ops.v2` (the admin's revision 1 with
   her colour) counts, as she could have stored it in a Secret: the reverter writes her colour.
   After she deletes it, the admin's `helm upgrade` makes the release his again.
2. The defence: alice's ConfigMap revision of the same release (deployed, her colour) writes
   nothing (the admin's colour stays and drift is put back to it); a second one at
   `pending-upgrade` does not open the release (her own `kubectl patch` stays denied); each gets
   a `ForeignRelease` Event. After she deletes both, the admin's revision is not "older than a
   revision seen": drift of its Role is still reverted. The admin's `helm upgrade` succeeds.

Runs on the newest Kubernetes only (not in scripts/e2e.sh's FLOOR): nothing here differs on 1.20.

    cd tests/e2e && KUBEBUILDER_ASSETS=... HELM_LOCKER_BIN=target/debug/helm-locker \\
        .venv-e2e/bin/python -m unittest -v test_trust_drivers
"""

import base64
import gzip
import json
import time
import unittest

import helm_python as helm

from chart_rbac import bind, chart_rbac_env, locked, unlock
from harness import PlaneTest, ControlPlane, eventually, write_files

NS = "team"
RELEASE = "ops"
# Writes drift by hand; exempt at admission (--exempt-user ops-admin).
OPS = "ops-admin"
SETTINGS = f"{RELEASE}-settings"
ROLE = f"{RELEASE}-reader"

CHART = {
    "Chart.yaml": "apiVersion: v2\nname: ops\nversion: 0.1.0\n",
    "templates/settings.yaml": """apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-settings
data:
  colour: {{ .Values.colour | default "blue" | quote }}
""",
    "templates/role.yaml": """apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {{ .Release.Name }}-reader
rules:
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["get"]
""",
}

# alice: ConfigMaps and Deployments in team, no Secrets.
ALICE_ROLE = {
    "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
    "metadata": {"name": "configmap-writer", "namespace": NS},
    "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["*"]},
              {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["*"]}],
}


class TrustDrivers(PlaneTest):
    @classmethod
    def setUpClass(cls):
        cls.plane = ControlPlane()
        k = cls.plane.kubectl
        assert k("create", "namespace", NS).returncode == 0
        out = k("apply", "-f", "-", input=json.dumps(ALICE_ROLE))
        assert out.returncode == 0, out.stderr
        bind(cls.plane, OPS, "cluster-admin", name="ops-admin")
        bind(cls.plane, "alice", "Role/configmap-writer", NS, name="alice-cm")
        bind(cls.plane, "carol", "edit", NS)
        cls.chart = write_files("drivers-chart-", CHART)
        assert eventually(lambda: cls.can_i_as("alice", "create", "configmaps", "-n", NS) == "yes", 20)
        assert cls.can_i_as("alice", "create", "secrets", "-n", NS) == "no"
        cls.env = chart_rbac_env(cls.plane)
        cls.locker = locked(cls.plane, cls.env, "drivers", "--exempt-user", OPS, webhook="drivers-lock")
        helm.Config(kubeconfig_path=cls.plane.kubeconfig, namespace=NS).install(cls.chart, RELEASE, {})

    @classmethod
    def tearDownClass(cls):
        unlock(cls.plane, cls.locker, "drivers-lock")
        cls.plane.down()

    def log(self):
        return self.locker.log_text()[-4000:]

    def colour(self):
        return (self.get("-n", NS, "configmap", SETTINGS) or {}).get("data", {}).get("colour")

    def patch_colour(self, user, colour, dry_run=False):
        return self.k(f"--as={user}", "-n", NS, "patch", "configmap", SETTINGS, "--type=merge",
                      "-p", json.dumps({"data": {"colour": colour}}), *(["--dry-run=server"] if dry_run else []))

    def role_verbs(self):
        return ((self.get("-n", NS, "role", ROLE) or {}).get("rules") or [{}])[0].get("verbs")

    def newest_secret_revision(self):
        items = self.get("-n", NS, "secrets", "-l", f"owner=helm,name={RELEASE}")["items"]
        return max(items, key=lambda s: int(s["metadata"]["labels"]["version"]))

    def forged_config_map(self, user, revision, colour, status="deployed"):
        """The admin's newest revision as a release ConfigMap of `revision`, `colour` in its
        manifest, created by `user`."""
        secret = self.newest_secret_revision()
        layer = base64.b64decode(secret["data"]["release"])
        release = json.loads(gzip.decompress(base64.b64decode(layer)))
        release["version"] = revision
        release["info"]["status"] = status
        release["manifest"] = release["manifest"].replace('colour: "blue"', f'colour: "{colour}"').replace(
            'colour: "purple"', f'colour: "{colour}"')
        self.assertIn(colour, release["manifest"])
        name = f"sh.helm.release.v1.{RELEASE}.v{revision}"
        config_map = {"apiVersion": "v1", "kind": "ConfigMap",
                      "metadata": {"name": name, "namespace": NS,
                                   "labels": {"owner": "helm", "name": RELEASE, "status": status,
                                              "version": str(revision)}},
                      "data": {"release": base64.b64encode(gzip.compress(json.dumps(release).encode())).decode()}}
        self.ok(self.k(f"--as={user}", "create", "-f", "-", input=json.dumps(config_map)))
        return name

    def test_1_a_config_map_revision_by_someone_who_may_write_secrets_counts(self):
        self.assertEqual(self.colour(), "blue")
        self.assertTrue(eventually(lambda: self.patch_colour("alice", "red", dry_run=True).returncode != 0, 20),
                        self.log())
        # Control: carol could have stored the same revision in a Secret; it counts, and the
        # reverter writes her colour (what the attack below did for alice before).
        name = self.forged_config_map("carol", 2, "red")
        self.assertTrue(eventually(lambda: self.colour() == "red", 30), self.log())
        self.ok(self.k("-n", NS, "delete", "configmap", name))
        helm.Config(kubeconfig_path=self.plane.kubeconfig, namespace=NS).upgrade(self.chart, RELEASE, {"colour": "blue"})
        self.assertTrue(eventually(lambda: self.colour() == "blue", 30), self.log())
        self.assertTrue(eventually(
            lambda: "revision 2" in self.patch_colour("alice", "red", dry_run=True).stderr, 20), self.log())

    def test_2_a_config_map_only_writer_takes_nothing_over(self):
        self.assertEqual(self.colour(), "blue", "test_1 runs first")
        logged = len(self.locker.log_text())
        ignored = self.locker.metric("helm_locker_foreign_release_secrets_total") or 0
        deployed = self.forged_config_map("alice", 3, "red")
        self.assertTrue(eventually(
            lambda: (self.locker.metric("helm_locker_foreign_release_secrets_total") or 0) > ignored, 30), self.log())
        self.assertTrue(eventually(lambda: self.event_notes(NS, deployed, "ForeignRelease"), 30), self.log())
        # The reverter: the admin's colour stays, and drift goes back to it, not to hers.
        time.sleep(3)
        self.assertEqual(self.colour(), "blue")
        self.ok(self.patch_colour(OPS, "green"))
        self.assertTrue(eventually(lambda: self.colour() == "blue", 30), self.log())
        # The lock: a pending revision of hers opens nothing; her patch stays denied, at the
        # admin's revision.
        pending = self.forged_config_map("alice", 4, "red", status="pending-upgrade")
        self.assertTrue(eventually(lambda: self.event_notes(NS, pending, "ForeignRelease"), 30), self.log())
        denied = self.patch_colour("alice", "red")
        self.assertNotEqual(denied.returncode, 0)
        self.assertIn(f"is locked by Helm release {NS}/{RELEASE} (revision 2, deployed)", denied.stderr)
        self.assertEqual(self.colour(), "blue")
        # Deleting both leaves the admin's revision as it was, not "older than one seen": drift
        # of its Role is still reverted.
        for name in (deployed, pending):
            self.ok(self.k("--as=alice", "-n", NS, "delete", "configmap", name))
        time.sleep(2)
        self.ok(self.k(f"--as={OPS}", "-n", NS, "patch", "role", ROLE, "--type=json",
                       "-p", json.dumps([{"op": "replace", "path": "/rules/0/verbs", "value": ["get", "list"]}])))
        self.assertTrue(eventually(lambda: self.role_verbs() == ["get"], 30), self.log())
        self.assertNotIn("older than a revision", self.locker.log_text()[logged:])
        # The admin's helm upgrade goes through, and is locked after.
        helm.Config(kubeconfig_path=self.plane.kubeconfig, namespace=NS).upgrade(self.chart, RELEASE, {"colour": "purple"})
        self.assertEqual(self.colour(), "purple")
        self.assertTrue(eventually(
            lambda: "revision 3" in self.patch_colour("alice", "red", dry_run=True).stderr, 20), self.log())


if __name__ == "__main__":
    unittest.main()
