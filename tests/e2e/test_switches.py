"""Issue 63, item 4: switches that act at once, without new pods, on a real control plane, with
the locker run as the chart runs it (its ServiceAccount and the chart's rendered RBAC, which
lets it read only its switches ConfigMap).

The chart puts `mode` and `revert.enabled` in the ConfigMap `<fullname>-switches`, which every
running replica watches (`--switches-configmap`). In an incident the new pods a rollout starts
may never become ready; the switch must land on the pods that run.

  1. `revert: "false"` pauses the reverter (drift stays), `"true"` resumes it and the drift left
     meanwhile is put back;
  2. with the locker's grant to list release Secrets taken away (a second replica started now
     never becomes ready), `mode: off` on the ConfigMap lets a denied write through the running
     replica within seconds, and the not-ready replica applies it too; `mode: deny` locks again.

    HELM_LOCKER_BIN=target/debug/helm-locker .venv-e2e/bin/python -m unittest -v test_switches
"""

import json
import os
import tempfile
import time
import unittest

from chart_rbac import NS as LOCKER_NS, chart_locker, chart_rbac_env
from harness import PlaneTest, ControlPlane, eventually, register_webhook, unregister_webhook

SWITCHES = "helm-locker-switches"
OPS = "ops"
APP = "shop"

CHART = {
    "Chart.yaml": "apiVersion: v2\nname: shop\nversion: 0.1.0\n",
    "templates/settings.yaml": """apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-settings
data:
  colour: blue
""",
}


class Switches(PlaneTest):
    @classmethod
    def setUpClass(cls):
        cls.plane = ControlPlane()
        k = cls.plane.kubectl
        assert k("create", "namespace", APP).returncode == 0
        for args in (("create", "clusterrolebinding", "ops-admin", "--clusterrole=cluster-admin", f"--user={OPS}"),
                     ("-n", APP, "create", "rolebinding", "alice-edit", "--clusterrole=edit", "--user=alice")):
            out = k(*args)
            assert out.returncode == 0, out.stderr
        cls.env = chart_rbac_env(cls.plane)
        cls.switch(mode="deny", revert="true")
        chart = tempfile.mkdtemp(prefix="switches-chart-")
        for path, text in CHART.items():
            os.makedirs(os.path.dirname(os.path.join(chart, path)), exist_ok=True)
            with open(os.path.join(chart, path), "w") as f:
                f.write(text)
        cls.plane.helm(APP).install(chart, APP, {})
        cls.locker = chart_locker(cls.plane, cls.env, "switches", "--exempt-user", OPS,
                                  "--switches-configmap", SWITCHES)
        cls.locker.wait_ready()
        assert eventually(lambda: cls.locker.metric("helm_locker_leader") == 1, 30), "never became leader"
        register_webhook(cls.plane, cls.locker, "switches")
        assert eventually(lambda: cls.plane.kubectl("auth", "can-i", "--as=alice", "-n", APP, "patch",
                                                    "configmaps").stdout.strip() == "yes", 20)

    @classmethod
    def tearDownClass(cls):
        unregister_webhook(cls.plane, "switches")
        cls.locker.stop()
        cls.plane.down()

    @classmethod
    def switch(cls, **data):
        cm = {"apiVersion": "v1", "kind": "ConfigMap",
              "metadata": {"name": SWITCHES, "namespace": LOCKER_NS}, "data": data}
        out = cls.plane.kubectl("apply", "-f", "-", input=json.dumps(cm))
        assert out.returncode == 0, out.stderr

    def colour(self):
        return self.plane.get_json("-n", APP, "configmap", f"{APP}-settings")["data"]["colour"]

    def patch(self, user, colour, dry_run=False):
        return self.k(f"--as={user}", "-n", APP, "patch", "configmap", f"{APP}-settings", "--type=merge",
                      "-p", json.dumps({"data": {"colour": colour}}), *(["--dry-run=server"] if dry_run else []))

    def allowed(self, user="alice"):
        return self.patch(user, "red", dry_run=True).returncode == 0

    def log(self):
        return self.locker.log_text()[-3000:]

    def test_1_revert_false_pauses_the_reverter_and_true_puts_back_what_drifted_meanwhile(self):
        self.assertEqual(self.patch(OPS, "green").returncode, 0)
        self.assertTrue(eventually(lambda: self.colour() == "blue", 20), self.log())
        self.switch(mode="deny", revert="false")
        self.assertTrue(eventually(lambda: "reverting=false" in self.locker.log_text(), 10), self.log())
        self.assertEqual(self.patch(OPS, "green").returncode, 0)
        time.sleep(5)
        self.assertEqual(self.colour(), "green", self.log())
        self.switch(mode="deny", revert="true")
        self.assertTrue(eventually(lambda: self.colour() == "blue", 20), self.log())

    def test_2_mode_off_lands_on_the_running_replica_while_no_new_one_can_become_ready(self):
        self.assertFalse(self.allowed(), "the control: alice's write is denied")
        # The locker may no longer list release Secrets: a replica started now never becomes
        # ready (as in an incident where the rollout's pods cannot start).
        # (Both of the chart's ClusterRoleBindings: the reverter's grant reads every kind too.)
        for name in ("helm-locker", "helm-locker-revert"):
            binding = self.plane.get_json("clusterrolebinding", name)
            self.assertEqual(self.k("delete", "clusterrolebinding", name).returncode, 0)
            self.addCleanup(self.k, "apply", "-f", "-", input=json.dumps(
                {"apiVersion": binding["apiVersion"], "kind": binding["kind"], "metadata": {"name": name},
                 "roleRef": binding["roleRef"], "subjects": binding["subjects"]}))
        fresh = chart_locker(self.plane, self.env, "switches-fresh", "--exempt-user", OPS,
                             "--switches-configmap", SWITCHES)
        self.addCleanup(fresh.stop)
        time.sleep(8)
        self.assertFalse(fresh.ready(), fresh.log_text()[-2000:])

        started = time.time()
        self.switch(mode="off", revert="true")
        self.assertTrue(eventually(self.allowed, 10), self.log())
        print(f"\n  mode off landed on the running replica in {time.time() - started:.1f} s")
        self.assertTrue(eventually(lambda: "mode=\"off\"" in fresh.log_text() or "mode=off" in fresh.log_text(), 10),
                        fresh.log_text()[-2000:])
        self.assertFalse(fresh.ready())
        self.switch(mode="deny", revert="true")
        self.assertTrue(eventually(lambda: not self.allowed(), 10), self.log())


if __name__ == "__main__":
    unittest.main()
