#!/usr/bin/env bash
# A longer rollout under load than CI's (tests/e2e/test_rollout.py): the locker replaced by a
# new process ROLLOVERS times while writers and helm upgrades run, each locker serving SECONDS.
#   scripts/rollout.sh [SECONDS] [ROLLOVERS]      (defaults: 30 s, 10 rollovers)
# Needs what scripts/e2e.sh installs (the control plane, .venv-e2e, kubectl).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --locked --bin helm-locker
HELM_LOCKER_BIN="$(scripts/target-dir.sh)/debug/helm-locker" ROLLOUT_SECONDS=${1:-30} ROLLOVERS=${2:-10} \
  .venv-e2e/bin/python -m unittest discover -s tests/e2e -p test_rollout.py -v
