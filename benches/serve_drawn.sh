#!/usr/bin/env bash
# Issue 36's "Done when": from mouse-up to the graph drawn in headless chromium, for 1 s
# ranges of a trace (docs/BENCHMARKS.md, session 24), through the ignored test
# tests/serve.rs `time_to_drawn` (the page's selectRange until a frame after it drew).
#
# Usage: benches/serve_drawn.sh BIN TRACE [STARTS_S]
#   BIN: the chainrec whose `serve` (and built-in page) is measured, e.g. target/release/chainrec
#   e.g. benches/serve_drawn.sh target/release/chainrec /tmp/busy20m.zst "1 8 16"
set -euo pipefail
BIN=$(realpath "$1") TRACE=$(realpath "$2")
STARTS=${3:-1 8 16}
cd "$(dirname "$0")/.."
CHAINREC_BENCH_BIN=$BIN CHAINREC_BENCH_TRACE=$TRACE CHAINREC_BENCH_STARTS=$STARTS \
  cargo test --profile ci --locked --test serve -- --ignored --exact time_to_drawn --nocapture 2>&1 |
  grep '^time_to_drawn:'
