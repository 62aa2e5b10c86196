"""matchConditions by Kubernetes version: the chart, webhook-config-1.28 and certs-gen emit the
conditions of webhook-config/match-conditions/match-conditions.yaml (the chart from its copy in
files/), from 1.28 on only, and the chart installs on every version from 1.20.

Offline, with real Helm (the Go SDK through helm-python-sdk) and kubectl's kustomize. Whether
the conditions skip only writes the locker allows is core/tests/match_conditions.rs.
"""

import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest

import helm_python as helm
from helm_python import _native

from harness import locker_values

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
CHART = os.path.join(ROOT, "charts", "helm-locker")
CONDITIONS = os.path.join(ROOT, "webhook-config", "match-conditions", "match-conditions.yaml")
KINDS = ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")
# Beside the helm-locker binary under test (scripts/e2e.sh builds both where cargo puts them).
CERTS_GEN = os.path.join(os.path.dirname(os.environ.get(
    "HELM_LOCKER_BIN", os.path.join(ROOT, "target", "debug", "helm-locker"))), "certs-gen")


def shipped_conditions():
    with open(CONDITIONS) as f:
        return helm.values_from_yaml(f.read())["conditions"]


def documents(text):
    docs = []
    for part in re.split(r"(?m)^---\s*$", text):
        obj = helm.values_from_yaml(part)
        if obj:
            docs.append(obj)
    return docs


def rendered(kube_version, values=None):
    """Every file the chart renders for a cluster reporting `kube_version`, by path.
    Chart.render has no kube_version argument; the SDK's native render takes it as an option
    (as `helm template --kube-version` does)."""
    chart = helm.Chart.load(CHART)
    try:
        opts = {"name": "helm-locker", "namespace": "helm-locker", "kube_version": kube_version}
        return json.loads(_native.call_string("helm_render", chart._raw(), json.dumps(locker_values(values)),
                                              json.dumps(opts)))
    finally:
        chart.close()


def notes(kube_version, values=None):
    return next(text for path, text in rendered(kube_version, values).items() if path.endswith("NOTES.txt"))


def render(kube_version, values=None):
    """The webhook configurations the chart renders for a cluster reporting `kube_version`."""
    out = rendered(kube_version, values)
    docs = []
    for path, text in sorted(out.items()):
        if not path.endswith("NOTES.txt"):
            docs.extend(documents(text))
    return [d for d in docs if d.get("kind") in KINDS]


# The author webhook stamps release Secret writes; every one must reach it: never conditions.
AUTHOR = "author.helm-locker.io"


def webhooks(configurations):
    """The webhooks that lock (every one but the author webhook)."""
    return [(c["kind"], w) for c in configurations for w in c["webhooks"] if w["name"] != AUTHOR]


def author_webhooks(configurations):
    return [w for c in configurations for w in c["webhooks"] if w["name"] == AUTHOR]


class MatchConditions(unittest.TestCase):
    def test_the_install_notes_say_which_writes_are_reviewed(self):
        self.assertIn("the webhooks carry matchConditions", notes("v1.30.5"))
        self.assertIn("has no matchConditions (1.28 and newer): every write", notes("v1.27.16"))
        self.assertIn("webhook.matchConditions is off: every write",
                      notes("v1.30.5", {"webhook": {"matchConditions": False}}))

    def test_the_chart_renders_them_from_1_28_on_and_never_before(self):
        want = shipped_conditions()
        self.assertEqual(len(want), 3)
        for version in ("v1.28.0", "v1.30.5-eks-ce1d5eb", "v1.36.3", "v1.40.0"):
            with self.subTest(version=version):
                found = webhooks(render(version, {"mode": "repair"}))
                self.assertEqual(len(found), 3, "validate, validate-status, repair")
                for kind, webhook in found:
                    self.assertEqual(webhook.get("matchConditions"), want, (kind, webhook["name"]))
        # 1.20 to 1.27 (and clusters built from source, such as the end-to-end suite's, which
        # report v0.0.0-master): the field is unknown there, so none.
        for version in ("v1.20.0", "v1.27.16", "v0.0.0-master+faecb196815e2"):
            with self.subTest(version=version):
                for kind, webhook in webhooks(render(version, {"mode": "repair"})):
                    self.assertNotIn("matchConditions", webhook, (version, kind))
        # A config that replaces the exemptions: the control plane's writes are sent, since the
        # locker may refuse them now.
        replaced = {"mode": "repair", "config": {"exempt": {"users": ["ops"]}}}
        for kind, webhook in webhooks(render("v1.36.3", replaced)):
            self.assertEqual(webhook.get("matchConditions"),
                             [c for c in want if c["name"] != "helm-locker.io/not-the-control-plane"], kind)
        # Turned off: every intercepted write is sent, on any version.
        for kind, webhook in webhooks(render("v1.36.3", {"mode": "repair", "webhook": {"matchConditions": False}})):
            self.assertNotIn("matchConditions", webhook, kind)

    def test_webhook_config_1_28_is_webhook_config_with_the_conditions(self):
        kubectl = shutil.which("kubectl")
        self.assertIsNotNone(kubectl, "kubectl is needed (scripts/e2e.sh installs it)")
        version = subprocess.run([kubectl, "version", "--client", "-o", "json"], capture_output=True, text=True)
        kustomize = json.loads(version.stdout or "{}").get("kustomizeVersion", "")
        if not re.match(r"v[4-9]|v\d\d", kustomize):
            self.skipTest(f"kubectl's kustomize {kustomize or 'unknown'} predates Components (v4)")

        def build(path):
            out = subprocess.run([kubectl, "kustomize", os.path.join(ROOT, path)], capture_output=True, text=True)
            self.assertEqual(out.returncode, 0, out.stderr)
            return sorted(documents(out.stdout), key=lambda d: (d["kind"], d["metadata"]["name"]))

        def build_own(components):
            """A kustomization of a user's own, as webhook-config/kustomization.yaml shows one:
            webhook-config and these Components (kustomize takes relative paths only)."""
            with tempfile.TemporaryDirectory() as own:
                rel = lambda path: os.path.relpath(os.path.join(ROOT, path), own)  # noqa: E731
                with open(os.path.join(own, "kustomization.yaml"), "w") as f:
                    f.write(json.dumps({"resources": [rel("webhook-config")],
                                        "components": [rel(c) for c in components]}))
                return build(own)

        base, newer = build("webhook-config"), build("webhook-config-1.28")
        self.assertEqual([d["kind"] for d in newer], [d["kind"] for d in base],
                         "the conditions' own object is not applied")
        # By default the lock and the author stamp only: the repair webhook would be a second
        # call per write in modes deny and warn.
        self.assertEqual([(d["kind"], d["metadata"]["name"]) for d in base],
                         [("MutatingWebhookConfiguration", "helm-locker-author"),
                          ("ValidatingWebhookConfiguration", "helm-locker")])
        want = shipped_conditions()
        for old, new in zip(base, newer):
            for before, after in zip(old["webhooks"], new["webhooks"]):
                self.assertEqual(after.pop("matchConditions", None), None if after["name"] == AUTHOR else want,
                                 after["name"])
                self.assertEqual(after, before)
        self.assertEqual(len(author_webhooks(newer)), 1)
        # Repair mode: the Component webhook-config/repair adds the mutating configuration as
        # shipped; listed before match-conditions, its webhook gets the conditions too.
        with open(os.path.join(ROOT, "webhook-config", "mutating.yaml")) as f:
            mutating = documents(f.read())
        self.assertEqual(build_own(["webhook-config/repair"]), sorted(base + mutating, key=lambda d: (
            d["kind"], d["metadata"]["name"])))
        repair = build_own(["webhook-config/repair", "webhook-config/match-conditions"])
        self.assertTrue(all(w.get("matchConditions") == want for _, w in webhooks(repair)))
        self.assertEqual(len(author_webhooks(repair)), 1)
        # The chart renders for 1.28 what webhook-config-1.28 (and, in repair mode, the
        # kustomization above) holds.
        chart = {w["name"]: w["matchConditions"] for _, w in webhooks(render("v1.28.0", {"mode": "repair"}))}
        self.assertEqual(set(chart), {w["name"] for _, w in webhooks(repair)})
        self.assertTrue(all(c == want for c in chart.values()))
        chart = {w["name"] for _, w in webhooks(render("v1.28.0"))}
        self.assertEqual(chart, {w["name"] for _, w in webhooks(base)})

    def test_certs_gen_writes_them_for_1_28_and_the_chart_renders_the_same(self):
        binary = CERTS_GEN
        # Built here so that a stale binary is never what is checked (quick when up to date).
        subprocess.run(["cargo", "build", "--locked", "-q", "-p", "certs-gen"], cwd=ROOT, check=True)
        chart = {w["name"]: w["matchConditions"] for _, w in webhooks(render("v1.29.0", {"mode": "repair"}))}
        with tempfile.TemporaryDirectory() as out:
            for version, expect in (("1.29", True), ("1.27", False)):
                subprocess.run([binary, "--kube-version", version, "--repair", "--out", out], check=True,
                               capture_output=True)
                with open(os.path.join(out, "webhook-configuration.yaml")) as f:
                    written = webhooks(documents(f.read()))
                self.assertEqual({w["name"] for _, w in written}, set(chart))
                for _, webhook in written:
                    if expect:
                        self.assertEqual(webhook["matchConditions"], chart[webhook["name"]])
                    else:
                        self.assertNotIn("matchConditions", webhook)

    def test_every_release_secret_write_reaches_the_author_webhook(self):
        """The author stamp (docs/security.md) must see every release Secret (and release
        ConfigMap: Helm's ConfigMap driver) write: no matchConditions and no namespaceSelector
        anywhere it is rendered; only Secrets and ConfigMaps labelled owner=helm are sent."""
        binary = CERTS_GEN
        subprocess.run(["cargo", "build", "--locked", "-q", "-p", "certs-gen"], cwd=ROOT, check=True)
        with tempfile.TemporaryDirectory() as out:
            subprocess.run([binary, "--kube-version", "1.36", "--out", out], check=True, capture_output=True)
            with open(os.path.join(out, "webhook-configuration.yaml")) as f:
                written = author_webhooks(documents(f.read()))
        for where, found in (("chart 1.36", author_webhooks(render("v1.36.3"))),
                             ("chart 1.20", author_webhooks(render("v1.20.0"))),
                             ("certs-gen 1.36", written)):
            with self.subTest(where=where):
                self.assertEqual(len(found), 1)
                webhook = found[0]
                self.assertNotIn("matchConditions", webhook)
                self.assertNotIn("namespaceSelector", webhook)
                self.assertEqual(webhook["objectSelector"], {"matchLabels": {"owner": "helm"}})
                self.assertEqual(webhook["failurePolicy"], "Ignore")
                self.assertEqual(webhook["clientConfig"]["service"]["path"], "/stamp")
                self.assertEqual([r["resources"] for r in webhook["rules"]], [["secrets", "configmaps"]])

    def test_the_chart_installs_on_every_version_from_1_20(self):
        """Chart.yaml's kubeVersion, checked by the semver library Helm's install check uses
        (Masterminds semver, through the template function semverCompare)."""
        with open(os.path.join(CHART, "Chart.yaml")) as f:
            constraint = helm.values_from_yaml(f.read())["kubeVersion"]
        with tempfile.TemporaryDirectory() as tmp:
            with open(os.path.join(tmp, "Chart.yaml"), "w") as f:
                f.write("apiVersion: v2\nname: probe\nversion: 0.1.0\n")
            os.mkdir(os.path.join(tmp, "templates"))
            with open(os.path.join(tmp, "templates", "probe.yaml"), "w") as f:
                f.write("allowed: {{ semverCompare %s .Capabilities.KubeVersion.Version }}\n" % json.dumps(constraint))
            chart = helm.Chart.load(tmp)
            try:
                def allowed(version):
                    out = json.loads(_native.call_string("helm_render", chart._raw(), None,
                                                         json.dumps({"kube_version": version})))
                    return helm.values_from_yaml(out["probe/templates/probe.yaml"])["allowed"]

                for version in ("v1.20.0", "v1.20.15-eks-abc", "v1.27.16", "v1.28.0", "v1.34.9", "v1.36.3",
                                "v1.37.0", "v0.0.0-master+faecb196815e2"):
                    self.assertTrue(allowed(version), version)
                for version in ("v1.19.16", "v1.16.0"):
                    self.assertFalse(allowed(version), version)
            finally:
                chart.close()


if __name__ == "__main__":
    unittest.main()
