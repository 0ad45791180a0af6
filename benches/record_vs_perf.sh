#!/usr/bin/env bash
# Recorder overhead on the pipe benchmark alone (perf bench sched pipe, pinned to CPU 0):
# benches/suite.sh with WORKLOADS=pipe and the configs this script always measured. Kept
# for the commands quoted in docs/BENCHMARKS.md.
#
#   sudo benches/record_vs_perf.sh                 # 6 rounds, 200k loops
#   ROUNDS=8 LOOPS=400000 sudo benches/record_vs_perf.sh
#   CONFIGS="untraced lazy eager" sudo benches/record_vs_perf.sh
#   RT=1 sudo benches/record_vs_perf.sh         # workload SCHED_FIFO (busy shared machine)
set -euo pipefail
exec env WORKLOADS=pipe PIPE_LOOPS="${LOOPS:-200000}" PIPE_RT="${RT:-0}" \
    CONFIGS="${CONFIGS:-untraced lazy eager none perf-sched-g perf-record}" \
    "$(dirname "$0")/suite.sh"
