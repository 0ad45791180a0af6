#!/usr/bin/env bash
# End-to-end `chainrec chains` throughput and peak RSS:
#   1. on a synthetic busy-server trace (EVENTS, default 50 M events);
#   2. side by side with `perf sched timehist -w -g` on the same workload,
#      `perf bench sched pipe`, recorded by `perf sched record -g` and by `chainrec record`.
#
# Usage: benches/chains_vs_perf.sh            (root needed for part 2; part 2 is skipped otherwise)
# Env:   EVENTS=50000000 DIR=/tmp/chainrec-chains-bench BIN=target/release/chainrec LOOPS=200000
# Prints one line per measurement: name, events, wall s, M events/s, CPU s (user+sys), M events
# per CPU-second, peak RSS (MB). The machine is shared: CPU-seconds are the steadier figure.
set -euo pipefail

EVENTS=${EVENTS:-50000000}
DIR=${DIR:-/tmp/chainrec-chains-bench}
BIN=${BIN:-target/release/chainrec}
LOOPS=${LOOPS:-200000}
mkdir -p "$DIR"
if [ ! -x "$BIN" ]; then cargo build --release --bin chainrec; fi

# measure NAME EVENTS CMD...: run CMD (stdout discarded), report wall time and peak RSS.
measure() {
    local name=$1 events=$2; shift 2
    local t
    t=$(mktemp)
    /usr/bin/time -f "%e %U %S %M" -o "$t" "$@" > /dev/null 2> "$DIR/${name// /_}.stderr"
    read -r secs user sys kb < "$t"
    rm -f "$t"
    awk -v n="$name" -v e="$events" -v s="$secs" -v u="$user" -v y="$sys" -v k="$kb" \
        'BEGIN { printf "%-32s %11d events %7.2f s wall %6.2f M ev/s | %7.2f s CPU %6.2f M ev/CPU-s | %7.1f MB peak RSS\n", n, e, s, e / s / 1e6, u + y, e / (u + y) / 1e6, k / 1024 }'
}

echo "# 1. synthetic busy-server, $EVENTS events"
if [ ! -f "$DIR/busy.zst" ]; then
    "$BIN" synth --scenario busy-server --events "$EVENTS" -o "$DIR/busy.zst"
fi
N=$("$BIN" chains "$DIR/busy.zst" --max-depth 1 2>&1 >/dev/null | sed -n 's/.*chains: \([0-9]*\) events.*/\1/p' | head -1)
measure "chains (parallel decode)" "$N" "$BIN" chains "$DIR/busy.zst"
measure "chains --serial" "$N" "$BIN" chains --serial "$DIR/busy.zst"
measure "chains --no-dedup" "$N" "$BIN" chains --no-dedup "$DIR/busy.zst"
measure "chains --mode last" "$N" "$BIN" chains --mode last "$DIR/busy.zst"
measure "offcpu" "$N" "$BIN" offcpu "$DIR/busy.zst"
CHAINREC_MEMSTAT=1 "$BIN" chains "$DIR/busy.zst" 2>&1 >/dev/null | grep memory || true

echo "# 2. perf bench sched pipe -l $LOOPS: perf sched timehist -w -g vs chainrec chains"
if [ "$(id -u)" != 0 ]; then
    echo "SKIP part 2: needs root"
    exit 0
fi
mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing
perf sched record -g -o "$DIR/perf.data" -- perf bench sched pipe -l "$LOOPS" > /dev/null 2> "$DIR/perf-record.stderr"
PN=$(perf report -i "$DIR/perf.data" --stats 2>/dev/null | awk '/SAMPLE events:/ {print $3; exit}')
measure "perf sched timehist -w -g" "$PN" perf sched timehist -i "$DIR/perf.data" -w -g
"$BIN" record -o "$DIR/pipe.zst" --stacks eager -- perf bench sched pipe -l "$LOOPS" > /dev/null 2> "$DIR/chainrec-record.stderr"
CN=$("$BIN" chains "$DIR/pipe.zst" 2>&1 >/dev/null | sed -n 's/.*chains: \([0-9]*\) events.*/\1/p' | head -1)
measure "chainrec chains (pipe, eager)" "$CN" "$BIN" chains "$DIR/pipe.zst"
measure "chainrec offwake (pipe, eager)" "$CN" "$BIN" offwake "$DIR/pipe.zst"
ls -l "$DIR/perf.data" "$DIR/pipe.zst" | awk '{print $5, $9}'
