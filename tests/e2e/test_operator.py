"""The operator always wins (docs/break-glass.md), on a real control plane with the reverter on.

The project's own chart (charts/helm-locker) is installed with real Helm as release
`helm-locker/helm-locker`, beside an application release `shop/shop`, while a locker runs with
the leader's Lease in that namespace (here a process, not the chart's pods: no node runs them).

  - without `--own-release` (how the locker behaved before it knew its own release) the
    reverter re-creates a deleted webhook configuration of the chart at once: the control that
    shows the test can fail;
  - with `--own-release helm-locker/helm-locker` (what the chart passes) the emergency bypass of
    the README holds for 30 s: both webhook configurations stay deleted, the Deployment scaled to
    0 stays at 0 (the scale itself is not denied), while the same locker still re-creates a
    deleted object of `shop` and still denies a locked write there;
  - writes elsewhere go through, and `helm upgrade` of the locker's own release succeeds and
    brings its webhook configurations back.
"""

import os
import time
import unittest

from harness import (BIN, locker_values, CHART as SHOP, DENIED, ROOT, ControlPlane, Locker, eventually,
                     register_webhook, unregister_webhook)

CHART = os.path.join(ROOT, "charts", "helm-locker")
NS = RELEASE = "helm-locker"
HOLD = 30.0
# An exempt cluster admin: its writes get past the webhook, as writes do while it is away.
OPS = "ops"


class OperatorWins(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.plane = ControlPlane()
        cls.plane.kubectl("create", "namespace", NS)
        cls.plane.kubectl("create", "namespace", "shop")
        cls.plane.kubectl("create", "clusterrolebinding", "ops-admin", "--clusterrole=cluster-admin", f"--user={OPS}")

    @classmethod
    def tearDownClass(cls):
        cls.plane.down()

    def k(self, *args):
        return self.plane.kubectl(*args)

    def ok(self, out):
        self.assertEqual(out.returncode, 0, out.stderr)
        return out

    def exists(self, kind, name, namespace=None):
        where = ("-n", namespace) if namespace else ()
        return self.k(*where, "get", kind, name).returncode == 0

    def replicas(self):
        return self.plane.get_json("-n", NS, "deploy", RELEASE)["spec"]["replicas"]

    def start(self, *flags):
        locker = Locker(self.plane, "operator", "--lease-namespace", NS, "--lease-name", "operator",
                        "--exempt-user", OPS, *flags)
        self.addCleanup(locker.stop)
        locker.wait_ready()
        self.assertTrue(eventually(lambda: locker.metric("helm_locker_leader") == 1, 30), "never became leader")
        register_webhook(self.plane, locker, "operator")
        self.addCleanup(unregister_webhook, self.plane, "operator")
        return locker

    def test_the_bypass_holds_and_the_lockers_own_upgrade_succeeds(self):
        # The control: a locker that does not know its own release re-creates its webhook.
        blind = self.start()
        self.plane.helm(NS).install(CHART, RELEASE, locker_values())
        self.plane.helm("shop").install(SHOP, "shop", {})
        self.assertTrue(eventually(lambda: self.exists("validatingwebhookconfiguration", RELEASE), 10))
        time.sleep(3)  # the reverter's watches list what exists
        self.ok(self.k("delete", "validatingwebhookconfiguration", RELEASE))
        self.assertTrue(eventually(lambda: self.exists("validatingwebhookconfiguration", RELEASE), 20),
                        "the control failed: a locker without --own-release did not re-create its "
                        f"webhook configuration\n{blind.log_text()[-3000:]}")
        blind.stop()
        unregister_webhook(self.plane, "operator")

        locker = self.start("--own-release", f"{NS}/{RELEASE}")
        time.sleep(3)
        # The README's emergency bypass, as the chart names things.
        self.ok(self.k("delete", "validatingwebhookconfiguration", RELEASE))
        self.ok(self.k("delete", "mutatingwebhookconfiguration", f"{RELEASE}-author"))
        self.ok(self.k("-n", NS, "scale", "deploy", RELEASE, "--replicas=0"))
        # The same locker still guards everything else: a deleted object of shop comes back
        # (deleted by an exempt identity, as a delete that got past the webhook) ...
        self.ok(self.k(f"--as={OPS}", "-n", "shop", "delete", "configmap", "shop-config"))
        self.assertTrue(eventually(lambda: self.exists("configmap", "shop-config", "shop"), 20),
                        locker.log_text()[-3000:])
        # ... and a locked write there is denied, while writes nobody locks go through.
        denied = self.k("-n", "shop", "scale", "deploy", "shop-web", "--replicas=7")
        self.assertIn(DENIED, denied.stderr)
        self.ok(self.k("-n", "shop", "create", "configmap", "unowned", "--from-literal=a=1"))
        self.ok(self.k("-n", NS, "create", "configmap", "notes", "--from-literal=a=1"))
        deadline = time.time() + HOLD
        while time.time() < deadline:
            self.assertFalse(self.exists("validatingwebhookconfiguration", RELEASE), locker.log_text()[-3000:])
            self.assertFalse(self.exists("mutatingwebhookconfiguration", f"{RELEASE}-author"))
            self.assertEqual(self.replicas(), 0)
            time.sleep(1)
        log = locker.log_text()
        self.assertNotIn("object=ValidatingWebhookConfiguration", log)
        self.assertNotIn(f"object=Deployment {NS}/{RELEASE}", log)

        # The operator's way back: helm upgrade of the locker's own release.
        self.plane.helm(NS).upgrade(CHART, RELEASE, locker_values({"replicaCount": 1}))
        self.assertTrue(self.exists("validatingwebhookconfiguration", RELEASE))
        self.assertTrue(self.exists("mutatingwebhookconfiguration", f"{RELEASE}-author"))
        self.assertEqual(self.replicas(), 1)
        status = self.plane.get_json("-n", NS, "secret", f"sh.helm.release.v1.{RELEASE}.v2")
        self.assertEqual(status["metadata"]["labels"]["status"], "deployed")
        # kubectl locker status says why it is open.
        out = self.plane.run([BIN, "kubectl", "status", "-n", NS])
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("own release", out.stdout)


if __name__ == "__main__":
    unittest.main()
