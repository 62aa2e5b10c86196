"""`kubectl locker vouch` adopts only what it shows (issue 67, attack 4; docs/security.md), on a
real control plane with the locker run under the chart's own ServiceAccount and RBAC
(chart_rbac.py) and its author webhook as the chart registers it.

`alice` holds the built-in `edit` role in `team`: she may write Secrets there, no RBAC object.
tests/e2e/charts/grants binds a ClusterRole that reads every Secret to its `readers`.

  1. Control: release team/found, installed before the locker (no author), its binding drifted
     by an exempt user to add alice: the drift is held (unknown author). The admin's routine
     `vouch --all -A --yes` shows it (no known author, the RBAC and cluster-scoped objects, the
     drift) and adopts it: the reverter now takes alice out with the admin's rights.
  2. The attack: the admin installs team/grant; alice writes its revision 2 adding herself to the
     binding (refused: `AuthorLacksRights`). The admin's `vouch --all -A --yes` skips it and
     lists alice as its author; her stamp stays, and she still cannot read Secrets.
  3. A revision changed after the show is not vouched: team/late (installed while the author
     webhook was away: no author) is shown, alice
     rewrites it (herself added) before the admin says yes, and the write's `resourceVersion`
     precondition refuses it; a vouch naming other content than written is refused by the author
     webhook itself.

Each ends with the admin's `helm upgrade` succeeding. Newest Kubernetes only. Run:

  cd tests/e2e && KUBEBUILDER_ASSETS=/path/to/v1.36.2 HELM_LOCKER_BIN=target/debug/helm-locker \\
      python -m unittest -v test_trust_vouch
"""

import json
import os
import subprocess
import time
import unittest

import test_trust_stamps
from chart_rbac import bind, chart_rbac_env, locked, unlock
from harness import PlaneTest, BIN, HERE, ControlPlane, eventually, register_author_webhook
from test_authors import decode, encode

GRANTS = os.path.join(HERE, "charts", "grants")
NS = "team"
# Writes drift by hand; exempt at admission (--exempt-user ops).
OPS = "ops"
SETTLE = 12.0
ALICE = {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}


def add_alice(o):
    if o["kind"] == "ClusterRoleBinding":
        o["subjects"].append(ALICE)
    return o


class TrustVouch(PlaneTest):
    forge = test_trust_stamps.TrustStamps.forge

    @classmethod
    def setUpClass(cls):
        cls.plane = ControlPlane()
        try:
            k = cls.plane.kubectl
            assert k("create", "namespace", NS).returncode == 0
            bind(cls.plane, "alice", "edit", NS)
            bind(cls.plane, OPS, "cluster-admin", name="ops-admin")
            assert eventually(lambda: k("auth", "can-i", "--as=alice", "delete", "secrets", "-n", NS)
                              .stdout.strip() == "yes", 10)
            # Found at install: no author stamp.
            helm = cls.plane.helm(NS)
            helm.install(GRANTS, "found", {"readers": []})
            env = chart_rbac_env(cls.plane)
            cls.locker = locked(cls.plane, env, "vouch", "--exempt-user", OPS)
        except BaseException:
            cls.plane.down()
            raise

    @classmethod
    def tearDownClass(cls):
        unlock(cls.plane, cls.locker, "vouch")
        cls.plane.down()

    def log(self):
        return self.locker.log_text()[-3000:]

    def reads_secrets(self):
        return self.can_i_as("alice", "get", "secrets", "-n", "kube-system")

    def subjects(self, release):
        return self.get("clusterrolebinding", f"{release}-read")["subjects"]

    def stamp_user(self, secret):
        annotations = self.get("-n", NS, "secret", secret)["metadata"].get("annotations") or {}
        author = annotations.get("helm-locker.io/author")
        return json.loads(author)["username"] if author else None

    def vouch(self, *args):
        return self.plane.run([BIN, "kubectl", "vouch", *args, "--reason", "routine"])

    def test_1_control_a_release_found_at_install_is_shown_and_adopted(self):
        before = self.subjects("found")
        self.ok(self.k(f"--as={OPS}", "patch", "clusterrolebinding", "found-read", "--type=json", "-p",
                       json.dumps([{"op": "add", "path": "/subjects/-", "value": ALICE}])))
        self.assertTrue(eventually(lambda: self.reads_secrets() == "yes", 10))
        # Held: its author is not known, so the RBAC drift is not put back.
        time.sleep(SETTLE)
        self.assertIn(ALICE, self.subjects("found"), self.log())

        out = self.vouch("--all", "-A", "--yes")
        self.assertEqual(out.returncode, 0, out.stderr + out.stdout)
        self.assertIn("release team/found revision 1 (deployed)", out.stdout)
        self.assertIn("author: not known", out.stdout)
        self.assertIn("ClusterRoleBinding found-read  [RBAC, cluster-scoped]", out.stdout)
        self.assertIn("ClusterRoleBinding found-read /subjects", out.stdout)
        self.assertIn("vouched: release team/found revision 1 (deployed), author now admin", out.stdout)
        # Now the admin's: the reverter takes alice out with his rights.
        self.assertTrue(eventually(lambda: self.reads_secrets() == "no", 30), self.log())
        self.assertEqual(self.subjects("found"), before)
        self.plane.helm(NS).upgrade(GRANTS, "found", {"readers": []})
        self.assertEqual(self.reads_secrets(), "no")

    def test_2_vouch_all_skips_a_tenants_refused_revision(self):
        helm = self.plane.helm(NS)
        helm.install(GRANTS, "grant", {"readers": []})
        before = self.subjects("grant")
        secret = "sh.helm.release.v1.grant.v2"
        self.forge("grant", 2, add_alice)
        self.assertEqual(self.stamp_user(secret), "alice")
        self.assertTrue(eventually(lambda: self.object_events(NS, secret, "AuthorLacksRights"), 30, 0.5),
                        self.log())

        out = self.vouch("--all", "-A", "--yes")
        self.assertEqual(out.returncode, 0, out.stderr + out.stdout)
        self.assertIn("skipped: release team/grant revision 2 (deployed): its author is alice", out.stdout)
        self.assertNotIn("vouched: release team/grant", out.stdout)
        self.assertEqual(self.stamp_user(secret), "alice")
        # Named, without --include-known-authors: skipped as well.
        out = self.vouch("grant", "-n", NS, "--yes")
        self.assertIn("its author is alice", out.stdout)
        time.sleep(SETTLE)
        self.assertEqual(self.subjects("grant"), before, self.log())
        self.assertEqual(self.reads_secrets(), "no")

        helm.upgrade(GRANTS, "grant", {"readers": []})
        self.assertNotEqual(self.stamp_user("sh.helm.release.v1.grant.v3"), "alice")
        self.assertEqual(self.reads_secrets(), "no")

    def test_3_a_revision_changed_after_the_show_is_not_vouched(self):
        # Installed while the author webhook was away: no author.
        self.locker.unregister_author_webhook()
        self.plane.helm(NS).install(GRANTS, "late", {"readers": []})
        register_author_webhook(self.plane, self.locker)
        self.locker.stamping = True
        secret = "sh.helm.release.v1.late.v1"
        self.assertIsNone(self.stamp_user(secret))
        before = self.subjects("late")
        vouch = subprocess.Popen([BIN, "kubectl", "vouch", "late", "-n", NS, "--reason", "found"],
                                 env=self.plane.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
        self.addCleanup(lambda: vouch.poll() is None and vouch.kill())
        asked = ""
        while "[y/N]" not in asked:
            char = vouch.stderr.read(1)
            self.assertTrue(char, f"no question asked: {asked}")
            asked += char
        # Between the show and the yes, alice adds herself to the revision.
        stored = self.get("-n", NS, "secret", secret)
        body = decode(stored)
        body["manifest"] = body["manifest"].replace(
            "subjects:\n", "subjects:\n- apiGroup: rbac.authorization.k8s.io\n  kind: User\n  name: alice\n", 1)
        self.assertIn("name: alice", body["manifest"])
        self.ok(self.k("--as=alice", "-n", NS, "patch", "secret", secret, "-p",
                       json.dumps({"data": {"release": encode(body)}})))
        out, err = vouch.communicate("y\n", timeout=60)
        self.assertEqual(vouch.returncode, 2, out + err)
        self.assertIn("release team/late revision 1 (deployed)", out)
        self.assertIn("changed since it was shown", err)
        self.assertNotIn("vouched: release", out)
        self.assertEqual(self.stamp_user(secret), "alice")

        # A vouch naming other content than written is refused by the author webhook itself.
        denied = self.k("-n", NS, "annotate", "secret", secret, "helm-locker.io/vouch=mine",
                        "helm-locker.io/vouch-content=sha256:00")
        self.assertNotEqual(denied.returncode, 0)
        self.assertIn("not the content written", denied.stderr)
        self.assertEqual(self.stamp_user(secret), "alice")
        time.sleep(SETTLE)
        self.assertEqual(self.subjects("late"), before, self.log())
        self.assertEqual(self.reads_secrets(), "no")

        self.plane.helm(NS).upgrade(GRANTS, "late", {"readers": []})
        self.assertEqual(self.reads_secrets(), "no")


if __name__ == "__main__":
    unittest.main()
