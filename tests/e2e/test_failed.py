"""A failed release on a real control plane, with real Helm: after a `helm upgrade` fails the
release stays locked at the failed revision (what Helm applied, or was about to), and the next
`helm upgrade` and `helm rollback` are never denied (each is pending while Helm works).
"""

import unittest

from harness import CHART, DENIED, ControlPlane, Locker, eventually, register_webhook, unregister_webhook


class FailedRelease(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.plane = ControlPlane()
        cls.locker = Locker(cls.plane, "failed", "--namespace", "fr", "--lease-name", "failed").wait_ready()
        register_webhook(cls.plane, cls.locker, "failed")

    @classmethod
    def tearDownClass(cls):
        unregister_webhook(cls.plane, "failed")
        cls.locker.stop()
        cls.plane.down()

    def k(self, *args):
        return self.plane.kubectl(*args)

    def statuses(self):
        secrets = self.plane.get_json("secret", "-n", "fr", "-l", "owner=helm,name=fr")["items"]
        return {int(s["metadata"]["labels"]["version"]): s["metadata"]["labels"]["status"] for s in secrets}

    def assert_scale_denied(self, revision, status):
        out = self.k("-n", "fr", "scale", "deploy", "fr-web", "--replicas=7")
        self.assertNotEqual(out.returncode, 0, "kubectl scale was allowed")
        self.assertIn(DENIED, out.stderr)
        self.assertIn(f"Helm release fr/fr (revision {revision}, {status})", out.stderr)

    def test_a_failed_release_stays_locked_and_helm_upgrade_and_rollback_go_through(self):
        release = self.plane.helm("fr")
        release.install(CHART, "fr", {"replicas": 2}, create_namespace=True)
        locked = eventually(lambda: self.k("-n", "fr", "scale", "--dry-run=server", "deploy", "fr-web",
                                           "--replicas=7").returncode != 0, 15, 0.2)
        self.assertTrue(locked, "never locked")
        # The API server rejects the Deployment (a container needs an image): revision 2 failed,
        # revision 1 still deployed.
        with self.assertRaises(Exception):
            release.upgrade(CHART, "fr", {"replicas": 2, "image": ""})
        self.assertEqual(self.statuses(), {1: "deployed", 2: "failed"})
        self.assertTrue(eventually(lambda: self.k("-n", "fr", "scale", "--dry-run=server", "deploy", "fr-web",
                                                  "--replicas=7").returncode != 0, 15, 0.2))
        self.assert_scale_denied(2, "failed")
        self.assertEqual(self.k("-n", "fr", "get", "deploy", "fr-web", "-o", "jsonpath={.spec.replicas}").stdout, "2")
        # helm upgrade from the failed release: not denied.
        release.upgrade(CHART, "fr", {"replicas": 3, "image": "nginx:1.26"})
        self.assertEqual(self.statuses()[3], "deployed")
        self.assertEqual(self.k("-n", "fr", "get", "deploy", "fr-web", "-o", "jsonpath={.spec.replicas}").stdout, "3")
        # Fails again; helm rollback from the failed release: not denied either.
        with self.assertRaises(Exception):
            release.upgrade(CHART, "fr", {"replicas": 4, "image": ""})
        self.assertEqual(self.statuses()[4], "failed")
        release.rollback("fr", version=3)
        self.assertEqual(self.statuses()[5], "deployed")
        image = self.k("-n", "fr", "get", "deploy", "fr-web", "-o", "jsonpath={.spec.template.spec.containers[0].image}")
        self.assertEqual(image.stdout, "nginx:1.26")
        self.assertTrue(eventually(lambda: "revision 5, deployed" in
                                   self.k("-n", "fr", "scale", "--dry-run=server", "deploy", "fr-web", "--replicas=7").stderr,
                                   15, 0.2))
        self.assert_scale_denied(5, "deployed")


if __name__ == "__main__":
    unittest.main()
