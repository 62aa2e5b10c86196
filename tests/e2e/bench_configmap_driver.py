"""What the ConfigMap driver's watch costs, on the real control plane: the resident memory of a
locker with `--release-drivers secret` and with `secret,configmap` (the default), first in a
cluster with N ordinary ConfigMaps and no release ConfigMap (the watch's own cost: ordinary
ConfigMaps are never sent to the locker, the watch selects `owner=helm` on the API server), then
with N release ConfigMaps added (Helm's ConfigMap driver, 3 objects each). Each locker is
started, waits until ready (every watch has listed), settles 5 s, and VmRSS and VmHWM are read
from /proc; the two settings alternate, `ROUNDS` times. Also the API calls: the locker's own
count of lists (`helm_locker_release_secret_lists_total`, one per watch's first list).

    cd tests/e2e && KUBEBUILDER_ASSETS=... HELM_LOCKER_BIN=<helm-locker> \\
      ../../.venv-e2e/bin/python bench_configmap_driver.py [N] [ROUNDS]
"""

import json
import statistics
import sys
import time

from harness import ControlPlane, Locker, eventually, release_config_map

N = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 5


def objects(i):
    return [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"r{i}-settings"},
         "data": {"colour": "blue", "size": "large"}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": f"r{i}"}},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": f"r{i}"},
         "spec": {"replicas": 2, "selector": {"matchLabels": {"app": f"r{i}"}},
                  "template": {"metadata": {"labels": {"app": f"r{i}"}},
                               "spec": {"containers": [{"name": "app", "image": "nginx:1.27",
                                                        "ports": [{"containerPort": 80}]}]}}}},
    ]


def memory_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        fields = dict(line.split(":", 1) for line in f if ":" in line)
    return int(fields["VmRSS"].split()[0]), int(fields["VmHWM"].split()[0])


def create(plane, items):
    for start in range(0, len(items), 200):
        out = plane.kubectl("create", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List",
                                                                   "items": items[start:start + 200]}))
        assert out.returncode == 0, out.stderr


def measure(plane, tag, phase):
    results = {"secret": [], "secret,configmap": []}
    for round in range(ROUNDS):
        for drivers in results:
            locker = Locker(plane, f"{tag}{round}-{drivers.replace(',', '-')}", "--release-drivers", drivers,
                            "--revert=false")
            locker.wait_ready(timeout=300)
            time.sleep(5)
            rss, hwm = memory_kb(locker.process.pid)
            releases = locker.metric("helm_locker_releases_indexed")
            lists = locker.metric("helm_locker_release_secret_lists_total")
            results[drivers].append((rss, hwm))
            print(f"{phase} round {round} --release-drivers {drivers}: RSS {rss / 1024:.1f} MiB, peak "
                  f"{hwm / 1024:.1f} MiB, releases indexed {releases}, lists {lists}", flush=True)
            locker.stop()
    for drivers, runs in results.items():
        print(f"{phase}: --release-drivers {drivers}: median RSS {statistics.median(r for r, _ in runs) / 1024:.1f} MiB,"
              f" median peak {statistics.median(h for _, h in runs) / 1024:.1f} MiB over {len(runs)} runs",
              flush=True)


def main():
    plane = ControlPlane()
    try:
        assert plane.kubectl("create", "namespace", "bulk").returncode == 0
        create(plane, [{"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": f"plain-{i}", "namespace": "bulk"},
                        "data": {"key": "value" * 20}} for i in range(N)])
        measure(plane, "idle", "no release ConfigMap")
        create(plane, [release_config_map(f"r{i}", "bulk", objects(i)) for i in range(N)])
        measure(plane, "full", f"{N} release ConfigMaps")
    finally:
        plane.down()


if __name__ == "__main__":
    main()
