"""Break glass on a real control plane: time-boxed, audited LockExceptions.

An on-call engineer whose RBAC lets her create LockExceptions in a release's namespace opens
the release's Deployment replicas to herself for a few seconds: her `kubectl scale` goes
through (an Event names the exception, her and the reason); someone not named is still denied,
as is a field the exception does not open; an exception in another namespace opens nothing, nor
does one already expired. When it ends the lock is back and the reverter puts the replicas back.
`kubectl locker unlock` creates one and `kubectl locker status` lists it with its time left.
"""

import datetime
import json
import os
import time
import unittest

from harness import BIN, CHART, DENIED, ROOT, ControlPlane, Locker, eventually, register_webhook, unregister_webhook

CRD = os.path.join(ROOT, "charts", "helm-locker", "crds", "lockexceptions.helm-locker.io.yaml")
WINDOW = 25


def rfc3339(seconds_from_now):
    t = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=seconds_from_now)
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


class BreakGlass(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.plane = ControlPlane()
        k = cls.plane.kubectl
        assert k("apply", "-f", CRD).returncode == 0
        k("wait", "--for=condition=established", "crd/lockexceptions.helm-locker.io", "--timeout=30s")
        cls.plane.helm("ex").install(CHART, "ex", {"replicas": 1}, create_namespace=True)
        assert k("create", "namespace", "other").returncode == 0
        # Both engineers may change the namespace's Deployments (as the built-in edit role
        # allows); only oncall may open its releases, with LockExceptions.
        assert k("-n", "ex", "create", "role", "deployer", "--verb=get,list,watch,patch,update",
                 "--resource=deployments.apps,deployments.apps/scale").returncode == 0
        for user in ("oncall", "bob"):
            assert k("-n", "ex", "create", "rolebinding", f"{user}-deployer", "--role=deployer", f"--user={user}").returncode == 0
        assert k("-n", "ex", "create", "role", "unlock", "--verb=get,list,watch,create,delete",
                 "--resource=lockexceptions.helm-locker.io").returncode == 0
        assert k("-n", "ex", "create", "rolebinding", "oncall-unlock", "--role=unlock", "--user=oncall").returncode == 0
        cls.locker = Locker(cls.plane, "ex", "--namespace", "ex", "--lease-name", "ex", "--lock-exceptions",
                            "--exception-max-duration", "1h").wait_ready()
        register_webhook(cls.plane, cls.locker, "ex")

    @classmethod
    def tearDownClass(cls):
        unregister_webhook(cls.plane, "ex")
        cls.locker.stop()
        cls.plane.down()

    def k(self, *args, input=None):
        return self.plane.kubectl(*args, input=input)

    def scale(self, user, replicas, dry_run=False):
        extra = ["--dry-run=server"] if dry_run else []
        return self.k(f"--as={user}", "-n", "ex", "scale", "deploy", "ex-web", f"--replicas={replicas}", *extra)

    def replicas(self):
        return self.k("-n", "ex", "get", "deploy", "ex-web", "-o", "jsonpath={.spec.replicas}").stdout

    def exception(self, name, namespace, user, until, **spec):
        body = {"apiVersion": "helm-locker.io/v1alpha1", "kind": "LockException",
                "metadata": {"name": name, "namespace": namespace},
                "spec": {"release": "ex", "until": until, "reason": "INC-7: traffic spike", "users": [user], **spec}}
        # In her own namespace with her own RBAC; elsewhere as the admin.
        who = [f"--as={user}"] if namespace == "ex" else []
        return self.k(*who, "apply", "-f", "-", input=json.dumps(body))

    def assert_denied(self, out, *texts):
        self.assertNotEqual(out.returncode, 0, f"allowed: {out.stdout}")
        self.assertIn(DENIED, out.stderr)
        for text in texts:
            self.assertIn(text, out.stderr)

    def test_an_open_exception_lets_the_named_engineer_scale_and_the_lock_returns_when_it_ends(self):
        self.assertTrue(eventually(lambda: DENIED in self.scale("oncall", 3, dry_run=True).stderr, 15, 0.2), "never locked")
        # An exception elsewhere, or one already expired, opens nothing.
        self.assertEqual(self.exception("elsewhere", "other", "bob", rfc3339(600)).returncode, 0)
        self.assertEqual(self.exception("expired", "ex", "oncall", rfc3339(-60)).returncode, 0)
        time.sleep(2)
        self.assert_denied(self.scale("bob", 3, dry_run=True))
        self.assert_denied(self.scale("oncall", 3, dry_run=True))
        # Her own, for the replicas of the Deployment only: created with her own RBAC.
        out = self.exception("oncall", "ex", "oncall", rfc3339(WINDOW), paths=["/spec/replicas"],
                             objects=[{"kind": "Deployment", "name": "ex-web"}])
        self.assertEqual(out.returncode, 0, out.stderr)
        opened = time.time()
        self.assertTrue(eventually(lambda: self.scale("oncall", 3, dry_run=True).returncode == 0, 10, 0.2),
                        f"the exception never opened:\n{self.locker.log_text()[-2000:]}")
        self.assertEqual(self.scale("oncall", 3).returncode, 0)
        self.assertEqual(self.replicas(), "3")
        # Someone not named, and a field it does not open: still denied.
        self.assert_denied(self.scale("bob", 4), "/spec/replicas")
        self.assert_denied(self.k("--as=oncall", "-n", "ex", "set", "image", "deploy/ex-web", "web=nginx:1.27"), "image")
        # Audited: an Event names the exception, the user and the reason; counted.
        events = eventually(lambda: [e for e in (self.plane.get_json("events", "-n", "ex") or {"items": []})["items"]
                                     if e["reason"] == "LockExceptionUsed"], 10)
        self.assertTrue(events, "no LockExceptionUsed event")
        note = events[0].get("message") or events[0].get("note") or ""
        self.assertIn("ex/oncall", note)
        self.assertIn("oncall", note)
        self.assertIn("INC-7: traffic spike", note)
        self.assertEqual(self.locker.metric("helm_locker_exceptions_open"), 1)
        self.assertGreaterEqual(self.locker.metric("helm_locker_exceptions_used_total"), 1)
        # The reverter leaves the opened field alone while it is open.
        time.sleep(3)
        self.assertEqual(self.replicas(), "3")
        # Closed (never deleted): the lock is back, and the replicas it let through are put back.
        time.sleep(max(0, WINDOW - (time.time() - opened)) + 2)
        self.assert_denied(self.scale("oncall", 5), "/spec/replicas")
        back = eventually(lambda: self.replicas() == "1", 15)
        self.assertTrue(back, f"replicas {self.replicas()}, not reverted to 1 after the exception ended:\n{self.locker.log_text()[-2000:]}")
        self.assertEqual(self.locker.metric("helm_locker_exceptions_open"), 0)

    def test_with_end_on_upgrade_a_successful_helm_upgrade_ends_it(self):
        release = self.plane.helm("up")
        release.install(CHART, "up", {"replicas": 1}, create_namespace=True)
        k = self.k
        self.assertEqual(k("-n", "up", "create", "role", "deployer", "--verb=get,list,watch,patch,update",
                           "--resource=deployments.apps,deployments.apps/scale").returncode, 0)
        self.assertEqual(k("-n", "up", "create", "rolebinding", "oncall", "--role=deployer", "--user=oncall").returncode, 0)
        locker = Locker(self.plane, "up", "--namespace", "up", "--lease-name", "up", "--lock-exceptions",
                        "--exceptions-end-on-upgrade").wait_ready()
        self.addCleanup(locker.stop)
        register_webhook(self.plane, locker, "up")
        self.addCleanup(unregister_webhook, self.plane, "up")
        scale = lambda: k("--as=oncall", "-n", "up", "scale", "deploy", "up-web", "--replicas=4", "--dry-run=server")
        self.assertTrue(eventually(lambda: DENIED in scale().stderr, 15, 0.2), "never locked")
        body = {"apiVersion": "helm-locker.io/v1alpha1", "kind": "LockException",
                "metadata": {"name": "hotfix", "namespace": "up"},
                "spec": {"release": "up", "until": rfc3339(600), "reason": "INC-9: until the fix ships",
                         "users": ["oncall"], "paths": ["/spec/replicas"]}}
        self.assertEqual(k("apply", "-f", "-", input=json.dumps(body)).returncode, 0)
        self.assertTrue(eventually(lambda: scale().returncode == 0, 10, 0.2), "the exception never opened")
        # The fix ships: the release's next revision is deployed, and the exception ends with it.
        release.upgrade(CHART, "up", {"replicas": 2})
        self.assertTrue(eventually(lambda: DENIED in scale().stderr, 10, 0.2),
                        f"still open after the upgrade:\n{locker.log_text()[-2000:]}")
        self.assertIn("LockException closed", locker.log_text())

    def test_kubectl_locker_unlock_creates_one_and_status_lists_it(self):
        env = dict(self.plane.env)
        out = self.plane.run([BIN, "kubectl", "unlock", "ex", "-n", "ex", "--for", "10m", "--reason", "INC-8: resize",
                              "--group", "sre", "--path", "/spec/replicas"], env=env)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("release ex/ex, for group sre, asked until", out.stdout)
        self.assertIn("helm-locker honours this LockException until", out.stdout)
        self.assertNotIn("the maximum", out.stdout)
        status = self.plane.run([BIN, "kubectl", "status", "-n", "ex", "-o", "json"], env=env)
        self.assertEqual(status.returncode, 0, status.stderr)
        exceptions = json.loads(status.stdout)["exceptions"]
        mine = [e for e in exceptions if e["reason"] == "INC-8: resize"]
        self.assertEqual(len(mine), 1, exceptions)
        self.assertEqual((mine[0]["groups"], mine[0]["paths"]), (["sre"], ["/spec/replicas"]))
        self.assertTrue(500 < mine[0]["secondsLeft"] <= 600, mine[0])
        # Longer than the locker's --exception-max-duration (1h here): the end printed is the
        # one the locker honours, and status agrees.
        out = self.plane.run([BIN, "kubectl", "unlock", "ex", "-n", "ex", "--for", "10000h", "--reason", "INC-9: long",
                              "--user", "oncall"], env=env)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("1h after its creation, the maximum (--exception-max-duration), not until", out.stdout)
        status = self.plane.run([BIN, "kubectl", "status", "-n", "ex", "-o", "json"], env=env)
        long = [e for e in json.loads(status.stdout)["exceptions"] if e["reason"] == "INC-9: long"]
        self.assertEqual(len(long), 1, status.stdout)
        self.assertTrue(3500 < long[0]["secondsLeft"] <= 3600, long[0])
        # Without anyone named it would open nothing: refused before anything is created.
        out = self.plane.run([BIN, "kubectl", "unlock", "ex", "-n", "ex", "--for", "10m", "--reason", "x"], env=env)
        self.assertNotEqual(out.returncode, 0)
        self.assertIn("--user or --group", out.stderr)


if __name__ == "__main__":
    unittest.main()
