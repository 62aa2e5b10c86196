#!/usr/bin/env bash
# The project's test command: unit tests, fixture replays, CLI and HTTPS server tests.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo fmt --all -- --check || echo "note: cargo fmt would reformat some files"
cargo test --workspace --locked
# Benchmarks must keep compiling (they are run by hand: cargo bench).
cargo bench --workspace --locked --no-run
