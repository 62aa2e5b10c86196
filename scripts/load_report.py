"""Turns loadgen's JSON lines (scripts/load.sh) into Markdown tables with ratios.

    python3 scripts/load_report.py target/load/results.jsonl "machine description"

load.sh runs every server once per kind of run in each round, seconds apart. The first table
gives each server's medians over the rounds; the second the ratios, taken within each round
(between runs seconds apart) and then the median over the rounds, with their range.
"""

import json
import statistics
import sys

SERVERS = ["limit", "peer", "helm-locker", "before"]


def main(path, machine):
    runs = {}  # kind -> server -> [results, one per round]
    for line in open(path):
        r = json.loads(line)
        server, kind = r["label"].split(" ", 1)
        runs.setdefault(kind, {}).setdefault(server, []).append(r)
    rounds = max(len(v) for by_server in runs.values() for v in by_server.values())
    print(f"Machine: {machine}. Load generator and server share the cores. "
          f"Medians of {rounds} round(s).\n")
    print("| run | server | reviews/s | p50 µs | p99 µs | p99.9 µs | errors | server CPU % | server RSS MiB |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    med = lambda rs, key: statistics.median(r[key] or 0 for r in rs)
    for kind, by_server in runs.items():
        for server in SERVERS:
            rs = by_server.get(server)
            if not rs:
                continue
            rss = statistics.median(r["server_rss_kib"] or 0 for r in rs) / 1024
            errors = sum(r["errors"] for r in rs)
            print(f"| {kind} | {server} | {med(rs, 'rps'):.0f} | {med(rs, 'p50_us'):.0f} | {med(rs, 'p99_us'):.0f} "
                  f"| {med(rs, 'p999_us'):.0f} | {errors} | {med(rs, 'server_cpu_percent'):.1f} | {rss:.1f} |")
    with_before = any("before" in by_server for by_server in runs.values())
    print("\n| run | helm-locker / peer (throughput) | helm-locker / limit (throughput) | "
          "helm-locker CPU per review / limit's |" + (" helm-locker / before (throughput) | "
                                                      "helm-locker CPU per review / before's |"
                                                      if with_before else ""))
    print("| --- | ---: | ---: | ---: |" + (" ---: | ---: |" if with_before else ""))

    def cpu_per_review(r):
        return (r["server_cpu_percent"] or 0) / max(r["rps"], 1)

    def ratio(values):
        values = [v for v in values if v == v]
        if not values:
            return "-"
        if len(values) == 1:
            return f"{values[0]:.2f}"
        return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"

    for kind, by_server in runs.items():
        if not all(s in by_server for s in SERVERS):
            continue
        rounds_here = zip(*(by_server[s] for s in ("helm-locker", "peer", "limit")))
        vs_peer, vs_limit, cpu = [], [], []
        for ours, peer, limit in rounds_here:
            vs_peer.append(ours["rps"] / max(peer["rps"], 1))
            vs_limit.append(ours["rps"] / max(limit["rps"], 1))
            base = cpu_per_review(limit)
            cpu.append(cpu_per_review(ours) / base if base else float("nan"))
        row = f"| {kind} | {ratio(vs_peer)}x | {ratio(vs_limit)} | {ratio(cpu)} |"
        if with_before and "before" in by_server:
            vs_before, cpu_before = [], []
            for ours, before in zip(by_server["helm-locker"], by_server["before"]):
                vs_before.append(ours["rps"] / max(before["rps"], 1))
                base = cpu_per_review(before)
                cpu_before.append(cpu_per_review(ours) / base if base else float("nan"))
            row += f" {ratio(vs_before)} | {ratio(cpu_before)} |"
        print(row)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "")
