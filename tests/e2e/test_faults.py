"""Faults on a real control plane: a corrupt release Secret among good ones, a 1 MB release,
1,000 releases created and deleted in a burst, the API server restarted while the locker serves,
and the locker started before the API server is reachable. (Transport faults, certificate
rotation and SIGTERM under load, are in scripts/faults.sh.)
"""

import base64
import json
import random
import string
import time
import unittest

from harness import CHART, ControlPlane, Locker, eventually, register_webhook, release_secret

DRY_PATCH = ("patch", "--dry-run=server")


class FaultsOnARealControlPlane(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.plane = ControlPlane()
        cls.locker = Locker(cls.plane, "faults", "--lease-name", "faults", "--revert=false").wait_ready()
        register_webhook(cls.plane, cls.locker, "faults", failure_policy="Ignore")
        cls.good = cls.plane.helm("good")
        cls.good.install(CHART, "good", {}, create_namespace=True)
        cls.extra = []

    @classmethod
    def tearDownClass(cls):
        cls.plane.kubectl("delete", "validatingwebhookconfiguration", "faults", "--ignore-not-found")
        for locker in [cls.locker, *cls.extra]:
            locker.stop()
        cls.plane.down()

    def k(self, *args, input=None):
        return self.plane.kubectl(*args, input=input)

    def locked(self, *patch, timeout=15):
        return eventually(lambda: self.k(*DRY_PATCH, *patch).returncode != 0, timeout, 0.1)

    def test_a_a_corrupt_release_secret_is_skipped_and_the_good_ones_stay_locked(self):
        self.assertTrue(self.locked("-n", "good", "deploy", "good-web", "-p", '{"spec":{"replicas":9}}'))
        secret = release_secret("broken", "good", [])
        secret["data"]["release"] = base64.b64encode(b"H4sI this is not gzip").decode()
        out = self.k("apply", "-f", "-", input=json.dumps(secret))
        self.assertEqual(out.returncode, 0, out.stderr)
        errors = eventually(lambda: (self.locker.metric("helm_locker_release_decode_errors_total") or 0) >= 1, 30)
        self.assertTrue(errors, "the corrupt Secret was not reported")
        self.assertTrue(self.locker.ready())
        self.assertTrue(self.locked("-n", "good", "deploy", "good-web", "-p", '{"spec":{"replicas":9}}'))
        log = self.locker.log_text()
        self.assertIn("sh.helm.release.v1.broken.v1", log)
        self.assertNotIn("this is not gzip", log)

    def test_b_a_1mb_release_is_indexed_and_locked(self):
        self.k("create", "namespace", "big")
        rng = random.Random(7)
        blob = "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(700_000))
        cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big", "namespace": "big"},
              "data": {"blob": blob, "mode": "on"}}
        secret = release_secret("big", "big", [cm])
        # As Helm creates it: the locker locks only objects that carry their release's annotations.
        cm["metadata"]["annotations"] = {"meta.helm.sh/release-name": "big", "meta.helm.sh/release-namespace": "big"}
        size = len(json.dumps(secret))
        self.assertGreater(size, 900_000)
        out = self.k("create", "-f", "-", input=json.dumps(cm))
        self.assertEqual(out.returncode, 0, out.stderr)
        started = time.time()
        out = self.k("create", "-f", "-", input=json.dumps(secret))
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertTrue(self.locked("-n", "big", "configmap", "big", "-p", '{"data":{"mode":"off"}}'))
        print(f"\n  a {size / 1e6:.2f} MB release Secret locked {time.time() - started:.2f}s after it was written")

    def test_c_1000_releases_created_and_deleted_in_a_burst(self):
        self.k("create", "namespace", "burst")
        before = self.locker.metric("helm_locker_releases_indexed")
        items = [release_secret(f"r{i}", "burst", [
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"r{i}-{j}"}, "data": {"k": str(j)}}
            for j in range(5)]) for i in range(1000)]
        for item in items:
            item["metadata"]["labels"]["burst"] = "yes"
        started = time.time()
        out = self.k("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
        self.assertEqual(out.returncode, 0, out.stderr)
        created = time.time() - started
        seen = eventually(lambda: self.locker.metric("helm_locker_releases_indexed") == before + 1000, 60, 0.2)
        self.assertTrue(seen, f"indexed {self.locker.metric('helm_locker_releases_indexed')}, expected {before + 1000}")
        indexed = time.time() - started
        started = time.time()
        # One deletecollection, as a namespace deletion or an operator cleaning up would send.
        out = self.k("delete", "--raw", "/api/v1/namespaces/burst/secrets?labelSelector=burst%3Dyes")
        self.assertEqual(out.returncode, 0, out.stderr)
        gone = eventually(lambda: self.locker.metric("helm_locker_releases_indexed") == before, 60, 0.2)
        self.assertTrue(gone, f"indexed {self.locker.metric('helm_locker_releases_indexed')}, expected {before}")
        print(f"\n  1000 releases: written in {created:.1f}s, all indexed {indexed:.1f}s after the first write; "
              f"deleted and dropped in {time.time() - started:.1f}s")
        self.assertTrue(self.locked("-n", "good", "deploy", "good-web", "-p", '{"spec":{"replicas":9}}'))

    def test_d_the_index_keeps_serving_while_the_api_server_restarts(self):
        self.assertTrue(self.locked("-n", "good", "deploy", "good-web", "-p", '{"spec":{"replicas":9}}'))
        indexed = self.locker.metric("helm_locker_objects_indexed")
        self.plane.stop_apiserver()
        try:
            for _ in range(10):
                self.assertTrue(self.locker.ready(), "not ready while the API server is away")
                self.assertEqual(self.locker.metric("helm_locker_objects_indexed"), indexed)
                time.sleep(0.5)
        finally:
            self.plane.start_apiserver()
        # The watch resumes: a later helm upgrade is seen.
        self.good.upgrade(CHART, "good", {"replicas": 2})
        seen = eventually(lambda: "revision 2" in self.k(*DRY_PATCH, "-n", "good", "deploy", "good-web",
                                                          "-p", '{"spec":{"replicas":9}}').stderr, 30, 0.2)
        self.assertTrue(seen, "the upgrade after the restart was not seen")

    def test_e_a_locker_started_before_the_api_server_becomes_ready_once_it_is_reachable(self):
        self.plane.stop_apiserver()
        try:
            early = Locker(self.plane, "early", "--lease-name", "early", "--revert=false")
            self.extra.append(early)
            time.sleep(3)
            self.assertIsNone(early.process.poll(), "the locker gave up while the API server was away")
            self.assertFalse(early.ready(), "ready before anything was indexed")
        finally:
            self.plane.start_apiserver()
        early.wait_ready(timeout=60)
        self.assertGreaterEqual(early.metric("helm_locker_releases_indexed"), 1)


if __name__ == "__main__":
    unittest.main(verbosity=2)
