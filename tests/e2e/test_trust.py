"""The trust boundary on a real control plane (docs/security.md): a tenant whose RBAC allows only
Secrets in her own namespace writes release Secrets by hand; the legitimate releases are
installed by real Helm. The locker runs as a cluster install runs it: every namespace watched,
the reverter on, the validating webhook registered for every resource.

  - a forged release plants nothing, binds nothing, rewrites nothing, and locks none of the
    victim's objects;
  - a Secret in one namespace that names another namespace's release is ignored (and said so);
  - a legitimate chart that deploys into a second namespace is still locked there, reverted, and
    recreated after a delete the locker saw;
  - a locker restarted after a locked object was deleted reports it, and recreates it only for a
    release a HelmRelease vouches for.
"""

import json
import os
import time
import unittest

from harness import (CHART, DENIED, HERE, ROOT, ControlPlane, Locker, eventually, register_webhook,
                     release_secret, unregister_webhook)

SPREAD = os.path.join(HERE, "charts", "spread")
CRD = os.path.join(ROOT, "charts", "helm-locker", "crds", "helmreleases.helm.cattle.io.yaml")
TENANT = "tina"
SETTLE = 5.0


class Trust(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.plane = ControlPlane()
        k = cls.plane.kubectl
        for ns in ("tenant", "victim", "spread-b"):
            assert k("create", "namespace", ns).returncode == 0
        # The tenant: Secrets in her own namespace, nothing else (what the built-in `edit` role
        # grants there, reduced to the one kind that matters).
        assert k("-n", "tenant", "create", "role", "secrets", "--verb=get,list,watch,create,update,patch,delete",
                 "--resource=secrets").returncode == 0
        assert k("-n", "tenant", "create", "rolebinding", "tenant-secrets", "--role=secrets",
                 f"--user={TENANT}").returncode == 0
        # An operator whose writes the webhook lets through (--exempt-user ops), to make drift.
        assert k("create", "clusterrolebinding", "ops-admin", "--clusterrole=cluster-admin",
                 "--user=ops").returncode == 0

    @classmethod
    def tearDownClass(cls):
        cls.plane.down()

    # --- helpers

    def k(self, *args, input=None):
        return self.plane.kubectl(*args, input=input)

    def ok(self, out):
        self.assertEqual(out.returncode, 0, out.stderr)
        return out

    def field(self, jsonpath, *args):
        return self.k("get", *args, "-o", f"jsonpath={jsonpath}").stdout

    def exists(self, *args):
        return self.k("get", *args, "-o", "name").returncode == 0

    def start(self, name, *flags, webhook=True):
        locker = Locker(self.plane, name, "--lease-name", name, *flags)
        self.addCleanup(locker.stop)
        locker.wait_ready()
        if webhook:
            register_webhook(self.plane, locker, name)
            self.addCleanup(unregister_webhook, self.plane, name)
        self.assertTrue(eventually(lambda: locker.metric("helm_locker_leader") == 1, 30), "never became leader")
        return locker

    def as_tenant(self, secret):
        return self.k(f"--as={TENANT}", "-n", "tenant", "create", "-f", "-", input=json.dumps(secret))

    def events(self, namespace, name, reason):
        items = (self.plane.get_json("events", "-n", namespace) or {"items": []})["items"]
        return [e for e in items if e["involvedObject"].get("name") == name and e["reason"] == reason]

    def wait_locked(self, namespace, *patch):
        locked = eventually(lambda: self.k("-n", namespace, "patch", "--dry-run=server", *patch).returncode != 0, 15, 0.2)
        self.assertTrue(locked, f"never locked: {' '.join(patch)}")

    def denied(self, out, *texts):
        self.assertNotEqual(out.returncode, 0, f"allowed: {out.stdout}")
        self.assertIn(DENIED, out.stderr)
        for text in texts:
            self.assertIn(text, out.stderr)

    # --- the properties

    def test_a_forged_release_plants_binds_and_rewrites_nothing(self):
        self.ok(self.k("-n", "victim", "create", "configmap", "victim-config", "--from-literal=owner=victim"))
        locker = self.start("trust-forged")
        # What she cannot do herself.
        self.assertNotEqual(self.k(f"--as={TENANT}", "create", "clusterrolebinding", "evil-direct",
                                   "--clusterrole=view", f"--user={TENANT}").returncode, 0)
        forged = release_secret("evil", "tenant", [
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
             "metadata": {"name": "evil-view"},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
             "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": TENANT}]},
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "planted", "namespace": "victim"},
             "data": {"planted": "yes"}},
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "victim-config", "namespace": "victim"},
             "data": {"owner": "tenant"}},
        ])
        self.ok(self.as_tenant(forged))
        # The reverter has looked at the forged release's objects: two missing, one not the release's.
        self.assertTrue(eventually(lambda: (locker.metric("helm_locker_missing_objects") or 0) >= 2, 20),
                        f"missing objects never reported:\n{locker.log_text()[-3000:]}")
        self.assertTrue(eventually(lambda: (locker.metric("helm_locker_unproven_objects") or 0) >= 1, 30))
        time.sleep(SETTLE)
        self.assertFalse(self.exists("clusterrolebinding", "evil-view"), "the forged binding was created")
        self.assertFalse(self.exists("-n", "victim", "configmap", "planted"), "the forged ConfigMap was planted")
        self.assertEqual(self.field("{.data.owner}", "-n", "victim", "configmap", "victim-config"), "victim")
        self.assertNotIn("deleted object recreated", locker.log_text())
        self.assertNotIn("drift reverted", locker.log_text())
        # The victim's own object is not locked: writes and a delete go through the webhook.
        self.ok(self.k("-n", "victim", "patch", "configmap", "victim-config", "-p", '{"data":{"owner":"still the victim"}}'))
        self.ok(self.k("-n", "victim", "create", "configmap", "planted", "--from-literal=mine=yes"))
        self.ok(self.k("-n", "victim", "delete", "configmap", "planted"))
        time.sleep(2)
        self.assertEqual(self.field("{.data.owner}", "-n", "victim", "configmap", "victim-config"), "still the victim")
        # Reported where the tenant looks: on her Secret.
        missing = eventually(lambda: self.events("tenant", "sh.helm.release.v1.evil.v1", "LockedObjectMissing"), 30)
        self.assertTrue(missing, "no LockedObjectMissing event on the forged Secret")
        self.assertTrue(any("evil-view" in (e.get("message") or "") for e in missing), missing)

    def test_a_secret_naming_another_namespaces_release_is_ignored(self):
        self.plane.helm("ledger").install(CHART, "ledger", {}, create_namespace=True)
        locker = self.start("trust-foreign")
        scale = ("deploy", "ledger-web", "-p", '{"spec":{"replicas":9}}')
        self.wait_locked("ledger", *scale)
        # A newer revision that says Helm is at work, and one whose manifest leaves the
        # Deployment out: both written in her namespace, both naming ledger/ledger.
        for revision, status in ((5, "pending-upgrade"), (6, "deployed")):
            forged = release_secret("ledger", "ledger", [
                {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ledger-config"}, "data": {}}],
                status=status, revision=revision)
            forged["metadata"]["namespace"] = "tenant"
            self.ok(self.as_tenant(forged))
        self.assertTrue(eventually(lambda: (locker.metric("helm_locker_foreign_release_secrets_total") or 0) >= 2, 15),
                        "the forged Secrets were not reported")
        time.sleep(1)
        self.denied(self.k("-n", "ledger", "patch", *scale), "Helm release ledger/ledger (revision 1, deployed)")
        self.assertEqual(self.field("{.spec.replicas}", "-n", "ledger", "deploy", "ledger-web"), "1")
        events = eventually(lambda: self.events("tenant", "sh.helm.release.v1.ledger.v5", "ForeignRelease"), 30)
        self.assertTrue(events, "no ForeignRelease event on the forged Secret")
        self.assertIn("may not create Secrets in \"ledger\"", events[0].get("message") or "")
        self.assertIn("release Secret ignored", locker.log_text())
        # A locker started now finds them in its first list (decoded a part at a time on every
        # core) and ignores them the same way.
        listed = self.start("trust-foreign-listed")
        self.assertTrue(eventually(lambda: (listed.metric("helm_locker_foreign_release_secrets_total") or 0) >= 2, 30),
                        "the forged Secrets were not reported from the list")
        self.denied(self.k("-n", "ledger", "patch", *scale), "Helm release ledger/ledger (revision 1, deployed)")

    def test_a_release_in_two_namespaces_stays_locked_and_a_seen_delete_is_recreated(self):
        # Installed while a locker runs, so that its author (the admin) is stamped: a release
        # written while no locker stamps may write only inside its own namespace
        # (test_authors.py), and this one writes into spread-b.
        locker = self.start("trust-spread", "--exempt-user", "ops")
        release = self.plane.helm("spread-a")
        release.install(SPREAD, "spread", {}, create_namespace=True)
        away = ("configmap", "spread-away", "-p", '{"data":{"greeting":"hacked"}}')
        self.wait_locked("spread-b", *away)
        self.denied(self.k("-n", "spread-b", "patch", *away), "Helm release spread-a/spread")
        self.denied(self.k("-n", "spread-b", "patch", "role", "spread-reader", "--type=json",
                           "-p", '[{"op":"add","path":"/rules/0/verbs/-","value":"list"}]'))
        self.denied(self.k("-n", "spread-b", "delete", "configmap", "spread-away"))
        # Drift that got past (an exempt operator) is reverted there too.
        self.ok(self.k("--as=ops", "-n", "spread-b", "patch", *away))
        back = eventually(lambda: self.field("{.data.greeting}", "-n", "spread-b", "configmap", "spread-away") == "hello", 30)
        self.assertTrue(back, f"not reverted:\n{locker.log_text()[-3000:]}")
        # A delete the locker saw (the object carried the release's annotations): created again.
        uid = self.field("{.metadata.uid}", "-n", "spread-b", "configmap", "spread-away")
        self.ok(self.k("--as=ops", "-n", "spread-b", "delete", "configmap", "spread-away"))
        new_uid = eventually(lambda: (u := self.field("{.metadata.uid}", "-n", "spread-b", "configmap", "spread-away")) != uid and u, 30)
        self.assertTrue(new_uid and new_uid != uid, f"not recreated:\n{locker.log_text()[-3000:]}")
        # And Helm carries on.
        release.upgrade(SPREAD, "spread", {"greeting": "hi"})
        self.assertEqual(self.field("{.data.greeting}", "-n", "spread-b", "configmap", "spread-away"), "hi")

    def test_a_restarted_locker_recreates_only_for_a_vouched_release(self):
        # Installed while a locker runs (its revision stamped with the admin: a revision with no
        # known author creates nothing, docs/security.md).
        before = self.start("trust-install", webhook=False)
        self.plane.helm("gone").install(CHART, "gone", {}, create_namespace=True)
        before.stop()
        # Deleted while no locker runs: nobody saw it go.
        self.ok(self.k("-n", "gone", "delete", "configmap", "gone-config"))
        locker = self.start("trust-restart", webhook=False)
        self.assertTrue(eventually(lambda: (locker.metric("helm_locker_missing_objects") or 0) >= 1, 20),
                        f"the missing object was not reported:\n{locker.log_text()[-3000:]}")
        time.sleep(SETTLE)
        self.assertFalse(self.exists("-n", "gone", "configmap", "gone-config"), "recreated without proof")
        events = eventually(lambda: self.events("gone", "sh.helm.release.v1.gone.v1", "LockedObjectMissing"), 30)
        self.assertTrue(events, "no LockedObjectMissing event on the release Secret")
        self.assertIn("ConfigMap gone/gone-config", events[0].get("message") or "")
        locker.stop()
        # An admin vouches for the release with a HelmRelease in the registration namespace.
        self.ok(self.k("apply", "-f", CRD))
        self.k("wait", "--for=condition=established", "crd/helmreleases.helm.cattle.io", "--timeout=30s")
        self.ok(self.k("create", "namespace", "cattle-helm-system"))
        self.ok(self.k("apply", "-f", "-", input=json.dumps({
            "apiVersion": "helm.cattle.io/v1alpha1", "kind": "HelmRelease",
            "metadata": {"name": "gone", "namespace": "cattle-helm-system"},
            "spec": {"release": {"name": "gone", "namespace": "gone"}}})))
        vouched = self.start("trust-vouched", "--registration-namespace", "cattle-helm-system", webhook=False)
        back = eventually(lambda: self.exists("-n", "gone", "configmap", "gone-config"), 20)
        self.assertTrue(back, f"not recreated for the vouched release:\n{vouched.log_text()[-3000:]}")
        self.assertEqual(self.field("{.data.greeting}", "-n", "gone", "configmap", "gone-config"), "hello")


if __name__ == "__main__":
    unittest.main()
