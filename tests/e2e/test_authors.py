"""A revision acts only with its author's rights (docs/security.md), on a real control plane.

An admin installs an operator's chart (tests/e2e/charts/ops-agent: a ClusterRole, its
ClusterRoleBinding, a RoleBinding of `admin` to a group, a ConfigMap, a Deployment) as release
`team/ops` with real Helm. `alice` holds only the built-in `edit` role in `team`: she may write
Secrets there, and no RBAC object anywhere. She writes revision 2 of the admin's release with the
ClusterRole widened to everything, herself added to both bindings, and the ConfigMap changed.

  - the reverter makes none of the RBAC writes (she could not), 30 s after and again after a
    locker restart; `kubectl auth can-i` as alice is unchanged; a Warning Event
    `AuthorLacksRights` on her Secret names her and what she may not do;
  - it does follow her revision where she could have written herself (the ConfigMap in `team`);
  - the admin's own `helm upgrade` succeeds, and real drift of the ClusterRole is reverted again;
  - a release Secret written while the author webhook is away, or before the locker was
    installed, has no known author: none of its content is written. Objects of its own namespace
    are held at what was live when the locker first saw them (drift where the revision agrees
    with that is still put back); RBAC, cluster-scoped objects and other namespaces are not
    written at all (`UnknownAuthor`). Re-making the locker's key changes nothing. One with a
    stamp copied from another Secret speaks for nobody.
  - `kubectl locker vouch` gives such a revision an author, the one who runs it: vouched for by
    alice, its ClusterRole's drift is still not put back (she may not write it); by the admin,
    it is.
"""

import base64
import gzip
import json
import os
import time
import unittest

from harness import PlaneTest, BIN, HERE, ControlPlane, Locker, eventually, register_webhook, unregister_webhook

CHART = os.path.join(HERE, "charts", "ops-agent")
NS = "team"
RELEASE = "ops"
# Writes drift by hand; exempt at admission (--exempt-user ops).
OPS = "ops"
SETTLE = 30.0


def widen(o):
    """alice's changes: the ClusterRole widened to everything, herself added to both bindings,
    the ConfigMap changed."""
    if o["kind"] == "ClusterRole":
        o["rules"] = [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]
    if o["kind"] in ("ClusterRoleBinding", "RoleBinding"):
        o["subjects"].append({"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"})
    if o["kind"] == "ConfigMap":
        o["data"]["setting"] = "from-alice"
    return o


def decode(secret):
    return json.loads(gzip.decompress(base64.b64decode(base64.b64decode(secret["data"]["release"]))))


def encode(release):
    payload = base64.b64encode(gzip.compress(json.dumps(release).encode()))
    return base64.b64encode(payload).decode()


class Authors(PlaneTest):
    @classmethod
    def setUpClass(cls):
        cls.plane = ControlPlane()
        k = cls.plane.kubectl
        assert k("create", "namespace", NS).returncode == 0
        assert k("-n", NS, "create", "rolebinding", "alice-edit", "--clusterrole=edit",
                 "--user=alice").returncode == 0
        assert k("create", "clusterrolebinding", "ops-admin", "--clusterrole=cluster-admin",
                 f"--user={OPS}").returncode == 0

    @classmethod
    def tearDownClass(cls):
        cls.plane.down()

    def start(self, name):
        locker = Locker(self.plane, name, "--lease-name", name, "--exempt-user", OPS)
        self.addCleanup(locker.stop)
        locker.wait_ready()
        self.assertTrue(eventually(lambda: locker.metric("helm_locker_leader") == 1, 30), "never became leader")
        return locker

    def can_i(self, *args):
        return self.can_i_as("alice", *args)

    def events(self, name, reason):
        return self.object_events(NS, name, reason)

    def rbac(self, release):
        """The RBAC objects as they are, without what the API server adds."""
        role = self.get("clusterrole", f"{release}-agent-read")
        crb = self.get("clusterrolebinding", f"{release}-agent-read")
        rb = self.get("-n", NS, "rolebinding", f"{release}-admins")
        return role["rules"], crb["subjects"], rb["subjects"]

    def forge(self, release, revision, change, as_user="alice"):
        """Revision `revision` of `release`, written by `as_user` (None: the admin) from the
        newest one she reads, with `change` applied to each object of the manifest."""
        who = (f"--as={as_user}",) if as_user else ()
        out = self.ok(self.k(*who, "-n", NS, "get", "secret",
                             f"sh.helm.release.v1.{release}.v{revision - 1}", "-o", "json"))
        body = decode(json.loads(out.stdout))
        docs = [d for d in body["manifest"].split("\n---\n") if d.strip()]
        objects = []
        for doc in docs:
            source = "\n".join(l for l in doc.splitlines() if l.startswith("# Source:"))
            text = "\n".join(l for l in doc.splitlines() if not l.startswith("# Source:") and l.strip() != "---")
            objects.append((source, change(self.yaml(text))))
        body["manifest"] = "".join(f"---\n{source}\n{json.dumps(o)}\n" for source, o in objects)
        body["version"] = revision
        body["info"]["status"] = "deployed"
        secret = {"apiVersion": "v1", "kind": "Secret", "type": "helm.sh/release.v1",
                  "metadata": {"name": f"sh.helm.release.v1.{release}.v{revision}", "namespace": NS,
                               "labels": {"owner": "helm", "name": release, "status": "deployed",
                                          "version": str(revision)}},
                  "data": {"release": encode(body)}}
        return self.ok(self.k(*who, "-n", NS, "create", "-f", "-", input=json.dumps(secret)))

    def yaml(self, text):
        # kubectl converts YAML to JSON for us (client-side, no server call).
        out = self.ok(self.k("create", "--dry-run=client", "-o", "json", "-f", "-", input=text))
        obj = json.loads(out.stdout)
        if "namespace:" not in text:
            # kubectl fills in its own namespace; Helm's manifest leaves it to the release's.
            obj["metadata"].pop("namespace", None)
        return obj

    def test_an_edit_user_cannot_make_the_reverter_write_rbac_from_an_admins_release(self):
        locker = self.start("authors")
        register_webhook(self.plane, locker, "authors")
        self.addCleanup(unregister_webhook, self.plane, "authors")
        self.plane.helm(NS).install(CHART, RELEASE, {})
        before = self.rbac(RELEASE)
        self.assertEqual(self.can_i("create", "rolebindings", "-n", NS), "no")
        self.assertEqual(self.can_i("get", "secrets", "-n", "kube-system"), "no")
        # (RBAC takes a moment to see the binding made in setUpClass.)
        self.assertTrue(eventually(lambda: self.can_i("patch", "configmaps", "-n", NS) == "yes", 10))


        forged_at = time.time()
        self.forge(RELEASE, 2, widen)
        secret = f"sh.helm.release.v1.{RELEASE}.v2"
        wanted = ("its author alice may not",
                  "escalate clusterroles.rbac.authorization.k8s.io ops-agent-read cluster-wide",
                  "bind clusterroles.rbac.authorization.k8s.io admin in team",
                  "patch clusterrolebindings.rbac.authorization.k8s.io ops-agent-read cluster-wide")

        def notes():
            text = " ".join(e.get("note") or e.get("message") or "" for e in self.events(secret, "AuthorLacksRights"))
            return text if all(w in text for w in wanted) else None

        self.assertTrue(eventually(notes, 30, 0.5),
                        f"AuthorLacksRights events on {secret}: {self.events(secret, 'AuthorLacksRights')}\n"
                        f"{locker.log_text()[-3000:]}")
        # Where she could write herself, her revision is followed: the ConfigMap in team.
        self.assertTrue(eventually(lambda: (self.get("-n", NS, "configmap", f"{RELEASE}-settings") or {})
                                   .get("data", {}).get("setting") == "from-alice", 30))
        time.sleep(max(0.0, forged_at + SETTLE - time.time()))
        self.assertEqual(self.rbac(RELEASE), before)
        self.assertEqual(self.can_i("get", "secrets", "-n", "kube-system"), "no")
        self.assertEqual(self.can_i("create", "rolebindings", "-n", NS), "no")
        self.assertGreaterEqual(locker.metric("helm_locker_author_refused_objects") or 0, 3)
        self.assertIn("the revision's author may not make the write", locker.log_text())

        # A restarted locker reads the same author from the stamp.
        unregister_webhook(self.plane, "authors")
        locker.stop()
        again = self.start("authors-2")
        register_webhook(self.plane, again, "authors")
        self.assertTrue(eventually(lambda: (again.metric("helm_locker_author_refused_objects") or 0) >= 3, 30),
                        again.log_text()[-3000:])
        time.sleep(5)
        self.assertEqual(self.rbac(RELEASE), before)
        self.assertEqual(self.can_i("get", "secrets", "-n", "kube-system"), "no")
        self.assertNotIn("drift reverted", again.log_text())

        # The admin's helm upgrade makes the release the admin's again.
        self.plane.helm(NS).upgrade(CHART, RELEASE, {})
        self.assertEqual(self.get("-n", NS, "configmap", f"{RELEASE}-settings")["data"]["setting"], "from-the-chart")
        self.assertEqual(self.rbac(RELEASE), before)
        # Real drift of the ClusterRole (an exempt writer, as while the webhook is away) is reverted.
        self.ok(self.k(f"--as={OPS}", "patch", "clusterrole", f"{RELEASE}-agent-read", "--type=json", "-p",
                       json.dumps([{"op": "add", "path": "/rules/-",
                                    "value": {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}}])))
        self.assertTrue(eventually(lambda: self.rbac(RELEASE) == before, 30),
                        f"drift of the admin's ClusterRole not reverted:\n{again.log_text()[-3000:]}")

    def held_and_refused(self, secret, locker, *wanted):
        """Waits for the UnknownAuthor Events on `secret` to name each of `wanted`."""
        def notes():
            text = " ".join(e.get("note") or e.get("message") or "" for e in self.events(secret, "UnknownAuthor"))
            return text if all(w in text for w in wanted) else None
        self.assertTrue(eventually(notes, 30, 0.5),
                        f"UnknownAuthor events on {secret}: {self.events(secret, 'UnknownAuthor')}\n"
                        f"{locker.log_text()[-3000:]}")

    def test_a_revision_written_while_the_author_webhook_is_away_is_held_at_what_is_live(self):
        locker = self.start("authors-away")
        self.plane.helm(NS).install(CHART, "away", {})
        self.assertTrue(eventually(lambda: self.get("-n", NS, "secret", "sh.helm.release.v1.away.v1")
                                   is not None, 10))
        before = self.rbac("away")
        # The author webhook is gone (deleted, or every locker replica was down): revision 2 is
        # unstamped. It changes a ConfigMap of its namespace and widens the ClusterRole.
        locker.unregister_author_webhook()
        time.sleep(2)

        def change(o):
            if o["kind"] == "ConfigMap":
                o["data"]["setting"] = "unstamped"
            if o["kind"] == "ClusterRole":
                o["rules"] = [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]
            return o

        self.forge("away", 2, change, as_user=None)
        secret = self.get("-n", NS, "secret", "sh.helm.release.v1.away.v2")
        self.assertNotIn("helm-locker.io/author-proof", secret["metadata"].get("annotations") or {})
        # None of its content is written: the ConfigMap is held at what was live, the
        # ClusterRole is not written at all; each is reported.
        self.held_and_refused("sh.helm.release.v1.away.v2", locker,
                              "ClusterRole away-agent-read", "RBAC objects are never written",
                              "holds ConfigMap team/away-settings", "/data/setting")
        self.assertEqual(self.get("-n", NS, "configmap", "away-settings")["data"]["setting"], "from-the-chart")
        self.assertEqual(self.rbac("away"), before)
        self.assertGreaterEqual(locker.metric("helm_locker_held_objects") or 0, 1)
        # Where the revision agrees with what was live, drift is still put back.
        self.ok(self.k(f"--as={OPS}", "-n", NS, "scale", "deploy", "away-agent", "--replicas=3"))
        self.assertTrue(eventually(lambda: self.get("-n", NS, "deploy", "away-agent")["spec"]["replicas"] == 1, 30),
                        locker.log_text()[-3000:])
        self.assertEqual(self.get("-n", NS, "configmap", "away-settings")["data"]["setting"], "from-the-chart")
        # A stamp copied from another Secret does not verify: nothing at all is written from it.
        v1 = self.get("-n", NS, "secret", "sh.helm.release.v1.away.v1")
        stamp = {k: v for k, v in (v1["metadata"].get("annotations") or {}).items() if k.startswith("helm-locker.io/")}
        self.assertEqual(set(stamp), {"helm-locker.io/author", "helm-locker.io/author-proof"})
        self.ok(self.k("-n", NS, "annotate", "secret", "sh.helm.release.v1.away.v2",
                       *(f"{k}={v}" for k, v in stamp.items())))
        time.sleep(3)
        self.ok(self.k("-n", NS, "patch", "configmap", "away-settings", "-p", '{"data":{"setting":"drifted"}}'))
        self.ok(self.k(f"--as={OPS}", "-n", NS, "scale", "deploy", "away-agent", "--replicas=2"))
        time.sleep(5)
        self.assertEqual(self.get("-n", NS, "configmap", "away-settings")["data"]["setting"], "drifted")
        self.assertEqual(self.get("-n", NS, "deploy", "away-agent")["spec"]["replicas"], 2)
        self.assertEqual(self.rbac("away"), before)

    def test_installing_the_locker_makes_no_forgery_written_before_it_real(self):
        # No locker runs: the admin installs, then alice (edit in team) forges revision 2.
        self.plane.helm(NS).install(CHART, "early", {})
        before = self.rbac("early")
        self.assertTrue(eventually(lambda: self.can_i("patch", "configmaps", "-n", NS) == "yes", 10))
        rights = lambda: (self.can_i("get", "secrets", "-n", "kube-system"),  # noqa: E731
                          self.can_i("create", "rolebindings", "-n", NS))
        self.assertEqual(rights(), ("no", "no"))


        self.forge("early", 2, widen)
        secret = "sh.helm.release.v1.early.v2"

        def unchanged(locker, settle):
            time.sleep(settle)
            self.assertEqual(self.rbac("early"), before, locker.log_text()[-3000:])
            self.assertEqual(rights(), ("no", "no"))
            self.assertEqual(self.get("-n", NS, "configmap", "early-settings")["data"]["setting"], "from-the-chart")
            self.assertNotIn("drift reverted", locker.log_text())

        # The locker is installed: what it finds is reported, and nothing of it is written.
        locker = self.start("authors-early")
        self.held_and_refused(secret, locker, "ClusterRole early-agent-read", "ClusterRoleBinding early-agent-read",
                              "RoleBinding team/early-admins", "holds ConfigMap team/early-settings")
        unchanged(locker, 10)
        # A restart reads the same history the same way.
        locker.stop()
        locker = self.start("authors-early-2")
        unchanged(locker, 8)
        # The key made again (deleted, as a re-install would) is no new trust horizon.
        locker.stop()
        self.ok(self.k("-n", "default", "delete", "secret", "helm-locker-author-key"))
        locker = self.start("authors-early-3")
        self.assertTrue(eventually(lambda: self.get("-n", "default", "secret", "helm-locker-author-key"), 10))
        unchanged(locker, 8)

        # The admin's next upgrade is stamped: the release is fully the admin's again, and
        # nothing is held for it any more (the gauge says so, though no object changed).
        self.assertGreaterEqual(locker.metric("helm_locker_held_objects") or 0, 1)
        self.plane.helm(NS).upgrade(CHART, "early", {})
        self.assertEqual(self.rbac("early"), before)
        self.assertTrue(eventually(lambda: (locker.metric("helm_locker_held_objects") or 0) == 0, 30),
                        locker.log_text()[-3000:])
        self.ok(self.k(f"--as={OPS}", "patch", "clusterrole", "early-agent-read", "--type=json", "-p",
                       json.dumps([{"op": "add", "path": "/rules/-",
                                    "value": {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}}])))
        self.assertTrue(eventually(lambda: self.rbac("early") == before, 30),
                        f"drift of the admin's ClusterRole not reverted:\n{locker.log_text()[-3000:]}")
    def test_a_vouch_makes_its_writer_the_author_of_a_release_found_at_install_and_grants_nothing(self):
        # Installed before any locker: no author.
        self.plane.helm(NS).install(CHART, "found", {})
        before = self.rbac("found")
        secret = "sh.helm.release.v1.found.v1"
        locker = self.start("authors-vouch")
        register_webhook(self.plane, locker, "authors-vouch")
        self.addCleanup(unregister_webhook, self.plane, "authors-vouch")
        drift = [{"op": "add", "path": "/rules/-",
                  "value": {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}}]
        self.ok(self.k(f"--as={OPS}", "patch", "clusterrole", "found-agent-read", "--type=json", "-p", json.dumps(drift)))
        drifted = self.rbac("found")
        self.assertNotEqual(drifted, before)
        self.held_and_refused(secret, locker, "ClusterRole found-agent-read")
        time.sleep(3)
        self.assertEqual(self.rbac("found"), drifted, "an unknown author's ClusterRole was written")

        unknown = locker.metric("helm_locker_unknown_author_releases") or 0
        self.assertGreaterEqual(unknown, 1)
        # alice (edit in team) vouches for it, as the plugin would: now hers, and she may not
        # write ClusterRoles, so the drift stays.
        self.ok(self.k("--as=alice", "-n", NS, "annotate", "secret", secret, "helm-locker.io/vouch=mine"))
        stored = self.get("-n", NS, "secret", secret)["metadata"]["annotations"]
        self.assertNotIn("helm-locker.io/vouch", stored)
        self.assertEqual(json.loads(stored["helm-locker.io/author"])["username"], "alice")
        self.assertTrue(eventually(lambda: (locker.metric("helm_locker_unknown_author_releases") or 0) < unknown, 10))
        lacks = eventually(lambda: self.events(secret, "AuthorLacksRights"), 30, 0.5)
        self.assertTrue(lacks, "\n".join(l for l in locker.log_text().splitlines() if "found" in l or "release Secret" in l)[-6000:])
        self.assertEqual(self.rbac("found"), drifted)

        # The admin vouches with the plugin: the reverter follows the release again. Now that
        # alice is its author, only by name and with --include-known-authors (he takes it over).
        out = self.plane.run([BIN, "kubectl", "vouch", "found", "-n", NS, "--reason", "found at install"])
        self.assertIn("its author is alice", out.stdout, out.stderr)
        out = self.plane.run([BIN, "kubectl", "vouch", "found", "-n", NS, "--reason", "found at install",
                              "--include-known-authors", "--yes"])
        self.assertEqual(out.returncode, 0, out.stderr + out.stdout)
        self.assertIn("author now admin", out.stdout)
        self.assertTrue(eventually(lambda: self.rbac("found") == before, 30),
                        f"drift of the vouched release's ClusterRole not reverted:\n{locker.log_text()[-3000:]}")
        self.plane.helm(NS).upgrade(CHART, "found", {})


if __name__ == "__main__":
    unittest.main()
