#!/usr/bin/env bash
# The project's test command (CI runs exactly this through .ci/run):
#   1. formatting, clippy (warnings are errors), then unit, fixture-replay, CLI and HTTPS server
#      tests (cargo test);
#   2. the benchmarks and examples still build (dev profile: run them with cargo bench);
#   3. end-to-end tests on a real control plane with real Helm and kubectl (scripts/e2e.sh).
# Set SKIP_E2E=1 to run only 1 and 2 (the control plane is built once, ~15 min, then cached).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo test --workspace --locked
cargo build --workspace --locked --benches --examples
if [[ -z ${SKIP_E2E:-} ]]; then
  ./scripts/e2e.sh
fi
