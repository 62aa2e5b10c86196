"""The author stamp names who wrote a revision's content, and only for the write it was made for
(issue 60, attacks 1 and 2; docs/security.md), on a real control plane with the locker run under
the chart's own ServiceAccount and RBAC (chart_rbac.py: it may read and patch every kind, with
no `bind` or `escalate`).

`alice` holds the built-in `edit` role in `team`: she may write Secrets there, no RBAC object.

  1. `helm test` does not launder a forgery. alice writes revision 2 of the admin's release
     team/ops (tests/e2e/charts/ops-agent, which has a test hook): its ClusterRole reads every
     kind, she is added to its ClusterRoleBinding. It is refused (she may not). The admin's
     `helm test ops` rewrites that revision's Secret (the hook's last run): the stamp still names
     alice, and nothing is written. Control: the admin's rewrite that does change the content is
     stamped with the admin, and the reverter then makes alice able to read every Secret: what
     the helm test rewrite did before.
  2. A stamp cannot be replayed. The admin installs team/grant (tests/e2e/charts/grants) binding
     alice to a ClusterRole that reads Secrets, then upgrades it without her. alice saved
     revision 1; with the author webhook away she deletes revisions 2 and 1 and creates revision
     1 again with its saved stamp. The API server sets the re-created Secret's creationTimestamp
     itself (whatever she sends, and no update changes it), more than a minute after the stamp:
     its author is not known (`UnknownAuthor`), and the binding is not given back. The same
     replay within the stamp's window (a fresh release) is stopped too, since this process saw
     the stamp on the first Secret (a spent stamp, issue 67); a process that never saw it lets
     it verify: that control is test_trust_generate_name.py's test 2.

     The same replay in place (revision 2 deleted, revision 1's Secret overwritten with its
     saved state: it keeps its creation time, so the stamp's time does not tell) is caught
     because the release's newest revision went down (`Unknown::WentBack`, in memory).

After each, the admin's next `helm upgrade` succeeds and makes the release the admin's again.
"""

import copy
import json
import os
import time
import unittest

from chart_rbac import bind, chart_rbac_env, locked, unlock
from harness import PlaneTest, HERE, ControlPlane, eventually, register_author_webhook
from test_authors import decode, encode

OPS_AGENT = os.path.join(HERE, "charts", "ops-agent")
GRANTS = os.path.join(HERE, "charts", "grants")
NS = "team"
# Writes drift by hand; exempt at admission (--exempt-user ops).
OPS = "ops"
SETTLE = 12.0
# core/src/author.rs STAMP_WINDOW_SECONDS: how much later than its stamp a Secret may be created.
STAMP_WINDOW = 60
ALICE = {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}


def readable(o):
    """alice's changes to ops-agent: its ClusterRole reads every kind (which the locker's own
    account may grant: it reads every kind), and she is added to its ClusterRoleBinding."""
    if o["kind"] == "ClusterRole":
        o["rules"] = [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["get", "list", "watch"]}]
    if o["kind"] == "ClusterRoleBinding":
        o["subjects"].append(ALICE)
    return o


class TrustStamps(PlaneTest):
    @classmethod
    def setUpClass(cls):
        cls.plane = ControlPlane()
        try:
            k = cls.plane.kubectl
            assert k("create", "namespace", NS).returncode == 0
            bind(cls.plane, "alice", "edit", NS)
            bind(cls.plane, OPS, "cluster-admin", name="ops-admin")
            # (RBAC takes a moment to see a new binding.)
            assert eventually(lambda: k("auth", "can-i", "--as=alice", "delete", "secrets", "-n", NS)
                              .stdout.strip() == "yes", 10)
            env = chart_rbac_env(cls.plane)
            cls.locker = locked(cls.plane, env, "stamps", "--exempt-user", OPS)
            # Attack 2's release, installed first so that its stamps are old by the time it runs:
            # alice is bound, and saves revision 1 as stored (with its stamp); the admin then
            # takes the binding away.
            helm = cls.plane.helm(NS)
            helm.install(GRANTS, "grant", {"readers": ["alice"]})
            cls.grant_stamped = time.time()
            out = k("--as=alice", "-n", NS, "get", "secret", "sh.helm.release.v1.grant.v1", "-o", "json")
            assert out.returncode == 0, out.stderr
            cls.grant_saved = json.loads(out.stdout)
            helm.upgrade(GRANTS, "grant", {"readers": []})
        except BaseException:
            cls.plane.down()
            raise

    @classmethod
    def tearDownClass(cls):
        unlock(cls.plane, cls.locker, "stamps")
        cls.plane.down()

    def log(self):
        return self.locker.log_text()[-3000:]

    def can_i(self, *args):
        return self.can_i_as("alice", *args)

    def reads_secrets(self):
        """Whether alice may read Secrets in kube-system (what each attack is after)."""
        return self.can_i("get", "secrets", "-n", "kube-system")

    def events(self, name, reason):
        return self.object_events(NS, name, reason)

    def noted(self, secret, reason, *wanted):
        """Waits for the `reason` Events on `secret` to name each of `wanted`."""
        def notes():
            text = " ".join(e.get("note") or e.get("message") or "" for e in self.events(secret, reason))
            return text if all(w in text for w in wanted) else None
        self.assertTrue(eventually(notes, 30, 0.5),
                        f"{reason} Events on {secret}: {self.events(secret, reason)}\n{self.log()}")

    def stamp_user(self, secret):
        annotations = self.get("-n", NS, "secret", secret)["metadata"].get("annotations") or {}
        author = annotations.get("helm-locker.io/author")
        return json.loads(author)["username"] if author else None

    def rbac(self, role):
        """A ClusterRole's rules and its binding's subjects, as they are."""
        return self.get("clusterrole", role)["rules"], self.get("clusterrolebinding", role)["subjects"]

    def forge(self, release, revision, change):
        """Revision `revision` of `release`, written by alice from the one before it, with
        `change` applied to each object of the manifest (as test_authors.py does)."""
        out = self.ok(self.k("--as=alice", "-n", NS, "get", "secret",
                             f"sh.helm.release.v1.{release}.v{revision - 1}", "-o", "json"))
        body = decode(json.loads(out.stdout))
        objects = []
        for doc in (d for d in body["manifest"].split("\n---\n") if d.strip()):
            source = "\n".join(l for l in doc.splitlines() if l.startswith("# Source:"))
            text = "\n".join(l for l in doc.splitlines() if not l.startswith("# Source:") and l.strip() != "---")
            obj = json.loads(self.ok(self.k("create", "--dry-run=client", "-o", "json", "-f", "-", input=text)).stdout)
            if "namespace:" not in text:
                obj["metadata"].pop("namespace", None)
            objects.append((source, change(obj)))
        body["manifest"] = "".join(f"---\n{source}\n{json.dumps(o)}\n" for source, o in objects)
        body["version"] = revision
        body["info"]["status"] = "deployed"
        secret = {"apiVersion": "v1", "kind": "Secret", "type": "helm.sh/release.v1",
                  "metadata": {"name": f"sh.helm.release.v1.{release}.v{revision}", "namespace": NS,
                               "labels": {"owner": "helm", "name": release, "status": "deployed",
                                          "version": str(revision)}},
                  "data": {"release": encode(body)}}
        self.ok(self.k("--as=alice", "-n", NS, "create", "-f", "-", input=json.dumps(secret)))

    def test_1_helm_test_does_not_launder_a_forgery(self):
        helm = self.plane.helm(NS)
        helm.install(OPS_AGENT, "ops", {})
        before = self.rbac("ops-agent-read")
        self.assertEqual(self.reads_secrets(), "no")
        self.assertTrue(eventually(lambda: self.can_i("patch", "configmaps", "-n", NS) == "yes", 10))

        secret = "sh.helm.release.v1.ops.v2"
        self.forge("ops", 2, readable)
        self.assertEqual(self.stamp_user(secret), "alice")
        self.noted(secret, "AuthorLacksRights", "its author alice may not",
                   "escalate clusterroles.rbac.authorization.k8s.io ops-agent-read cluster-wide")

        # The admin's pipeline runs helm test: Helm rewrites the newest revision's Secret with
        # the hook's last run (the admin is the writer the API server authenticates).
        version = self.get("-n", NS, "secret", secret)["metadata"]["resourceVersion"]
        helm.test("ops")
        stored = self.get("-n", NS, "secret", secret)
        self.assertNotEqual(stored["metadata"]["resourceVersion"], version)
        self.assertEqual([h.get("last_run", {}).get("phase") for h in decode(stored)["hooks"]], ["Succeeded"])
        # Defended: the content is still alice's, so is the stamp; nothing is written.
        self.assertEqual(self.stamp_user(secret), "alice")
        time.sleep(SETTLE)
        self.assertEqual(self.rbac("ops-agent-read"), before, self.log())
        self.assertEqual(self.reads_secrets(), "no")
        self.assertEqual(self.can_i("create", "rolebindings", "-n", NS), "no")

        # Control: a rewrite by the admin that does change the content (a value) is the
        # admin's, and the reverter then follows alice's rules with the admin's rights: what the
        # helm test rewrite made it do before.
        body = decode(stored)
        body["config"] = dict(body.get("config") or {}, reviewed="by-the-admin")
        control = copy.deepcopy(stored)
        control["data"]["release"] = encode(body)
        control["metadata"].pop("managedFields", None)
        self.ok(self.k("-n", NS, "replace", "-f", "-", input=json.dumps(control)))
        self.assertNotIn(self.stamp_user(secret), (None, "alice"))
        self.assertTrue(eventually(lambda: self.reads_secrets() == "yes", 30),
                        f"the admin's stamp did not make the reverter follow the revision:\n{self.log()}")
        self.assertIn(ALICE, self.rbac("ops-agent-read")[1])

        # The admin's next helm upgrade succeeds and takes it all back.
        helm.upgrade(OPS_AGENT, "ops", {})
        self.assertTrue(eventually(lambda: self.rbac("ops-agent-read") == before, 30), self.log())
        self.assertTrue(eventually(lambda: self.reads_secrets() == "no", 10))
        self.assertEqual(self.stamp_user("sh.helm.release.v1.ops.v3"), self.stamp_user(secret))

    def replay(self, release, saved):
        """alice, with the author webhook away: deletes revisions 2 and 1 of `release` and
        creates revision 1 again from `saved` (its stamp and its creationTimestamp as saved).
        Returns the Secret as the API server stored it."""
        self.locker.unregister_author_webhook()
        for revision in (2, 1):
            self.ok(self.k("--as=alice", "-n", NS, "delete", "secret", f"sh.helm.release.v1.{release}.v{revision}"))
        again = copy.deepcopy(saved)
        for field in ("resourceVersion", "uid", "managedFields", "selfLink"):
            again["metadata"].pop(field, None)
        self.ok(self.k("--as=alice", "-n", NS, "create", "-f", "-", input=json.dumps(again)))
        return self.get("-n", NS, "secret", f"sh.helm.release.v1.{release}.v1")

    def stamp_again(self):
        register_author_webhook(self.plane, self.locker)
        self.locker.stamping = True

    def test_2_a_saved_stamp_replayed_on_a_recreated_secret_names_nobody(self):
        helm = self.plane.helm(NS)
        self.addCleanup(self.stamp_again)
        # The same replay within the stamp's window: the stamp verifies by its time, but this
        # process saw it on the first Secret, so on the re-created one it is spent (issue 67;
        # the control, a process that never saw it, is test_trust_generate_name.py's).
        helm.install(GRANTS, "fresh", {"readers": ["alice"]})
        saved = self.get("-n", NS, "secret", "sh.helm.release.v1.fresh.v1")
        self.assertIn("helm-locker.io/author-proof", saved["metadata"].get("annotations") or {})
        helm.upgrade(GRANTS, "fresh", {"readers": []})
        self.assertTrue(eventually(lambda: self.reads_secrets() == "no", 10))
        # Creation times have whole seconds: a revision 1 created in the same second as revision
        # 2 reads as brought back (WentBack), not as a new install, and the control would not
        # be one.
        time.sleep(1.1)
        self.replay("fresh", saved)
        self.assertFalse(eventually(lambda: self.reads_secrets() == "yes", SETTLE, 0.5),
                         f"a stamp replayed within its window gave the binding back:\n{self.log()}")
        self.noted("sh.helm.release.v1.fresh.v1", "UnknownAuthor", "its author stamp was made for an earlier write")
        self.stamp_again()
        helm.upgrade(GRANTS, "fresh", {"readers": []})
        self.assertTrue(eventually(lambda: self.reads_secrets() == "no", 30), self.log())

        # The attack: grant's revision 1 was stamped more than the window ago.
        before = self.rbac("grant-read")
        self.assertNotIn(ALICE, before[1])
        time.sleep(max(0.0, self.grant_stamped + STAMP_WINDOW + 2 - time.time()))
        saved = self.grant_saved
        self.assertIn("helm-locker.io/author-proof", saved["metadata"]["annotations"])
        recreated = self.replay("grant", saved)
        secret = "sh.helm.release.v1.grant.v1"
        # The API server chose the creation time, not alice; and she kept the saved stamp.
        self.assertGreater(recreated["metadata"]["creationTimestamp"], saved["metadata"]["creationTimestamp"])
        self.assertEqual({k: v for k, v in recreated["metadata"]["annotations"].items() if k.startswith("helm-locker.io/")},
                         {k: v for k, v in saved["metadata"]["annotations"].items() if k.startswith("helm-locker.io/")})
        # No update moves it back either (the API server keeps the stored creation time).
        self.k("--as=alice", "-n", NS, "patch", "secret", secret, "-p",
               json.dumps({"metadata": {"creationTimestamp": saved["metadata"]["creationTimestamp"]}}))
        self.assertEqual(self.get("-n", NS, "secret", secret)["metadata"]["creationTimestamp"],
                         recreated["metadata"]["creationTimestamp"])
        gained = eventually(lambda: self.reads_secrets() == "yes", SETTLE, 0.5)
        self.assertFalse(gained, f"the replayed stamp gave alice her binding back:\n{self.log()}")
        self.assertEqual(self.rbac("grant-read"), before, self.log())
        self.noted(secret, "UnknownAuthor", "its author stamp was made for an earlier write",
                   "ClusterRoleBinding grant-read")

        # The admin's next helm upgrade succeeds, is stamped, and is followed: drift of the
        # binding is put back.
        self.stamp_again()
        helm.upgrade(GRANTS, "grant", {"readers": []})
        upgraded = "sh.helm.release.v1.grant.v2"
        self.assertNotIn(self.stamp_user(upgraded), (None, "alice"))
        self.ok(self.k(f"--as={OPS}", "patch", "clusterrolebinding", "grant-read", "--type=json", "-p",
                       json.dumps([{"op": "add", "path": "/subjects/-", "value": ALICE}])))
        self.assertTrue(eventually(lambda: self.rbac("grant-read") == before, 30),
                        f"drift of the admin's binding not reverted:\n{self.log()}")
        self.assertEqual(self.reads_secrets(), "no")

    def test_3_an_older_revision_brought_back_in_place_names_nobody(self):
        # The same replay without re-creating: revision 1's Secret is overwritten with its
        # saved state (deployed, with its stamp) after revision 2 is deleted. The Secret keeps
        # its creation time, so its stamp is within its window; what gives it away is that the
        # release's newest revision went down.
        helm = self.plane.helm(NS)
        self.addCleanup(self.stamp_again)
        helm.install(GRANTS, "kept", {"readers": ["alice"]})
        saved = self.get("-n", NS, "secret", "sh.helm.release.v1.kept.v1")
        helm.upgrade(GRANTS, "kept", {"readers": []})
        before = self.rbac("kept-read")
        self.assertTrue(eventually(lambda: self.reads_secrets() == "no", 10))
        self.locker.unregister_author_webhook()
        secret = "sh.helm.release.v1.kept.v1"
        self.ok(self.k("--as=alice", "-n", NS, "delete", "secret", "sh.helm.release.v1.kept.v2"))
        again = copy.deepcopy(saved)
        for field in ("resourceVersion", "managedFields"):
            again["metadata"].pop(field, None)
        self.ok(self.k("--as=alice", "-n", NS, "replace", "-f", "-", input=json.dumps(again)))
        stored = self.get("-n", NS, "secret", secret)
        self.assertEqual(stored["metadata"]["creationTimestamp"], saved["metadata"]["creationTimestamp"])
        self.assertEqual(stored["metadata"]["annotations"], saved["metadata"]["annotations"])
        gained = eventually(lambda: self.reads_secrets() == "yes", SETTLE, 0.5)
        self.assertFalse(gained, f"the revision brought back gave alice her binding back:\n{self.log()}")
        self.assertEqual(self.rbac("kept-read"), before, self.log())
        self.noted(secret, "UnknownAuthor", "older than a revision of this release helm-locker saw before",
                   "ClusterRoleBinding kept-read")
        # The admin's next helm upgrade succeeds, and the release is the admin's again.
        self.stamp_again()
        helm.upgrade(GRANTS, "kept", {"readers": []})
        self.assertNotIn(self.stamp_user("sh.helm.release.v1.kept.v2"), (None, "alice"))
        self.ok(self.k(f"--as={OPS}", "patch", "clusterrolebinding", "kept-read", "--type=json", "-p",
                       json.dumps([{"op": "add", "path": "/subjects/-", "value": ALICE}])))
        self.assertTrue(eventually(lambda: self.rbac("kept-read") == before, 30),
                        f"drift of the admin's binding not reverted:\n{self.log()}")
        self.assertEqual(self.reads_secrets(), "no")


if __name__ == "__main__":
    unittest.main()
