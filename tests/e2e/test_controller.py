"""The drift reverter in detail and leader election on a real control plane, with real Helm (the
Go SDK: server-side apply, field manager `python`) and kubectl. (HelmRelease opt-in is scenario 6
in test_scenarios.py.)

Drift is written while no webhook is registered (the reverter's job is what got past it).
"""

import json
import signal
import socket
import time
import unittest

from harness import CHART, ControlPlane, Locker, eventually, release_secret

REVERT_WITHIN = 5.0


class ControllerOnARealControlPlane(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.plane = ControlPlane()
        cls.lockers = []

    @classmethod
    def tearDownClass(cls):
        for locker in cls.lockers:
            locker.stop()
        cls.plane.down()

    def start(self, name, *flags):
        locker = Locker(self.plane, name, *flags)
        self.lockers.append(locker)
        return locker.wait_ready()

    def k(self, *args, input=None):
        return self.plane.kubectl(*args, input=input)

    def field(self, jsonpath, *args):
        return self.k("get", *args, "-o", f"jsonpath={jsonpath}").stdout

    def assert_back_within(self, seconds, jsonpath, expected, *args):
        started = time.time()
        value = eventually(lambda: self.field(jsonpath, *args) == expected, seconds)
        self.assertTrue(value, f"{' '.join(args)} {jsonpath} is {self.field(jsonpath, *args)!r}, "
                               f"not back to {expected!r} after {seconds}s")
        return time.time() - started

    def drift(self, *args, input=None):
        out = self.k(*args, input=input)
        self.assertEqual(out.returncode, 0, out.stderr)

    def test_1_drift_is_reverted_as_helm_and_helm_upgrade_and_rollback_succeed(self):
        locker = self.start("rv", "--namespace", "rv", "--lease-name", "rv")
        release = self.plane.helm("rv")
        release.install(CHART, "rv", {"replicas": 2}, create_namespace=True)
        self.assertTrue(eventually(lambda: locker.metric("helm_locker_leader") == 1, 20), "never became leader")
        took = []
        # A Deployment field, a ConfigMap value, a cluster-scoped ClusterRole and a custom resource.
        self.drift("-n", "rv", "patch", "deploy", "rv-web", "-p", '{"spec":{"replicas":7}}')
        took.append(self.assert_back_within(REVERT_WITHIN, "{.spec.replicas}", "2", "-n", "rv", "deploy", "rv-web"))
        self.drift("-n", "rv", "patch", "configmap", "rv-config", "-p", '{"data":{"greeting":"hacked"}}')
        took.append(self.assert_back_within(REVERT_WITHIN, "{.data.greeting}", "hello", "-n", "rv", "configmap", "rv-config"))
        self.drift("patch", "clusterrole", "rv-reader", "--type=json",
                   "-p", '[{"op":"add","path":"/rules/0/verbs/-","value":"delete"}]')
        took.append(self.assert_back_within(REVERT_WITHIN, "{.rules[0].verbs}", '["get","list"]', "clusterrole", "rv-reader"))
        self.drift("-n", "rv", "patch", "widget", "rv-widget", "--type=merge", "-p", '{"spec":{"color":"red"}}')
        took.append(self.assert_back_within(REVERT_WITHIN, "{.spec.color}", "blue", "-n", "rv", "widget", "rv-widget"))
        # kubectl's server-side apply, forcing the conflict, is drift too.
        self.drift("-n", "rv", "apply", "--server-side", "--force-conflicts", "-f", "-",
                   input='{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"rv-config"},"data":{"mode":"debug"}}')
        took.append(self.assert_back_within(REVERT_WITHIN, "{.data.mode}", "production", "-n", "rv", "configmap", "rv-config"))
        # A deleted object comes back.
        uid = self.field("{.metadata.uid}", "-n", "rv", "service", "rv-svc")
        self.drift("-n", "rv", "delete", "service", "rv-svc")
        started = time.time()
        new_uid = eventually(lambda: self.field("{.metadata.uid}", "-n", "rv", "service", "rv-svc"), REVERT_WITHIN)
        self.assertTrue(new_uid and new_uid != uid, "the deleted Service did not come back")
        took.append(time.time() - started)
        print(f"\n  reverted in {', '.join(f'{t:.2f}s' for t in took)}")
        # Each revert is an Event on the object, naming the paths.
        events = eventually(lambda: [e for e in (self.plane.get_json("events", "-n", "rv") or {"items": []})["items"]
                                     if e.get("reason") == "Reverted" and e["involvedObject"]["name"] == "rv-web"], 5)
        self.assertTrue(events, "no Reverted event on the Deployment")
        self.assertIn("/spec/replicas", events[0].get("message") or events[0].get("note", ""))
        self.assertGreaterEqual(locker.metric("helm_locker_reverts_total"), 6)
        # Helm still owns its fields: upgrade and rollback meet no server-side apply conflict
        # (in the recorded story both FAILED after kubectl edits).
        release.upgrade(CHART, "rv", {"replicas": 3, "image": "nginx:1.26"})
        self.assertEqual(self.field("{.spec.replicas}", "-n", "rv", "deploy", "rv-web"), "3")
        self.assertEqual(self.field("{.data.mode}", "-n", "rv", "configmap", "rv-config"), "production")
        release.rollback("rv", version=1)
        self.assertEqual(self.field("{.spec.replicas}", "-n", "rv", "deploy", "rv-web"), "2")
        self.assertEqual(self.field("{.spec.template.spec.containers[0].image}", "-n", "rv", "deploy", "rv-web"), "nginx:1.25")
        # No revert fought Helm during the upgrade and rollback.
        reverted_before = locker.metric("helm_locker_reverts_total")
        time.sleep(2)
        self.assertEqual(locker.metric("helm_locker_reverts_total"), reverted_before)
        release.uninstall("rv")
        # Uninstalled objects are gone for good: nothing recreates them.
        time.sleep(2)
        self.assertNotEqual(self.k("-n", "rv", "get", "deploy", "rv-web").returncode, 0)

    def test_1b_zero_values_the_api_server_does_not_store_are_not_drift(self):
        """A chart's `hostNetwork: false` is absent from the stored Deployment (omitempty): the
        reverter must not re-apply it forever."""
        locker = self.start("zv", "--namespace", "zv", "--lease-name", "zv")
        self.plane.helm("zv").install(CHART, "zv", {"zeroValues": True}, create_namespace=True)
        self.assertTrue(eventually(lambda: locker.metric("helm_locker_leader") == 1, 20), "never became leader")
        # Events on the object make the reverter look at it again.
        for i in range(3):
            self.drift("-n", "zv", "annotate", "deploy", "zv-web", f"touch={i}", "--overwrite")
            time.sleep(1)
        time.sleep(3)
        self.assertEqual(locker.metric("helm_locker_reverts_total") or 0, 0, locker.log_text()[-3000:])
        self.assertNotIn("drift reverted", locker.log_text())
        # Real drift on the same object is still reverted.
        self.drift("-n", "zv", "patch", "deploy", "zv-web", "-p", '{"spec":{"replicas":5}}')
        self.assert_back_within(REVERT_WITHIN, "{.spec.replicas}", "1", "-n", "zv", "deploy", "zv-web")

    def test_2_only_the_lease_holder_reverts_and_another_takes_over(self):
        flags = ("--namespace", "pair", "--lease-name", "pair", "--lease-duration", "3")
        first = self.start("first", *flags)
        self.assertTrue(eventually(lambda: first.metric("helm_locker_leader") == 1, 20))
        second = self.start("second", *flags)
        release = self.plane.helm("pair")
        release.install(CHART, "pair", {}, create_namespace=True)
        time.sleep(1)
        self.assertEqual((first.metric("helm_locker_leader"), second.metric("helm_locker_leader")), (1, 0))
        self.drift("-n", "pair", "patch", "configmap", "pair-config", "-p", '{"data":{"greeting":"one"}}')
        self.assert_back_within(REVERT_WITHIN, "{.data.greeting}", "hello", "-n", "pair", "configmap", "pair-config")
        self.assertIn("drift reverted", first.log_text())
        self.assertNotIn("drift reverted", second.log_text())
        first.kill()
        self.assertTrue(eventually(lambda: second.metric("helm_locker_leader") == 1, 15), "the second replica never took over")
        self.drift("-n", "pair", "patch", "configmap", "pair-config", "-p", '{"data":{"greeting":"two"}}')
        self.assert_back_within(REVERT_WITHIN, "{.data.greeting}", "hello", "-n", "pair", "configmap", "pair-config")
        self.assertIn("drift reverted", second.log_text())
        release.uninstall("pair")

    def test_3_a_stopping_leader_hands_over_at_once_after_serving_its_delay(self):
        """SIGTERM: the pod is not ready but still answers the webhook for --shutdown-delay (so
        that a Service stops routing to it first), and the leader frees its Lease at once: the
        other replica takes over at its next look (every 6 s here), not after the 30 s lease
        duration."""
        flags = ("--namespace", "hand", "--lease-name", "hand", "--lease-duration", "30")
        first = self.start("hand-first", *flags, "--shutdown-delay", "3s")
        self.assertTrue(eventually(lambda: first.metric("helm_locker_leader") == 1, 20))
        second = self.start("hand-second", *flags)
        time.sleep(1)
        self.assertEqual(second.metric("helm_locker_leader"), 0)
        first.process.terminate()
        self.assertTrue(eventually(lambda: not first.ready(), 2, 0.05), "still ready after SIGTERM")
        self.assertIsNone(first.process.poll(), "exited without serving its delay")
        # The webhook's listener still accepts connections during the delay.
        socket.create_connection(("127.0.0.1", first.port), timeout=2).close()
        took = time.time()
        self.assertTrue(eventually(lambda: second.metric("helm_locker_leader") == 1, 25, 0.1),
                        "the second replica never took over")
        took = time.time() - took
        self.assertLess(took, 15, f"took over after {took:.1f}s: the Lease was not freed")
        first.process.wait(timeout=30)
        self.assertIn("released the lease", first.log_text())

    def test_3b_a_second_signal_ends_the_shutdown_delay(self):
        """Someone at a terminal who pressed Ctrl-C twice (or a kubelet that sends SIGTERM
        again) is not kept waiting for --shutdown-delay."""
        locker = self.start("twice", "--namespace", "twice", "--lease-name", "twice", "--shutdown-delay", "120s")
        locker.process.terminate()
        self.assertTrue(eventually(lambda: not locker.ready(), 30, 0.05), "still ready after SIGTERM")
        time.sleep(0.5)
        self.assertIsNone(locker.process.poll(), "exited without serving its delay")
        locker.process.send_signal(signal.SIGINT)
        locker.process.wait(timeout=60)  # far less than the 120 s delay
        self.assertIn("a second signal", locker.log_text())

    def test_4_client_side_releases_are_reverted_under_helms_update_manager(self):
        """A Helm 3 style release (no apply_method; objects written with Update operations by
        the `helm` field manager) gets a resourceVersion-guarded JSON patch as `helm`."""
        self.k("create", "namespace", "csa")
        cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "legacy", "namespace": "csa"},
              "data": {"greeting": "hello"}}
        owned = json.loads(json.dumps(cm))
        owned["metadata"]["labels"] = {"app.kubernetes.io/managed-by": "Helm"}
        owned["metadata"]["annotations"] = {"meta.helm.sh/release-name": "legacy",
                                            "meta.helm.sh/release-namespace": "csa"}
        out = self.k("create", "--field-manager", "helm", "-f", "-", input=json.dumps(owned))
        self.assertEqual(out.returncode, 0, out.stderr)
        secret = release_secret("legacy", "csa", [cm])
        out = self.k("create", "-f", "-", input=json.dumps(secret))
        self.assertEqual(out.returncode, 0, out.stderr)
        self.start("csa", "--namespace", "csa", "--lease-name", "csa")
        self.drift("-n", "csa", "patch", "configmap", "legacy", "-p", '{"data":{"greeting":"hacked"}}')
        self.assert_back_within(REVERT_WITHIN, "{.data.greeting}", "hello", "-n", "csa", "configmap", "legacy")
        managed = self.plane.get_json("-n", "csa", "configmap", "legacy", "--show-managed-fields")["metadata"]["managedFields"]
        owners = [(m["manager"], m["operation"]) for m in managed if "f:greeting" in json.dumps(m.get("fieldsV1", {}))]
        self.assertEqual(owners, [("helm", "Update")])

    def test_5_after_an_outage_a_changed_field_is_put_back_and_a_deleted_object_is_reported(self):
        """Every replica down (failurePolicy Ignore lets writes through meanwhile): once a locker
        runs again, a field changed meanwhile is reverted; an object deleted meanwhile is not made
        again (at start-up a missing object is not known to have been deleted) but reported on
        the release Secret and in `helm_locker_missing_objects`, and `helm upgrade` makes it."""
        flags = ("--namespace", "out", "--lease-name", "out")
        locker = self.start("out", *flags)
        release = self.plane.helm("out")
        release.install(CHART, "out", {}, create_namespace=True)
        self.assertTrue(eventually(lambda: locker.metric("helm_locker_leader") == 1, 20), "never became leader")
        locker.stop()
        self.drift("-n", "out", "patch", "configmap", "out-config", "-p", '{"data":{"greeting":"meanwhile"}}')
        self.drift("-n", "out", "delete", "service", "out-svc")
        locker.start()
        locker.wait_ready()
        self.assertTrue(eventually(lambda: locker.metric("helm_locker_leader") == 1, 30), "never became leader again")
        self.assert_back_within(15, "{.data.greeting}", "hello", "-n", "out", "configmap", "out-config")
        self.assertTrue(eventually(lambda: locker.metric("helm_locker_missing_objects") == 1, 15),
                        locker.log_text()[-3000:])
        self.assertNotEqual(self.k("-n", "out", "get", "service", "out-svc").returncode, 0,
                            "the Service deleted during the outage was made again")
        events = eventually(lambda: [e for e in (self.plane.get_json("events", "-n", "out") or {"items": []})["items"]
                                     if e.get("reason") == "LockedObjectMissing"], 10)
        self.assertTrue(events, "no LockedObjectMissing event")
        self.assertIn("out-svc", json.dumps(events))
        self.assertTrue(events[0]["involvedObject"]["name"].startswith("sh.helm.release.v1.out."), events[0])
        release.upgrade(CHART, "out", {})
        self.assertEqual(self.k("-n", "out", "get", "service", "out-svc").returncode, 0)
        self.assertTrue(eventually(lambda: locker.metric("helm_locker_missing_objects") == 0, 15))
        release.uninstall("out")


if __name__ == "__main__":
    unittest.main(verbosity=2)
