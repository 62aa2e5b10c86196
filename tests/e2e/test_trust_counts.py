"""Issue 67, attack 5 (bounded in objects, not only bytes), on a real control plane, with the
locker under the chart's RBAC (tests/e2e/chart_rbac.py).

mallory (`edit` in her own namespace `tenant`) writes deployed release Secrets of many small
ConfigMaps: before, three of 200,000 took every replica down (OOM) and logged a line per object.
Control first: a release of hers within `--max-release-objects` (set low here, 40, to prove the
rule quickly) is indexed and locks its objects, and the admin's release's drift is reverted.
Then one over the bound: no revision (its objects stay open), a `ReleaseTooLarge` Warning Event
on the Secret, `helm_locker_releases_too_many_objects_total`, one log line naming it, no line
per object; the admin's drift is still reverted promptly while it is there; a restart with it
present is ready again and its peak memory is printed. The admin's `helm upgrade` succeeds.
The second test starts the locker on twelve releases at the default bounds (5,000 objects,
16 MiB each; E2E_COUNTS_RELEASES sizes it) and one over: under the chart's 256 MiB (210 MiB on
a 2-vCPU Xeon, debug build; 371 MiB before). The bound per namespace (--max-namespace-objects,
20,000) keeps four of them: the index no longer grows with each (20 releases: 224 MiB, as 12).
The third: mallory's releases past that bound (set low here, to the admin's release and one of
hers) never push out an admin's release in her namespace created first, also after a restart
that lists hers first (by name); hers over it is reported (ReleaseTooLarge, the metric, one log
line) and locks nothing, and is indexed once she deletes one of hers.

  cd tests/e2e && KUBEBUILDER_ASSETS=... HELM_LOCKER_BIN=... python -m unittest -v test_trust_counts
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
# Writes drift by hand; exempt at admission (--exempt-user ops).
OPS = "ops"
DENIED = "helm-locker"
BOUND = 40


def config_maps(prefix, n):
    return "".join(f"---\n# Source: many/templates/cm.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n"
                   f"  name: {prefix}{i}\ndata:\n  v: chart\n" for i in range(n))


def release_secret(name, manifest):
    release = {"name": name, "namespace": TENANT, "version": 1,
               "info": {"status": "deployed", "description": "Install complete"},
               "chart": {"metadata": {"name": "many", "version": "1.0.0"}}, "manifest": manifest}
    return {"apiVersion": "v1", "kind": "Secret", "type": "helm.sh/release.v1",
            "metadata": {"name": f"sh.helm.release.v1.{name}.v1", "namespace": TENANT,
                         "labels": {"owner": "helm", "name": name, "status": "deployed", "version": "1"}},
            "data": {"release": base64.b64encode(base64.b64encode(gzip.compress(json.dumps(release).encode()))).decode()}}


def in_namespace(secret, ns):
    """`secret` (of release_secret) as a release of namespace `ns`."""
    release = json.loads(gzip.decompress(base64.b64decode(base64.b64decode(secret["data"]["release"]))))
    release["namespace"] = ns
    secret["metadata"]["namespace"] = ns
    secret["data"]["release"] = base64.b64encode(base64.b64encode(gzip.compress(json.dumps(release).encode()))).decode()
    return secret


def vm_hwm_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise AssertionError("no VmHWM")


class TrustCounts(PlaneTest):
    @classmethod
    def setUpClass(cls):
        cls.plane = ControlPlane()
        k = cls.plane.kubectl
        for ns in (NS, TENANT):
            assert k("create", "namespace", ns).returncode == 0
        assert k("-n", TENANT, "create", "rolebinding", "mallory-edit", "--clusterrole=edit",
                 "--user=mallory").returncode == 0
        assert k("create", "clusterrolebinding", "ops-admin", "--clusterrole=cluster-admin",
                 f"--user={OPS}").returncode == 0
        cls.env = chart_rbac_env(cls.plane)

    @classmethod
    def tearDownClass(cls):
        cls.plane.down()

    def tenant_objects(self, prefix, n):
        """mallory's ConfigMaps, annotated as her release's (what the lock needs to hold them)."""
        for i in range(n):
            cm = {"apiVersion": "v1", "kind": "ConfigMap",
                  "metadata": {"name": f"{prefix}{i}", "namespace": TENANT,
                               "annotations": {"meta.helm.sh/release-name": prefix, "meta.helm.sh/release-namespace": TENANT},
                               "labels": {"app.kubernetes.io/managed-by": "Helm"}},
                  "data": {"v": "chart"}}
            self.ok(self.k("--as=mallory", "-n", TENANT, "create", "-f", "-", input=json.dumps(cm)))

    def test_a_release_of_more_objects_than_the_bound_is_ignored_and_reported_and_others_are_still_reverted(self):
        locker = chart_locker(self.plane, self.env, "counts", "--exempt-user", OPS,
                              "--max-release-objects", str(BOUND))
        self.addCleanup(locker.stop)
        locker.wait_ready()
        self.assertTrue(eventually(lambda: locker.metric("helm_locker_leader") == 1, 30), "never became leader")
        register_webhook(self.plane, locker, "counts")
        self.addCleanup(unregister_webhook, self.plane, "counts")
        helm = self.plane.helm(NS)
        helm.install(CHART, "guarded", {})
        setting = lambda: self.get("-n", NS, "configmap", "guarded-settings")["data"]["setting"]  # noqa: E731
        drift = lambda value: self.ok(self.k(f"--as={OPS}", "-n", NS, "patch", "configmap", "guarded-settings",  # noqa: E731
                                             "--type=merge", "-p", json.dumps({"data": {"setting": value}})))
        drift("drifted")
        self.assertTrue(eventually(lambda: setting() == "from-the-chart", 20), locker.log_text()[-3000:])

        # Control: a release of hers at the bound is indexed and locks its objects.
        self.tenant_objects("small", 2)
        small = config_maps("small", BOUND)
        self.ok(self.k("--as=mallory", "-n", TENANT, "create", "-f", "-", input=json.dumps(release_secret("small", small))))
        patch = lambda name: self.k("--as=mallory", "-n", TENANT, "patch", "configmap", name,  # noqa: E731
                                    "-p", '{"data":{"v":"mine"}}')
        self.assertTrue(eventually(lambda: DENIED in patch("small0").stderr, 20, 0.5),
                        f"a release at the bound is not locked\n{locker.log_text()[-3000:]}")

        # One over the bound: no revision, reported, her objects open.
        self.tenant_objects("big", 2)
        big = config_maps("big", BOUND + 1)
        self.ok(self.k("--as=mallory", "-n", TENANT, "create", "-f", "-", input=json.dumps(release_secret("big", big))))
        self.assertTrue(eventually(lambda: self.object_events(TENANT, "sh.helm.release.v1.big.v1", "ReleaseTooLarge"), 20, 0.5),
                        f"no ReleaseTooLarge event\n{locker.log_text()[-3000:]}")
        self.assertGreaterEqual(locker.metric("helm_locker_releases_too_many_objects_total") or 0, 1)
        self.assertEqual(patch("big0").returncode, 0, "an ignored release locked its objects")
        log = locker.log_text()
        self.assertIn(f"release renders {BOUND + 1} objects", log)
        # One line for her two releases' shared nothing, and none per object.
        self.assertLessEqual(log.count("claimed by several releases"), 1)

        # While it is there, the admin's drift is still put back promptly.
        started = time.monotonic()
        drift("drifted again")
        self.assertTrue(eventually(lambda: setting() == "from-the-chart", 20), locker.log_text()[-3000:])
        print(f"\ndrift reverted in {time.monotonic() - started:.1f} s with the over-bound release present")

        # A restart with it present is ready, and reports it again.
        unregister_webhook(self.plane, "counts")
        locker.stop()
        locker.start()
        locker.wait_ready()
        register_webhook(self.plane, locker, "counts")
        self.assertTrue(eventually(lambda: DENIED in patch("small0").stderr, 20, 0.5), locker.log_text()[-3000:])
        self.assertEqual(patch("big1").returncode, 0)
        self.assertGreaterEqual(locker.metric("helm_locker_releases_too_many_objects_total") or 0, 1)
        print(f"VmHWM of the locker restarted with it present: {vm_hwm_kib(locker.process.pid)} kB")

        # The admin's next upgrade succeeds.
        helm.upgrade(CHART, "guarded", {"setting": "upgraded"})
        self.assertEqual(setting(), "upgraded")


    def test_twelve_full_releases_at_the_default_bounds_start_under_the_charts_memory_limit(self):
        # A tenant's worst case within the default bounds: RELEASES Secrets (about 50 kB each)
        # of 5,000 ConfigMaps of 3.2 kB each (16 MiB decompressed, just under
        # --max-release-bytes), in one list page; and one release of 5,001, ignored.
        releases, filler = int(os.environ.get("E2E_COUNTS_RELEASES", "12")), "x" * 3200
        full = "".join(f"---\n# Source: many/templates/cm.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n"
                       f"  name: full{i}\ndata:\n  v: {filler}\n" for i in range(5000))
        for r in range(releases):
            self.ok(self.k("--as=mallory", "-n", TENANT, "create", "-f", "-",
                           input=json.dumps(release_secret(f"full{r}", full))))
        self.ok(self.k("--as=mallory", "-n", TENANT, "create", "-f", "-",
                       input=json.dumps(release_secret("over", config_maps("over", 5001)))))
        locker = chart_locker(self.plane, self.env, "counts-default", "--exempt-user", OPS)
        self.addCleanup(locker.stop)
        started = time.monotonic()
        locker.wait_ready(timeout=120)
        ready = time.monotonic() - started
        peak = vm_hwm_kib(locker.process.pid)
        print(f"\n{releases} releases of 5,000 objects (16 MiB each) and one of 5,001: ready in {ready:.1f} s, "
              f"VmHWM {peak} kB, {locker.metric('helm_locker_objects_indexed')} objects indexed")
        self.assertTrue(eventually(lambda: (locker.metric("helm_locker_releases_too_many_objects_total") or 0) >= 1, 20),
                        locker.log_text()[-3000:])
        self.assertLess(peak, 256 * 1024, "over the chart's memory limit")
        self.assertLessEqual(locker.log_text().count("claimed by several releases"), releases)
        self.assertTrue(eventually(lambda: locker.metric("helm_locker_leader") == 1, 30), "never became leader")
        # The admin's release is installed and its drift reverted while they are there.
        register_webhook(self.plane, locker, "counts-default")
        self.addCleanup(unregister_webhook, self.plane, "counts-default")
        helm = self.plane.helm("default")
        helm.install(CHART, "admin", {})
        self.ok(self.k(f"--as={OPS}", "-n", "default", "patch", "configmap", "admin-settings", "--type=merge",
                       "-p", json.dumps({"data": {"setting": "drifted"}})))
        setting = lambda: self.get("-n", "default", "configmap", "admin-settings")["data"]["setting"]  # noqa: E731
        self.assertTrue(eventually(lambda: setting() == "from-the-chart", 20), locker.log_text()[-3000:])
        helm.upgrade(CHART, "admin", {"setting": "upgraded"})
        self.assertEqual(setting(), "upgraded")
        for r in range(releases):
            self.k("-n", TENANT, "delete", "secret", f"sh.helm.release.v1.full{r}.v1")

    def test_a_tenants_releases_over_the_namespace_bound_never_push_out_an_admins_created_first(self):
        ns = "tenant-full"
        self.ok(self.k("create", "namespace", ns))
        self.ok(self.k("-n", ns, "create", "rolebinding", "mallory-edit", "--clusterrole=edit", "--user=mallory"))
        # The admin's release in her namespace, created first (helm, not her).
        helm = self.plane.helm(ns)
        helm.install(CHART, "zz-admin", {})
        secret = self.get("-n", ns, "secret", "sh.helm.release.v1.zz-admin.v1")
        manifest = json.loads(gzip.decompress(base64.b64decode(base64.b64decode(secret["data"]["release"]))))["manifest"]
        admin = sum(1 for line in manifest.splitlines() if line.startswith("kind:"))
        # Her two releases of 20, named to be listed first. Bound: the admin's and one of hers;
        # in name order her two would fit and the admin's would not (40 <= bound < 40 + admin).
        bound = 39 + admin
        time.sleep(1.2)  # creationTimestamps are whole seconds: hers are later than the admin's
        locker = chart_locker(self.plane, self.env, "counts-ns", "--exempt-user", OPS,
                              "--max-namespace-objects", str(bound))
        self.addCleanup(locker.stop)
        locker.wait_ready()
        self.assertTrue(eventually(lambda: locker.metric("helm_locker_leader") == 1, 30), "never became leader")
        register_webhook(self.plane, locker, "counts-ns")
        self.addCleanup(unregister_webhook, self.plane, "counts-ns")

        def her_release(name):
            self.ok(self.k("--as=mallory", "-n", ns, "create", "-f", "-",
                           input=json.dumps(in_namespace(release_secret(name, config_maps(name, 20)), ns))))
            cm = {"apiVersion": "v1", "kind": "ConfigMap",
                  "metadata": {"name": f"{name}0", "namespace": ns,
                               "annotations": {"meta.helm.sh/release-name": name, "meta.helm.sh/release-namespace": ns},
                               "labels": {"app.kubernetes.io/managed-by": "Helm"}},
                  "data": {"v": "chart"}}
            self.ok(self.k("--as=mallory", "-n", ns, "create", "-f", "-", input=json.dumps(cm)))

        patch = lambda name: self.k("--as=mallory", "-n", ns, "patch", "configmap", name,  # noqa: E731
                                    "-p", '{"data":{"v":"mine"}}')
        her_release("aa-one")
        time.sleep(1.2)
        her_release("aa-two")
        self.assertTrue(eventually(lambda: DENIED in patch("aa-one0").stderr, 20, 0.5),
                        f"her release within the bound is not locked\n{locker.log_text()[-3000:]}")
        self.assertTrue(eventually(lambda: self.object_events(ns, "sh.helm.release.v1.aa-two.v1", "ReleaseTooLarge"), 20, 0.5),
                        f"no ReleaseTooLarge event\n{locker.log_text()[-3000:]}")
        self.assertEqual(patch("aa-two0").returncode, 0, "a release over the namespace bound locked its objects")

        def admin_locked():
            # Her write to the admin's object is denied, and an exempt drift is put back.
            denied = self.k("--as=mallory", "-n", ns, "patch", "configmap", "zz-admin-settings", "--type=merge",
                            "-p", json.dumps({"data": {"setting": "hers"}}))
            self.assertIn(DENIED, denied.stderr, f"the admin's release is not locked\n{locker.log_text()[-3000:]}")
            self.ok(self.k(f"--as={OPS}", "-n", ns, "patch", "configmap", "zz-admin-settings", "--type=merge",
                           "-p", json.dumps({"data": {"setting": "drifted"}})))
            setting = lambda: self.get("-n", ns, "configmap", "zz-admin-settings")["data"]["setting"]  # noqa: E731
            self.assertTrue(eventually(lambda: setting() == "from-the-chart", 20), locker.log_text()[-3000:])

        admin_locked()
        # A restart lists hers first (by name): the admin's, created first, is still kept.
        unregister_webhook(self.plane, "counts-ns")
        locker.stop()
        locker.start()
        locker.wait_ready()
        register_webhook(self.plane, locker, "counts-ns")
        self.assertTrue(eventually(lambda: DENIED in patch("aa-one0").stderr, 20, 0.5), locker.log_text()[-3000:])
        admin_locked()
        self.assertEqual(patch("aa-two0").returncode, 0, "over the bound after a restart, yet locked")
        self.assertGreaterEqual(locker.metric("helm_locker_releases_over_namespace_bound_total") or 0, 1)
        log = locker.log_text()
        # One line per refusal of her release (at most one before the restart and one after),
        # never one per object.
        lines = [line for line in log.splitlines()
                 if "release not indexed: its namespace" in line and f"release={ns}/" in line]
        self.assertTrue(1 <= len(lines) <= 2 and all("aa-two" in line for line in lines), lines)
        # She deletes one of hers: the next is indexed.
        self.ok(self.k("--as=mallory", "-n", ns, "delete", "secret", "sh.helm.release.v1.aa-one.v1"))
        self.assertTrue(eventually(lambda: DENIED in patch("aa-two0").stderr, 20, 0.5),
                        f"room made, yet her next release is not indexed\n{locker.log_text()[-3000:]}")
        # The admin's upgrade goes through.
        helm.upgrade(CHART, "zz-admin", {"setting": "upgraded"})
        self.assertEqual(self.get("-n", ns, "configmap", "zz-admin-settings")["data"]["setting"], "upgraded")


if __name__ == "__main__":
    unittest.main()
