"""Issue 61, item 2: Helm's ConfigMap driver, on a real control plane, with the locker run as the
chart runs it (its ServiceAccount and the chart's rendered RBAC: tests/e2e/chart_rbac.py).

`HELM_DRIVER=configmap` (and k3s's helm-controller with `spec.driver: configmap`) keeps a
release's revisions in ConfigMaps named and labelled as the Secrets would be, Helm's layer of the
release as a plain string in `data.release`. The release here is installed and upgraded by real
Helm with that driver (the suite's Helm SDK takes `storage_driver="configmap"`): no release
Secret exists at any time.

1. The control: a locker with `--release-drivers secret` does not see the release; alice (edit
   in the namespace) changes the chart's ConfigMap freely. The author webhook stamps the
   release ConfigMap all the same.
2. A locker with both drivers (the default): the release is locked (the denial names it), the
   change alice made before it started is reverted (content never live in its life: the reverter
   writes it only because the ConfigMap's stamp names an author, as for a Secret), drift is
   reverted, and the next `helm upgrade` (with the ConfigMap driver) succeeds and is locked at
   its revision after.

Runs on the newest Kubernetes only (not in scripts/e2e.sh's FLOOR): nothing here differs on 1.20.

    HELM_LOCKER_BIN=target/debug/helm-locker .venv-e2e/bin/python -m unittest -v test_configmap_driver
"""

import json
import unittest

import helm_python as helm

from chart_rbac import bind, chart_locker, chart_rbac_env
from harness import PlaneTest, ControlPlane, eventually, register_webhook, unregister_webhook, write_files

NS = "cm"
RELEASE = "web"
# Writes drift by hand; exempt at admission (--exempt-user ops).
OPS = "ops"
SETTINGS = f"{RELEASE}-settings"

CHART = {
    "Chart.yaml": "apiVersion: v2\nname: web\nversion: 0.1.0\n",
    "templates/settings.yaml": """apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-settings
data:
  colour: {{ .Values.colour | default "blue" | quote }}
""",
}


class ConfigMapDriver(PlaneTest):
    @classmethod
    def setUpClass(cls):
        cls.plane = ControlPlane()
        k = cls.plane.kubectl
        assert k("create", "namespace", NS).returncode == 0
        bind(cls.plane, OPS, "cluster-admin", name="ops-admin")
        bind(cls.plane, "alice", "edit", NS)
        cls.chart = write_files("cm-chart-", CHART)
        cls.env = chart_rbac_env(cls.plane)
        cls.locker = None
        assert eventually(lambda: cls.can_i_as("alice", "patch", "configmaps", "-n", NS) == "yes", 20)

    @classmethod
    def tearDownClass(cls):
        unregister_webhook(cls.plane, "cm-lock")
        if cls.locker:
            cls.locker.stop()
        cls.plane.down()

    @classmethod
    def start(cls, name, *flags):
        if cls.locker:
            unregister_webhook(cls.plane, "cm-lock")
            cls.locker.stop()
        cls.locker = chart_locker(cls.plane, cls.env, name, "--exempt-user", OPS, *flags)
        cls.locker.wait_ready()
        register_webhook(cls.plane, cls.locker, "cm-lock")

    def helm(self):
        """Helm with its ConfigMap driver (HELM_DRIVER=configmap)."""
        return helm.Config(kubeconfig_path=self.plane.kubeconfig, namespace=NS, storage_driver="configmap")

    def log(self):
        return self.locker.log_text()[-4000:]

    def colour(self):
        return (self.get("-n", NS, "configmap", SETTINGS) or {}).get("data", {}).get("colour")

    def patch_colour(self, user, colour, dry_run=False):
        return self.k(f"--as={user}", "-n", NS, "patch", "configmap", SETTINGS, "--type=merge",
                      "-p", json.dumps({"data": {"colour": colour}}), *(["--dry-run=server"] if dry_run else []))

    def denied(self, expect=""):
        """The webhook's denial of alice's patch, once it comes (a server-side dry run, which
        admission sees and nothing stores), or None."""
        return eventually(lambda: (lambda out: out if out.returncode != 0 and expect in out.stderr else None)(
            self.patch_colour("alice", "red", dry_run=True)), 20)

    def stored(self, revision):
        """The release ConfigMap of `revision` (and that no release Secret exists)."""
        name = f"sh.helm.release.v1.{RELEASE}.v{revision}"
        self.assertIsNone(self.get("-n", NS, "secret", name))
        stored = self.get("-n", NS, "configmap", name)
        self.assertIsNotNone(stored, f"no release ConfigMap {name}")
        self.assertEqual(stored["metadata"]["labels"]["owner"], "helm")
        return stored

    def test_1_without_the_configmap_driver_the_release_is_not_seen(self):
        self.start("cm-off", "--release-drivers", "secret", "--revert=false")
        self.helm().install(self.chart, RELEASE, {})
        stored = self.stored(1)
        # The author webhook stamps a release ConfigMap as it stamps a Secret.
        annotations = stored["metadata"].get("annotations", {})
        self.assertIn("helm-locker.io/author", annotations)
        self.assertTrue(annotations.get("helm-locker.io/author-proof", "").startswith("v2."))
        self.assertEqual(self.colour(), "blue")
        # Control: alice's write goes through (the lock below is what denies it).
        self.ok(self.patch_colour("alice", "red"))
        self.assertEqual(self.colour(), "red")

    def test_2_with_it_the_release_is_locked_reverted_and_upgraded(self):
        self.assertEqual(self.colour(), "red", "test_1 runs first")
        self.start("cm-on")
        assert eventually(lambda: self.locker.metric("helm_locker_leader") == 1, 30), "never became leader"
        # alice's red was live when this locker first saw the object: blue was never live in its
        # life, and is written only for a revision whose author is known (the stamp verified).
        self.assertTrue(eventually(lambda: self.colour() == "blue", 30), self.log())
        self.assertTrue(self.denied(), self.log())
        denied = self.patch_colour("alice", "red")
        self.assertNotEqual(denied.returncode, 0)
        self.assertIn(f"is locked by Helm release {NS}/{RELEASE} (revision 1, deployed)", denied.stderr)
        self.assertEqual(self.colour(), "blue")
        # Drift that got past the webhook (an exempt user) is reverted.
        self.ok(self.patch_colour(OPS, "green"))
        self.assertTrue(eventually(lambda: self.colour() == "blue", 30), self.log())

        # The next helm upgrade, with the ConfigMap driver, goes through and is locked after.
        self.helm().upgrade(self.chart, RELEASE, {"colour": "purple"})
        self.stored(2)
        self.assertEqual(self.colour(), "purple")
        self.assertTrue(self.denied(expect="revision 2"), self.log())
        self.assertNotEqual(self.patch_colour("alice", "red").returncode, 0)
        self.ok(self.patch_colour(OPS, "green"))
        self.assertTrue(eventually(lambda: self.colour() == "purple", 30), self.log())


if __name__ == "__main__":
    unittest.main()
