"""The kubectl plugin on a real control plane: `kubectl locker status|why|diff`, run by kubectl
itself through a `kubectl-locker` symlink to helm-locker on PATH, against releases installed
with real Helm (the Go SDK through helm-python-sdk).

No webhook is registered here: the plugin only reads (release Secrets, live objects, the
API server's schema), and drift is written with plain kubectl, as it would get past a webhook
(an exempt user, the locker down).

Run through scripts/e2e.sh (it builds helm-locker and sets HELM_LOCKER_BIN), or alone:
  HELM_LOCKER_BIN="$(scripts/target-dir.sh)/debug/helm-locker" \
      .venv-e2e/bin/python -m unittest discover -s tests/e2e -p test_plugin.py -v
(from the repository's root; scripts/target-dir.sh prints where cargo builds, CARGO_TARGET_DIR
included).
"""

import json
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import BIN, CHART, ROOT, ControlPlane, release_secret  # noqa: E402

CRD = os.path.join(ROOT, "charts", "helm-locker", "crds", "helmreleases.helm.cattle.io.yaml")


class KubectlLocker(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.plane = ControlPlane()
        bin_dir = os.path.join(cls.plane.dir, "bin")
        os.makedirs(bin_dir, exist_ok=True)
        os.symlink(os.path.abspath(BIN), os.path.join(bin_dir, "kubectl-locker"))
        cls.env = dict(cls.plane.env, PATH=bin_dir + os.pathsep + os.environ.get("PATH", ""))
        cls.timings = {}
        for name, values in [("pl", {"replicas": 2}), ("dr", {"replicas": 2}), ("fl", {}), ("pd", {})]:
            cls.plane.helm(name).install(CHART, name, values, create_namespace=True)

    @classmethod
    def tearDownClass(cls):
        if cls.timings:
            print("\n  kubectl locker wall time: " + ", ".join(f"{k} {v:.2f}s" for k, v in sorted(cls.timings.items())))
        cls.plane.down()

    def locker(self, *args):
        """`kubectl locker ARGS` as a user runs it: kubectl finds the plugin on PATH."""
        started = time.time()
        out = self.plane.run(["kubectl", "locker", *args], env=self.env)
        self.timings.setdefault(args[0], time.time() - started)
        return out

    def json_of(self, *args, code=0):
        out = self.locker(*args, "-o", "json")
        self.assertEqual(out.returncode, code, out.stderr + out.stdout)
        return json.loads(out.stdout)

    def k(self, *args, input=None):
        out = self.plane.kubectl(*args, input=input)
        self.assertEqual(out.returncode, 0, out.stderr)
        return out

    def test_1_status_shows_an_installed_release_locked_and_in_sync(self):
        out = self.locker("status", "-n", "pl")
        self.assertEqual(out.returncode, 0, out.stderr)
        lines = out.stdout.splitlines()
        self.assertEqual(lines[0].split()[:8],
                         ["NAMESPACE", "RELEASE", "REVISION", "STATUS", "LOCKED", "MODE", "OBJECTS", "DRIFTED"])
        self.assertEqual(lines[1].split(), ["pl", "pl", "1", "deployed", "yes", "deny", "6", "0"], out.stdout)
        [release] = self.json_of("status", "-n", "pl")["releases"]
        self.assertEqual({k: release[k] for k in ("name", "namespace", "revision", "status", "locked", "mode",
                                                  "reason", "objects", "driftedFields", "missingObjects",
                                                  "unreadableObjects")},
                         {"name": "pl", "namespace": "pl", "revision": 1, "status": "deployed", "locked": True,
                          "mode": "deny", "reason": None, "objects": 6, "driftedFields": 0, "missingObjects": 0,
                          "unreadableObjects": 0})
        # The same command without the symlink: helm-locker kubectl.
        direct = self.plane.run([BIN, "kubectl", "status", "-n", "pl"])
        self.assertEqual((direct.returncode, direct.stdout), (0, out.stdout), direct.stderr)
        # -A: every namespace's releases; --kubeconfig works as kubectl's.
        everywhere = self.json_of("status", "-A", "--kubeconfig", self.plane.kubeconfig)
        self.assertTrue({"pl", "dr", "fl", "pd"} <= {r["name"] for r in everywhere["releases"]})

    def test_2_diff_exits_0_in_sync_and_1_on_drift_naming_each_path_and_both_values(self):
        out = self.locker("diff", "-n", "dr")
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        self.assertIn("No drift: 6 objects of 1 release compared match their chart.", out.stdout)
        self.k("-n", "dr", "patch", "deploy", "dr-web", "-p", '{"spec":{"replicas":5}}')
        self.k("-n", "dr", "patch", "configmap", "dr-config", "-p", '{"data":{"greeting":"hacked"}}')
        self.k("patch", "clusterrole", "dr-reader", "--type=json",
               "-p", '[{"op":"add","path":"/rules/0/verbs/-","value":"delete"}]')
        out = self.locker("diff", "-n", "dr")
        self.assertEqual(out.returncode, 1, out.stdout + out.stderr)
        self.assertIn("Deployment dr/dr-web (release dr/dr):\n  /spec/replicas: chart 2, live 5\n", out.stdout)
        self.assertIn('/data/greeting: chart "hello", live "hacked"', out.stdout)
        self.assertIn("ClusterRole dr-reader (release dr/dr):", out.stdout)
        # The release by name, and JSON for scripts.
        report = self.json_of("diff", "dr", "-n", "dr", code=1)
        self.assertTrue(report["drift"])
        fields = {(d["kind"], f["path"]): (f["chart"], f["live"]) for d in report["differences"] for f in d["fields"]}
        self.assertEqual(fields[("Deployment", "/spec/replicas")], (2, 5))
        self.assertEqual(fields[("ConfigMap", "/data/greeting")], ("hello", "hacked"))
        # A deleted object is drift too; the status counts it all.
        self.k("-n", "dr", "delete", "service", "dr-svc")
        out = self.locker("diff", "dr", "-n", "dr")
        self.assertEqual(out.returncode, 1)
        self.assertIn("Service dr/dr-svc (release dr/dr): missing, deleted from the cluster", out.stdout)
        [release] = self.json_of("status", "-n", "dr")["releases"]
        self.assertEqual((release["locked"], release["driftedFields"], release["missingObjects"]), (True, 3, 1))
        # An unknown release is an error, exit status 2.
        out = self.locker("diff", "nosuch", "-n", "dr")
        self.assertEqual(out.returncode, 2)
        self.assertIn("no Helm release nosuch in namespace dr", out.stderr)

    def test_3_why_names_the_release_and_each_locked_path_with_chart_and_live_values(self):
        self.k("-n", "pl", "patch", "deploy", "pl-web", "-p", '{"spec":{"template":{"spec":{"containers":[{"name":"web","image":"nginx:1.27"}]}}}}')
        out = self.locker("why", "deploy/pl-web", "-n", "pl")
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertTrue(out.stdout.startswith(
            "Deployment pl/pl-web is locked by Helm release pl/pl (revision 1, deployed, mode deny).\n"), out.stdout)
        rows = {line[2:].split()[0]: line for line in out.stdout.splitlines() if line[:2] in ("* ", "  ")}
        self.assertTrue(rows["/spec/replicas"].startswith("  "), rows["/spec/replicas"])
        # PATH CHART LIVE FROM: where the chart sets each field, read from the release's chart.
        self.assertEqual(rows["/spec/replicas"].split()[1:], ["2", "2", "values:", "replicas"])
        image = rows["/spec/template/spec/containers/0/image"]
        self.assertTrue(image.startswith("* "), image)
        self.assertEqual(image.split()[2:], ['"nginx:1.25"', '"nginx:1.27"', "values:", "image"])
        # "0.5" in the chart is stored as 500m: equal, not drift. No value sets it: the template line.
        cpu = rows["/spec/template/spec/containers/0/resources/limits/cpu"]
        self.assertEqual(cpu.split()[:3], ["/spec/template/spec/containers/0/resources/limits/cpu", '"0.5"', '"500m"'])
        self.assertRegex(cpu, r"set in shop/templates/\S+\.yaml line \d+$")
        self.assertIn("1 of ", out.stdout)
        report = self.json_of("why", "deployments.apps", "pl-web", "-n", "pl")
        self.assertEqual((report["release"]["name"], report["release"]["locked"]), ("pl", True))
        fields = {f["path"]: f for f in report["fields"]}
        self.assertEqual(fields["/spec/replicas"]["from"], "values: replicas")
        # Cluster-scoped, a custom resource by kind.group, and an object no release renders.
        out = self.locker("why", "clusterrole/pl-reader")
        self.assertIn("ClusterRole pl-reader is locked by Helm release pl/pl", out.stdout)
        out = self.locker("why", "widgets.example.com/pl-widget", "-n", "pl")
        self.assertIn("Widget pl/pl-widget is locked by Helm release pl/pl", out.stdout + out.stderr)
        self.assertIn("/spec/color", out.stdout)
        self.k("-n", "pl", "create", "configmap", "free", "--from-literal=a=b")
        out = self.locker("why", "cm", "free", "-n", "pl")
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("ConfigMap pl/free: no Helm release locks it", out.stdout)
        out = self.locker("why", "nosuchkind/x", "-n", "pl")
        self.assertEqual(out.returncode, 2)
        self.assertIn("nosuchkind", out.stderr)

    def test_4_a_failed_upgrade_stays_locked_and_a_pending_one_says_why_it_is_not(self):
        # The API server rejects the Deployment (a container needs an image): revision 2 failed.
        with self.assertRaises(Exception):
            self.plane.helm("fl").upgrade(CHART, "fl", {"image": ""})
        secrets = self.plane.get_json("secret", "-n", "fl", "-l", "owner=helm,name=fl")["items"]
        self.assertIn("failed", {s["metadata"]["labels"]["status"] for s in secrets})
        [release] = self.json_of("status", "-n", "fl")["releases"]
        self.assertEqual((release["revision"], release["status"], release["locked"]), (2, "failed", True))
        self.assertIsNone(release["reason"])
        out = self.locker("why", "deploy/fl-web", "-n", "fl")
        self.assertIn("locked by Helm release fl/fl (revision 2, failed, mode deny)", out.stdout)
        out = self.locker("diff", "-n", "fl")
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        self.assertIn("skipped release fl/fl: its newest revision 2 is failed", out.stdout)
        # Helm at work: the newest revision is pending-upgrade (as mid-upgrade).
        cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "pd-config"}, "data": {"greeting": "hello"}}
        self.k("apply", "-f", "-", input=json.dumps(release_secret("pd", "pd", [cm], status="pending-upgrade", revision=2)))
        out = self.locker("status", "-n", "pd")
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("Helm is at work (pending-upgrade): its objects are open until it finishes (no helm command running for it: stuck, helm rollback)", out.stdout)
        self.assertEqual(out.stdout.splitlines()[1].split()[:6], ["pd", "pd", "2", "pending-upgrade", "no", "deny"])

    def test_5_the_lockers_policy_and_helmrelease_registrations_are_honoured(self):
        policy = os.path.join(self.plane.dir, "policy.yaml")
        with open(policy, "w") as f:
            f.write("releases:\n- {namespace: dr, mode: warn}\n")
        by_name = {r["name"]: r for r in self.json_of("status", "-A", "--config", policy)["releases"]}
        self.assertEqual((by_name["dr"]["mode"], by_name["dr"]["locked"]), ("warn", True))
        self.assertEqual(by_name["pl"]["mode"], "deny")
        # --registration-namespace: only what a HelmRelease there registers is locked, with its mode.
        self.k("apply", "-f", CRD)
        self.k("wait", "--for=condition=established", "crd/helmreleases.helm.cattle.io", "--timeout=30s")
        self.k("create", "namespace", "registry")
        self.k("apply", "-f", "-", input=json.dumps({
            "apiVersion": "helm.cattle.io/v1alpha1", "kind": "HelmRelease",
            "metadata": {"name": "pl", "namespace": "registry"},
            "spec": {"release": {"name": "pl", "namespace": "pl"}, "mode": "repair"}}))
        report = self.json_of("status", "-A", "--registration-namespace", "registry")
        by_name = {r["name"]: r for r in report["releases"]}
        self.assertEqual((by_name["pl"]["locked"], by_name["pl"]["mode"]), (True, "repair"))
        self.assertEqual((by_name["dr"]["locked"], by_name["dr"]["reason"]),
                         (False, "policy: no HelmRelease in registry registers it"))


if __name__ == "__main__":
    unittest.main()
