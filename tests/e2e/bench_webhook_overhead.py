"""What the webhook adds to a write, on the real control plane, in one run: the latency of the
same write to the API server with no webhook called, with helm-locker called for an object no
release owns (most of a cluster's writes), and with helm-locker called for a locked object (a
Helm-owned ConfigMap, written by a controller-like client without changing chart fields).

The three writes are interleaved, one of each in turn, so the machine's drift (two cores shared
with etcd and the API server) hits all three alike: helm-locker is registered with a
namespaceSelector that matches namespace `bench` and not `bench-free`, and the same ConfigMap
sits in both. For scale, the cheapest possible webhook (`examples/baseline_server.rs
--echo-uid`: answers "allowed" without parsing the review) is registered for namespace
`bench-limit` and measured in the same rounds. A last round with the webhook unregistered checks that the selector itself costs
nothing. Each write is a JSON merge patch over one kept-alive HTTPS connection, so client
process start-up (kubectl's ~100 ms) does not drown the difference.

    scripts/e2e.sh builds everything; then:
    cargo build --release --bin helm-locker --example baseline_server
    cd tests/e2e && target=$(../../scripts/target-dir.sh) && HELM_LOCKER_BIN=$target/release/helm-locker \
      BASELINE_BIN=$target/release/examples/baseline_server ../../.venv-e2e/bin/python bench_webhook_overhead.py [N]
    (scripts/target-dir.sh prints where cargo builds, CARGO_TARGET_DIR included.)
"""

import http.client
import subprocess
import types
import json
import os
import ssl
import statistics
import sys
import time
import urllib.parse

from harness import CHART, ControlPlane, Locker, eventually, free_port, register_webhook, unregister_webhook

BASELINE = os.environ.get("BASELINE_BIN", os.path.join(os.path.dirname(__file__), "../../target/release/examples/baseline_server"))


def patcher(plane):
    with open(plane.kubeconfig) as f:
        text = f.read()
    server = next(line.split("server:", 1)[1].strip() for line in text.splitlines() if "server:" in line)
    url = urllib.parse.urlparse(server)
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    connection = http.client.HTTPSConnection(url.hostname, url.port, context=context)
    headers = {"Authorization": "Bearer admintoken", "Content-Type": "application/merge-patch+json"}

    def patch(namespace, name, body):
        started = time.perf_counter()
        connection.request("PATCH", f"/api/v1/namespaces/{namespace}/configmaps/{name}?fieldManager=bench",
                           body=json.dumps(body), headers=headers)
        response = connection.getresponse()
        response.read()
        assert response.status == 200, response.status
        return time.perf_counter() - started
    return patch


def summary(samples):
    ms = sorted(x * 1e3 for x in samples)
    return statistics.median(ms), statistics.quantiles(ms, n=100)[98]


def interleaved(patch, targets, n):
    """n rounds; in each, one patch of every target in turn. Latencies per target."""
    samples = {t: [] for t in targets}
    for i in range(n):
        for namespace, name in targets:
            samples[(namespace, name)].append(
                patch(namespace, name, {"metadata": {"annotations": {"bench": str(i)}}}))
    return samples


def main(n):
    plane = ControlPlane()
    locker = limit = None
    try:
        plane.kubectl("create", "namespace", "bench")
        plane.kubectl("label", "namespace", "bench", "bench-hook=called")
        plane.kubectl("create", "namespace", "bench-free")
        plane.kubectl("-n", "bench", "create", "configmap", "free")
        plane.kubectl("-n", "bench-free", "create", "configmap", "free")
        plane.kubectl("create", "namespace", "bench-limit")
        plane.kubectl("label", "namespace", "bench-limit", "bench-hook=limit")
        plane.kubectl("-n", "bench-limit", "create", "configmap", "free")
        plane.helm("bench-limit").install(CHART, "limit", {})
        plane.helm("bench").install(CHART, "owned", {})
        plane.helm("bench-free").install(CHART, "twin", {})
        locker = Locker(plane, "bench", "--revert=false").wait_ready()
        patch = patcher(plane)
        register_webhook(plane, locker, "bench", only_label="bench-hook=called")
        # The cheapest webhook, on helm-locker's certificate.
        port = free_port()
        limit = subprocess.Popen([BASELINE, f"127.0.0.1:{port}", os.path.join(locker.certs, "tls.crt"),
                                  os.path.join(locker.certs, "tls.key"), "--echo-uid"])
        register_webhook(plane, types.SimpleNamespace(port=port, ca_bundle=locker.ca_bundle), "bench-limit",
                         only_label="bench-hook=limit")
        eventually(lambda: plane.kubectl("get", "validatingwebhookconfiguration", "bench").returncode == 0, 5)
        time.sleep(1)
        cases = {("bench-free", "free"): "no webhook called, plain object",
                 ("bench-limit", "free"): "cheapest possible webhook, plain object",
                 ("bench", "free"): "helm-locker, unowned object",
                 ("bench-free", "twin-config"): "no webhook called, Helm-owned object",
                 ("bench-limit", "limit-config"): "cheapest possible webhook, Helm-owned object",
                 ("bench", "owned-config"): "helm-locker, locked object"}
        baseline = {("bench-free", "free"): ("bench-free", "free"),
                    ("bench", "free"): ("bench-free", "free"),
                    ("bench-limit", "free"): ("bench-free", "free"),
                    ("bench-free", "twin-config"): ("bench-free", "twin-config"),
                    ("bench-limit", "limit-config"): ("bench-free", "twin-config"),
                    ("bench", "owned-config"): ("bench-free", "twin-config")}
        interleaved(patch, list(cases), 50)  # warm-up
        samples = interleaved(patch, list(cases), n)
        unregister_webhook(plane, "bench")
        unregister_webhook(plane, "bench-limit")
        time.sleep(1)
        unhooked = interleaved(patch, [("bench-free", "free"), ("bench", "free")], n)

        print(f"\n{n} merge patches per row, interleaved, one connection; machine: {os.cpu_count()} cores")
        print("| case | median ms | p99 ms | median against the same object, no webhook |\n| --- | ---: | ---: | ---: |")
        for target, case in cases.items():
            median, p99 = summary(samples[target])
            base = summary(samples[baseline[target]])[0]
            added = f"{median - base:+.2f} ms" if baseline[target] != target else ""
            print(f"| {case} | {median:.2f} | {p99:.2f} | {added} |")
        free, hooked_ns = summary(unhooked[("bench-free", "free")])[0], summary(unhooked[("bench", "free")])[0]
        print(f"| check: webhook unregistered, namespace bench-free | {free:.2f} | | |")
        print(f"| check: webhook unregistered, namespace bench | {hooked_ns:.2f} | | {hooked_ns - free:+.2f} ms |")
        # helm-locker's own time per review (body read to response, unowned and locked alike):
        # what of the difference is the decision, and what is the network and TLS around it.
        count = locker.metric("helm_locker_admission_duration_seconds_count")
        total = locker.metric("helm_locker_admission_duration_seconds_sum")
        if count:
            print(f"helm-locker's own time per review, mean of {int(count)}: {1e6 * total / count:.1f} µs")
    finally:
        unregister_webhook(plane, "bench")
        unregister_webhook(plane, "bench-limit")
        if limit:
            limit.terminate()
        if locker:
            locker.stop()
        plane.down()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 300)
