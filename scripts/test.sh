#!/usr/bin/env bash
# The project's test command (CI runs exactly this through .ci/run):
#   1. formatting, clippy (warnings are errors), licenses and banned crates (cargo deny), then
#      unit, property, fixture-replay, fuzz-corpus replay, log-leak, CLI and HTTPS server tests
#      (cargo test);
#      the README's and try-it's no-cluster blocks, run as written (scripts/run-doc-blocks.py);
#   2. the benchmarks, examples and fuzz targets still build (dev profile: run them with
#      cargo bench, and cargo fuzz as docs/reliability.md says);
#   3. transport faults under load: certificate rotation, SIGTERM, TLS versions, client
#      certificates (scripts/faults.sh, on the dev build);
#   4. end-to-end tests on a real control plane with real Helm and kubectl (scripts/e2e.sh).
# Set SKIP_E2E=1 to run only 1 to 3 (the control plane is built once, a few minutes, then cached).
set -euo pipefail
cd "$(dirname "$0")/.."
# One build, never edited: incremental caches would only take disk (several GB on a cold run).
export CARGO_INCREMENTAL=0
# Each step's end is logged with the time since the start, so a CI log says where its minutes go.
at() { echo "test.sh: $1 done at $((SECONDS / 60)) min $((SECONDS % 60)) s"; }
echo "disk before the build: $(df -h --output=avail . | tail -1 | tr -d ' ') free"
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
# The libraries and binaries alone too: with every target, the tests' features (core's
# test-util) are on, and code only they use is not seen unused.
cargo clippy --workspace --locked -- -D warnings
at "fmt and clippy"
# The core crate stays pure: nothing that does I/O or parses command lines may reach it.
if cargo tree -p helm-locker-core -e normal --prefix none --locked | grep -E '^(tokio|kube|kube-client|hyper|axum|clap|rustls) '; then
  echo "helm-locker-core must not depend on the crates above" >&2
  exit 1
fi
# No circle of imports between the files of either crate (scripts/check-imports.py names the
# files and the names that tie them).
python3 scripts/check-imports.py core/src src
# Licenses and banned crates (deny.toml). cargo-deny is built once when missing (~4-7 min on two
# cores); advisories are not checked here: their database is fetched from GitHub.
if ! command -v cargo-deny >/dev/null; then
  cargo install cargo-deny --locked --version 0.20.2
fi
# cargo deny reads the crates of every platform in Cargo.lock; a fresh machine's cache holds only
# what the Linux build fetched, so fetch them all first.
cargo fetch --locked
cargo deny --offline check licenses bans
at "cargo deny"
cargo test --workspace --locked
at "cargo test"
# The book (docs/, an mdBook; README.md is the front page): built, then scripts/check-docs.py
# checks every link and repository path it names, and its lists of what the code defines
# against the code: the metrics (src/metrics.rs), the alerts (the chart's PrometheusRule), the
# serve flags and their variables (src/cli.rs), and the modules design.md's "Where the code
# is" names (core/src/lib.rs, src/lib.rs, src/*/mod.rs); and that the memory sizing the
# README, install.md, troubleshooting.md and performance.md state is the chart's comment's.
# mdBook is installed once when missing, like cargo-deny.
if ! command -v mdbook >/dev/null; then
  cargo install mdbook --locked --version 0.4.52 --no-default-features
fi
mdbook build docs
python3 scripts/check-docs.py
at "the book and its checks"
# The README's no-cluster try and docs/try-it.md's blocks, run as written (the debug build above
# is reused): each must print the denial the page shows.
python3 scripts/run-doc-blocks.py
at "the doc blocks"
cargo build --workspace --locked --benches --examples
# The fuzz targets (fuzz/, a workspace of its own) still build; core/tests/fuzz_corpus.rs has already
# replayed their committed corpora. They share target/ so only what differs is compiled. Without
# a C++ compiler libFuzzer cannot be built: the targets are then type-checked only.
cargo fmt --manifest-path fuzz/Cargo.toml -- --check
if command -v c++ >/dev/null; then
  CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target} cargo build --manifest-path fuzz/Cargo.toml --locked
else
  CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target} cargo check --manifest-path fuzz/Cargo.toml --locked \
    --no-default-features
fi
# The scripts that run built binaries find them where cargo put them (scripts/target-dir.sh), not
# in target/: none names target/debug or target/release, and the fault step runs with
# CARGO_TARGET_DIR set to another path to the same build (a symlink: nothing is rebuilt).
if grep -nE '^[^#]*(^|[^$"a-zA-Z_/])target/(debug|release)/' scripts/*.sh; then
  echo "scripts must run binaries from \$(scripts/target-dir.sh), not target/" >&2
  exit 1
fi
elsewhere=$(mktemp -d)
ln -s "$(scripts/target-dir.sh)" "$elsewhere/target"
CARGO_TARGET_DIR="$elsewhere/target" PROFILE=debug ./scripts/faults.sh
rm -rf "$elsewhere"
at "benches, examples, fuzz targets and faults"
if [[ -z ${SKIP_E2E:-} ]]; then
  ./scripts/e2e.sh
  at "end-to-end tests"
fi
echo "disk after the tests: $(df -h --output=avail . | tail -1 | tr -d ' ') free, build $(du -sh "$(scripts/target-dir.sh)" 2>/dev/null | cut -f1)"
