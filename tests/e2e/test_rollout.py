"""A rollout of the locker under load, on a real control plane (issue: safe to operate).

While writers patch objects no release owns, create and delete objects in a release's namespace
and patch a locked field, and `helm upgrade`s of another release run one after another, the
locker is replaced by a new process ROLLOVERS times: the new one started and ready, the webhook
configurations pointed at it (as a Service's endpoints move to a new pod), the old one sent
SIGTERM (it serves for its --shutdown-delay, then finishes what it has). The webhook's
failurePolicy is Fail, so a call that fails is a refused write and is counted.

Expected: 0 webhook errors, 0 writes denied that should be allowed, 0 locked writes allowed,
every upgrade deployed. ROLLOUT_SECONDS (default 6) is how long each locker serves under load
before the next takes over and ROLLOVERS (default 2) how many take over: CI runs the short
version; scripts/rollout.sh runs a longer one.
"""

import json
import os
import threading
import time
import unittest

from harness import (CHART, DENIED, ControlPlane, Locker, eventually, register_webhook,
                     unregister_webhook)

SECONDS = float(os.environ.get("ROLLOUT_SECONDS", "6"))
ROLLOVERS = int(os.environ.get("ROLLOVERS", "2"))
LOCKED, UPGRADED = "steady", "moving"


class Rollout(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.plane = ControlPlane()

    @classmethod
    def tearDownClass(cls):
        cls.plane.down()

    def start(self, name):
        locker = Locker(self.plane, name, "--lease-name", "rollout", "--lease-duration", "3",
                        "--shutdown-delay", "2s")
        self.addCleanup(locker.stop)
        return locker.wait_ready()

    def test_a_locker_replaced_under_load_decides_every_write_rightly(self):
        old = self.start("rollout-0")
        register_webhook(self.plane, old, "rollout")
        self.addCleanup(unregister_webhook, self.plane, "rollout")
        self.plane.helm(LOCKED).install(CHART, LOCKED, {}, create_namespace=True)
        moving = self.plane.helm(UPGRADED)
        moving.install(CHART, UPGRADED, {}, create_namespace=True)
        self.assertTrue(eventually(lambda: self.plane.kubectl(
            "-n", LOCKED, "patch", "--dry-run=server", "configmap", f"{LOCKED}-config", "-p",
            '{"data":{"greeting":"x"}}').returncode != 0, 15, 0.2), "never locked")
        self.plane.kubectl("-n", LOCKED, "create", "configmap", "free", "--from-literal=k=v")

        counts = {"locked_denied": 0, "locked_allowed": 0, "free_allowed": 0, "free_denied": 0,
                  "upgrades": 0}
        errors = []
        lock = threading.Lock()
        stop = threading.Event()

        def count(kind, out, expect_denied):
            with lock:
                if out.returncode == 0:
                    counts[f"{kind}_allowed"] += 1
                elif DENIED in out.stderr and "is locked by Helm release" in out.stderr:
                    counts[f"{kind}_denied"] += 1
                else:
                    errors.append(out.stderr.strip())

        def writer(n):
            k = self.plane.kubectl
            i = 0
            while not stop.is_set():
                i += 1
                count("locked", k("-n", LOCKED, "patch", "configmap", f"{LOCKED}-config", "-p",
                                  json.dumps({"data": {"greeting": f"w{n}-{i}"}})), True)
                count("free", k("-n", LOCKED, "patch", "configmap", "free", "-p",
                                json.dumps({"data": {"k": f"w{n}-{i}"}})), False)
                name = f"tmp-{n}-{i}"
                count("free", k("-n", LOCKED, "create", "configmap", name, "--from-literal=k=v"), False)
                count("free", k("-n", LOCKED, "delete", "configmap", name), False)
                count("free", k("-n", UPGRADED, "annotate", "configmap", f"{UPGRADED}-config",
                                f"note=w{n}-{i}", "--overwrite"), False)

        def upgrader():
            i = 0
            while not stop.is_set():
                i += 1
                try:
                    moving.upgrade(CHART, UPGRADED, {"greeting": f"v{i}", "replicas": 1 + i % 3})
                    with lock:
                        counts["upgrades"] += 1
                except Exception as e:  # a refused write makes the upgrade fail
                    with lock:
                        errors.append(f"helm upgrade {i}: {e}")

        threads = [threading.Thread(target=writer, args=(n,)) for n in range(2)]
        threads.append(threading.Thread(target=upgrader))
        for t in threads:
            t.start()
        try:
            for r in range(1, ROLLOVERS + 1):
                time.sleep(SECONDS)
                new = self.start(f"rollout-{r}")
                register_webhook(self.plane, new, "rollout")  # the endpoints move to the new one
                old.stop()  # SIGTERM: serves for its shutdown delay, then drains
                old = new
            time.sleep(SECONDS)
        finally:
            stop.set()
            for t in threads:
                t.join(timeout=120)
        print(f"\nrollout: {ROLLOVERS} rollovers, {counts}", flush=True)
        self.assertEqual(errors, [], counts)
        self.assertEqual(counts["locked_allowed"], 0, counts)
        self.assertEqual(counts["free_denied"], 0, counts)
        self.assertGreater(counts["locked_denied"], 10, counts)
        self.assertGreater(counts["free_allowed"], 40, counts)
        self.assertGreaterEqual(counts["upgrades"], ROLLOVERS, counts)
        history = self.plane.kubectl("-n", UPGRADED, "get", "secret", "-l", f"owner=helm,name={UPGRADED}",
                                     "-o", "jsonpath={.items[*].metadata.labels.status}").stdout.split()
        self.assertNotIn("failed", history)
        self.assertFalse([s for s in history if s.startswith("pending")], history)
        self.assertEqual(self.plane.get_json("-n", LOCKED, "configmap", f"{LOCKED}-config")["data"]["greeting"],
                         "hello")


if __name__ == "__main__":
    unittest.main()
