#!/usr/bin/env bash
# Scale benchmark: synthetic clusters of 1, 1,000 and 10,000 Helm releases of 30 objects each,
# encoded exactly as Helm stores them (examples/synth_releases.rs), loaded by
# `helm-locker serve --releases-dir` through the same decoding and indexing code as the API
# server watch. For each size: time from start to ready (index built), resident memory once
# ready and its peak while indexing, and admission latency under a fixed load
# (examples/loadgen.rs, HTTP/1.1 keep-alive, 2,000 reviews/s) of the same reviews at every
# size, three loads one after the other:
#   mix       80% an object no release owns, 10% a write to a locked object that changes no
#             chart field, 10% a denied change;
#   unowned   only the object no release owns;
#   locked    only the write to a locked object that changes no chart field.
#   scripts/scale.sh [SECONDS] [SIZES...]     (default 10 s per load; sizes 1 1000 10000)
# COMPARE_WITH=/path/to/another/helm-locker runs that binary too, after this one at every size,
# on the same files: old against new in one run (e.g. a build of the previous commit).
# READY_RUNS=N starts each build N times at every size, the builds taking turns, and reports the
# median time to ready with its range (one start moves by ±20% on a shared VM); default 1.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-10}
shift || true
sizes=("${@:-1 1000 10000}")
read -r -a sizes <<<"${sizes[*]}"
cargo build --release --locked --bin helm-locker --example synth_releases --example loadgen
target=$(scripts/target-dir.sh)
out=target/scale
rm -rf "$out" && mkdir -p "$out"
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
unowned=tests/fixtures/cluster-capture/reviews/103-kubectl-create-unrelated-create-configmap-unrelated.json
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
builds=("this $target/release/helm-locker")
if [[ -n ${COMPARE_WITH:-} ]]; then builds+=("compared $COMPARE_WITH"); fi
# Starts `$1 serve` on the size's files; sets pid, and ready (seconds from start to /readyz).
serve_until_ready() {
  local start
  start=$(date +%s.%N)
  "$1" serve --self-signed --self-signed-dir "$work/certs" --releases-dir "$dir/releases" \
    --addr 127.0.0.1:28443 --admin-addr 127.0.0.1:28080 >"$dir/serve.log" 2>&1 &
  pid=$!
  until curl -sf localhost:28080/readyz >/dev/null 2>&1; do sleep 0.01; done
  ready=$(echo "$(date +%s.%N) - $start" | bc)
}
printf '| releases | build | objects | manifests MiB | ready in s | RSS MiB | RSS / manifests | peak RSS MiB | load | p50 µs | p99 µs | p99.9 µs | errors |\n'
printf '| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: |\n'
for n in "${sizes[@]}"; do
  dir=$work/$n
  manifest_bytes=$("$target"/release/examples/synth_releases "$dir" "$n")
  : >"$dir/mix.txt"
  for _ in 1 2 3 4 5 6 7 8; do echo "$unowned" >>"$dir/mix.txt"; done
  echo "$dir/review-locked-allowed.json" >>"$dir/mix.txt"
  echo "$dir/review-denied.json" >>"$dir/mix.txt"
  echo "$unowned" >"$dir/unowned.txt"
  echo "$dir/review-locked-allowed.json" >"$dir/locked.txt"
  # Extra starts, the builds taking turns, for the median time to ready.
  declare -A readies=()
  for ((run = 1; run < ${READY_RUNS:-1}; run++)); do
    for build in "${builds[@]}"; do
      read -r name bin <<<"$build"
      serve_until_ready "$bin"
      readies[$name]+="$ready "
      kill $pid
      wait $pid 2>/dev/null || true
    done
  done
  for build in "${builds[@]}"; do
    read -r name bin <<<"$build"
    serve_until_ready "$bin"
    ready=$(python3 -c 'import statistics, sys; r = sorted(map(float, sys.argv[1:]))
print(f"{statistics.median(r):.2f}" + (f" ({r[0]:.2f}-{r[-1]:.2f})" if len(r) > 1 else ""))' ${readies[$name]:-} "$ready")
    objects=$(curl -s localhost:28080/metrics | awk '/^helm_locker_objects_indexed /{print $2}')
    rss=$(awk '/VmRSS/{print $2}' /proc/$pid/status)
    peak=$(awk '/VmHWM/{print $2}' /proc/$pid/status)
    # A revision's first denial reads its chart for the advice (where the chart sets the field);
    # with --releases-dir that read parses the whole releases file (seconds at 50,000 releases;
    # on the API server it is one GET of one Secret), and denials wait up to 250 ms for it. Once,
    # before the loads: they measure the admission path, not that read.
    for _ in $(seq 600); do
      took=$(curl -s -o /dev/null -w '%{time_total}' --cacert "$work/certs/ca.crt" -H 'Content-Type: application/json' \
        --data-binary @"$dir/review-denied.json" https://127.0.0.1:28443/validate)
      awk -v t="$took" 'BEGIN { exit !(t < 0.1) }' && break
      sleep 0.1
    done
    for load in mix unowned locked; do
      result=$("$target"/release/examples/loadgen --url https://127.0.0.1:28443/validate --ca "$work/certs/ca.crt" \
        --mix "$dir/$load.txt" --connections 8 --rate 2000 --seconds "$secs" --server-pid $pid --label "$n releases $name $load")
      echo "$result" >>"$out/results.jsonl"
      python3 - "$n" "$name" "$objects" "$manifest_bytes" "$ready" "$rss" "$peak" "$load" "$result" <<'PY'
import json, sys
n, name, objects, manifest, ready, rss, peak, load, result = sys.argv[1:]
r = json.loads(result)
manifest_mib, rss_mib = int(manifest) / 2**20, int(rss) / 1024
print(f"| {n} | {name} | {objects} | {manifest_mib:.1f} | {ready} | {rss_mib:.0f} | "
      f"{rss_mib / manifest_mib:.2f} | {int(peak) / 1024:.0f} | {load} | {r['p50_us']} | {r['p99_us']} | {r['p999_us']} | {r['errors']} |")
PY
    done
    kill $pid
    wait $pid 2>/dev/null || true
  done
  rm -rf "$dir"
done
