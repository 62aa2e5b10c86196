#!/usr/bin/env bash
# Load benchmark over TLS on loopback: helm-locker serve vs a minimal always-allow hyper+rustls
# server (examples/baseline_server.rs), same machine, same run. Reports reviews/s and latency
# percentiles (wrk: HTTP/1.1 keep-alive; h2load: HTTP/2). Needs wrk and h2load (Debian: wrk,
# nghttp2-client; installed when missing). Traffic stays on 127.0.0.1 and each run is bounded.
#   scripts/load.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-10}
command -v wrk >/dev/null && command -v h2load >/dev/null || {
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk nghttp2-client >/dev/null; }
cargo build --release --locked --bin helm-locker --example baseline_server
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
# The allow path most writes take: an object no release owns (the recorded kubectl create).
review=tests/fixtures/cluster-capture/reviews/103-kubectl-create-unrelated-create-configmap-unrelated.json
cat >"$work/post.lua" <<LUA
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local f = io.open("$review", "r"); wrk.body = f:read("*a"); f:close()
LUA
target/release/helm-locker serve --self-signed --self-signed-dir "$work/certs" --releases-dir examples/releases \
  --addr 127.0.0.1:18443 --admin-addr 127.0.0.1:18080 --log warn,rustls=error &
for _ in $(seq 50); do curl -sf localhost:18080/readyz >/dev/null && break; sleep 0.1; done
target/release/examples/baseline_server 127.0.0.1:19443 "$work/certs/tls.crt" "$work/certs/tls.key" &
sleep 0.5
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
for target in "helm-locker https://127.0.0.1:18443/validate" "baseline https://127.0.0.1:19443/validate"; do
  set -- $target
  echo "== $1, HTTP/1.1 keep-alive, 2 threads x 32 connections, ${secs}s (wrk)"
  wrk -t2 -c32 -d"${secs}s" --latency -s "$work/post.lua" "$2" | grep -E "Requests/sec|^ +(50|75|90|99)%|Non-2xx|Socket errors"
  echo "== $1, HTTP/2, 32 connections x 8 streams, ${secs}s (h2load)"
  h2load -D "$secs" -c32 -m8 -t2 -d "$review" -H 'content-type: application/json' "$2" | grep -E "finished in|requests:|time for request"
  echo "== $1, HTTP/1.1, fixed 5000 req/s (h2load --rps, 10 clients x 500)"
  h2load --h1 -D "$secs" -c10 --rps 500 -t2 -d "$review" -H 'content-type: application/json' "$2" | grep -E "finished in|requests:|time for request"
done
