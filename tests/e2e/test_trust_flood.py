"""A tenant's flood of small releases past her namespace's bound, on a real control plane, with
the locker under the chart's RBAC (tests/e2e/chart_rbac.py).

mallory may only create Secrets in her namespace `tenant` (a Role of that one verb: the
narrowest that writes release Secrets). She creates E2E_FLOOD_RELEASES (default 6,000) deployed
release Secrets of one ConfigMap each, in lists of 500, far past `--max-namespace-objects`
(set to 100 here). An admin's release in `team` was installed by Helm first.

Control: a locker whose bound holds all of hers indexes every release; its time to ready is the
baseline. The attack: a locker whose bound refuses all but 100 of hers must be ready within a
few times that baseline (each refused release cost a walk over her namespace's releases, so
her N releases cost every replica's start N squared), report her refused releases (the metric;
the log and Events are capped per namespace, not one line and one API write per release she
wrote), and keep following the cluster while they are there: the admin's drift is reverted
promptly, a release the admin installs after the start is locked at once, and the admin's
`helm upgrade` succeeds.

  cd tests/e2e && KUBEBUILDER_ASSETS=... HELM_LOCKER_BIN=... python -m unittest -v test_trust_flood
"""

import base64
import gzip
import json
import os
import time
import unittest

from chart_rbac import chart_locker, chart_rbac_env
from harness import PlaneTest, HERE, ControlPlane, eventually, register_webhook, unregister_webhook

CHART = os.path.join(HERE, "charts", "ops-agent")
NS = "team"
TENANT = "tenant"
OPS = "ops"
DENIED = "helm-locker"
FLOOD = int(os.environ.get("E2E_FLOOD_RELEASES", "6000"))
BOUND = 100


def release_secret(name):
    manifest = (f"---\n# Source: one/templates/cm.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n"
                f"  name: {name}\ndata:\n  v: chart\n")
    release = {"name": name, "namespace": TENANT, "version": 1,
               "info": {"status": "deployed", "description": "Install complete"},
               "chart": {"metadata": {"name": "one", "version": "1.0.0"}}, "manifest": manifest}
    payload = base64.b64encode(gzip.compress(json.dumps(release).encode())).decode()
    return {"apiVersion": "v1", "kind": "Secret", "type": "helm.sh/release.v1",
            "metadata": {"name": f"sh.helm.release.v1.{name}.v1", "namespace": TENANT,
                         "labels": {"owner": "helm", "name": name, "status": "deployed", "version": "1"}},
            "stringData": {"release": payload}}


class TrustFlood(PlaneTest):
    @classmethod
    def setUpClass(cls):
        cls.plane = ControlPlane()
        k = cls.plane.kubectl
        for ns in (NS, TENANT):
            assert k("create", "namespace", ns).returncode == 0
        assert k("-n", TENANT, "create", "role", "secret-writer", "--verb=create",
                 "--resource=secrets").returncode == 0
        assert k("-n", TENANT, "create", "rolebinding", "mallory-secrets", "--role=secret-writer",
                 "--user=mallory").returncode == 0
        assert k("create", "clusterrolebinding", "ops-admin", "--clusterrole=cluster-admin",
                 f"--user={OPS}").returncode == 0
        cls.env = chart_rbac_env(cls.plane)
        cls.plane.helm(NS).install(CHART, "guarded", {})
        time.sleep(1.2)  # creationTimestamps are whole seconds: hers are later than the admin's
        started = time.monotonic()
        names = [f"flood{i:05d}" for i in range(FLOOD)]
        for at in range(0, FLOOD, 500):
            items = [release_secret(name) for name in names[at:at + 500]]
            out = k("--as=mallory", "-n", TENANT, "create", "-f", "-",
                    input=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
            assert out.returncode == 0, out.stderr[-2000:]
        print(f"\nmallory created {FLOOD} release Secrets in {time.monotonic() - started:.1f} s", flush=True)

    @classmethod
    def tearDownClass(cls):
        cls.plane.down()

    def start(self, name, bound):
        """A locker of the chart's account with `--max-namespace-objects bound`, and its time to
        ready."""
        locker = chart_locker(self.plane, self.env, name, "--exempt-user", OPS,
                              "--max-namespace-objects", str(bound))
        self.addCleanup(locker.stop)
        started = time.monotonic()
        locker.wait_ready(timeout=600)
        return locker, time.monotonic() - started

    def test_a_flood_of_refused_releases_neither_slows_the_start_nor_stalls_the_watch(self):
        # Control: every release of hers fits.
        control, baseline = self.start("flood-fits", FLOOD * 2)
        self.assertTrue(eventually(lambda: (control.metric("helm_locker_releases_indexed") or 0) >= FLOOD + 1, 60),
                        control.log_text()[-3000:])
        self.assertEqual(control.metric("helm_locker_releases_over_namespace_bound_total") or 0, 0)
        control.stop()

        # The attack: all but BOUND of hers refused.
        locker, ready = self.start("flood", BOUND)
        print(f"\n{FLOOD} releases of one object in one namespace: ready in {baseline:.1f} s when all fit, "
              f"{ready:.1f} s when all but {BOUND} are refused ({ready / baseline:.2f}x)", flush=True)
        self.assertLess(ready, max(4 * baseline, baseline + 30),
                        f"the refused releases slow the start\n{locker.log_text()[-3000:]}")
        self.assertTrue(eventually(lambda: (locker.metric("helm_locker_releases_over_namespace_bound_total") or 0)
                                   >= FLOOD - BOUND, 60), locker.log_text()[-3000:])
        self.assertTrue(eventually(lambda: locker.metric("helm_locker_leader") == 1, 60), "never became leader")
        register_webhook(self.plane, locker, "flood")
        self.addCleanup(unregister_webhook, self.plane, "flood")

        # The watch is followed while hers are there: a drift is put back, a new release locks.
        setting = lambda: self.get("-n", NS, "configmap", "guarded-settings")["data"]["setting"]  # noqa: E731
        started = time.monotonic()
        self.ok(self.k(f"--as={OPS}", "-n", NS, "patch", "configmap", "guarded-settings", "--type=merge",
                       "-p", json.dumps({"data": {"setting": "drifted"}})))
        self.assertTrue(eventually(lambda: setting() == "from-the-chart", 30), locker.log_text()[-3000:])
        reverted = time.monotonic() - started
        helm = self.plane.helm(NS)
        helm.install(CHART, "later", {})
        started = time.monotonic()
        patch = lambda: self.k("-n", NS, "patch", "configmap", "later-settings", "--type=merge",  # noqa: E731
                               "-p", json.dumps({"data": {"setting": "mine"}}))
        self.assertTrue(eventually(lambda: DENIED in patch().stderr, 30, 0.2),
                        f"a release installed after the start is not locked\n{locker.log_text()[-3000:]}")
        print(f"with them refused: drift reverted in {reverted:.1f} s, a new release locked in "
              f"{time.monotonic() - started:.1f} s", flush=True)

        # What reports them is bounded by the namespace, not by what she wrote.
        log = locker.log_text()
        lines = [line for line in log.splitlines() if "release not indexed: its namespace" in line]
        self.assertLessEqual(len(lines), 20, f"{len(lines)} log lines for her refused releases")
        self.assertTrue(any("more release Secrets of this namespace" in line for line in log.splitlines()),
                        "no summary of the refused releases not logged one by one")
        events = self.get("-n", TENANT, "events", "--field-selector", "reason=ReleaseTooLarge")["items"]
        self.assertLessEqual(len(events), 20, f"{len(events)} Events for her refused releases")
        self.assertGreaterEqual(len(events), 1, "no Event for her refused releases")

        # Her releases within the bound lock; one refused does not (she may not patch either:
        # the admin's write stands for a write to each).
        self.assertIn(DENIED, self.denied_patch("flood00000"))
        self.assertNotIn(DENIED, self.denied_patch(f"flood{FLOOD - 1:05d}"))

        # The admin's upgrade goes through.
        helm.upgrade(CHART, "guarded", {"setting": "upgraded"})
        self.assertEqual(setting(), "upgraded")

    def denied_patch(self, name):
        """The error of a patch to her ConfigMap `name` (made by the admin, as her release's)."""
        cm = {"apiVersion": "v1", "kind": "ConfigMap",
              "metadata": {"name": name, "namespace": TENANT,
                           "annotations": {"meta.helm.sh/release-name": name, "meta.helm.sh/release-namespace": TENANT},
                           "labels": {"app.kubernetes.io/managed-by": "Helm"}},
              "data": {"v": "chart"}}
        self.k(f"--as={OPS}", "-n", TENANT, "create", "-f", "-", input=json.dumps(cm))
        return self.k("-n", TENANT, "patch", "configmap", name, "--type=merge",
                      "-p", json.dumps({"data": {"v": "mine"}})).stderr


if __name__ == "__main__":
    unittest.main()
