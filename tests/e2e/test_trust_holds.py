"""Issue 60, attacks 6 and 7, on a real control plane, with the locker under the chart's RBAC
(tests/e2e/chart_rbac.py).

6. Held content is written. A release revision written while the author webhook is away has no
   known author: its objects are held at what was live. alice (`edit` in team) writes such a
   revision of the admin's release that sets `hostNetwork: true` on its Deployment. Drift of a
   field the revision agrees with is put back; the held field is never written, by the forced
   apply either (its body is built from the paths that agreed with what was live), and not
   once a LockException open when the locker first saw the revision closes.
7. One small Secret takes the locker down. mallory (`edit` in her own namespace) writes a 435 kB
   release Secret holding 240 MiB of gzipped notes. The locker does not decompress it past
   --max-release-bytes: it stays up and ready, its peak memory barely moves, the Secret gets a
   `ReleaseTooLarge` Warning Event and `helm_locker_releases_too_large_total` counts it, and
   the admin's release stays locked. A restart with the Secret present is ready again.

After each, the admin's next `helm upgrade` succeeds.
"""

import base64
import datetime
import gzip
import json
import os
import time
import unittest
import zlib

from chart_rbac import chart_locker, chart_rbac_env
from harness import PlaneTest, HERE, ROOT, ControlPlane, eventually, register_author_webhook, register_webhook, unregister_webhook

CHART = os.path.join(HERE, "charts", "ops-agent")
CRD = os.path.join(ROOT, "charts", "helm-locker", "crds", "lockexceptions.helm-locker.io.yaml")
NS = "team"
TENANT = "tenant"
# Writes drift by hand; exempt at admission (--exempt-user ops).
OPS = "ops"
DENIED = "helm-locker"
# The locker's default --max-release-bytes.
LIMIT = 16 * 1024 * 1024
HOST_NETWORK = "/spec/template/spec/hostNetwork"


def rfc3339(seconds_from_now):
    t = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=seconds_from_now)
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def decode(secret):
    return json.loads(gzip.decompress(base64.b64decode(base64.b64decode(secret["data"]["release"]))))


def encode(release):
    return base64.b64encode(base64.b64encode(gzip.compress(json.dumps(release).encode()))).decode()


def notes_bomb(mib, claim=None):
    """A release whose notes are `mib` MiB of one letter, gzipped as it streams (the test never
    holds it whole); `claim`: the size its gzip trailer says instead of the real one."""
    head = b'{"name":"bomb","namespace":"tenant","version":1,"info":{"status":"deployed","notes":"'
    tail = b'"},"chart":{"metadata":{"name":"bomb","version":"1.0.0"}},"manifest":""}'
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = b"A" * (1 << 20)
    gz = c.compress(head) + b"".join(c.compress(block) for _ in range(mib)) + c.compress(tail) + c.flush()
    if claim is not None:
        gz = gz[:-4] + claim.to_bytes(4, "little")
    return gz


def decompressed_size(gz):
    """What the payload decompresses to, counted a piece at a time (at most 1 MiB held); of a
    payload whose trailer lies, at least what came out before the trailer was checked."""
    d, total, rest = zlib.decompressobj(31), 0, gz
    try:
        while rest:
            total += len(d.decompress(rest, 1 << 20))
            rest = d.unconsumed_tail
    except zlib.error:
        pass
    return total


def vm_hwm_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise AssertionError("no VmHWM")


class TrustHolds(PlaneTest):
    @classmethod
    def setUpClass(cls):
        cls.plane = ControlPlane()
        k = cls.plane.kubectl
        assert k("apply", "-f", CRD).returncode == 0
        k("wait", "--for=condition=established", "crd/lockexceptions.helm-locker.io", "--timeout=30s")
        for ns in (NS, TENANT):
            assert k("create", "namespace", ns).returncode == 0
        assert k("-n", NS, "create", "rolebinding", "alice-edit", "--clusterrole=edit", "--user=alice").returncode == 0
        assert k("-n", TENANT, "create", "rolebinding", "mallory-edit", "--clusterrole=edit",
                 "--user=mallory").returncode == 0
        assert k("create", "clusterrolebinding", "ops-admin", "--clusterrole=cluster-admin",
                 f"--user={OPS}").returncode == 0
        cls.env = chart_rbac_env(cls.plane)

    @classmethod
    def tearDownClass(cls):
        cls.plane.down()

    def start(self, name):
        locker = chart_locker(self.plane, self.env, name, "--exempt-user", OPS)
        self.addCleanup(locker.stop)
        locker.wait_ready()
        self.assertTrue(eventually(lambda: locker.metric("helm_locker_leader") == 1, 30), "never became leader")
        return locker

    def deployment(self, release):
        return self.get("-n", NS, "deploy", f"{release}-agent")

    def host_network(self, release):
        return self.deployment(release)["spec"]["template"]["spec"].get("hostNetwork", False)

    def setting(self, release):
        return self.get("-n", NS, "configmap", f"{release}-settings").get("data")

    def forge(self, release, change, as_user):
        """Revision 2 of `release`, written by `as_user` from revision 1, `change` applied to
        each object of its manifest (JSON documents: Helm reads them as YAML)."""
        secret = self.get("-n", NS, "secret", f"sh.helm.release.v1.{release}.v1")
        body = decode(secret)
        objects = []
        for doc in body["manifest"].split("\n---\n"):
            text = "\n".join(line for line in doc.splitlines() if not line.startswith("# Source:") and line.strip() != "---")
            if not text.strip():
                continue
            out = self.ok(self.k("create", "--dry-run=client", "-o", "json", "-f", "-", input=text))
            obj = json.loads(out.stdout)
            if "namespace:" not in text:
                obj["metadata"].pop("namespace", None)
            objects.append(change(obj))
        body["manifest"] = "".join(f"---\n# Source: ops-agent/templates/{i}.yaml\n{json.dumps(o)}\n"
                                   for i, o in enumerate(objects))
        body["version"] = 2
        body["info"]["status"] = "deployed"
        forged = {"apiVersion": "v1", "kind": "Secret", "type": "helm.sh/release.v1",
                  "metadata": {"name": f"sh.helm.release.v1.{release}.v2", "namespace": NS,
                               "labels": {"owner": "helm", "name": release, "status": "deployed", "version": "2"}},
                  "data": {"release": encode(body)}}
        self.ok(self.k(f"--as={as_user}", "-n", NS, "create", "-f", "-", input=json.dumps(forged)))
        # Helm supersedes the revision it replaces.
        self.ok(self.k("-n", NS, "label", "secret", f"sh.helm.release.v1.{release}.v1", "status=superseded", "--overwrite"))

    def test_held_content_is_never_written_by_the_revert_nor_once_an_exception_closes(self):
        locker = self.start("holds")
        helm = self.plane.helm(NS)
        for release in ("held", "heldx"):
            helm.install(CHART, release, {})
            self.assertTrue(eventually(lambda: self.get("-n", NS, "secret", f"sh.helm.release.v1.{release}.v1"), 10))
        # heldx: a LockException on the Deployment's hostNetwork, open when the locker first
        # sees the unknown revision.
        exception = {"apiVersion": "helm-locker.io/v1alpha1", "kind": "LockException",
                     "metadata": {"name": "heldx-hostnetwork", "namespace": NS},
                     "spec": {"release": "heldx", "until": rfc3339(900), "reason": "INC-60: test",
                              "users": [OPS], "paths": [HOST_NETWORK],
                              "objects": [{"kind": "Deployment", "name": "heldx-agent"}]}}
        self.ok(self.k("apply", "-f", "-", input=json.dumps(exception)))
        time.sleep(2)

        # The author webhook is away: alice (edit in team) writes revision 2 of each, with the
        # Deployment on the node's network.
        locker.unregister_author_webhook()
        time.sleep(2)

        def host(o):
            # The Deployment on the node's network; the ConfigMap without its setting (which a
            # forced apply of the revision would drop: Helm's manager applied it before).
            if o["kind"] == "Deployment":
                o["spec"]["template"]["spec"]["hostNetwork"] = True
            if o["kind"] == "ConfigMap":
                o["data"] = {"other": "from-alice"}
            return o

        for release in ("held", "heldx"):
            self.forge(release, host, "alice")
        register_author_webhook(self.plane, locker)
        locker.stamping = True
        # Control: the revision is unknown (no stamp), it sets hostNetwork, and live has none:
        # the held field really differs from what is live.
        for release in ("held", "heldx"):
            secret = self.get("-n", NS, "secret", f"sh.helm.release.v1.{release}.v2")
            self.assertNotIn("helm-locker.io/author-proof", secret["metadata"].get("annotations") or {})
            self.assertIn('"hostNetwork": true', decode(secret)["manifest"])
            self.assertNotIn("from-the-chart", decode(secret)["manifest"])
            self.assertFalse(self.host_network(release))
            self.assertEqual(self.setting(release), {"setting": "from-the-chart"})
        self.assertTrue(eventually(lambda: (locker.metric("helm_locker_held_objects") or 0) >= 2, 20),
                        locker.log_text()[-3000:])

        # Drift of a field the revision agrees with (replicas 1): put back, and nothing held is
        # written with it.
        label = "app.kubernetes.io/managed-by"
        for release in ("held", "heldx"):
            self.ok(self.k(f"--as={OPS}", "-n", NS, "scale", "deploy", f"{release}-agent", "--replicas=3"))
            self.ok(self.k(f"--as={OPS}", "-n", NS, "label", "configmap", f"{release}-settings", f"{label}=kubectl", "--overwrite"))
        for release in ("held", "heldx"):
            self.assertTrue(eventually(lambda: self.deployment(release)["spec"]["replicas"] == 1, 20),
                            f"{release} drift never put back\n{locker.log_text()[-3000:]}")
            cm = lambda: self.get("-n", NS, "configmap", f"{release}-settings")  # noqa: E731
            self.assertTrue(eventually(lambda: cm()["metadata"]["labels"].get(label) == "Helm", 20),
                            f"{release} label never put back\n{locker.log_text()[-3000:]}")
            self.assertFalse(self.host_network(release), locker.log_text()[-3000:])
            self.assertEqual(self.setting(release), {"setting": "from-the-chart"})
        self.assertIn("drift reverted", locker.log_text())

        # The exception ends: the revision's hostNetwork is still held, not written.
        self.ok(self.k("-n", NS, "delete", "lockexception", "heldx-hostnetwork"))
        time.sleep(2)
        self.ok(self.k(f"--as={OPS}", "-n", NS, "scale", "deploy", "heldx-agent", "--replicas=4"))
        self.assertTrue(eventually(lambda: self.deployment("heldx")["spec"]["replicas"] == 1, 20),
                        locker.log_text()[-3000:])
        time.sleep(3)
        for release in ("held", "heldx"):
            self.assertFalse(self.host_network(release), locker.log_text()[-3000:])
            self.assertEqual(self.setting(release), {"setting": "from-the-chart"})

        # The admin's next upgrade succeeds, and the release is the admin's again.
        for release in ("held", "heldx"):
            helm.upgrade(CHART, release, {})
            self.assertFalse(self.host_network(release))
            self.assertEqual(self.deployment(release)["spec"]["replicas"], 1)

    def test_a_cluster_scoped_custom_resource_of_an_unknown_revision_is_not_written(self):
        # A kind the locker's tables do not know (a custom resource), cluster-scoped: the index
        # places it in the release's namespace; only discovery says where it lives.
        crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
               "metadata": {"name": "gadgets.example.com"},
               "spec": {"group": "example.com", "scope": "Cluster",
                        "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
                        "versions": [{"name": "v1", "served": True, "storage": True,
                                      "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}}
        self.ok(self.k("apply", "-f", "-", input=json.dumps(crd)))
        self.ok(self.k("wait", "--for=condition=established", "crd/gadgets.example.com", "--timeout=30s"))
        chart = os.path.join(self.plane.dir, "gadget-chart")
        os.makedirs(os.path.join(chart, "templates"), exist_ok=True)
        with open(os.path.join(chart, "Chart.yaml"), "w") as f:
            f.write("apiVersion: v2\nname: gadget\nversion: 1.0.0\n")
        with open(os.path.join(chart, "templates", "gadget.yaml"), "w") as f:
            f.write("apiVersion: example.com/v1\nkind: Gadget\nmetadata:\n  name: {{ .Release.Name }}-gadget\n"
                    "spec:\n  size: 1\n  color: blue\n")
        locker = self.start("holds-cr")
        helm = self.plane.helm(NS)
        helm.install(chart, "gadgets", {})
        gadget = lambda: self.get("gadget", "gadgets-gadget")["spec"]  # noqa: E731
        drift = lambda color: self.ok(self.k(f"--as={OPS}", "patch", "gadget", "gadgets-gadget", "--type=merge",  # noqa: E731
                                             "-p", json.dumps({"spec": {"color": color}})))
        # Control: under the admin's own revision, the reverter writes this kind (its RBAC lets
        # it, cluster-wide): drift is put back.
        drift("red")
        self.assertTrue(eventually(lambda: gadget()["color"] == "blue", 20), locker.log_text()[-3000:])

        # The author webhook is away: alice writes revision 2, the gadget larger.
        locker.unregister_author_webhook()
        time.sleep(2)

        def larger(o):
            if o["kind"] == "Gadget":
                o["spec"]["size"] = 99
            return o

        self.forge("gadgets", larger, "alice")
        register_author_webhook(self.plane, locker)
        locker.stamping = True
        secret = self.get("-n", NS, "secret", "sh.helm.release.v1.gadgets.v2")
        self.assertNotIn("helm-locker.io/author-proof", secret["metadata"].get("annotations") or {})
        # Drift again: a cluster-scoped object of an unknown revision is not written at all,
        # neither the drift put back nor the revision's size; the refusal is reported.
        drift("green")
        self.assertTrue(eventually(lambda: "cluster-scoped" in locker.log_text(), 20), locker.log_text()[-3000:])
        time.sleep(5)
        self.assertEqual(gadget(), {"size": 1, "color": "green"}, locker.log_text()[-3000:])

        # Nothing reverts it meanwhile: ops puts the colour back by hand (a value other than
        # the chart's, co-owned by kubectl, would make Helm 4's server-side apply conflict).
        # The admin's next upgrade then succeeds, and the gadget is the chart's.
        drift("blue")
        helm.upgrade(chart, "gadgets", {})
        self.assertEqual(gadget(), {"size": 1, "color": "blue"})

    def test_a_gzip_bomb_release_secret_is_skipped_and_reported_and_the_locker_stays_up(self):
        locker = self.start("bomb")
        register_webhook(self.plane, locker, "holds-bomb")
        self.addCleanup(unregister_webhook, self.plane, "holds-bomb")
        helm = self.plane.helm(NS)
        helm.install(CHART, "guarded", {})
        patch = lambda: self.k("--as=alice", "-n", NS, "patch", "configmap", "guarded-settings",  # noqa: E731
                               "-p", '{"data":{"setting":"from-alice"}}')
        self.assertTrue(eventually(lambda: DENIED in patch().stderr, 15, 0.3), "never locked")
        # Control: alice may patch ConfigMaps there; the lock is what denies her.
        self.assertEqual(self.k("auth", "can-i", "--as=alice", "patch", "configmaps", "-n", NS).stdout.strip(), "yes")
        time.sleep(2)
        before = vm_hwm_kib(locker.process.pid)

        # mallory writes, in her own namespace, a release Secret as small as the (about
        # 430 kB) holding 240 MiB of notes; and one whose gzip trailer lies (claims 1 kB).
        bombs = {"sh.helm.release.v1.bomb.v1": notes_bomb(240), "sh.helm.release.v1.bomb.v2": notes_bomb(40, claim=1000)}
        for i, (name, gz) in enumerate(bombs.items(), 1):
            # Control: really larger than the limit once decompressed.
            self.assertGreater(decompressed_size(gz), LIMIT)
            secret = {"apiVersion": "v1", "kind": "Secret", "type": "helm.sh/release.v1",
                      "metadata": {"name": name, "namespace": TENANT,
                                   "labels": {"owner": "helm", "name": "bomb", "status": "deployed", "version": str(i)}},
                      "data": {"release": base64.b64encode(base64.b64encode(gz)).decode()}}
            body = json.dumps(secret)
            self.assertLess(len(body), 1024 * 1024)
            self.ok(self.k("--as=mallory", "-n", TENANT, "create", "-f", "-", input=body))
        self.assertGreater(len(base64.b64encode(base64.b64encode(bombs["sh.helm.release.v1.bomb.v1"]))), 400_000)

        # Reported: an Event on each Secret, the metric, a log line without contents.
        for name in bombs:
            self.assertTrue(eventually(lambda: self.object_events(TENANT, name, "ReleaseTooLarge"), 20, 0.5),
                            f"no ReleaseTooLarge event on {name}\n{locker.log_text()[-3000:]}")
        self.assertGreaterEqual(locker.metric("helm_locker_releases_too_large_total") or 0, 2)
        log = locker.log_text()
        self.assertIn("release Secret too large", log)
        self.assertNotIn("AAAAAAAA", log)
        # Up, ready, and its peak memory barely moved: the bomb was never decompressed (the
        # first one's trailer says 240 MiB; the liar's is counted into nothing). 32 MiB is what
        # a release as large as the limit may cost to decode (twice 16 MiB); the attack took
        # 777 MB more.
        self.assertIsNone(locker.process.poll())
        self.assertTrue(locker.ready())
        after = vm_hwm_kib(locker.process.pid)
        print(f"\nVmHWM of the locker: {before} kB before the bombs, {after} kB after")
        self.assertLess(after - before, 32 * 1024, f"VmHWM {before} kB -> {after} kB")
        # Other releases stay locked.
        self.assertIn(DENIED, patch().stderr)
        self.assertEqual(self.get("-n", NS, "configmap", "guarded-settings")["data"]["setting"], "from-the-chart")

        # A restart finds the bombs in its first list and is ready again (no crash loop).
        unregister_webhook(self.plane, "holds-bomb")
        locker.stop()
        locker.start()
        locker.wait_ready()
        register_webhook(self.plane, locker, "holds-bomb")
        self.assertTrue(eventually(lambda: DENIED in patch().stderr, 15, 0.3), locker.log_text()[-3000:])
        restarted = vm_hwm_kib(locker.process.pid)
        print(f"VmHWM of the locker restarted with the bombs present: {restarted} kB")
        self.assertLess(restarted, before + 32 * 1024)
        self.assertGreaterEqual(locker.metric("helm_locker_releases_too_large_total") or 0, 2)

        # The admin's next upgrade succeeds.
        helm.upgrade(CHART, "guarded", {"setting": "upgraded"})
        self.assertEqual(self.get("-n", NS, "configmap", "guarded-settings")["data"]["setting"], "upgraded")


if __name__ == "__main__":
    unittest.main()
