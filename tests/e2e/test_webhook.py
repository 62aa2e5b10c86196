"""helm-locker on a real control plane: real kube-apiserver, real Helm (Go SDK), real kubectl.

Run through scripts/e2e.sh, which builds everything and sets HELM_LOCKER_BIN. Against an
existing cluster instead of the loopback one: E2E_KUBECONFIG=~/.kube/config (the webhook is
registered by URL at 127.0.0.1, so the API server must run on this machine, as kind's does not).
"""

import base64
import os
import subprocess
import time
import unittest
import urllib.request

import helm_python as helm

from harness import BIN, CHART, HERE, ControlPlane, free_port  # noqa: F401 (re-exported for test_install)


def kubectl(env, *args, input=None):
    return subprocess.run(["kubectl", *args], env=env, input=input, capture_output=True, text=True, timeout=60)


WEBHOOK = """
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: helm-locker-e2e
webhooks:
- name: validate.helm-locker.io
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: Fail
  timeoutSeconds: 5
  clientConfig:
    url: https://127.0.0.1:{port}/validate
    caBundle: {ca}
  namespaceSelector:
    matchExpressions:
    - {{key: kubernetes.io/metadata.name, operator: NotIn, values: [kube-system]}}
  rules:
  - apiGroups: ["*"]
    apiVersions: ["*"]
    operations: [CREATE, UPDATE, DELETE]
    resources: ["*/*"]
    scope: "*"
"""


class WebhookOnARealControlPlane(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.plane = ControlPlane()
        cls.env = dict(os.environ, KUBECONFIG=cls.plane.kubeconfig)
        cls.port, cls.admin = free_port(), free_port()
        certs = os.path.join(cls.plane.dir, "certs")
        cls.log = open(os.path.join(cls.plane.dir, "helm-locker.log"), "w")
        cls.locker = subprocess.Popen(
            [BIN, "serve", "--self-signed", "--self-signed-dir", certs,
             "--addr", f"127.0.0.1:{cls.port}", "--admin-addr", f"127.0.0.1:{cls.admin}"],
            env=cls.env, stdout=cls.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 60
        while not cls.ready():
            if time.time() > deadline or cls.locker.poll() is not None:
                raise RuntimeError(f"helm-locker not ready; see {cls.log.name}")
            time.sleep(0.2)
        with open(os.path.join(certs, "ca.crt"), "rb") as f:
            ca = base64.b64encode(f.read()).decode()
        out = kubectl(cls.env, "apply", "-f", "-", input=WEBHOOK.format(port=cls.port, ca=ca))
        assert out.returncode == 0, out.stderr

    @classmethod
    def tearDownClass(cls):
        kubectl(cls.env, "delete", "validatingwebhookconfiguration", "helm-locker-e2e", "--ignore-not-found")
        cls.locker.terminate()
        cls.locker.wait(timeout=30)
        cls.log.close()
        cls.plane.down()

    @classmethod
    def ready(cls):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{cls.admin}/readyz", timeout=1) as r:
                return r.status == 200
        except OSError:
            return False

    def helm_in(self, namespace):
        return helm.Config(kubeconfig_path=self.plane.kubeconfig, namespace=namespace)

    def metric(self, name):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.admin}/metrics", timeout=2) as r:
            for line in r.read().decode().splitlines():
                if line.startswith(name + " ") or line.startswith(name + "{"):
                    yield line

    def eventually_denied(self, *args):
        """kubectl's result once the locker has seen the release as deployed (watch latency)."""
        deadline = time.time() + 10
        while True:
            out = kubectl(self.env, *args)
            if out.returncode != 0 or time.time() > deadline:
                return out
            time.sleep(0.2)

    def test_kubectl_patch_is_denied_with_our_message_and_helm_upgrade_proceeds(self):
        shop = self.helm_in("shop")
        shop.install(CHART, "shop", {"replicas": 3, "greeting": "hi"}, create_namespace=True)
        out = self.eventually_denied("-n", "shop", "patch", "deploy", "shop-web", "-p", '{"spec":{"replicas":7}}')
        self.assertNotEqual(out.returncode, 0, out.stdout)
        self.assertIn("Deployment shop/shop-web is locked by Helm release shop/shop (revision 1, deployed)", out.stderr)
        self.assertIn("/spec/replicas is 3 in the chart, this request sets 7", out.stderr)
        out = kubectl(self.env, "-n", "shop", "get", "deploy", "shop-web", "-o", "jsonpath={.spec.replicas}")
        self.assertEqual(out.stdout, "3")
        # A field the chart does not set stays free.
        out = kubectl(self.env, "-n", "shop", "annotate", "configmap", "shop-config", "note=hello")
        self.assertEqual(out.returncode, 0, out.stderr)
        # Helm itself is never blocked, and the change lands.
        shop.upgrade(CHART, "shop", {"replicas": 4, "greeting": "hi"})
        out = kubectl(self.env, "-n", "shop", "get", "deploy", "shop-web", "-o", "jsonpath={.spec.replicas}")
        self.assertEqual(out.stdout, "4")
        out = self.eventually_denied("-n", "shop", "delete", "service", "shop-svc")
        self.assertNotEqual(out.returncode, 0)
        self.assertIn("deleting it is not allowed", out.stderr)
        shop.uninstall("shop")

    def test_helm_upgrade_right_after_install_is_never_denied(self):
        for i in range(10):
            name = f"race{i}"
            release = self.helm_in(name)
            release.install(CHART, name, {"replicas": 1}, create_namespace=True)
            for replicas in (2, 3):
                release.upgrade(CHART, name, {"replicas": replicas, "greeting": f"v{replicas}"})
            out = kubectl(self.env, "-n", name, "get", "deploy", f"{name}-web", "-o", "jsonpath={.spec.replicas}")
            self.assertEqual(out.stdout, "3")
            release.uninstall(name)
        with open(self.log.name) as log:
            denied = [line for line in log if "locked object" in line and "race" in line]
        self.assertEqual(denied, [])


if __name__ == "__main__":
    unittest.main(verbosity=2)
