#!/usr/bin/env bash
# Soak: helm-locker serve under a steady 2,000 reviews/s of the recorded mix (scripts/load.sh's
# weighting) over HTTP/1.1 keep-alive for SECONDS (default 600), sampling its resident memory
# every 10 s. Prints the RSS curve and loadgen's summary; fails on any error or on RSS growth
# of 5% or more from the first sample after warm-up to the last.
#   scripts/soak.sh [SECONDS] [RATE]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-600}
rate=${2:-2000}
cargo build --release --locked --bin helm-locker --example loadgen
target=$(scripts/target-dir.sh)
out=target/soak
rm -rf "$out" && mkdir -p "$out"
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
state=tests/fixtures/cluster-capture/releases/02-after-upgrade.json
mkdir -p "$work/releases" && cp "$state" "$work/releases/"
scripts/review_mix.sh "$target"/release/helm-locker "$state" "$work" "$out/mix.txt"
"$target"/release/helm-locker serve --self-signed --self-signed-dir "$work/certs" --releases-dir "$work/releases" \
  --addr 127.0.0.1:38443 --admin-addr 127.0.0.1:38080 >"$out/helm-locker.log" 2>&1 &
pid=$!
until curl -sf localhost:38080/readyz >/dev/null 2>&1; do sleep 0.05; done
(
  start=$(date +%s)
  while kill -0 $pid 2>/dev/null; do
    echo "$(($(date +%s) - start)) $(awk '/VmRSS/{print $2}' /proc/$pid/status)"
    sleep 10
  done
) >"$out/rss.txt" &
"$target"/release/examples/loadgen --url https://127.0.0.1:38443/validate --ca "$work/certs/ca.crt" \
  --mix "$out/mix.txt" --connections 16 --rate "$rate" --seconds "$secs" --warmup 5 --server-pid $pid \
  --label soak | tee "$out/result.json"
echo "RSS (seconds, KiB):"
cat "$out/rss.txt"
python3 - "$out/result.json" "$out/rss.txt" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
samples = [tuple(map(int, l.split())) for l in open(sys.argv[2]) if len(l.split()) == 2]
after_warmup = [kib for t, kib in samples if t >= 30] or [kib for _, kib in samples]
growth = (after_warmup[-1] - after_warmup[0]) / after_warmup[0] * 100
print(f"requests {r['requests']}, errors {r['errors']}, p50 {r['p50_us']} µs, p99 {r['p99_us']} µs, "
      f"p99.9 {r['p999_us']} µs; RSS {after_warmup[0]} -> {after_warmup[-1]} KiB ({growth:+.1f}%)")
sys.exit(1 if r["errors"] or growth >= 5 else 0)
PY
