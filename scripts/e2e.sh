#!/usr/bin/env bash
# End-to-end tests on a real control plane (etcd, kube-apiserver, kube-controller-manager 1.20
# built from Debian's source package and cached in ~/.cache/kube-testenv), real Helm (the Go
# SDK through a pinned helm-python-sdk), real kubectl. Set E2E_KUBECONFIG to use an existing
# cluster whose API server runs on this machine instead.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.venv-e2e
if [[ ! -x $venv/bin/python ]]; then
  python3 -m venv "$venv"
fi
"$venv/bin/pip" install -q --disable-pip-version-check 'helm-python-sdk==0.2.2'
if [[ -z ${E2E_KUBECONFIG:-} ]]; then
  tests/e2e/kube-testenv.sh build
fi
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
# tests/e2e/test_node.py: the image (scripts/image.sh, built without a registry) on a real node
# (kubelet, kube-scheduler, kube-proxy built like the control plane and cached, ~1 min with the
# control plane's Go cache; containerd, runc and the CNI plugins from Debian). On a machine that
# cannot run a node the test is skipped with the reason (kube-testenv.sh node-check).
if tests/e2e/kube-testenv.sh node-check; then
  tests/e2e/kube-testenv.sh build-node
  scripts/image.sh
fi
HELM_LOCKER_BIN="$target"/debug/helm-locker "$venv/bin/python" -m unittest discover -s tests/e2e -p 'test_*.py' -v
