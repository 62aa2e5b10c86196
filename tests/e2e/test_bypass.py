"""The README's emergency bypass and its way back, run as written (the shell blocks are read out
of README.md), on a release not named `helm-locker`, in repair mode under `failurePolicy: Fail`:
the worst case, where a configuration left behind would refuse every write it intercepts.

No kubelet runs, so the chart's pods never start: the webhooks have no endpoints, and every write
they intercept is refused until the bypass removes them.
"""

import os
import re
import subprocess
import unittest

import helm_python as helm

from harness import ROOT, ControlPlane, eventually

CHART = os.path.join(ROOT, "charts", "helm-locker")
RELEASE, NS = "guard", "guard-system"
VALUES = {"mode": "repair", "webhook": {"failurePolicy": "Fail"}}


def readme_block(marker):
    """The README's ```sh block whose text contains `marker`."""
    with open(os.path.join(ROOT, "README.md")) as f:
        blocks = re.findall(r"```sh\n(.*?)```", f.read(), re.S)
    found = [b for b in blocks if marker in b]
    assert len(found) == 1, f"{len(found)} README blocks contain {marker!r}"
    return found[0]


class Bypass(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.plane = ControlPlane()

    @classmethod
    def tearDownClass(cls):
        cls.plane.down()

    def k(self, *args):
        return self.plane.kubectl(*args)

    def run_block(self, block):
        env = dict(self.plane.env, RELEASE=RELEASE, NS=NS)
        out = subprocess.run(["bash", "-euo", "pipefail", "-c", block], env=env, capture_output=True,
                             text=True, timeout=120, cwd=ROOT)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        return out

    def configurations(self):
        out = self.k("get", "validatingwebhookconfiguration,mutatingwebhookconfiguration", "-o", "name")
        return sorted(line for line in out.stdout.split() if RELEASE in line)

    def test_the_readme_bypass_holds_for_any_release_name_in_repair_mode_and_the_way_back_works(self):
        self.assertEqual(self.k("create", "namespace", NS).returncode, 0)
        self.assertEqual(self.k("create", "namespace", "shop").returncode, 0)
        # Kubernetes 1.20 does not set kubernetes.io/metadata.name (1.21 does): label the
        # namespaces the webhook must never intercept, as NOTES.txt tells users to.
        for ns in ("kube-system", "kube-node-lease", NS):
            self.k("label", "namespace", ns, f"kubernetes.io/metadata.name={ns}", "--overwrite")
        release = helm.Config(kubeconfig_path=self.plane.kubeconfig, namespace=NS)
        release.install(CHART, RELEASE, VALUES)
        # The chart names its objects <release>-helm-locker: a bypass by name would miss them.
        self.assertEqual(len(self.configurations()), 3, self.configurations())
        # The control: with no locker behind them, the configurations refuse writes.
        refused = self.k("-n", "shop", "create", "configmap", "before", "--from-literal=a=b")
        self.assertNotEqual(refused.returncode, 0)
        self.assertIn("failed calling webhook", refused.stderr)

        self.run_block(readme_block("--replicas=0"))
        self.assertEqual(self.configurations(), [])
        replicas = self.k("-n", NS, "get", "deploy", "-o", "jsonpath={.items[0].spec.replicas}").stdout
        self.assertEqual(replicas, "0")
        self.assertEqual(self.k("-n", "shop", "create", "configmap", "after", "--from-literal=a=b").returncode, 0)

        # The way back, with the chart in this repository (the README's path) and the values kept.
        block = readme_block("helm upgrade")
        block = block.replace("helm upgrade", "true # helm upgrade")  # no Helm CLI here: the SDK below
        self.run_block("SEL=app.kubernetes.io/name=helm-locker,app.kubernetes.io/instance=$RELEASE\n" + block)
        release.upgrade(CHART, RELEASE, VALUES)
        self.assertEqual(len(self.configurations()), 3)
        self.assertTrue(eventually(lambda: self.k("-n", NS, "get", "deploy", "-o",
                                                  "jsonpath={.items[0].spec.replicas}").stdout == "2", 10))


if __name__ == "__main__":
    unittest.main()
