#!/usr/bin/env bash
# End-to-end tests on real control planes (etcd, kube-apiserver, kube-controller-manager), real
# Helm (the Go SDK through a pinned helm-python-sdk), real kubectl, on two Kubernetes versions
# (docs/testing.md, "Versions"):
#   - every test on the newest one here: the binaries in KUBEBUILDER_ASSETS (or
#     KUBE_TESTENV_BIN_DIR) when set, else ../shared/kube/v1.36.2 (xz files, unpacked once into
#     ~/.cache/kube-testenv) when it exists, with the kubectl of the same version;
#   - the floor of the chart's kubeVersion, 1.20 built from Debian's source package and cached in
#     ~/.cache/kube-testenv: the tests in FLOOR below (all of them when no newer binaries exist).
# Set E2E_KUBECONFIG to use an existing cluster whose API server runs on this machine instead
# (every test, once).
set -euo pipefail
cd "$(dirname "$0")/.."
at() { echo "e2e: $1 done at $((SECONDS / 60)) min $((SECONDS % 60)) s"; }
venv=.venv-e2e
if [[ ! -x $venv/bin/python ]]; then
  python3 -m venv "$venv"
fi
"$venv/bin/pip" install -q --disable-pip-version-check 'helm-python-sdk==0.2.2'
if [[ -z ${E2E_KUBECONFIG:-} ]]; then
  tests/e2e/kube-testenv.sh build
fi
at "the control plane (built once, then cached)"
command -v kubectl >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kubernetes-client >/dev/null; }
# promtool checks the chart's alerting rules (tests/e2e/test_monitoring.py): taken from Debian's
# prometheus package, unpacked into target/tools rather than installed (only promtool is needed).
if ! command -v promtool >/dev/null && [[ ! -x target/tools/promtool ]]; then
  tmp=$(mktemp -d)
  (cd "$tmp" && { apt-get download -qq prometheus 2>/dev/null || { apt-get update -qq && apt-get download -qq prometheus; }; } &&
    dpkg-deb -x prometheus_*.deb unpacked)
  mkdir -p target/tools && cp "$tmp/unpacked/usr/bin/promtool" target/tools/ && rm -rf "$tmp"
fi
cargo build --locked --bin helm-locker
target=$(scripts/target-dir.sh)
newest=${KUBEBUILDER_ASSETS:-${KUBE_TESTENV_BIN_DIR:-}}
if [[ -z $newest && -z ${E2E_KUBECONFIG:-} && -d ../shared/kube/v1.36.2 ]]; then
  newest=$(tests/e2e/kube-testenv.sh unpack ../shared/kube/v1.36.2)
fi
# tests/e2e/test_node.py: the image (scripts/image.sh, built without a registry) on a real node
# (kubelet, kube-scheduler, kube-proxy: the newest binaries' own, else built like the control
# plane and cached, ~1 min with the control plane's Go cache; containerd, runc and the CNI plugins
# from Debian). On a machine that cannot run a node the test is skipped with the reason
# (kube-testenv.sh node-check).
if tests/e2e/kube-testenv.sh node-check; then
  KUBEBUILDER_ASSETS=$newest tests/e2e/kube-testenv.sh build-node
  scripts/image.sh
fi
at "the node's binaries and the image"
export HELM_LOCKER_BIN="$target"/debug/helm-locker
# E2E_JOBS test files at a time (default 2; 1 on a given cluster, which the files would share),
# each against its own control plane: a file mostly waits on the API server and on its
# controllers, so one alone takes as long as beside another (test_fights 104 s alone, 107 s in
# two lanes) and two lanes halve the suite's time. A file's log is printed whole when it ends,
# with its time, so the log says where CI's minutes go; every file runs, and the suite fails at
# the end naming the files that failed. The files in ALONE run after the others, one at a time.
results=$(mktemp -d)
trap 'rm -rf "$results"' EXIT
# run_file N FILE ON [ASSETS]: FILE on the control plane of ASSETS (the binaries' directory;
# none: 1.20 built from Debian's source, or the given cluster), logged as run on ON.
run_file() {
  local n=$1 file=$2 on=$3 log="$results/$1.log" start=$SECONDS
  if [[ $# -ge 4 ]]; then
    (cd tests/e2e && KUBEBUILDER_ASSETS=$4 KUBE_TESTENV_BIN_DIR="" "../../$venv/bin/python" -m unittest -v "${file%.py}") >"$log" 2>&1 ||
      echo " $file ($on)" >>"$results/failed"
  else
    (cd tests/e2e && "../../$venv/bin/python" -m unittest -v "${file%.py}") >"$log" 2>&1 || echo " $file ($on)" >>"$results/failed"
  fi
  echo "e2e: $file took $((SECONDS - start)) s on $on" >>"$log"
  flock "$results/print" cat "$log"
}
# run_all ENTRIES...: each entry FILE|ON|ASSETS ("-" for none), E2E_JOBS at a time.
run_all() {
  local entry file on assets n=0 running=0
  for entry in "$@"; do
    IFS='|' read -r file on assets <<<"$entry"
    if ((running >= jobs)); then wait -n || true; running=$((running - 1)); fi
    n=$((n + 1)); running=$((running + 1))
    if [[ $assets == - ]]; then run_file "$n" "$file" "$on" & else run_file "$n" "$file" "$on" "$assets" & fi
  done
  wait
}
# The longest files (about 100 to 250 s each) start first, so the lanes end together.
FIRST="test_history.py test_ownership.py test_scenarios.py test_fights.py test_authors.py test_trust_flood.py
  test_trust_stamps.py test_faults.py"
# A memory peak compared with the chart's limit (trust_counts) and the node, with its
# machine-wide bridge and iptables chains: alone.
ALONE="test_trust_counts.py test_node.py"
all=$(cd tests/e2e && ls test_*.py)
# What proves the chart's `kubeVersion: >=1.20` on 1.20 itself, and runs on both versions: the
# chart installed and run under its own RBAC (install), the README's bypass (bypass: 1.20 has
# no matchConditions), the switches (a watch authorized by resourceNames), the trust rules
# (trust*, authors, flux_layout: the authorization API, managedFields and the author webhook of
# each version) and the doors to one object (identity: until 1.22 an Ingress is also served
# under networking.k8s.io/v1beta1 and extensions/v1beta1, another group with another schema),
# where an Event about a cluster-scoped object goes (signals: kube-system before 1.22) and what
# Helm owns (ownership: the schema's granular and atomic maps, the versions served, what
# managedFields record), and what a restore is compared with (restore: the zero values each API
# server leaves out and the defaults it fills in).
FLOOR="test_install.py test_bypass.py test_authors.py test_trust.py test_trust_labels.py
  test_trust_owners.py test_trust_stamps.py test_trust_holds.py test_flux_layout.py test_switches.py
  test_identity.py test_signals.py test_ownership.py test_restore.py"
# On 1.20 alone, by design: subresources measures what each subresource of 1.20 persists
# (docs/subresources.md); what 1.36 persists would be another measurement (docs/testing.md,
# "Versions").
ONLY_ON_FLOOR="test_subresources.py"
# Entries in order: FIRST's files on every version they run on, then the rest; ALONE's apart.
ordered=$(for f in $FIRST; do if [[ " $(echo $all) " == *" $f "* ]]; then echo "$f"; fi; done
  for f in $all; do if [[ " $(echo $FIRST) " != *" $f "* ]]; then echo "$f"; fi; done)
pooled=() alone=()
add() { if [[ " $(echo $ALONE) " == *" ${1%%|*} "* ]]; then alone+=("$1"); else pooled+=("$1"); fi; }
if [[ -n ${E2E_KUBECONFIG:-} ]]; then
  jobs=${E2E_JOBS:-1}
  for file in $ordered; do add "$file|the given cluster|-"; done
else
  jobs=${E2E_JOBS:-2}
  floor_on="1.20 (Debian's source)"
  if [[ -n $newest ]]; then
    newest_on=$(KUBEBUILDER_ASSETS=$newest tests/e2e/kube-testenv.sh version)
    for file in $ordered; do
      [[ " $(echo $ONLY_ON_FLOOR) " == *" $file "* ]] || add "$file|$newest_on|$newest"
      if [[ " $(echo $FLOOR) $(echo $ONLY_ON_FLOOR) " == *" $file "* ]]; then add "$file|$floor_on|"; fi
    done
  else
    for file in $ordered; do add "$file|$floor_on|"; done
  fi
fi
run_all "${pooled[@]}"
jobs=1 run_all "${alone[@]}"
failed=$(cat "$results/failed" 2>/dev/null || true)
if [[ -n $failed ]]; then
  echo "e2e: failed:$failed" >&2
  exit 1
fi
