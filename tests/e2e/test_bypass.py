"""The README's emergency bypass and its way back, run as written (the shell blocks are read out
of README.md), on releases not named `helm-locker`, in every mode (deny, warn, repair) under both
failure policies. Under `Fail` a configuration left behind would refuse every write it
intercepts; repair mode registers a third, mutating one.

No kubelet runs, so the chart's pods never start: the webhooks have no endpoints, and under `Fail`
every write they intercept is refused until the bypass removes them.

The way back's `helm upgrade` goes through Helm's Go SDK (there is no Helm CLI here). It applies
server side without forcing conflicts, as the CLI does by default (Helm 4's pkg/cmd/upgrade.go:
`--server-side=auto` follows the release's `apply_method: ssa`; `--force-conflicts` is false). The bypass's `kubectl scale` leaves no
other manager on the replicas, so that upgrade puts them back without a conflict.
"""

import json
import os
import re
import subprocess
import unittest

import helm_python as helm

from harness import ROOT, ControlPlane, eventually, locker_values
from test_authors import decode

CHART = os.path.join(ROOT, "charts", "helm-locker")
MODES = ("deny", "warn", "repair")
POLICIES = ("Fail", "Ignore")


def readme_block(marker):
    """The README's ```sh block whose text contains `marker`."""
    with open(os.path.join(ROOT, "README.md")) as f:
        blocks = re.findall(r"```sh\n(.*?)```", f.read(), re.S)
    found = [b for b in blocks if marker in b]
    assert len(found) == 1, f"{len(found)} README blocks contain {marker!r}"
    return found[0]


def break_glass_switch_off():
    """docs/break-glass.md's command that sets mode=off by hand when Helm cannot run."""
    with open(os.path.join(ROOT, "docs", "break-glass.md")) as f:
        found = re.findall(r"`(kubectl [^`]*-switches\$[^`]*)`", f.read())
    assert len(found) == 1, found
    return found[0]


class Bypass(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.plane = ControlPlane()
        assert cls.plane.kubectl("create", "namespace", "shop").returncode == 0
        # Kubernetes 1.20 does not set kubernetes.io/metadata.name (1.21 does): label the
        # namespaces the webhook must never intercept, as NOTES.txt tells users to.
        for ns in ("kube-system", "kube-node-lease"):
            cls.plane.kubectl("label", "namespace", ns, f"kubernetes.io/metadata.name={ns}", "--overwrite")

    @classmethod
    def tearDownClass(cls):
        cls.plane.down()

    def k(self, *args):
        return self.plane.kubectl(*args)

    def run_block(self, block, release, namespace, check=True):
        env = dict(self.plane.env, RELEASE=release, NS=namespace)
        out = subprocess.run(["bash", "-euo", "pipefail", "-c", block], env=env, capture_output=True,
                             text=True, timeout=120, cwd=ROOT)
        if check:
            self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        return out

    def configurations(self, release):
        out = self.k("get", "validatingwebhookconfiguration,mutatingwebhookconfiguration", "-o", "name")
        return sorted(line for line in out.stdout.split() if release in line)

    def replicas(self, namespace):
        return self.k("-n", namespace, "get", "deploy", "-o", "jsonpath={.items[0].spec.replicas}").stdout

    def test_the_readme_bypass_and_way_back_work_in_every_mode_for_any_release_name(self):
        for mode in MODES:
            for policy in POLICIES:
                with self.subTest(mode=mode, failurePolicy=policy):
                    self.bypass_and_back(mode, policy)

    def bypass_and_back(self, mode, policy):
        release = f"guard-{mode}-{policy.lower()}"
        namespace = release
        values = locker_values({"mode": mode, "webhook": {"failurePolicy": policy}})
        self.assertEqual(self.k("create", "namespace", namespace).returncode, 0)
        self.k("label", "namespace", namespace, f"kubernetes.io/metadata.name={namespace}", "--overwrite")
        helm_release = helm.Config(kubeconfig_path=self.plane.kubeconfig, namespace=namespace)
        helm_release.install(CHART, release, values)
        try:
            # The chart names its objects <release>-helm-locker: a bypass by name would miss them.
            # The validating and the author configurations; repair mode adds the mutating one.
            expected = 3 if mode == "repair" else 2
            self.assertEqual(len(self.configurations(release)), expected, self.configurations(release))
            # The control: with no locker behind them, the configurations refuse writes under
            # Fail; under Ignore they go through unchecked.
            before = self.k("-n", "shop", "create", "configmap", f"before-{release}", "--from-literal=a=b")
            if policy == "Fail":
                self.assertNotEqual(before.returncode, 0)
                self.assertIn("failed calling webhook", before.stderr)
            else:
                self.assertEqual(before.returncode, 0, before.stderr)

            # break-glass.md's switch by hand, for when Helm cannot run (the running replicas
            # watch this ConfigMap; test_switches shows them obey it).
            sel = f"SEL=app.kubernetes.io/name=helm-locker,app.kubernetes.io/instance={release}\n"
            self.run_block(sel + break_glass_switch_off(), release, namespace)
            switches = self.k("-n", namespace, "get", "configmap", "-l", sel[4:].strip(), "-o",
                              "jsonpath={.items[*].data.mode}").stdout.split()
            self.assertEqual(switches, ["off"])

            self.run_block(readme_block("--replicas=0"), release, namespace)
            self.assertEqual(self.configurations(release), [])
            self.assertEqual(self.replicas(namespace), "0")
            after = self.k("-n", "shop", "create", "configmap", f"after-{release}", "--from-literal=a=b")
            self.assertEqual(after.returncode, 0, after.stderr)

            # Why the way back is one upgrade: a scale through the scale subresource leaves no
            # other field manager on /spec/replicas (1.20 keeps Helm's, 1.36 drops it), so a
            # server-side apply that does not force conflicts (the CLI's default and the SDK's;
            # the release applies server side) takes the replicas back without a conflict.
            stored = self.k("-n", namespace, "get", "secret", "-l", f"owner=helm,name={release}",
                            "-o", "jsonpath={.items[0].data.release}").stdout
            self.assertEqual(decode({"data": {"release": stored}}).get("apply_method"), "ssa")
            deployment = json.loads(self.k("-n", namespace, "get", "deploy", "-o", "json",
                                           "--show-managed-fields").stdout)["items"][0]
            owners = [m["manager"] for m in deployment["metadata"]["managedFields"]
                      if "f:replicas" in m.get("fieldsV1", {}).get("f:spec", {})]
            self.assertLessEqual(set(owners), {"python"}, deployment["metadata"]["managedFields"])

            # The switch by hand made kubectl-patch the manager of the mode: the upgrade stops on
            # it (break-glass.md says so) until the same command gives it the release's value.
            with self.assertRaises(helm.HelmError) as stopped:
                helm_release.upgrade(CHART, release, values, reuse_values=True)
            self.assertIn('conflict with "kubectl-patch"', str(stopped.exception))
            self.assertIn(".data.mode", str(stopped.exception))
            self.run_block(sel + break_glass_switch_off().replace('"mode":"off"', f'"mode":"{mode}"'),
                           release, namespace)
            # The stopped upgrade still applied the rest of the chart, the configurations among
            # them; no kubelet runs here, so no pod answers them: bypass again, as one would.
            self.run_block(readme_block("--replicas=0"), release, namespace)

            # The way back, with the chart in this repository (the README's path), values kept.
            block = readme_block("helm upgrade")
            block = block.replace("helm upgrade", "true # helm upgrade")  # no Helm CLI here: the SDK below
            self.run_block(f"SEL=app.kubernetes.io/name=helm-locker,app.kubernetes.io/instance={release}\n"
                           + block, release, namespace)
            helm_release.upgrade(CHART, release, values, reuse_values=True)
            self.assertEqual(len(self.configurations(release)), expected)
            self.assertTrue(eventually(lambda: self.replicas(namespace) == "2", 10))
            # ... and the switches back at the release's values.
            self.assertEqual(self.k("-n", namespace, "get", "configmap", "-l", sel[4:].strip(), "-o",
                                    "jsonpath={.items[*].data.mode}").stdout.split(), [mode])
        finally:
            # The configurations first, so that under Fail the uninstall's own deletes of
            # cluster-wide objects are not refused by a webhook with no endpoints.
            self.run_block(readme_block("--replicas=0"), release, namespace, check=False)
            helm_release.uninstall(release, ignore_not_found=True)
            self.k("delete", "namespace", namespace, "--wait=false")


if __name__ == "__main__":
    unittest.main()
