#!/usr/bin/env bash
# Prints the directory cargo builds this workspace into: target/, or wherever CARGO_TARGET_DIR
# (or a cargo config's build.target-dir) puts it. The scripts that run built binaries ask here
# rather than assume target/.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo metadata --format-version 1 --no-deps --locked |
  sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p'
