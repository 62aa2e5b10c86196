"""The reverter never fights a controller, and a fight stops itself (docs/reliability.md), on a
real control plane with the real HorizontalPodAutoscaler controller (kube-controller-manager).

A chart renders a Deployment with `replicas: 1` and an HPA on it with `minReplicas: 3`
(tests/e2e/charts/autoscaled). The HPA controller scales the Deployment to 3 through `scale`:

  - the replicas are the autoscaler's: after 90 s they are 3, and the reverter reverted the
    Deployment at most once (it never touched replicas); a person's `kubectl scale` is still
    denied at admission (the autoscaler writes as the exempt control plane);
  - meanwhile an exempt writer changes a locked ConfigMap value every 2 s: the reverter puts it
    back at most 3 times, then stops, says so (a `RevertFight` Warning Event naming the writer,
    `helm_locker_revert_fights`), and the admission lock stays;
  - a restart resumes reverting (the other writer's value is put back, so Helm 4's server-side
    upgrade meets no conflict), and `helm upgrade` works; from 1.22, where the autoscaler's
    write through `scale` makes it the owner of `.spec.replicas`, once the chart leaves
    replicas to the HPA (as it must with server-side apply).
"""

import json
import os
import threading
import time
import unittest

from harness import DENIED, HERE, ControlPlane, Locker, eventually, register_webhook, unregister_webhook

CHART = os.path.join(HERE, "charts", "autoscaled")
NS = "scaled"
OPS = "ops"


class Fights(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.plane = ControlPlane()
        k = cls.plane.kubectl
        assert k("create", "namespace", NS).returncode == 0
        assert k("create", "clusterrolebinding", "ops-admin", "--clusterrole=cluster-admin",
                 f"--user={OPS}").returncode == 0

    @classmethod
    def tearDownClass(cls):
        cls.plane.down()

    def k(self, *args, input=None):
        return self.plane.kubectl(*args, input=input)

    def field(self, jsonpath, *args):
        return self.k("get", *args, "-o", f"jsonpath={jsonpath}").stdout

    def events(self, name, reason):
        items = (self.plane.get_json("events", "-n", NS) or {"items": []})["items"]
        return [e for e in items if e["involvedObject"].get("name") == name and e["reason"] == reason]

    def reverts_of(self, locker, kind, name):
        return sum(1 for line in locker.log_text().splitlines()
                   if "drift reverted" in line and f"object={kind} {NS}/{name}" in line)

    def test_the_autoscaler_owns_replicas_and_a_fight_with_another_writer_stops_itself(self):
        locker = Locker(self.plane, "fights", "--lease-name", "fights", "--exempt-user", OPS)
        self.addCleanup(locker.stop)
        locker.wait_ready()
        register_webhook(self.plane, locker, "fights")
        self.addCleanup(unregister_webhook, self.plane, "fights")
        self.assertTrue(eventually(lambda: locker.metric("helm_locker_leader") == 1, 30), "never became leader")
        release = self.plane.helm(NS)
        release.install(CHART, "app", {})
        deployment = ("-n", NS, "deployment", "app-web")
        # Locked, and known to the locker: a change of the image is denied.
        self.assertTrue(eventually(lambda: DENIED in self.k(
            "-n", NS, "set", "image", "deployment/app-web", "web=registry.k8s.io/pause:3.10", "--dry-run=server").stderr, 20))

        stop = threading.Event()
        changes = []

        def fight():
            # An exempt writer's loop that changes a locked value back every 2 s.
            while not stop.is_set():
                out = self.k(f"--as={OPS}", "-n", NS, "patch", "configmap", "app-settings", "-p",
                             json.dumps({"data": {"mode": f"theirs-{len(changes)}"}}))
                changes.append(out.returncode)
                stop.wait(2)

        fighter = threading.Thread(target=fight, daemon=True)
        started = time.time()
        fighter.start()
        self.addCleanup(stop.set)
        self.assertTrue(eventually(lambda: self.field("{.spec.replicas}", *deployment) == "3", 60),
                        f"the autoscaler never scaled to minReplicas:\n{locker.log_text()[-2000:]}")
        fought = eventually(lambda: self.events("app-settings", "RevertFight"), 60, 0.5)
        self.assertTrue(fought, f"no RevertFight event:\n{locker.log_text()[-3000:]}")
        note = fought[0].get("note") or fought[0].get("message") or ""
        self.assertIn("/data/mode", note)
        self.assertIn("kubectl", note)
        self.assertEqual(locker.metric("helm_locker_revert_fights"), 1)
        time.sleep(max(0.0, started + 90 - time.time()))
        stop.set()
        fighter.join(10)
        self.assertTrue(all(rc == 0 for rc in changes))
        # After 90 s: the autoscaler's replicas held; the Deployment was reverted at most once.
        self.assertEqual(self.field("{.spec.replicas}", *deployment), "3")
        self.assertLessEqual(self.reverts_of(locker, "Deployment", "app-web"), 1, locker.log_text()[-3000:])
        # The fight: 3 reverts, then none, however often the other writer wrote.
        self.assertGreaterEqual(len(changes), 20)
        self.assertEqual(self.reverts_of(locker, "ConfigMap", "app-settings"), 3, locker.log_text()[-3000:])
        # The admission lock stays: a person is still denied, on the ConfigMap and on replicas.
        out = self.k("-n", NS, "patch", "configmap", "app-settings", "-p", '{"data":{"mode":"mine"}}')
        self.assertIn(DENIED, out.stderr)
        out = self.k("-n", NS, "scale", "deployment", "app-web", "--replicas=4")
        self.assertIn(DENIED, out.stderr)

        # A restart resumes reverting: the value is put back as Helm's field manager (the other
        # writer owned it, and Helm 4's server-side upgrade would conflict with it)...
        unregister_webhook(self.plane, "fights")
        locker.stop()
        again = Locker(self.plane, "fights-2", "--lease-name", "fights", "--exempt-user", OPS)
        self.addCleanup(again.stop)
        again.wait_ready()
        register_webhook(self.plane, again, "fights")
        self.assertTrue(eventually(lambda: self.field("{.data.mode}", "-n", NS, "configmap", "app-settings")
                                   == "steady", 60), again.log_text()[-3000:])
        # ...then helm upgrade works, and the new revision is reverted to. From 1.22 the API
        # server records the autoscaler's write through `scale` in managedFields
        # (kube-controller-manager, subresource scale, owns .spec.replicas): the upgrade of a
        # chart that still sets replicas conflicts with it before any webhook is asked, and the
        # locker leaves that ownership alone (it never fights the autoscaler); the chart then
        # leaves replicas to the HPA. On 1.20 Helm still owns them and sets 1 until the
        # autoscaler raises them again.
        values = {"mode": "upgraded"}
        if self.plane.minor >= 22:
            with self.assertRaises(Exception) as failed:
                release.upgrade(CHART, "app", values)
            self.assertIn('conflict with "kube-controller-manager" with subresource "scale"', str(failed.exception))
            self.assertIn(".spec.replicas", str(failed.exception))
            values["replicas"] = None
        release.upgrade(CHART, "app", values)
        if self.plane.minor >= 22:
            self.assertEqual(self.field("{.spec.replicas}", *deployment), "3")
        self.assertEqual(self.field("{.data.mode}", "-n", NS, "configmap", "app-settings"), "upgraded")
        out = self.k(f"--as={OPS}", "-n", NS, "patch", "configmap", "app-settings", "-p", '{"data":{"mode":"again"}}')
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertTrue(eventually(lambda: self.field("{.data.mode}", "-n", NS, "configmap", "app-settings")
                                   == "upgraded", 30), again.log_text()[-3000:])


if __name__ == "__main__":
    unittest.main()
