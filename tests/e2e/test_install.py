"""The chart installed with real Helm on a real control plane, and helm-locker run as a local
process with the chart's ServiceAccount token: the chart's RBAC is enough for everything the
server does (index releases, self-managed certificate, caBundle of its webhook configuration)
and no more (it cannot write Secrets or other objects while the reverter is off).

No kubelet runs, so the chart's pods never start; the server runs here instead, as them.
"""

import base64
import json
import os
import socket
import ssl
import subprocess
import time
import unittest
import urllib.request

import helm_python as helm

from harness import BIN, CHART as SHOP_CHART, ControlPlane, free_port, locker_values


def kubectl(env, *args, input=None):
    return subprocess.run(["kubectl", *args], env=env, input=input, capture_output=True, text=True, timeout=60)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
CHART = os.path.join(ROOT, "charts", "helm-locker")
NS, RELEASE, SA, SECRET = "helm-locker", "helm-locker", "helm-locker", "helm-locker-tls"


class ChartOnARealControlPlane(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.plane = ControlPlane()
        cls.env = dict(os.environ, KUBECONFIG=cls.plane.kubeconfig)
        try:
            cls.install()
        except BaseException:
            cls.plane.down()
            raise

    @classmethod
    def install(cls):
        # Kubernetes 1.20 does not set kubernetes.io/metadata.name (1.21 does): label the
        # namespaces the webhook must never intercept, as NOTES.txt tells users to.
        cls.must("create", "namespace", NS)
        for ns in ("kube-system", "kube-node-lease", NS):
            cls.must("label", "namespace", ns, f"kubernetes.io/metadata.name={ns}", "--overwrite")
        cls.helm = helm.Config(kubeconfig_path=cls.plane.kubeconfig, namespace=NS)
        cls.helm.install(CHART, RELEASE, locker_values({"revert": {"enabled": False}}))
        cls.shop = helm.Config(kubeconfig_path=cls.plane.kubeconfig, namespace="shop")
        cls.shop.install(SHOP_CHART, "shop", {"replicas": 3, "greeting": "hi"}, create_namespace=True)
        cls.sa_kubeconfig = cls.service_account_kubeconfig()
        cls.sa_env = dict(os.environ, KUBECONFIG=cls.sa_kubeconfig)
        cls.port, cls.admin = free_port(), free_port()
        cls.certs = os.path.join(cls.plane.dir, "install-certs")
        cls.log = open(os.path.join(cls.plane.dir, "helm-locker-install.log"), "w")
        # What the chart's Deployment runs (its environment, as flags), as the chart's account.
        cls.locker = subprocess.Popen(
            [BIN, "serve", "--addr", f"127.0.0.1:{cls.port}", "--admin-addr", f"127.0.0.1:{cls.admin}",
             "--exempt-service-account", f"{NS}/{SA}",
             "--self-managed-secret", SECRET, "--self-managed-namespace", NS, "--self-managed-service", RELEASE,
             "--self-managed-name", "127.0.0.1", "--webhook-configuration", f"{RELEASE},{RELEASE}-author",
             "--self-signed-dir", cls.certs,
             # The pod's own namespace, where the chart lets it keep the author key.
             "--lease-namespace", NS, "--author-key-secret", f"{RELEASE}-author-key"],
            env=cls.sa_env, stdout=cls.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 60
        while not cls.ready():
            if time.time() > deadline or cls.locker.poll() is not None:
                raise RuntimeError(f"helm-locker not ready; see {cls.log.name}")
            time.sleep(0.2)

    @classmethod
    def tearDownClass(cls):
        if getattr(cls, "locker", None):
            cls.locker.terminate()
            cls.locker.wait(timeout=30)
            cls.log.close()
        cls.plane.down()

    @classmethod
    def must(cls, *args, env=None, input=None):
        out = kubectl(env or cls.env, *args, input=input)
        assert out.returncode == 0, f"kubectl {' '.join(args)}: {out.stderr}"
        return out.stdout

    @classmethod
    def service_account_kubeconfig(cls):
        token = kubectl(cls.env, "-n", NS, "create", "token", SA, "--duration", "1h")
        if token.returncode == 0:
            token = token.stdout.strip()
        else:  # no TokenRequest: a token Secret, filled in by the controller manager
            cls.must("-n", NS, "apply", "-f", "-", input=json.dumps({
                "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
                "metadata": {"name": f"{SA}-token", "annotations": {"kubernetes.io/service-account.name": SA}}}))
            deadline = time.time() + 30
            while True:
                data = kubectl(cls.env, "-n", NS, "get", "secret", f"{SA}-token", "-o", "jsonpath={.data.token}").stdout
                if data or time.time() > deadline:
                    break
                time.sleep(0.5)
            token = base64.b64decode(data).decode()
        server = cls.must("config", "view", "--minify", "-o", "jsonpath={.clusters[0].cluster.server}")
        path = os.path.join(cls.plane.dir, "service-account.kubeconfig")
        with open(path, "w") as f:
            json.dump({
                "apiVersion": "v1", "kind": "Config", "current-context": "sa",
                "clusters": [{"name": "local", "cluster": {"server": server, "insecure-skip-tls-verify": True}}],
                "users": [{"name": SA, "user": {"token": token}}],
                "contexts": [{"name": "sa", "context": {"cluster": "local", "user": SA}}],
            }, f)
        who = kubectl(dict(os.environ, KUBECONFIG=path), "auth", "can-i", "list", "secrets", "-A")
        assert who.stdout.strip() == "yes", (who.stdout, who.stderr)
        return path

    @classmethod
    def ready(cls):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{cls.admin}/readyz", timeout=1) as r:
                return r.status == 200
        except OSError:
            return False

    def metric(self, name):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.admin}/metrics", timeout=2) as r:
            for line in r.read().decode().splitlines():
                if line.startswith(name + " "):
                    return float(line.split()[-1])
        return None

    def can_i(self, *args):
        out = kubectl(self.sa_env, "auth", "can-i", *args)
        return out.stdout.strip()

    def secret_ca(self):
        data = self.must("-n", NS, "get", "secret", SECRET, "-o", "json")
        secret = json.loads(data)
        self.assertEqual(secret["type"], "kubernetes.io/tls")
        return base64.b64decode(secret["data"]["ca.crt"])

    def webhook_ca_bundle(self):
        out = self.must("get", "validatingwebhookconfiguration", RELEASE,
                        "-o", "jsonpath={.webhooks[0].clientConfig.caBundle}")
        return base64.b64decode(out)

    def test_the_server_indexes_releases_with_the_charts_service_account(self):
        # helm-locker's own release and shop: both listed through the chart's RBAC.
        deadline = time.time() + 10
        while (self.metric("helm_locker_releases_indexed") or 0) < 2 and time.time() < deadline:
            time.sleep(0.2)
        self.assertGreaterEqual(self.metric("helm_locker_releases_indexed"), 2)

    def test_the_self_managed_certificate_is_created_served_and_put_in_the_webhook(self):
        ca = self.secret_ca()
        self.assertIn(b"BEGIN CERTIFICATE", ca)
        deadline = time.time() + 15
        while self.webhook_ca_bundle() != ca and time.time() < deadline:
            time.sleep(0.5)
        self.assertEqual(self.webhook_ca_bundle(), ca)
        context = ssl.create_default_context(cadata=ca.decode())
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as tcp:
            with context.wrap_socket(tcp, server_hostname=f"{RELEASE}.{NS}.svc") as tls:
                self.assertTrue(tls.getpeercert())
        # A helm upgrade leaves the caBundle alone (the chart never sets it: no drift, no churn).
        self.helm.upgrade(CHART, RELEASE, locker_values({"revert": {"enabled": False}, "logLevel": "debug"}))
        self.assertEqual(self.webhook_ca_bundle(), ca)

    def test_a_write_to_a_locked_object_is_denied_through_the_real_api_server(self):
        # webhook-config/'s rules, dialled by URL (no kubelet, so no Service endpoints here),
        # trusting the self-managed CA.
        with open(os.path.join(ROOT, "webhook-config", "validating.yaml")) as f:
            config = helm.values_from_yaml(f.read())
        config["metadata"]["name"] = "helm-locker-e2e-install"
        for webhook in config["webhooks"]:
            webhook["clientConfig"] = {"url": f"https://127.0.0.1:{self.port}/validate",
                                       "caBundle": base64.b64encode(self.secret_ca()).decode()}
        self.must("apply", "-f", "-", input=json.dumps(config))
        try:
            deadline = time.time() + 10
            while True:
                out = kubectl(self.env, "-n", "shop", "patch", "deploy", "shop-web", "-p", '{"spec":{"replicas":7}}')
                if out.returncode != 0 or time.time() > deadline:
                    break
                time.sleep(0.2)
            self.assertNotEqual(out.returncode, 0, out.stdout)
            self.assertIn('admission webhook "validate.helm-locker.io" denied the request', out.stderr)
            self.assertIn("Deployment shop/shop-web is locked by Helm release shop/shop", out.stderr)
        finally:
            kubectl(self.env, "delete", "validatingwebhookconfiguration", "helm-locker-e2e-install")

    def test_two_replicas_starting_together_serve_one_certificate(self):
        secret, ports, procs = "race-tls", [], []
        try:
            for i in range(2):
                port, admin = free_port(), free_port()
                ports.append((port, admin))
                procs.append(subprocess.Popen(
                    [BIN, "serve", "--addr", f"127.0.0.1:{port}", "--admin-addr", f"127.0.0.1:{admin}",
                     "--self-managed-secret", secret, "--self-managed-namespace", NS,
                     "--self-managed-service", RELEASE, "--self-signed-dir", os.path.join(self.plane.dir, f"race{i}"),
                     "--lease-namespace", NS, "--author-key-secret", f"{RELEASE}-author-key"],
                    env=self.sa_env, stdout=self.log, stderr=subprocess.STDOUT))
            served = []
            for (port, admin), proc in zip(ports, procs):
                deadline = time.time() + 30
                while True:
                    try:
                        with urllib.request.urlopen(f"http://127.0.0.1:{admin}/readyz", timeout=1) as r:
                            if r.status == 200:
                                break
                    except OSError:
                        pass
                    self.assertIsNone(proc.poll(), "a replica exited")
                    self.assertLess(time.time(), deadline)
                    time.sleep(0.2)
                data = json.loads(self.must("-n", NS, "get", "secret", secret, "-o", "json"))["data"]
                context = ssl.create_default_context(cadata=base64.b64decode(data["ca.crt"]).decode())
                with socket.create_connection(("127.0.0.1", port), timeout=5) as tcp:
                    with context.wrap_socket(tcp, server_hostname=f"{RELEASE}.{NS}.svc") as tls:
                        served.append(tls.getpeercert(binary_form=True))
            self.assertEqual(served[0], served[1])
        finally:
            for proc in procs:
                proc.terminate()
                proc.wait(timeout=30)

    def test_without_the_reverter_the_service_account_can_read_but_not_write(self):
        allowed = [
            ("list", "secrets", "-A"), ("watch", "secrets", "-A"), ("get", "secrets", "-n", "shop"),
            ("list", "helmreleases.helm.cattle.io", "-A"),
            ("create", "secrets", "-n", NS), ("update", f"secrets/{SECRET}", "-n", NS),
            ("patch", f"validatingwebhookconfigurations/{RELEASE}"),
            # events.enabled (the default): denials are recorded as Events on the objects.
            ("create", "events", "-n", "shop"), ("patch", "events", "-n", "shop"),
        ]
        refused = [
            ("update", "secrets", "-n", "shop"), ("patch", "secrets", "-n", "shop"),
            ("delete", "secrets", "-n", "shop"), ("create", "secrets", "-n", "shop"),
            ("update", "secrets/other", "-n", NS), ("delete", f"secrets/{SECRET}", "-n", NS),
            ("patch", "deployments", "-n", "shop"), ("create", "configmaps", "-n", "shop"),
            ("delete", "deployments", "-n", "shop"), ("create", "leases.coordination.k8s.io", "-n", NS),
            ("delete", "events", "-n", "shop"), ("patch", "validatingwebhookconfigurations/other"),
            ("delete", f"validatingwebhookconfigurations/{RELEASE}"), ("create", "clusterrolebindings"),
        ]
        for args in allowed:
            self.assertEqual(self.can_i(*args), "yes", args)
        for args in refused:
            self.assertEqual(self.can_i(*args), "no", args)
        # And actual attempts, as the server would make them, are refused by the API server.
        release_secret = self.must("-n", "shop", "get", "secret", "-l", "owner=helm,name=shop",
                                   "-o", "jsonpath={.items[0].metadata.name}")
        for args in (("-n", "shop", "patch", "secret", release_secret, "-p", '{"metadata":{"labels":{"x":"y"}}}'),
                     ("-n", "shop", "scale", "deploy", "shop-web", "--replicas=5"),
                     ("-n", "shop", "delete", "configmap", "shop-config"),
                     ("-n", "shop", "create", "configmap", "intruder")):
            out = kubectl(self.sa_env, *args)
            self.assertNotEqual(out.returncode, 0, args)
            self.assertIn("forbidden", out.stderr.lower(), args)

    def test_the_reverter_gets_its_verbs_only_when_enabled(self):
        try:
            self.helm.upgrade(CHART, RELEASE, locker_values({"revert": {"enabled": True}}))
            self.assertEqual(self.can_i("patch", "deployments", "-n", "shop"), "yes")
            self.assertEqual(self.can_i("create", "configmaps", "-n", "shop"), "yes")
            self.assertEqual(self.can_i("create", "leases.coordination.k8s.io", "-n", NS), "yes")
            self.assertEqual(self.can_i("update", "leases.coordination.k8s.io/helm-locker", "-n", NS), "yes")
            self.assertEqual(self.can_i("create", "events.events.k8s.io", "-n", "shop"), "yes")
            self.assertEqual(self.can_i("delete", "deployments", "-n", "shop"), "no")
            self.assertEqual(self.can_i("update", "deployments", "-n", "shop"), "no")
            self.assertEqual(self.can_i("update", "leases.coordination.k8s.io/other", "-n", NS), "no")
        finally:
            self.helm.upgrade(CHART, RELEASE, locker_values({"revert": {"enabled": False}}))
        self.assertEqual(self.can_i("patch", "deployments", "-n", "shop"), "no")


if __name__ == "__main__":
    unittest.main(verbosity=2)
