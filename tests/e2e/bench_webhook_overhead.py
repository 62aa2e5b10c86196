"""What the webhook adds to a write, on the real control plane, in one run: the latency of the
same write to the API server with no webhook, with helm-locker registered (the object is owned
by no release: most of a cluster's writes), and with helm-locker registered and the object
locked (a Helm-owned ConfigMap, written by a controller-like client without changing chart
fields). Each write is a JSON merge patch over one kept-alive HTTPS connection, so client
process start-up (kubectl's ~100 ms) does not drown the difference.

    scripts/e2e.sh builds everything; then:
    cd tests/e2e && HELM_LOCKER_BIN=../../target/release/helm-locker ../../.venv-e2e/bin/python bench_webhook_overhead.py [N]
"""

import http.client
import json
import os
import ssl
import statistics
import sys
import time
import urllib.parse

from harness import CHART, ControlPlane, Locker, eventually, register_webhook, unregister_webhook


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


def measure(patch, namespace, name, n):
    samples = [patch(namespace, name, {"metadata": {"annotations": {"bench": str(i)}}}) for i in range(n)]
    return statistics.median(samples) * 1e3, statistics.quantiles(samples, n=100)[98] * 1e3


def main(n):
    plane = ControlPlane()
    locker = None
    try:
        plane.kubectl("create", "namespace", "bench")
        plane.kubectl("-n", "bench", "create", "configmap", "free")
        plane.helm("bench").install(CHART, "owned", {})
        locker = Locker(plane, "bench", "--revert=false").wait_ready()
        patch = patcher(plane)
        for _ in range(50):  # warm-up
            patch("bench", "free", {"metadata": {"annotations": {"warm": "up"}}})
        rows = []
        for round_ in range(3):
            unregister_webhook(plane, "bench")
            time.sleep(1)
            rows.append(("no webhook", round_, *measure(patch, "bench", "free", n)))
            register_webhook(plane, locker, "bench")
            eventually(lambda: plane.kubectl("get", "validatingwebhookconfiguration", "bench").returncode == 0, 5)
            time.sleep(1)
            rows.append(("helm-locker, unowned object", round_, *measure(patch, "bench", "free", n)))
            rows.append(("helm-locker, locked object", round_, *measure(patch, "bench", "owned-config", n)))
        print(f"\n{n} merge patches per row, one connection; machine: {os.cpu_count()} cores")
        print("| case | round | median ms | p99 ms |\n| --- | ---: | ---: | ---: |")
        for case, round_, median, p99 in rows:
            print(f"| {case} | {round_ + 1} | {median:.2f} | {p99:.2f} |")
        by_case = {}
        for case, _, median, _ in rows:
            by_case.setdefault(case, []).append(median)
        base = statistics.median(by_case["no webhook"])
        for case, medians in by_case.items():
            print(f"{case}: median of medians {statistics.median(medians):.2f} ms "
                  f"({statistics.median(medians) - base:+.2f} ms against no webhook)")
    finally:
        unregister_webhook(plane, "bench")
        if locker:
            locker.stop()
        plane.down()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 300)
