#!/usr/bin/env bash
# Transport faults under load (the control-plane faults are tests/e2e/test_faults.py):
#   1. the serving certificate rotated (files replaced) during load, with a new TLS handshake
#      every 20 requests per connection: zero failed requests, new connections get the new one;
#   2. SIGTERM during load: zero failed in-flight requests (requests sent after the listener
#      closed are counted apart as "unsent"), and the process exits 0.
# Exits non-zero if either fails.
#   scripts/faults.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked --bin helm-locker --example loadgen
cargo build --release --locked -p certs-gen
out=target/faults
rm -rf "$out" && mkdir -p "$out"
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
state=tests/fixtures/cluster-capture/releases/02-after-upgrade.json
mkdir -p "$work/releases" && cp "$state" "$work/releases/"
ls tests/fixtures/cluster-capture/reviews/*.json >"$work/mix.txt"
target/release/certs-gen --out "$work/old" --ip 127.0.0.1 >/dev/null
target/release/certs-gen --out "$work/new" --ip 127.0.0.1 >/dev/null
cat "$work/old/ca.crt" "$work/new/ca.crt" >"$work/both-cas.crt"
mkdir -p "$work/serving" && cp "$work/old/tls.crt" "$work/old/tls.key" "$work/serving/"
failed=0
issuer() { openssl s_client -connect 127.0.0.1:48443 -servername 127.0.0.1 </dev/null 2>/dev/null | openssl x509 -noout -fingerprint -sha256; }
fingerprint() { openssl x509 -noout -fingerprint -sha256 -in "$1"; }

echo "== certificate rotation under load"
target/release/helm-locker serve --tls-cert "$work/serving/tls.crt" --tls-key "$work/serving/tls.key" \
  --releases-dir "$work/releases" --addr 127.0.0.1:48443 --admin-addr 127.0.0.1:48080 >"$out/rotation.log" 2>&1 &
pid=$!
until curl -sf localhost:48080/readyz >/dev/null 2>&1; do sleep 0.05; done
target/release/examples/loadgen --url https://127.0.0.1:48443/validate --ca "$work/both-cas.crt" --mix "$work/mix.txt" \
  --connections 16 --rate 2000 --seconds 8 --warmup 0 --new-connection-every 20 --server-pid $pid \
  --label rotation >"$out/rotation.json" &
load=$!
sleep 3
# Replaced the way a Secret volume updates: new files renamed into place (key, then cert).
cp "$work/new/tls.key" "$work/serving/.tls.key" && mv "$work/serving/.tls.key" "$work/serving/tls.key"
cp "$work/new/tls.crt" "$work/serving/.tls.crt" && mv "$work/serving/.tls.crt" "$work/serving/tls.crt"
wait $load
cat "$out/rotation.json"
sleep 1
served=$(issuer)
if [[ $served != "$(fingerprint "$work/new/tls.crt")" ]]; then
  echo "FAIL: new connections still get the old certificate"; failed=1
fi
python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); sys.exit(1 if r["errors"] or r["unsent"] or not r["requests"] else 0)' \
  "$out/rotation.json" || { echo "FAIL: requests failed during the rotation"; failed=1; }
kill $pid; wait $pid 2>/dev/null || true

echo "== SIGTERM under load"
target/release/helm-locker serve --tls-cert "$work/serving/tls.crt" --tls-key "$work/serving/tls.key" \
  --releases-dir "$work/releases" --addr 127.0.0.1:48443 --admin-addr 127.0.0.1:48080 >"$out/sigterm.log" 2>&1 &
pid=$!
until curl -sf localhost:48080/readyz >/dev/null 2>&1; do sleep 0.05; done
target/release/examples/loadgen --url https://127.0.0.1:48443/validate --ca "$work/both-cas.crt" --mix "$work/mix.txt" \
  --connections 16 --rate 4000 --seconds 6 --warmup 0 --label sigterm >"$out/sigterm.json" &
load=$!
sleep 3
kill -TERM $pid
status=0
wait $pid || status=$?
wait $load
cat "$out/sigterm.json"
echo "helm-locker exited with $status"
[[ $status == 0 ]] || { echo "FAIL: exit status $status after SIGTERM"; failed=1; }
python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); sys.exit(1 if r["errors"] or not r["requests"] else 0)' \
  "$out/sigterm.json" || { echo "FAIL: in-flight requests failed on SIGTERM"; failed=1; }
exit $failed
