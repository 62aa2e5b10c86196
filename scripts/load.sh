#!/usr/bin/env bash
# Load benchmark over TLS on loopback, three servers in the same run:
#   limit       examples/baseline_server.rs: axum + rustls (helm-locker's stack), a canned "allowed", body read, never parsed
#   peer        examples/peer_server.rs: axum, kube-rs style (whole AdmissionReview<DynamicObject>),
#               built with cargo's default release settings (PEER_PROFILE, default plain-release)
#   helm-locker helm-locker serve, indexing the recorded release (shop, revision 2 deployed)
# The load is the recorded AdmissionReviews (tests/fixtures/cluster-capture), weighted into a
# realistic mix by how helm-locker decides them offline (`helm-locker review`): ~90% objects no
# release owns, ~8% writes to locked objects that are allowed (controllers' status updates,
# Helm's own writes), ~2% denials. examples/loadgen.rs drives it over HTTP/1.1 keep-alive and
# HTTP/2, at the highest rate and at fixed rates, and reads each server's CPU and RSS.
# "locked h1/h2" send only writes to locked objects that change no chart field, at full speed;
# "unowned h1" and "denied h1" only the mix's reviews of objects no release owns, or its denials
# (not run by default: LOAD_KINDS="unowned h1,locked h1,denied h1,max h1" compares the kinds).
#   before      (only with LOAD_BEFORE=PATH) an older helm-locker binary, served the same way: the
#               report then gives this build's figures over that one's, measured in the same run
#               (build it from a worktree of the older commit with its own CARGO_TARGET_DIR)
#   scripts/load.sh [SECONDS [ROUNDS]]   (default 10 s per run, 3 rounds; results also in
#                                        target/load/results.jsonl, the report in report.md)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-10}
rounds=${2:-3}
# The peer stands for a typical webhook, built with cargo's default release settings
# (the plain-release profile, no LTO); PEER_PROFILE=release builds it as helm-locker is built.
peer_profile=${PEER_PROFILE:-plain-release}
cargo build --release --locked --bin helm-locker --example baseline_server --example loadgen
cargo build --profile "$peer_profile" --locked --example peer_server
target=$(scripts/target-dir.sh)
out=target/load
rm -rf "$out" && mkdir -p "$out"
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
state=tests/fixtures/cluster-capture/releases/02-after-upgrade.json
mkdir -p "$work/releases" && cp "$state" "$work/releases/"
scripts/review_mix.sh "$target"/release/helm-locker "$state" "$work" "$out/mix.txt" "$out/locked.txt" \
  "$out/unowned.txt" "$out/denied.txt"
echo "locked-only mix: $(wc -l <"$out/locked.txt") writes to locked objects that change no chart field"

"$target"/release/helm-locker serve --self-signed --self-signed-dir "$work/certs" --releases-dir "$work/releases" \
  --addr 127.0.0.1:18443 --admin-addr 127.0.0.1:18080 >"$work/helm-locker.log" 2>&1 &
locker=$!
for _ in $(seq 100); do curl -sf localhost:18080/readyz >/dev/null && break; sleep 0.1; done
servers=("limit LIMIT 19443 $work/certs" "peer PEER 19444 $work/certs" "helm-locker $locker 18443 $work/certs")
if [[ -n ${LOAD_BEFORE:-} ]]; then
  "$LOAD_BEFORE" serve --self-signed --self-signed-dir "$work/before-certs" --releases-dir "$work/releases" \
    --addr 127.0.0.1:18444 --admin-addr 127.0.0.1:18081 >"$work/before.log" 2>&1 &
  before=$!
  for _ in $(seq 100); do curl -sf localhost:18081/readyz >/dev/null && break; sleep 0.1; done
  servers+=("before $before 18444 $work/before-certs")
fi
"$target"/release/examples/baseline_server 127.0.0.1:19443 "$work/certs/tls.crt" "$work/certs/tls.key" &
limit=$!
"$target"/"$peer_profile"/examples/peer_server 127.0.0.1:19444 "$work/certs/tls.crt" "$work/certs/tls.key" &
peer=$!
sleep 0.5

machine="$(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "machine: $machine; $rounds rounds of $secs s per run, load generator on the same cores; peer built with the $peer_profile profile"
servers=("${servers[@]/LIMIT/$limit}")
servers=("${servers[@]/PEER/$peer}")
run() { # name pid port certs label mix loadgen-args...
  local name=$1 pid=$2 port=$3 certs=$4 label=$5 mix=$6
  shift 6
  "$target"/release/examples/loadgen --url "https://127.0.0.1:$port/validate" --ca "$certs/ca.crt" \
    --mix "$mix" --seconds "$secs" --server-pid "$pid" --label "$name $label" "$@" | tee -a "$out/results.jsonl"
}
# Rounds, and within a round the servers one after the other for each kind of run, in an order
# that rotates: a ratio is taken between runs seconds apart, so the machine's drift (other
# tenants, turbo) hits every server alike. The report gives medians over the rounds.
# LOAD_KINDS="max h1,max h2" runs only those kinds.
IFS=, read -r -a kinds <<<"${LOAD_KINDS:-max h1,max h2,locked h1,locked h2,5000/s h1,1000/s h1}"
for round in $(seq "$rounds"); do
  for kind in "${kinds[@]}"; do
    for i in "${!servers[@]}"; do
      set -- ${servers[$(((i + round) % ${#servers[@]}))]}
      case $kind in
        "max h1") run "$1" "$2" "$3" "$4" "$kind" "$out/mix.txt" --connections 32 ;;
        "max h2") run "$1" "$2" "$3" "$4" "$kind" "$out/mix.txt" --connections 4 --http2 --streams 16 ;;
        "locked h1") run "$1" "$2" "$3" "$4" "$kind" "$out/locked.txt" --connections 32 ;;
        "locked h2") run "$1" "$2" "$3" "$4" "$kind" "$out/locked.txt" --connections 4 --http2 --streams 16 ;;
        "unowned h1") run "$1" "$2" "$3" "$4" "$kind" "$out/unowned.txt" --connections 32 ;;
        "denied h1") run "$1" "$2" "$3" "$4" "$kind" "$out/denied.txt" --connections 32 ;;
        "5000/s h1") run "$1" "$2" "$3" "$4" "$kind" "$out/mix.txt" --connections 16 --rate 5000 ;;
        "1000/s h1") run "$1" "$2" "$3" "$4" "$kind" "$out/mix.txt" --connections 8 --rate 1000 ;;
        *) echo "load.sh: unknown kind of run \"$kind\" in LOAD_KINDS" >&2; exit 2 ;;
      esac
    done
  done
done
python3 scripts/load_report.py "$out/results.jsonl" "$machine" | tee "$out/report.md"
