"""A denial names the values key that sets the field and the `helm upgrade --set` that changes
it the right way: on a real control plane, with a chart written the way published ones are,
installed by real Helm (charts/webapp, written in this repository: values on the line with
`default`, `toYaml` under a key, `with` blocks, `include` helpers), kubectl denied, then the
suggested upgrade done and found to work.

Run through scripts/e2e.sh, or alone:
  HELM_LOCKER_BIN="$(scripts/target-dir.sh)/debug/helm-locker" \
      .venv-e2e/bin/python -m unittest discover -s tests/e2e -p test_values_trace.py -v
(from the repository's root; scripts/target-dir.sh prints where cargo builds, CARGO_TARGET_DIR
included).
"""

import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import DENIED, ControlPlane, Locker, eventually, register_webhook  # noqa: E402

WEBAPP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "charts", "webapp")
NS = "vt"
DEPLOY = "deploy/vt-webapp"
VALUES = {"replicaCount": 2, "cache": {"enabled": False}}


class ValuesTrace(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.plane = ControlPlane()
        cls.locker = Locker(cls.plane, "vt").wait_ready()
        register_webhook(cls.plane, cls.locker, "vt")
        cls.helm = cls.plane.helm(NS)
        cls.helm.install(WEBAPP, NS, VALUES, create_namespace=True)
        locked = eventually(lambda: cls.plane.kubectl(
            "-n", NS, "scale", DEPLOY, "--replicas=9", "--dry-run=server").returncode != 0, 20, 0.2)
        assert locked, "the release was never locked"

    @classmethod
    def tearDownClass(cls):
        cls.locker.stop()
        cls.plane.down()

    def denied(self, *args, input=None):
        out = self.plane.kubectl("-n", NS, *args, input=input)
        self.assertNotEqual(out.returncode, 0, f"allowed: {out.stdout}")
        self.assertIn(DENIED, out.stderr)
        return out.stderr

    def test_a_value_on_the_line_and_the_command_that_changes_it(self):
        message = self.denied("scale", DEPLOY, "--replicas=5")
        self.assertIn("/spec/replicas is 2 in the chart, this request sets 5", message)
        self.assertIn("In the chart: /spec/replicas comes from values replicaCount.", message)
        self.assertIn("helm upgrade vt <webapp chart> -n vt --reuse-values --set replicaCount=5", message)

    def test_a_field_under_to_yaml_gets_the_rest_of_its_path(self):
        patch = {"spec": {"template": {"spec": {"containers": [
            {"name": "webapp", "resources": {"requests": {"cpu": "250m"}}}]}}}}
        message = self.denied("patch", DEPLOY, "--type=strategic", "-p", json.dumps(patch))
        self.assertIn("comes from values resources.requests.cpu", message)
        self.assertIn("--set resources.requests.cpu=250m", message)

    def test_a_field_no_value_sets_names_the_template_line(self):
        message = self.denied("patch", DEPLOY, "--type=merge", "-p",
                              json.dumps({"spec": {"strategy": {"rollingUpdate": {"maxUnavailable": 3}}}}))
        self.assertIn("/spec/strategy/rollingUpdate/maxUnavailable is set in webapp/templates/deployment.yaml line 15",
                      message)
        self.assertNotIn("--set", message)

    def test_the_suggested_upgrade_is_the_change(self):
        message = self.denied("scale", DEPLOY, "--replicas=4")
        self.assertIn("--set replicaCount=4", message)
        # What --reuse-values --set replicaCount=4 means, through the Go SDK.
        self.helm.upgrade(WEBAPP, NS, dict(VALUES, replicaCount=4))
        replicas = self.plane.kubectl("-n", NS, "get", DEPLOY, "-o", "jsonpath={.spec.replicas}").stdout
        self.assertEqual(replicas, "4")
        # The Events recording the denials carry the same advice (one per object, reason and
        # user every 30 s: the first denial of this class's tests).
        def notes():
            out = self.plane.kubectl("-n", NS, "get", "events.events.k8s.io", "-o", "json")
            return [e.get("note", "") for e in json.loads(out.stdout)["items"]] if out.returncode == 0 else []
        self.assertTrue(eventually(lambda: any("In the chart: " in n for n in notes()), 30), notes())

if __name__ == "__main__":
    unittest.main()
