"""Shared pieces of the end-to-end suite: the control plane, kubectl, and helm-locker processes."""

import atexit
import base64
import gzip
import json
import os
import signal
import shutil
import socket
import subprocess
import sys
import re
import tempfile
import threading
import time
import unittest
import urllib.request

import helm_python as helm

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CHART = os.path.join(HERE, "charts", "shop")
BIN = os.environ.get("HELM_LOCKER_BIN", os.path.join(ROOT, "target", "debug", "helm-locker"))
# Where the API server reaches the lockers the tests start. Loopback for our own control plane;
# for a cluster in containers (kind) the host's address on the container network, e.g.
# E2E_WEBHOOK_HOST=$(docker network inspect kind -f '{{(index .IPAM.Config 0).Gateway}}').
WEBHOOK_HOST = os.environ.get("E2E_WEBHOOK_HOST", "127.0.0.1")
# Cluster-wide kinds the tests create; on an existing cluster, new ones are deleted at the end.
CLUSTER_KINDS = "namespaces,clusterroles,clusterrolebindings,customresourcedefinitions"
# The control plane's binaries when not built from Debian's source (kube-testenv.sh): the kubectl
# beside them is the one every test runs (kubectl supports one minor version of skew).
ASSETS = os.environ.get("KUBE_TESTENV_BIN_DIR") or os.environ.get("KUBEBUILDER_ASSETS")
if ASSETS and os.path.exists(os.path.join(ASSETS, "kubectl")):
    os.environ["PATH"] = ASSETS + os.pathsep + os.environ["PATH"]
# The image value the locker's chart requires (no image is published: charts/helm-locker refuses to
# render without one). scripts/image.sh builds helm-locker:<appVersion>, the name used here.
LOCKER_IMAGE = {"repository": "helm-locker"}


def locker_values(values=None):
    """`values` for charts/helm-locker, with the image it requires unless they name one."""
    values = dict(values or {})
    values["image"] = {**LOCKER_IMAGE, **values.get("image", {})}
    return values


# What kubectl prints when the lockers these tests register deny a write.
DENIED = 'admission webhook "validate.helm-locker.io" denied the request'


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ControlPlane:
    """The loopback control plane (kube-testenv.sh), or an existing cluster (E2E_KUBECONFIG),
    left as found: what the tests created cluster-wide (namespaces, cluster roles and bindings,
    CRDs) is deleted at the end. Failing to start is an error, never a skip."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="helm-locker-e2e-")
        existing = os.environ.get("E2E_KUBECONFIG")
        if existing:
            self.kubeconfig, self.owned = existing, False
        else:
            up = subprocess.run([os.path.join(HERE, "kube-testenv.sh"), "up", self.dir])
            if up.returncode != 0:
                # What `up` started before it failed (etcd, kube-apiserver) goes with it.
                subprocess.run([os.path.join(HERE, "kube-testenv.sh"), "down", self.dir], check=False)
                raise subprocess.CalledProcessError(up.returncode, up.args)
            self.kubeconfig, self.owned = os.path.join(self.dir, "kubeconfig"), True
            # A class whose setUpClass fails after this point never reaches its tearDownClass:
            # the plane is stopped when the test process exits, if not before.
            atexit.register(self.down)
        self.env = dict(os.environ, KUBECONFIG=self.kubeconfig)
        self.found = set() if self.owned else self.cluster_objects()
        # Every control plane says which Kubernetes it is (the suite runs on more than one).
        version = self.kubectl("get", "--raw", "/version")
        info = json.loads(version.stdout) if version.returncode == 0 else {}
        self.version = info.get("gitVersion", "?")
        # The minor version, for an expectation that depends on the version rather than on
        # what is served (`serves`): 1.22 records a write through `scale` in managedFields,
        # 1.24 stopped making a token Secret for every ServiceAccount.
        match = re.match(r"v1\.(\d+)\.", self.version)
        self.minor = int(match.group(1)) if match else None
        if self.version.startswith("v0.0.0-master"):
            # kube-testenv.sh's build from Debian's source package sets no version.
            self.version = f"1.20 from Debian's kubernetes source package ({self.version})"
            self.minor = 20
        print(f"control plane: kube-apiserver {self.version}", file=sys.stderr, flush=True)

    def serves(self, group_version):
        """Whether the API server serves `group_version` ("autoscaling/v2", "v1"): what a test
        expects per version is written by what is served (Helm's charts choose the same way,
        with .Capabilities.APIVersions), not by the version number. Cached: the built-in groups a
        plane serves do not change while it runs."""
        if not hasattr(self, "_served"):
            out = self.kubectl("api-versions")
            assert out.returncode == 0, out.stderr
            self._served = set(out.stdout.split())
        return group_version in self._served

    def cluster_objects(self):
        out = self.kubectl("get", CLUSTER_KINDS, "-o", "name")
        assert out.returncode == 0, f"cannot reach the cluster: {out.stderr}"
        return set(out.stdout.split())

    def down(self):
        if getattr(self, "stopped", False):
            return
        self.stopped = True
        if self.owned:
            subprocess.run([os.path.join(HERE, "kube-testenv.sh"), "down", self.dir], check=False)
            # etcd's data (~70 MB a control plane, mostly its preallocated log) goes; the logs
            # stay in self.dir for a failure to be read.
            shutil.rmtree(os.path.join(self.dir, "etcd"), ignore_errors=True)
        else:
            created = sorted(self.cluster_objects() - self.found)
            if created:
                self.kubectl("delete", "--wait=false", "--ignore-not-found", *created)

    def stop_apiserver(self):
        """Stops kube-apiserver (etcd keeps the data); start_apiserver brings it back."""
        assert self.owned, "only our own control plane can be restarted"
        pidfile = os.path.join(self.dir, "apiserver.pid")
        with open(pidfile) as f:
            pid = int(f.read())
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            self.apiserver_command = [a.decode() for a in f.read().split(b"\0") if a]
        os.kill(pid, signal.SIGTERM)
        deadline = time.time() + 30
        while os.path.exists(f"/proc/{pid}") and time.time() < deadline:
            try:
                with open(f"/proc/{pid}/stat") as f:
                    if f.read().split(") ")[1].startswith("Z"):
                        break
            except OSError:
                break
            time.sleep(0.1)

    def start_apiserver(self):
        log = open(os.path.join(self.dir, "apiserver.log"), "a")
        process = subprocess.Popen(self.apiserver_command, stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True)
        with open(os.path.join(self.dir, "apiserver.pid"), "w") as f:
            f.write(str(process.pid))
        deadline = time.time() + 60
        while self.kubectl("get", "--raw", "/readyz").returncode != 0:
            assert time.time() < deadline and process.poll() is None, "kube-apiserver did not come back"
            time.sleep(0.2)

    def kubectl(self, *args, input=None):
        return subprocess.run(["kubectl", *args], env=self.env, input=input, capture_output=True,
                              text=True, timeout=60)

    def run(self, command, env=None):
        return subprocess.run(command, env=env or self.env, capture_output=True, text=True, timeout=60)

    def get_json(self, *args):
        out = self.kubectl("get", *args, "-o", "json")
        return json.loads(out.stdout) if out.returncode == 0 else None

    def helm(self, namespace):
        return helm.Config(kubeconfig_path=self.kubeconfig, namespace=namespace)


class Locker:
    """One `helm-locker serve` process against the control plane."""

    def __init__(self, plane, name, *flags, env=None, binary=None):
        """`binary`: another helm-locker build than HELM_LOCKER_BIN (a previous build, to
        compare in the same run)."""
        self.plane, self.name, self.flags = plane, name, flags
        self.binary = binary or BIN
        self.env = env or plane.env
        # The author webhook (webhook-config/author.yaml) of this locker is registered once it
        # is ready, and removed when it stops: without it, a release written meanwhile has no
        # known author and the reverter writes none of its content (docs/security.md).
        self.stamping = False
        self.certs = os.path.join(plane.dir, f"certs-{name}")
        self.log_path = os.path.join(plane.dir, f"helm-locker-{name}.log")
        self.start()

    def start(self):
        """Starts the process on two free ports. A port free when picked can be taken before the
        locker binds it (an outgoing connection's ephemeral port): wait_ready starts again then."""
        name, flags = self.name, self.flags
        self.port, self.admin = free_port(), free_port()
        self.log = open(self.log_path, "w")
        self.process = subprocess.Popen(
            [self.binary, "serve", "--self-signed", "--self-signed-dir", self.certs,
             "--self-signed-name", WEBHOOK_HOST,
             "--addr", f"{'127.0.0.1' if WEBHOOK_HOST == '127.0.0.1' else '0.0.0.0'}:{self.port}", "--admin-addr", f"127.0.0.1:{self.admin}",
             # No shutdown delay unless asked: these lockers are reached by URL, not through a
             # Service.
             "--identity", name, *(() if "--shutdown-delay" in flags else ("--shutdown-delay", "0s")), *flags],
            env=self.env, stdout=self.log, stderr=subprocess.STDOUT)

    def wait_ready(self, timeout=60):
        deadline = time.time() + timeout
        restarts = 0
        while not self.ready():
            if self.process.poll() is not None and restarts < 3 and self.lost_its_port():
                restarts += 1
                self.log.close()
                self.start()
                continue
            if time.time() > deadline or self.process.poll() is not None:
                raise RuntimeError(f"helm-locker {self.name} not ready; see {self.log_path}")
            time.sleep(0.2)
        if not self.stamping and "--releases-dir" not in self.flags:
            register_author_webhook(self.plane, self)
            self.stamping = True
        return self

    def lost_its_port(self):
        """Whether the process ended because another took a port it was given."""
        with open(self.log_path) as f:
            return "Address already in use" in f.read()

    def ready(self):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.admin}/readyz", timeout=1) as r:
                return r.status == 200
        except OSError:
            return False

    def metric(self, name):
        """The value of an unlabelled metric, or the sum over a labelled family."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.admin}/metrics", timeout=2) as r:
                text = r.read().decode()
        except OSError:
            return None
        total = None
        for line in text.splitlines():
            if line.startswith(name + " ") or line.startswith(name + "{"):
                total = (total or 0) + float(line.rsplit(" ", 1)[1])
        return total

    def log_text(self):
        with open(self.log_path) as f:
            return f.read()

    def ca_bundle(self):
        with open(os.path.join(self.certs, "ca.crt"), "rb") as f:
            return base64.b64encode(f.read()).decode()

    def unregister_author_webhook(self):
        if self.stamping:
            self.plane.kubectl("delete", "mutatingwebhookconfiguration", f"author-{self.name}", "--ignore-not-found")
            self.stamping = False

    def kill(self):
        self.unregister_author_webhook()
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)
        self.log.close()

    def stop(self):
        self.unregister_author_webhook()
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
        self.log.close()


WEBHOOK = """
apiVersion: admissionregistration.k8s.io/v1
kind: {kind}WebhookConfiguration
metadata:
  name: {name}
webhooks:
- name: {path}.helm-locker.io
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: {failure_policy}
  timeoutSeconds: 5
  clientConfig:
    url: https://{host}:{port}/{path}
    caBundle: {ca}
  namespaceSelector:
    matchExpressions:
    - {{key: kubernetes.io/metadata.name, operator: NotIn, values: [kube-system]}}{selector}
  rules:
  - apiGroups: ["*"]
    apiVersions: ["*"]
    operations: [CREATE, UPDATE, DELETE]
    resources: ["*/*"]
    scope: "*"
"""


class CutProxy:
    """A TCP proxy between a locker and the API server, which a test can cut and restore: the
    locker loses the API server (its watch breaks, its lists fail) while kubectl and Helm still
    reach it. `env` is the plane's environment with a kubeconfig through the proxy."""

    def __init__(self, plane):
        with open(plane.kubeconfig) as f:
            text = f.read()
        match = re.search(r"server: https://([^:/\s]+):(\d+)", text)
        assert match, "no server address in the kubeconfig"
        self.upstream = (match.group(1), int(match.group(2)))
        self.listener = socket.create_server(("127.0.0.1", 0))
        port = self.listener.getsockname()[1]
        path = os.path.join(plane.dir, f"kubeconfig-proxy-{port}")
        with open(path, "w") as f:
            f.write(text.replace(match.group(0), f"server: https://127.0.0.1:{port}"))
        self.env = dict(plane.env, KUBECONFIG=path)
        self.open, self.sockets, self.lock = True, set(), threading.Lock()
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if not self.open:
                client.close()
                continue
            try:
                server = socket.create_connection(self.upstream)
            except OSError:
                client.close()
                continue
            with self.lock:
                self.sockets |= {client, server}
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self.pump, args=(a, b), daemon=True).start()

    def pump(self, source, sink):
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        for s in (source, sink):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self):
        """Closes every connection through the proxy and refuses new ones until `restore`."""
        self.open = False
        with self.lock:
            for s in self.sockets:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()
            self.sockets.clear()

    def restore(self):
        self.open = True

    def close(self):
        self.cut()
        self.listener.close()


def register_webhook(plane, locker, name, mutating=False, failure_policy="Fail", only_label=None):
    """A webhook configuration for every resource, pointing at locker by URL. `only_label`
    ("key=value") limits it to namespaces carrying that label."""
    selector = ""
    if only_label:
        key, value = only_label.split("=", 1)
        selector = f"\n    - {{key: {key}, operator: In, values: [{value}]}}"
    config = WEBHOOK.format(kind="Mutating" if mutating else "Validating", name=name,
                            path="mutate" if mutating else "validate", failure_policy=failure_policy,
                            host=WEBHOOK_HOST, port=locker.port, ca=locker.ca_bundle(),
                            selector=selector)
    out = plane.kubectl("apply", "-f", "-", input=config)
    assert out.returncode == 0, out.stderr


AUTHOR_WEBHOOK = """
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: {name}
webhooks:
- name: author.helm-locker.io
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: Ignore
  timeoutSeconds: 5
  reinvocationPolicy: IfNeeded
  clientConfig:
    url: https://{host}:{port}/stamp
    caBundle: {ca}
  objectSelector:
    matchLabels: {{owner: helm}}
  rules:
  - apiGroups: [""]
    apiVersions: [v1]
    operations: [CREATE, UPDATE]
    resources: [secrets, configmaps]
    scope: Namespaced
"""


def register_author_webhook(plane, locker, timeout=30):
    """The author webhook of webhook-config/author.yaml, pointing at locker by URL; returns once
    the API server stamps release Secret writes through it (a probe Secret carries the stamp)."""
    config = AUTHOR_WEBHOOK.format(name=f"author-{locker.name}", host=WEBHOOK_HOST, port=locker.port,
                                   ca=locker.ca_bundle())
    out = plane.kubectl("apply", "-f", "-", input=config)
    assert out.returncode == 0, out.stderr
    probe = release_secret(f"probe-{locker.name}", "default", [])
    probe["metadata"]["name"] = f"author-probe-{locker.name}"
    deadline = time.time() + timeout
    try:
        while True:
            plane.kubectl("delete", "secret", "-n", "default", probe["metadata"]["name"], "--ignore-not-found")
            out = plane.kubectl("create", "-f", "-", "-o", "json", input=json.dumps(probe))
            if out.returncode == 0 and "helm-locker.io/author-proof" in json.loads(out.stdout)["metadata"].get("annotations", {}):
                return
            assert time.time() < deadline, f"release Secret writes are not stamped by helm-locker {locker.name}: {out.stderr}"
            time.sleep(0.2)
    finally:
        plane.kubectl("delete", "secret", "-n", "default", probe["metadata"]["name"], "--ignore-not-found")


def unregister_webhook(plane, name, mutating=False):
    kind = "mutatingwebhookconfiguration" if mutating else "validatingwebhookconfiguration"
    plane.kubectl("delete", kind, name, "--ignore-not-found")


def eventually(predicate, timeout, interval=0.1):
    """The first truthy value of predicate() within timeout seconds, else the last value."""
    deadline = time.time() + timeout
    while True:
        value = predicate()
        if value or time.time() > deadline:
            return value
        time.sleep(interval)


class PlaneTest(unittest.TestCase):
    """A test against `self.plane` (a ControlPlane, set by the test class): kubectl and the
    reads every file makes, written once."""

    plane = None

    def k(self, *args, input=None):
        return self.plane.kubectl(*args, input=input)

    def ok(self, out):
        self.assertEqual(out.returncode, 0, out.stderr)
        return out

    def get(self, *args):
        return self.plane.get_json(*args)

    @classmethod
    def can_i_as(cls, user, *args):
        """`kubectl auth can-i` as user: "yes" or "no"."""
        return cls.plane.kubectl("auth", "can-i", f"--as={user}", *args).stdout.strip()

    def object_events(self, namespace, name, reason):
        """The Events of that reason about the object of that name in namespace."""
        items = (self.get("events", "-n", namespace) or {"items": []})["items"]
        return [e for e in items if e["involvedObject"].get("name") == name and e["reason"] == reason]

    def event_notes(self, namespace, name, reason):
        """The text of each of those Events (events.k8s.io's note, else core's message)."""
        return [e.get("note") or e.get("message") or "" for e in self.object_events(namespace, name, reason)]


def write_files(prefix, files, root=None):
    """A new directory (under `root`, else the system's temporary one) holding `files`
    (relative path -> text), e.g. a chart; its path."""
    path = tempfile.mkdtemp(prefix=prefix, dir=root)
    for name, text in files.items():
        os.makedirs(os.path.dirname(os.path.join(path, name)), exist_ok=True)
        with open(os.path.join(path, name), "w") as f:
            f.write(text)
    return path


def block_yaml(value, indent=0):
    """`value` (dicts of plain keys, lists, strings, numbers) as block YAML, as a chart's templates
    render it: each string double-quoted (as `| quote` writes it)."""
    pad = " " * indent
    if isinstance(value, dict) and value:
        lines = []
        for key, item in value.items():
            if isinstance(item, (dict, list)) and item:
                lines.append(f"{pad}{key}:\n{block_yaml(item, indent + 2)}")
            else:
                lines.append(f"{pad}{key}: {block_yaml(item)}")
        return "\n".join(lines)
    if isinstance(value, list) and value:
        return "\n".join(f"{pad}- {block_yaml(item, indent + 2).lstrip()}" for item in value)
    return json.dumps(value)


def release_secret(name, namespace, objects, status="deployed", revision=1, render=json.dumps):
    """A release Secret exactly as Helm stores it: JSON, gzip, base64, then the Secret's own base64.
    The one encoder of the suite (the Rust side's is helm_locker_core::test_util). Each object of
    the manifest is one JSON document, or `render`'s text (`block_yaml`: as a chart renders it)."""
    manifest = "".join(f"---\n# Source: bulk/templates/{i}.yaml\n{render(o)}\n" for i, o in enumerate(objects))
    release = {"name": name, "namespace": namespace, "version": revision,
               "info": {"status": status, "description": "Install complete"},
               "chart": {"metadata": {"name": "bulk", "version": "1.0.0"}}, "manifest": manifest}
    payload = base64.b64encode(gzip.compress(json.dumps(release).encode())).decode()
    return {"apiVersion": "v1", "kind": "Secret", "type": "helm.sh/release.v1",
            "metadata": {"name": f"sh.helm.release.v1.{name}.v{revision}", "namespace": namespace,
                         "labels": {"owner": "helm", "name": name, "status": status, "version": str(revision)}},
            "data": {"release": base64.b64encode(payload.encode()).decode()}}


def release_config_map(name, namespace, objects, status="deployed", revision=1):
    """The same release as Helm's ConfigMap driver stores it: labels and name as the Secret's, no
    type, and `data.release` Helm's layer (JSON, gzip, base64) as a plain string."""
    secret = release_secret(name, namespace, objects, status, revision)
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": secret["metadata"],
            "data": {"release": base64.b64decode(secret["data"]["release"]).decode()}}
