"""As users run it: the image built here (scripts/image.sh), the chart installed with its default
values on a real node (kubelet, containerd, runc, kube-scheduler, kube-proxy: kube-testenv.sh
node-up), and the webhook reached by the API server through the chart's Service.

The order is a user's: install and wait for both replicas (probes), the caBundle a pod wrote, a
chart of ours denied and upgraded, drift reverted by the leader, the leader pod deleted, a rolling
`helm upgrade helm-locker` under a stream of writes, a drain (the PodDisruptionBudget), a
certificate renewed by a pod, and the emergency bypass holding against the locker's own pods. Start-to-Ready times and memory are written to
<node dir>/measurements.json and printed (docs/performance.md).

Skipped, with the reason, only when this machine cannot run a node (kube-testenv.sh node-check);
a node that can start and does not is a failure.
"""

import base64
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import helm_python as helm

from harness import DENIED, HERE, ROOT, eventually, locker_values

TESTENV = os.path.join(HERE, "kube-testenv.sh")
CHART = os.path.join(ROOT, "charts", "helm-locker")
SHOP = os.path.join(HERE, "charts", "shop")
WEBAPP = os.path.join(HERE, "charts", "webapp")
with open(os.path.join(ROOT, "Cargo.toml")) as _f:
    VERSION = re.search(r'^version = "([^"]+)"', _f.read(), re.M).group(1)
IMAGE_DIR = os.environ.get("IMAGE_TARGET_DIR", os.path.join(ROOT, "target", "image"))
ARCHIVE = os.path.join(IMAGE_DIR, f"helm-locker-{VERSION}.tar")
CERTS_GEN = os.path.join(IMAGE_DIR, "x86_64-unknown-linux-gnu", "image", "certs-gen")
# The node's sandbox image: present on the node, so the shop chart's pods pull nothing.
PAUSE = "localhost/kube-testenv/pause:1"
NS, RELEASE = "helm-locker", "helm-locker"
SELECTOR = "app.kubernetes.io/instance=helm-locker,app.kubernetes.io/name=helm-locker"
LOCKED = "Deployment shop/shop-web is locked by Helm release shop/shop"


def seconds(stamp):
    return time.mktime(time.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ"))


# One node at a time on a machine (its bridge, address and iptables chains are the machine's):
# concurrent runs of the suite wait here for each other.
NODE_LOCK = "/tmp/kube-testenv-node.lock"


class Node:
    """kube-testenv.sh node-up: the control plane and one node, torn down by node-down."""

    def __init__(self):
        self.lock = open(NODE_LOCK, "w")
        deadline = time.time() + 1800
        while True:
            try:
                fcntl.flock(self.lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                assert time.time() < deadline, f"another run held {NODE_LOCK} for 30 minutes"
                time.sleep(2)
        self.dir = tempfile.mkdtemp(prefix="helm-locker-node-")
        start = time.time()
        up = subprocess.run([TESTENV, "node-up", self.dir])
        self.up_seconds = time.time() - start
        if up.returncode != 0:
            self.down()
            raise AssertionError(f"node-up failed ({up.returncode}); logs in {self.dir}")
        self.kubeconfig = os.path.join(self.dir, "kubeconfig")
        self.env = dict(os.environ, KUBECONFIG=self.kubeconfig)

    def down(self):
        subprocess.run([TESTENV, "node-down", self.dir], check=False)
        # etcd's data (~70 MB, mostly its preallocated log) goes; the logs stay to be read.
        shutil.rmtree(os.path.join(self.dir, "etcd"), ignore_errors=True)
        self.lock.close()

    def kubectl(self, *args, input=None, timeout=60):
        return subprocess.run(["kubectl", *args], env=self.env, input=input, capture_output=True,
                              text=True, timeout=timeout)

    def must(self, *args, input=None):
        out = self.kubectl(*args, input=input)
        assert out.returncode == 0, f"kubectl {' '.join(args)}: {out.stderr}"
        return out.stdout

    def get_json(self, *args):
        out = self.kubectl("get", *args, "-o", "json")
        return json.loads(out.stdout) if out.returncode == 0 else None

    def helm(self, namespace):
        return helm.Config(kubeconfig_path=self.kubeconfig, namespace=namespace)


def locker_processes():
    """{container id: pid} of the `helm-locker serve` processes running on this machine."""
    found = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            if argv[:2] != [b"/usr/local/bin/helm-locker", b"serve"]:
                continue
            with open(f"/proc/{pid}/cgroup") as f:
                ids = re.findall(r"([0-9a-f]{64})", f.read())
        except OSError:
            continue
        if ids:
            found[ids[-1]] = int(pid)
    return found


def proc_status(pid):
    with open(f"/proc/{pid}/status") as f:
        return dict(line.split(":", 1) for line in f.read().splitlines() if ":" in line)


class NodeInstall(unittest.TestCase):
    measurements = {}

    @classmethod
    def setUpClass(cls):
        check = subprocess.run([TESTENV, "node-check"], capture_output=True, text=True)
        if check.returncode == 3:
            raise unittest.SkipTest(check.stdout.strip())
        assert check.returncode == 0, check.stdout + check.stderr
        # scripts/e2e.sh builds the image first; run alone, the test builds it when missing.
        if not os.path.exists(ARCHIVE) or not os.path.exists(CERTS_GEN):
            subprocess.run([os.path.join(ROOT, "scripts", "image.sh")], check=True)
        cls.node = Node()
        try:
            cls.measurements["node_up_seconds"] = round(cls.node.up_seconds, 1)
            subprocess.run([TESTENV, "node-import", cls.node.dir, ARCHIVE], check=True)
            # Kubernetes 1.20 does not set kubernetes.io/metadata.name (1.21 does): label the
            # namespaces the webhook must never intercept, as NOTES.txt tells users to.
            cls.node.must("create", "namespace", NS)
            for ns in ("kube-system", "kube-node-lease", NS):
                cls.node.must("label", "namespace", ns, f"kubernetes.io/metadata.name={ns}", "--overwrite")
            cls.locker = cls.node.helm(NS)
            start = time.time()
            cls.locker.install(CHART, RELEASE, locker_values())
            cls.pods_ready = eventually(lambda: len(cls.ready_pods()) == 2, 180, 0.2)
            cls.measurements["install_to_both_ready_seconds"] = round(time.time() - start, 1)
            cls.shop = cls.node.helm("shop")
            cls.shop.install(SHOP, "shop", {"replicas": 1, "image": PAUSE}, create_namespace=True)
        except BaseException:
            cls.node.down()
            raise

    @classmethod
    def tearDownClass(cls):
        path = os.path.join(cls.node.dir, "measurements.json")
        with open(path, "w") as f:
            json.dump(cls.measurements, f, indent=1)
        print(f"\nnode measurements ({path}): {json.dumps(cls.measurements)}", file=sys.stderr)
        cls.node.down()

    # --- helpers

    @classmethod
    def pods(cls):
        return cls.node.get_json("pods", "-n", NS, "-l", SELECTOR)["items"]

    @classmethod
    def ready_pods(cls):
        return [p for p in cls.pods() if p["metadata"].get("deletionTimestamp") is None
                and any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions", []))]

    def leader(self):
        return self.node.get_json("lease", "-n", NS, RELEASE)["spec"].get("holderIdentity")

    def logs(self, pod):
        out = self.node.kubectl("logs", "-n", NS, pod)
        self.assertEqual(out.returncode, 0, out.stderr)
        return out.stdout

    def wait_two_ready(self, timeout=180):
        ok = eventually(lambda: len(self.ready_pods()) == 2 and len(self.pods()) == 2, timeout, 0.5)
        self.assertTrue(ok, [(p["metadata"]["name"], p["status"].get("phase")) for p in self.pods()])

    def denied_dry_run(self):
        out = self.node.kubectl("-n", "shop", "scale", "deploy", "shop-web", "--replicas=9", "--dry-run=server")
        return out.returncode != 0 and DENIED in out.stderr

    def drift(self, *args):
        """A write that gets past the webhook: as the locker's own ServiceAccount (exempt), which
        the chart lets patch every kind. The reverter must put it back all the same."""
        self.node.must(*args, "--as", f"system:serviceaccount:{NS}:{RELEASE}")

    def replicas(self):
        return self.node.get_json("deploy", "-n", "shop", "shop-web")["spec"]["replicas"]

    def start_to_ready(self, pod):
        conditions = {c["type"]: c["lastTransitionTime"] for c in pod["status"]["conditions"]}
        started = pod["status"]["containerStatuses"][0]["state"]["running"]["startedAt"]
        return {"created_to_ready_s": seconds(conditions["Ready"]) - seconds(pod["metadata"]["creationTimestamp"]),
                "container_started_to_ready_s": seconds(conditions["Ready"]) - seconds(started)}

    def memory(self, label):
        """RSS of each locker process (/proc) and the kubelet's working set of each container."""
        summary = json.loads(self.node.must("get", "--raw", "/api/v1/nodes/node-1/proxy/stats/summary"))
        working = {p["podRef"]["name"]: c["memory"].get("workingSetBytes")
                   for p in summary["pods"] if p["podRef"]["namespace"] == NS for c in p["containers"]}
        processes = locker_processes()
        out = {}
        for pod in self.ready_pods():
            cid = pod["status"]["containerStatuses"][0]["containerID"].split("//")[1]
            status = proc_status(processes[cid])
            out[pod["metadata"]["name"]] = {
                "rss_mib": round(int(status["VmRSS"].split()[0]) / 1024, 1),
                "rss_peak_mib": round(int(status["VmHWM"].split()[0]) / 1024, 1),
                "working_set_mib": round((working.get(pod["metadata"]["name"]) or 0) / 2**20, 1)}
        self.measurements[f"memory_{label}"] = out
        return out

    # --- the story

    def test_1_both_replicas_become_ready_through_their_probes_as_the_images_user(self):
        self.assertTrue(self.pods_ready, [(p["metadata"]["name"], p["status"]) for p in self.pods()])
        pods = self.ready_pods()
        self.assertEqual(len(pods), 2)
        processes = locker_processes()
        timings = {}
        for pod in pods:
            container = pod["spec"]["containers"][0]
            self.assertEqual(container["image"], f"helm-locker:{VERSION}")
            for probe, path in (("startupProbe", "/healthz"), ("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
                self.assertEqual(container[probe]["httpGet"]["path"], path)
            status = pod["status"]["containerStatuses"][0]
            if status["restartCount"]:
                # Two replicas starting together both write the caBundle; the one whose patch is
                # refused reads again (found here: it used to exit, and the pod restarted).
                previous = self.node.kubectl("logs", "-n", NS, pod["metadata"]["name"], "--previous")
                self.fail(f"{pod['metadata']['name']} restarted: {status.get('lastState')}\n"
                          f"{(previous.stdout + previous.stderr)[-3000:]}")
            # The process the kubelet started: the image's entrypoint, as 65532, on a read-only root.
            cid = status["containerID"].split("//")[1]
            self.assertIn(cid, processes)
            pid = processes[cid]
            self.assertEqual(proc_status(pid)["Uid"].split()[:2], ["65532", "65532"])
            with open(f"/proc/{pid}/mountinfo") as f:
                root = next(line for line in f if line.split()[4] == "/")
            self.assertIn("ro", root.split()[5].split(","), root)
            timings[pod["metadata"]["name"]] = self.start_to_ready(pod)
        self.measurements["start_to_ready_install"] = timings
        self.memory("after_install")

    def test_2_the_ca_bundle_is_filled_in_by_a_pod(self):
        secret = self.node.get_json("secret", "-n", NS, f"{RELEASE}-tls")
        self.assertIsNotNone(secret, "the pods create the Secret")
        ca = base64.b64decode(secret["data"]["ca.crt"]).decode()
        config = self.node.get_json("validatingwebhookconfiguration", RELEASE)
        hook = config["webhooks"][0]
        self.assertEqual(base64.b64decode(hook["clientConfig"]["caBundle"]).decode(), ca)
        # Reached through the chart's Service (kube-proxy on the node), not a URL.
        self.assertEqual(hook["clientConfig"]["service"]["name"], RELEASE)
        self.assertNotIn("url", hook["clientConfig"])
        # Not part of the release: helm uninstall leaves it.
        self.assertNotIn("meta.helm.sh/release-name", secret["metadata"].get("annotations") or {})
        writers = [p["metadata"]["name"] for p in self.pods() if "caBundle updated" in self.logs(p["metadata"]["name"])]
        self.assertTrue(writers, "no pod logged writing the caBundle")

    def test_3_kubectl_scale_is_denied_through_the_service_and_helm_upgrade_is_allowed(self):
        self.node.must("label", "namespace", "shop", "kubernetes.io/metadata.name=shop", "--overwrite")
        self.assertTrue(eventually(self.denied_dry_run, 60, 0.5), "the release was never locked")
        out = self.node.kubectl("-n", "shop", "scale", "deploy", "shop-web", "--replicas=3")
        self.assertNotEqual(out.returncode, 0)
        self.assertIn(DENIED, out.stderr)
        self.assertIn(f"{LOCKED} (revision 1, deployed): /spec/replicas is 1 in the chart, this request sets 3",
                      out.stderr)
        self.assertEqual(self.replicas(), 1)
        self.shop.upgrade(SHOP, "shop", {"replicas": 2, "image": PAUSE})
        self.assertEqual(self.replicas(), 2)
        out = self.node.kubectl("-n", "shop", "scale", "deploy", "shop-web", "--replicas=5")
        self.assertIn(f"{LOCKED} (revision 2, deployed): /spec/replicas is 2 in the chart", out.stderr)

    def test_3b_the_same_on_a_chart_written_like_published_ones(self):
        # tests/e2e/charts/webapp (no published chart can be fetched here): helpers, toYaml,
        # an HPA, an Ingress, a PodDisruptionBudget. Its pods run the node's pause image.
        web = self.node.helm("web")
        pause = {"repository": PAUSE.rsplit(":", 1)[0], "tag": PAUSE.rsplit(":", 1)[1]}
        web.install(WEBAPP, "web", {"image": pause}, create_namespace=True)
        self.node.must("label", "namespace", "web", "kubernetes.io/metadata.name=web", "--overwrite")
        scale = lambda n: self.node.kubectl("-n", "web", "scale", "deploy", "web-webapp", f"--replicas={n}")
        self.assertTrue(eventually(lambda: DENIED in scale(4).stderr, 60, 0.5), "never locked")
        out = scale(4)
        self.assertIn("Deployment web/web-webapp is locked by Helm release web/web (revision 1, deployed): "
                      "/spec/replicas is 1 in the chart, this request sets 4", out.stderr)
        out = self.node.kubectl("-n", "web", "set", "env", "deploy/web-webapp", "WEBAPP_UI_COLOR=red")
        self.assertIn(DENIED, out.stderr)
        web.upgrade(WEBAPP, "web", {"image": pause, "replicaCount": 2, "ui": {"color": "red"}})
        self.assertEqual(self.node.get_json("deploy", "-n", "web", "web-webapp")["spec"]["replicas"], 2)

    def test_4_drift_is_reverted_by_the_leader(self):
        leader = self.leader()
        self.assertIn(leader, [p["metadata"]["name"] for p in self.ready_pods()])
        self.drift("-n", "shop", "patch", "deploy", "shop-web", "-p", '{"spec":{"replicas":5}}')
        self.assertTrue(eventually(lambda: self.replicas() == 2, 15, 0.2), self.replicas())
        self.assertIn("drift reverted", self.logs(leader))
        other = next(p["metadata"]["name"] for p in self.ready_pods() if p["metadata"]["name"] != leader)
        self.assertNotIn("drift reverted", self.logs(other))

    def test_5_the_leader_pod_deleted_another_takes_over_and_reverts(self):
        leader = self.leader()
        pod = next(p for p in self.ready_pods() if p["metadata"]["name"] == leader)
        pid = locker_processes()[pod["status"]["containerStatuses"][0]["containerID"].split("//")[1]]
        duration = self.node.get_json("lease", "-n", NS, RELEASE)["spec"]["leaseDurationSeconds"]
        # On SIGTERM the leader frees its Lease at once (then serves its shutdown delay, not
        # ready); a follower takes it at its next look, every duration/5.
        bound = duration / 5 + 3
        start = time.time()

        def new_holder():
            holder = self.leader()
            return holder if holder and holder != leader else None

        self.node.must("delete", "pod", "-n", NS, leader, "--wait=false")
        holder = eventually(new_holder, 30 + duration, 0.2)
        took = time.time()
        self.assertTrue(holder, f"the lease is still {leader}'s")
        self.measurements["leader_deleted_to_new_holder_seconds"] = round(took - start, 1)
        self.assertLessEqual(took - start, bound, f"taken over {took - start:.1f} s after the leader was deleted")
        self.assertTrue(eventually(lambda: not os.path.exists(f"/proc/{pid}"), 40, 0.2),
                        "the deleted leader's process never exited")
        self.measurements["leader_deleted_to_exit_seconds"] = round(time.time() - start, 1)
        # Whoever holds it now (the other replica, or the deleted one's replacement) reverts.
        self.drift("-n", "shop", "patch", "deploy", "shop-web", "-p", '{"spec":{"replicas":6}}')
        self.assertTrue(eventually(lambda: self.replicas() == 2, 15, 0.2), self.replicas())
        self.assertIn("drift reverted", self.logs(holder))
        self.wait_two_ready()

    def test_6_a_rolling_helm_upgrade_of_the_locker_decides_no_write_wrongly(self):
        self.node.must("-n", "shop", "create", "configmap", "free", "--from-literal=k=v")
        apiserver_log = os.path.join(self.node.dir, "apiserver.log")
        log_start = os.path.getsize(apiserver_log)
        counts = {"locked_denied": 0, "locked_allowed": 0, "locked_other_error": 0,
                  "unlocked_allowed": 0, "unlocked_denied": 0, "unlocked_other_error": 0}
        errors = []
        stop = threading.Event()

        def writes():
            i = 0
            while not stop.is_set():
                i += 1
                # Locked: the chart sets data.greeting. Unlocked: an annotation the chart does not
                # set on the same object, and an object of no release.
                for kind, args in (
                        ("locked", ("patch", "configmap", "shop-config", "-p", json.dumps({"data": {"greeting": f"w{i}"}}))),
                        ("unlocked", ("annotate", "configmap", "shop-config", f"note=w{i}", "--overwrite")),
                        ("unlocked", ("patch", "configmap", "free", "-p", json.dumps({"data": {"k": f"w{i}"}})))):
                    out = self.node.kubectl("-n", "shop", *args)
                    if out.returncode == 0:
                        counts[f"{kind}_allowed"] += 1
                    elif DENIED in out.stderr:
                        counts[f"{kind}_denied"] += 1
                    else:
                        counts[f"{kind}_other_error"] += 1
                        errors.append(out.stderr.strip())

        writer = threading.Thread(target=writes)
        writer.start()
        try:
            time.sleep(3)
            before = {p["metadata"]["name"] for p in self.pods()}
            start = time.time()
            self.locker.upgrade(CHART, RELEASE, locker_values({"podAnnotations": {"rolled": "1"}}))
            rolled = eventually(lambda: len(self.ready_pods()) == 2 and len(self.pods()) == 2
                                and not ({p["metadata"]["name"] for p in self.pods()} & before), 240, 0.5)
            self.measurements["rolling_upgrade_seconds"] = round(time.time() - start, 1)
            time.sleep(3)
        finally:
            stop.set()
            writer.join()
        with open(apiserver_log) as f:
            f.seek(log_start)
            failing_open = len(re.findall(r"failing open", f.read()))
        counts["apiserver_failing_open"] = failing_open
        self.measurements["rolling_upgrade_writes"] = counts
        self.assertTrue(rolled, [(p["metadata"]["name"], p["status"].get("phase")) for p in self.pods()])
        timings = {p["metadata"]["name"]: self.start_to_ready(p) for p in self.ready_pods()}
        self.measurements["start_to_ready_rolling"] = timings
        # Wrong: an unlocked write denied, a locked write allowed while every call reached a locker
        # (failurePolicy: Ignore lets a write through only when the call fails, and the API
        # server logs it as failing open; the reverter then puts it back).
        self.assertEqual(counts["unlocked_denied"], 0, counts)
        self.assertLessEqual(counts["locked_allowed"], failing_open, counts)
        self.assertEqual(counts["locked_other_error"] + counts["unlocked_other_error"], 0, errors[:5])
        self.assertGreater(counts["locked_denied"], 10, counts)
        config = lambda: self.node.get_json("configmap", "-n", "shop", "shop-config")["data"]["greeting"]
        self.assertTrue(eventually(lambda: config() == "hello", 15, 0.2), config())
        self.memory("after_rolling_upgrade_under_writes")

    def test_7_a_drain_evicts_one_replica_and_the_disruption_budget_keeps_the_other(self):
        """What `kubectl drain` does, step by step: cordon, then one Eviction per pod. The first
        is granted, the second refused by the PodDisruptionBudget (minAvailable 1), and the
        replica left still denies through the Service. (drain's own wait for the evicted pod to
        be gone is not asserted: the pod object outlived its container by over 45 s in two runs
        of six, after the kubelet had unmounted its volumes; the time is recorded instead.)"""
        self.wait_two_ready()
        pdb = self.node.get_json("pdb", "-n", NS, RELEASE)
        self.assertEqual(pdb["spec"]["minAvailable"], 1)
        first, second = (p["metadata"]["name"] for p in self.ready_pods())

        def evict(name):
            body = {"apiVersion": "policy/v1beta1", "kind": "Eviction", "metadata": {"name": name, "namespace": NS}}
            return self.node.kubectl("create", "--raw", f"/api/v1/namespaces/{NS}/pods/{name}/eviction",
                                     "-f", "-", input=json.dumps(body))

        self.node.must("cordon", "node-1")
        try:
            start = time.time()
            out = evict(first)
            self.assertEqual(out.returncode, 0, out.stderr)
            # The budget counts the evicted pod out at once: the second eviction is refused.
            refused = eventually(lambda: (lambda o: o.returncode != 0 and "disruption budget" in o.stderr)(evict(second)),
                                 10, 0.5)
            self.assertTrue(refused, "the second replica was evicted too")
            self.assertEqual([p["metadata"]["name"] for p in self.ready_pods()], [second])
            # The one left serves: the webhook still denies, through the Service.
            self.assertTrue(eventually(self.denied_dry_run, 20, 0.5))
            gone = eventually(lambda: first not in {p["metadata"]["name"] for p in self.pods()}, 60, 0.5)
            self.measurements["evicted_pod_gone_seconds"] = round(time.time() - start, 1) if gone else "over 60"
        finally:
            self.node.must("uncordon", "node-1")
        self.wait_two_ready()

    def test_8_a_certificate_near_its_end_is_renewed_by_a_pod(self):
        # The server renews 30 days before the end: put one that ends in 10 days in the Secret
        # (keeping the current CA in ca.crt, as a renewal does), then start a pod.
        work = tempfile.mkdtemp(dir=self.node.dir)
        subprocess.run([CERTS_GEN, "--service", RELEASE, "--namespace", NS, "--dns", RELEASE,
                        "--dns", f"{RELEASE}.{NS}", "--days", "10", "--out", work],
                       check=True, capture_output=True)
        secret = self.node.get_json("secret", "-n", NS, f"{RELEASE}-tls")
        old_ca = base64.b64decode(secret["data"]["ca.crt"]).decode()
        with open(os.path.join(work, "ca.crt")) as f:
            short_ca = f.read()
        data = {"ca.crt": short_ca + old_ca}
        for name in ("tls.crt", "tls.key"):
            with open(os.path.join(work, name)) as f:
                data[name] = f.read()
        secret["data"] = {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}
        self.node.must("replace", "-f", "-", input=json.dumps(secret))
        victim = next(p["metadata"]["name"] for p in self.ready_pods() if p["metadata"]["name"] != self.leader())
        self.node.must("delete", "pod", "-n", NS, victim, "--wait=false")

        def renewed():
            s = self.node.get_json("secret", "-n", NS, f"{RELEASE}-tls")
            return base64.b64decode(s["data"]["tls.crt"]).decode() != data["tls.crt"] and s

        s = eventually(renewed, 90, 0.5)
        self.assertTrue(s, "the Secret still holds the 10-day certificate")
        new_ca = base64.b64decode(s["data"]["ca.crt"]).decode()
        pem = lambda text: re.findall(r"-----BEGIN CERTIFICATE-----[^-]+-----END CERTIFICATE-----", text)
        # A new CA first, then the previous ones (the 10-day one's and the first), still trusted.
        self.assertEqual(pem(new_ca)[1:], pem(short_ca) + pem(old_ca))
        bundle = lambda: base64.b64decode(self.node.get_json("validatingwebhookconfiguration", RELEASE)
                                          ["webhooks"][0]["clientConfig"]["caBundle"]).decode()
        self.assertTrue(eventually(lambda: bundle() == new_ca, 30, 0.5))
        self.wait_two_ready()
        renewers = [p["metadata"]["name"] for p in self.pods()
                    if "renewed the self-managed serving certificate" in self.logs(p["metadata"]["name"])]
        self.assertTrue(renewers)
        self.assertIn("expires within 30 days", self.logs(renewers[0]))
        # Both replicas answer through the Service with their certificates: the old one's CA and
        # the new one's are both in the bundle. Each call lands on either; ten in a row all deny.
        self.assertTrue(all(self.denied_dry_run() for _ in range(10)))

    def test_9_the_emergency_bypass_holds_against_the_lockers_own_pods(self):
        # As the README and NOTES.txt say, with the chart's pods running and reverting.
        self.node.must("delete", "validatingwebhookconfiguration", RELEASE)
        self.node.must("delete", "mutatingwebhookconfiguration", f"{RELEASE}-author")
        self.node.must("-n", NS, "scale", "deploy", RELEASE, "--replicas=0")
        exists = lambda *what: self.node.kubectl("get", *what).returncode == 0  # noqa: E731
        deadline = time.time() + 30
        while time.time() < deadline:
            self.assertFalse(exists("validatingwebhookconfiguration", RELEASE))
            self.assertFalse(exists("mutatingwebhookconfiguration", f"{RELEASE}-author"))
            self.assertEqual(self.node.get_json("deploy", "-n", NS, RELEASE)["spec"]["replicas"], 0)
            time.sleep(1)
        # Writes go through unchecked meanwhile; helm upgrade brings it all back.
        self.node.must("-n", "shop", "scale", "deploy", "shop-web", "--replicas=2")
        self.locker.upgrade(CHART, RELEASE, locker_values({"podAnnotations": {"rolled": "1"}}))
        self.wait_two_ready()
        self.assertTrue(exists("validatingwebhookconfiguration", RELEASE))
        self.assertTrue(eventually(self.denied_dry_run, 60, 0.5), "not locking again after the upgrade")


if __name__ == "__main__":
    unittest.main(verbosity=2)
