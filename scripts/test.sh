#!/usr/bin/env bash
# The project's test command (CI runs exactly this through .ci/run):
#   1. formatting, then unit, fixture-replay, CLI and HTTPS server tests (cargo test);
#   2. the benchmarks and examples still build (dev profile: run them with cargo bench);
#   3. transport faults under load: certificate rotation, SIGTERM, TLS versions, client
#      certificates (scripts/faults.sh, on the dev build);
#   4. end-to-end tests on a real control plane with real Helm and kubectl (scripts/e2e.sh).
# Set SKIP_E2E=1 to run only 1 to 3 (the control plane is built once, ~15 min, then cached).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo fmt --all -- --check
cargo test --workspace --locked
cargo build --workspace --locked --benches --examples
PROFILE=debug ./scripts/faults.sh
if [[ -z ${SKIP_E2E:-} ]]; then
  ./scripts/e2e.sh
fi
