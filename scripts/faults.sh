#!/usr/bin/env bash
# Transport faults under load (the control-plane faults are tests/e2e/test_faults.py):
#   1. the serving certificate rotated (files replaced) during load, with a new TLS handshake
#      every 20 requests per connection: zero failed requests, new connections get the new one;
#   2. SIGTERM during load: zero failed in-flight requests over HTTP/2, the API server's
#      protocol for webhooks (requests sent after the listener closed are counted apart as
#      "unsent"; HTTP/1.1 is reported), and the process exits 0.
#   3. TLS: 1.0 and 1.1 refused, 1.2 and 1.3 accepted; with --client-ca, a client without a
#      certificate signed by that CA is refused and one with it is answered.
# Exits non-zero if any fails.
#   scripts/faults.sh                 (PROFILE=debug: the dev build, as scripts/test.sh runs it)
set -euo pipefail
cd "$(dirname "$0")/.."
# The dev build is ~10x slower (the load generator too): a lighter load, the same assertions.
target=$(scripts/target-dir.sh)
if [[ ${PROFILE:-release} == debug ]]; then build=() bin="$target"/debug steady=300 heavy=600
else build=(--release) bin="$target"/release steady=2000 heavy=4000; fi
cargo build "${build[@]}" --locked --bin helm-locker --example loadgen
cargo build "${build[@]}" --locked -p certs-gen
out=target/faults
rm -rf "$out" && mkdir -p "$out"
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
state=tests/fixtures/cluster-capture/releases/02-after-upgrade.json
mkdir -p "$work/releases" && cp "$state" "$work/releases/"
ls tests/fixtures/cluster-capture/reviews/*.json >"$work/mix.txt"
$bin/certs-gen --out "$work/old" --ip 127.0.0.1 >/dev/null
$bin/certs-gen --out "$work/new" --ip 127.0.0.1 >/dev/null
cat "$work/old/ca.crt" "$work/new/ca.crt" >"$work/both-cas.crt"
mkdir -p "$work/serving" && cp "$work/old/tls.crt" "$work/old/tls.key" "$work/serving/"
failed=0
issuer() { openssl s_client -connect 127.0.0.1:48443 -servername 127.0.0.1 </dev/null 2>/dev/null | openssl x509 -noout -fingerprint -sha256; }
fingerprint() { openssl x509 -noout -fingerprint -sha256 -in "$1"; }

echo "== certificate rotation under load"
$bin/helm-locker serve --tls-cert "$work/serving/tls.crt" --tls-key "$work/serving/tls.key" \
  --releases-dir "$work/releases" --addr 127.0.0.1:48443 --admin-addr 127.0.0.1:48080 >"$out/rotation.log" 2>&1 &
pid=$!
until curl -sf localhost:48080/readyz >/dev/null 2>&1; do sleep 0.05; done
$bin/examples/loadgen --url https://127.0.0.1:48443/validate --ca "$work/both-cas.crt" --mix "$work/mix.txt" \
  --connections 16 --rate $steady --seconds 8 --warmup 0 --new-connection-every 20 --server-pid $pid \
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

# The API server calls webhooks over HTTP/2, where a graceful shutdown (GOAWAY) tells the
# client which requests were not taken, so none fails. Over HTTP/1.1 a request written onto a
# kept-alive connection at the moment the server closes it cannot be told apart; that count is
# reported, not failed.
for protocol in h2 http/1.1; do
  echo "== SIGTERM under load ($protocol)"
  flags=(--connections 16)
  [[ $protocol == h2 ]] && flags=(--connections 4 --http2 --streams 4)
  $bin/helm-locker serve --tls-cert "$work/serving/tls.crt" --tls-key "$work/serving/tls.key" \
    --releases-dir "$work/releases" --addr 127.0.0.1:48443 --admin-addr 127.0.0.1:48080 >"$out/sigterm.log" 2>&1 &
  pid=$!
  until curl -sf localhost:48080/readyz >/dev/null 2>&1; do sleep 0.05; done
  $bin/examples/loadgen --url https://127.0.0.1:48443/validate --ca "$work/both-cas.crt" --mix "$work/mix.txt" \
    "${flags[@]}" --rate $heavy --seconds 6 --warmup 0 --label "sigterm $protocol" >"$out/sigterm.json" &
  load=$!
  sleep 3
  kill -TERM $pid
  status=0
  wait $pid || status=$?
  wait $load
  cat "$out/sigterm.json" | tee -a "$out/sigterm.jsonl"
  echo "helm-locker exited with $status"
  [[ $status == 0 ]] || { echo "FAIL: exit status $status after SIGTERM"; failed=1; }
  if [[ $protocol == h2 ]]; then
    python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); sys.exit(1 if r["errors"] or not r["requests"] else 0)' \
      "$out/sigterm.json" || { echo "FAIL: in-flight requests failed on SIGTERM"; failed=1; }
  fi
done

echo "== TLS versions and --client-ca"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=apiserver-ca \
  -keyout "$work/client-ca.key" -out "$work/client-ca.crt" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=kube-apiserver \
  -keyout "$work/client.key" -out "$work/client.csr" 2>/dev/null
printf 'extendedKeyUsage=clientAuth\nbasicConstraints=CA:FALSE\n' >"$work/client.ext"
openssl x509 -req -in "$work/client.csr" -CA "$work/client-ca.crt" -CAkey "$work/client-ca.key" -CAcreateserial \
  -days 1 -extfile "$work/client.ext" -out "$work/client.crt" 2>/dev/null
$bin/helm-locker serve --tls-cert "$work/serving/tls.crt" --tls-key "$work/serving/tls.key" \
  --client-ca "$work/client-ca.crt" --releases-dir "$work/releases" \
  --addr 127.0.0.1:48443 --admin-addr 127.0.0.1:48080 >"$out/tls.log" 2>&1 &
pid=$!
until curl -sf localhost:48080/readyz >/dev/null 2>&1; do sleep 0.05; done
handshake() { openssl s_client -connect 127.0.0.1:48443 -servername 127.0.0.1 "$@" </dev/null >/dev/null 2>&1; }
for v in -tls1 -tls1_1; do
  if handshake $v -cert "$work/client.crt" -key "$work/client.key"; then echo "FAIL: $v accepted"; failed=1; else echo "$v refused"; fi
done
for v in -tls1_2 -tls1_3; do
  if handshake $v -cert "$work/client.crt" -key "$work/client.key"; then echo "$v accepted"; else echo "FAIL: $v refused"; failed=1; fi
done
review=tests/fixtures/cluster-capture/reviews/103-kubectl-create-unrelated-create-configmap-unrelated.json
post() { curl -s -o /dev/null -w '%{http_code}' --cacert "$work/both-cas.crt" -H 'content-type: application/json' \
  --data-binary @"$review" "$@" https://127.0.0.1:48443/validate || true; }
code=$(post)
if [[ $code == 200 ]]; then echo "FAIL: answered a client without a certificate"; failed=1; else echo "client without a certificate refused ($code)"; fi
code=$(post --cert "$work/client.crt" --key "$work/client.key")
if [[ $code == 200 ]]; then echo "client with the API server's certificate answered"; else echo "FAIL: client certificate refused ($code)"; failed=1; fi
kill $pid; wait $pid 2>/dev/null || true
exit $failed
