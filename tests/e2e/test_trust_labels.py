"""A release Secret's labels are its writer's word; only a payload that decodes is a revision
(docs/security.md, "A revision is what its payload says"). On a real control plane, with the
locker run as the chart runs it (its ServiceAccount and the chart's RBAC).

`sally` may only create and read Secrets in `team`. She writes a Secret labelled as revision 99
of the admin's release `team/shop`, `pending-upgrade`, holding no release at all:

  - a write to the release's Deployment is still denied (the fresh read before a denial reads the
    payloads, not the labels), and drift of it is still reverted (the reverter's re-check too);
  - the control: a Secret whose payload IS a pending revision of the release opens it, so what
    decides is the payload;
  - the admin's next `helm upgrade` succeeds once her Secret is gone (Helm itself cannot read a
    history holding a Secret that does not decode: that is Helm's, not the locker's).
"""

import base64
import json
import time
import unittest

from chart_rbac import chart_locker, chart_rbac_env
from harness import (PlaneTest, CHART, DENIED, ControlPlane, eventually, register_webhook, release_secret,
                     unregister_webhook)

NS, RELEASE, TENANT, OPS = "team", "shop", "sally", "ops"


class LabelsAreNotARevision(PlaneTest):
    @classmethod
    def setUpClass(cls):
        cls.plane = ControlPlane()
        k = cls.plane.kubectl
        assert k("create", "namespace", NS).returncode == 0
        assert k("-n", NS, "create", "role", "secret-writer", "--verb=get,list,create",
                 "--resource=secrets").returncode == 0
        assert k("-n", NS, "create", "rolebinding", "sally-secrets", "--role=secret-writer",
                 f"--user={TENANT}").returncode == 0
        # Makes drift past the webhook (--exempt-user ops).
        assert k("create", "clusterrolebinding", "ops-admin", "--clusterrole=cluster-admin",
                 f"--user={OPS}").returncode == 0
        cls.plane.helm(NS).install(CHART, RELEASE, {"replicas": 2})
        cls.env = chart_rbac_env(cls.plane)

    @classmethod
    def tearDownClass(cls):
        cls.plane.down()

    def replicas(self):
        return self.k("-n", NS, "get", "deploy", f"{RELEASE}-web", "-o", "jsonpath={.spec.replicas}").stdout

    def scale(self, replicas, *who):
        return self.k(*who, "-n", NS, "patch", "deploy", f"{RELEASE}-web", "-p",
                      json.dumps({"spec": {"replicas": replicas}}))

    def as_tenant(self, secret):
        return self.k(f"--as={TENANT}", "-n", NS, "create", "-f", "-", input=json.dumps(secret))

    def test_labels_without_a_release_open_nothing(self):
        locker = chart_locker(self.plane, self.env, "labels", "--exempt-user", OPS)
        self.addCleanup(locker.stop)
        locker.wait_ready()
        register_webhook(self.plane, locker, "labels")
        self.addCleanup(unregister_webhook, self.plane, "labels")
        self.assertTrue(eventually(lambda: self.scale(7, "--dry-run=server").returncode != 0, 20),
                        "the release's Deployment never locked")

        # The attack: labels of a pending revision 99, and no release inside.
        forged = {"apiVersion": "v1", "kind": "Secret", "type": "helm.sh/release.v1",
                  "metadata": {"name": f"sh.helm.release.v1.{RELEASE}.v99", "namespace": NS,
                               "labels": {"owner": "helm", "name": RELEASE, "status": "pending-upgrade",
                                          "version": "99"}},
                  "data": {"release": base64.b64encode(b"no release here").decode()}}
        self.ok(self.as_tenant(forged))
        self.addCleanup(self.k, "-n", NS, "delete", "secret", forged["metadata"]["name"], "--ignore-not-found")
        confirmed = locker.metric("helm_locker_confirmations_total") or 0
        out = self.scale(7)
        self.assertNotEqual(out.returncode, 0, "labels alone opened the release")
        self.assertIn(DENIED, out.stderr)
        # The denial was confirmed by a fresh read, which read the payloads.
        self.assertGreater(locker.metric("helm_locker_confirmations_total") or 0, confirmed)
        self.assertEqual(self.replicas(), "2")
        # Drift past the webhook is still put back: the reverter's re-check reads payloads too.
        self.ok(self.scale(5, f"--as={OPS}"))
        self.assertTrue(eventually(lambda: self.replicas() == "2", 20),
                        f"drift not reverted with a label-only Secret present:\n{locker.log_text()[-3000:]}")

        # The control: a Secret whose payload is a pending revision of the release opens it.
        pending = release_secret(RELEASE, NS, [], status="pending-upgrade", revision=100)
        self.ok(self.as_tenant(pending))
        self.assertTrue(eventually(lambda: self.scale(7, "--dry-run=server").returncode == 0, 20),
                        "a pending payload did not open the release")
        self.ok(self.k("-n", NS, "delete", "secret", pending["metadata"]["name"]))
        self.assertTrue(eventually(lambda: self.scale(7, "--dry-run=server").returncode != 0, 20),
                        "the release did not lock again")

        # The admin's next upgrade succeeds (without the Secret Helm cannot decode).
        self.ok(self.k("-n", NS, "delete", "secret", forged["metadata"]["name"]))
        self.plane.helm(NS).upgrade(CHART, RELEASE, {"replicas": 3})
        self.assertTrue(eventually(lambda: self.replicas() == "3", 10))
        time.sleep(2)
        self.assertEqual(self.replicas(), "3")


if __name__ == "__main__":
    unittest.main()
