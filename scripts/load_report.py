"""Turns loadgen's JSON lines (scripts/load.sh) into a Markdown table with ratios.

    python3 scripts/load_report.py target/load/results.jsonl "machine description"
"""

import json
import sys

SERVERS = ["limit", "peer", "helm-locker"]


def main(path, machine):
    runs = {}
    for line in open(path):
        r = json.loads(line)
        server, label = r["label"].split(" ", 1)
        runs.setdefault(label, {})[server] = r
    print(f"Machine: {machine}. Load generator and server share the cores.\n")
    print("| run | server | reviews/s | p50 µs | p99 µs | p99.9 µs | errors | server CPU % | server RSS MiB |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for label, by_server in runs.items():
        for server in SERVERS:
            r = by_server.get(server)
            if not r:
                continue
            rss = r["server_rss_kib"] / 1024 if r["server_rss_kib"] is not None else float("nan")
            print(f"| {label} | {server} | {r['rps']:.0f} | {r['p50_us']} | {r['p99_us']} | {r['p999_us']} "
                  f"| {r['errors']} | {r['server_cpu_percent']} | {rss:.1f} |")
    print("\n| run | helm-locker / peer (throughput) | helm-locker / limit (throughput) | "
          "helm-locker CPU per review / limit's |")
    print("| --- | ---: | ---: | ---: |")
    for label, by_server in runs.items():
        if not all(s in by_server for s in SERVERS):
            continue
        ours, peer, limit = (by_server[s] for s in ("helm-locker", "peer", "limit"))

        def cpu_per_review(r):
            return (r["server_cpu_percent"] or 0) / max(r["rps"], 1)

        cpu = cpu_per_review(ours) / cpu_per_review(limit) if cpu_per_review(limit) else float("nan")
        print(f"| {label} | {ours['rps'] / peer['rps']:.2f}x | {ours['rps'] / limit['rps']:.2f} | {cpu:.2f} |")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "")
