"""Issue 67, attack 2 and the replay inside the stamp's window, on a real control plane with the
locker run as the chart runs it (its ServiceAccount and the chart's RBAC: chart_rbac.py), both
webhooks registered as the chart registers them (the validating one, and the author webhook with
`failurePolicy: Ignore`), and `--trusted-storage-namespace flux-system,flux-system/configmap`
(the admin trusts both drivers there, so only the stamp decides).

1. No write opts out of the stamp. alice may only create ConfigMaps in `flux-system`. Control:
   her release ConfigMap of `apps/web` with a name is stamped as alice and refused (she may not
   create ConfigMaps in `apps`): it locks nothing, bob (`edit` in `apps`) still patches the
   object it claims. The attack: the same object with `metadata.generateName` (before: stamped
   over no name, `BadProof`, and unknown counted in a trusted namespace) is refused by the author
   webhook, whose explicit denial holds whatever its failurePolicy; nothing is stored.
2. A stamp seen is spent. The admin's revision 1 of a release binding alice to a ClusterRole
   that reads Secrets, saved by alice (`edit` in `team`), is created again from her copy inside
   the 60 s window while the author webhook is away, after the admin's upgrade took her binding
   away and she deleted the revisions. Control: a locker process started after the stamp was
   made (it never saw it) takes the stamp as the admin's and gives the binding back. Defended:
   the process that saw the stamp on the first Secret takes the re-created one as a replay
   (`UnknownAuthor`: "made for an earlier write"), and the binding stays away.

After each, the rightful user's `helm upgrade` succeeds.

    cd tests/e2e && KUBEBUILDER_ASSETS=/root/.cache/kube-testenv/unpacked/v1.36.2 \\
      HELM_LOCKER_BIN=../../target/debug/helm-locker ../../.venv-e2e/bin/python -m unittest -v test_trust_generate_name
"""

import base64
import copy
import gzip
import json
import os
import time
import unittest

from chart_rbac import chart_rbac_env, locked, unlock
from harness import PlaneTest, HERE, ControlPlane, eventually, register_author_webhook, write_files

GRANTS = os.path.join(HERE, "charts", "grants")
OPS = "ops"
SETTLE = 12.0
TRUSTED = "flux-system,flux-system/configmap"
CHART = {
    "Chart.yaml": "apiVersion: v2\nname: site\nversion: 0.1.0\n",
    "templates/settings.yaml": """apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-settings
data:
  colour: {{ .Values.colour | default "blue" | quote }}
""",
}
SETTINGS = """---
# Source: site/templates/settings.yaml
apiVersion: v1
kind: ConfigMap
metadata:
  name: web-settings
  namespace: apps
data:
  colour: "blue"
"""


def release_config_map(body, generate=False):
    """Revision `body` of a release as Helm's ConfigMap driver stores it, in flux-system."""
    name, revision = body["name"], body["version"]
    metadata = {"namespace": "flux-system",
                "labels": {"owner": "helm", "name": name, "status": body["info"]["status"],
                           "version": str(revision)}}
    if generate:
        metadata["generateName"] = f"sh.helm.release.v1.{name}.v"
    else:
        metadata["name"] = f"sh.helm.release.v1.{name}.v{revision}"
    payload = base64.b64encode(gzip.compress(json.dumps(body).encode())).decode()
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": {"release": payload}}


class TrustGenerateName(PlaneTest):
    @classmethod
    def setUpClass(cls):
        cls.plane = ControlPlane()
        try:
            k = cls.plane.kubectl
            for ns in ("apps", "flux-system", "team"):
                assert k("create", "namespace", ns).returncode == 0
            grants = [
                ("create", "clusterrolebinding", "ops-admin", "--clusterrole=cluster-admin", f"--user={OPS}"),
                # alice: ConfigMaps in flux-system, nothing else there (the narrowest role).
                ("-n", "flux-system", "create", "role", "configmap-writer", "--verb=create,get",
                 "--resource=configmaps"),
                ("-n", "flux-system", "create", "rolebinding", "alice-configmaps", "--role=configmap-writer",
                 "--user=alice"),
                ("-n", "team", "create", "rolebinding", "alice-edit", "--clusterrole=edit", "--user=alice"),
                ("-n", "apps", "create", "rolebinding", "bob-edit", "--clusterrole=edit", "--user=bob"),
            ]
            for args in grants:
                out = k(*args)
                assert out.returncode == 0, out.stderr
            assert eventually(lambda: cls.can_i_as("alice", "create", "configmaps", "-n", "flux-system") == "yes", 20)
            assert eventually(lambda: cls.can_i_as("alice", "delete", "secrets", "-n", "team") == "yes", 20)
            assert eventually(lambda: cls.can_i_as("bob", "patch", "configmaps", "-n", "apps") == "yes", 20)
            cls.chart = write_files("site-chart-", CHART)
            cls.env = chart_rbac_env(cls.plane)
            cls.locker = cls.start("genname")
        except BaseException:
            cls.plane.down()
            raise

    @classmethod
    def start(cls, name):
        return locked(cls.plane, cls.env, name, "--exempt-user", OPS, "--trusted-storage-namespace", TRUSTED,
                      webhook="genname", leader_within=40)

    @classmethod
    def tearDownClass(cls):
        unlock(cls.plane, cls.locker, "genname")
        cls.plane.down()

    def log(self):
        return self.locker.log_text()[-3000:]

    def foreign(self):
        return self.locker.metric("helm_locker_foreign_release_secrets_total") or 0

    def patch_settings(self, user, colour):
        return self.k(f"--as={user}", "-n", "apps", "patch", "configmap", "web-settings", "--type=merge",
                      "-p", json.dumps({"data": {"colour": colour}}))

    def test_1_a_release_config_map_without_a_name_is_refused_not_trusted(self):
        # The object the forged release claims, as Helm would have labelled it.
        self.ok(self.k("-n", "apps", "create", "-f", "-", input=json.dumps({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "web-settings", "namespace": "apps",
                         "labels": {"app.kubernetes.io/managed-by": "Helm"},
                         "annotations": {"meta.helm.sh/release-name": "web",
                                         "meta.helm.sh/release-namespace": "apps"}},
            "data": {"colour": "blue"}})))
        body = {"name": "web", "namespace": "apps", "version": 1,
                "info": {"status": "deployed", "description": "Install complete"},
                "chart": {"metadata": {"name": "site", "version": "0.1.0"}},
                "manifest": SETTINGS, "config": {}}

        # Control: named, it is stamped as alice, and alice may not create ConfigMaps in apps.
        before = self.foreign()
        out = self.ok(self.k("--as=alice", "-n", "flux-system", "create", "-o", "json", "-f", "-",
                             input=json.dumps(release_config_map(body))))
        stamped = json.loads(out.stdout)["metadata"].get("annotations") or {}
        self.assertEqual(json.loads(stamped["helm-locker.io/author"])["username"], "alice")
        self.assertTrue(eventually(lambda: self.foreign() > before, 20), self.log())
        self.assertIn("may not create ConfigMaps", self.log())
        self.ok(self.patch_settings("bob", "green"))

        # The attack: the same revision 2 with generateName. Refused by the author webhook.
        body["version"] = 2
        out = self.k("--as=alice", "-n", "flux-system", "create", "-f", "-",
                     input=json.dumps(release_config_map(body, generate=True)))
        self.assertNotEqual(out.returncode, 0, out.stdout)
        self.assertIn("must be created with a name", out.stderr)
        self.assertIn("generateName", out.stderr)
        listed = self.get("-n", "flux-system", "configmap", "-l", "owner=helm,name=web")
        self.assertEqual([i["metadata"]["name"] for i in listed["items"]], ["sh.helm.release.v1.web.v1"])
        time.sleep(2)
        self.ok(self.patch_settings("bob", "red"))
        self.assertEqual(self.get("-n", "apps", "configmap", "web-settings")["data"]["colour"], "red")

        # The rightful user's helm install and upgrade (Secrets, in apps) go through and lock.
        helm = self.plane.helm("apps")
        helm.install(self.chart, "site", {})
        helm.upgrade(self.chart, "site", {"colour": "purple"})
        self.assertTrue(eventually(lambda: self.k("--as=bob", "-n", "apps", "patch", "configmap", "site-settings",
                                                  "--type=merge", "-p", '{"data":{"colour":"x"}}',
                                                  "--dry-run=server").returncode != 0, 20), self.log())

    def reads_secrets(self):
        return self.can_i_as("alice", "get", "secrets", "-n", "kube-system")

    def installed_and_taken_back(self, release):
        """The admin installs `release` binding alice, alice saves revision 1 (with its stamp),
        the admin upgrades without her. Returns the saved Secret."""
        helm = self.plane.helm("team")
        helm.install(GRANTS, release, {"readers": ["alice"]})
        saved = json.loads(self.ok(self.k("--as=alice", "-n", "team", "get", "secret",
                                          f"sh.helm.release.v1.{release}.v1", "-o", "json")).stdout)
        self.assertIn("helm-locker.io/author-proof", saved["metadata"]["annotations"])
        helm.upgrade(GRANTS, release, {"readers": []})
        self.assertTrue(eventually(lambda: self.reads_secrets() == "no", 20))
        return saved

    def replay(self, release, saved):
        """alice, with the author webhook away: deletes revisions 2 and 1, and creates revision 1
        again from her copy (inside the stamp's window)."""
        self.locker.unregister_author_webhook()
        # Whole-second creation times: not in the second revision 2 was created (WentBack).
        time.sleep(1.1)
        for revision in (2, 1):
            self.ok(self.k("--as=alice", "-n", "team", "delete", "secret", f"sh.helm.release.v1.{release}.v{revision}"))
        again = copy.deepcopy(saved)
        for field in ("resourceVersion", "uid", "managedFields", "selfLink", "creationTimestamp"):
            again["metadata"].pop(field, None)
        self.ok(self.k("--as=alice", "-n", "team", "create", "-f", "-", input=json.dumps(again)))

    def stamp_again(self):
        register_author_webhook(self.plane, self.locker)
        self.locker.stamping = True

    def test_2_a_stamp_seen_is_spent_a_copy_created_again_inside_the_window_names_nobody(self):
        helm = self.plane.helm("team")
        self.addCleanup(self.stamp_again)
        # Control: a process that never saw the stamp (started after it) cannot tell the copy
        # from the first Secret: the stamp verifies inside its window and the binding comes back.
        saved = self.installed_and_taken_back("before")
        unlock(self.plane, self.locker, "genname")
        self.__class__.locker = self.start("genname2")
        started = time.time()
        self.replay("before", saved)
        self.assertTrue(eventually(lambda: self.reads_secrets() == "yes", 30),
                        f"the control's replay did not verify:\n{self.log()}")
        self.stamp_again()
        helm.upgrade(GRANTS, "before", {"readers": []})
        self.assertTrue(eventually(lambda: self.reads_secrets() == "no", 30), self.log())

        # Defended: the same replay in the process that saw the stamp.
        saved = self.installed_and_taken_back("grant")
        before = self.get("clusterrolebinding", "grant-read")["subjects"]
        self.replay("grant", saved)
        recreated = self.get("-n", "team", "secret", "sh.helm.release.v1.grant.v1")
        self.assertEqual(recreated["metadata"]["annotations"].get("helm-locker.io/author-proof"),
                         saved["metadata"]["annotations"]["helm-locker.io/author-proof"])
        gained = eventually(lambda: self.reads_secrets() == "yes", SETTLE, 0.5)
        self.assertFalse(gained, f"the replayed stamp gave alice her binding back:\n{self.log()}")
        self.assertEqual(self.get("clusterrolebinding", "grant-read")["subjects"], before)
        self.assertLess(time.time() - started, 120)

        def noted():
            text = " ".join(e.get("note") or e.get("message") or ""
                            for e in self.object_events("team", "sh.helm.release.v1.grant.v1", "UnknownAuthor"))
            return "made for an earlier write" in text
        self.assertTrue(eventually(noted, 30, 0.5), self.log())

        # The admin's next helm upgrade succeeds and is followed again.
        self.stamp_again()
        helm.upgrade(GRANTS, "grant", {"readers": []})
        self.assertEqual(self.reads_secrets(), "no")


if __name__ == "__main__":
    unittest.main()
