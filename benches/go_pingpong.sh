#!/usr/bin/env bash
# Issue #38's cost bar: the channel ping-pong (testdata/go/gowaits.go `pingpong SECS`, two
# goroutines passing a value over unbuffered channels) traced by `chainrec record` (default
# cap: the probes are detached within ~50 ms) against untraced, in pairs, traced and
# untraced in turn so that a drift of the machine's speed hits both. The figure is the
# program's own rate (round trips per second, which it prints), not the process's time.
# Prints one line per pair and the median, min and max of traced / untraced.
# Usage (root): benches/go_pingpong.sh CHAINREC GOWAITS [PAIRS] [SECS]   (PAIRS 9, SECS 5)
#   GOWAITS: gowaits built with the Go under test (GO111MODULE=off go build -o ... gowaits.go)
# One warm-up pair is run first and not counted.
set -euo pipefail
BIN=$1 PROG=$2 PAIRS=${3:-9} SECS=${4:-5}
out=$(mktemp -d /tmp/go_pingpong.XXXXXX)
trap 'rm -rf "$out"' EXIT
rate() { awk '/^pingpong / { print $5 }' "$1" | sed 's|/s||'; }
ratios=()
for i in $(seq 0 "$PAIRS"); do
    "$BIN" record -q -o "$out/pp.zst" -- "$PROG" pingpong "$SECS" >"$out/traced" 2>&1
    "$PROG" pingpong "$SECS" >"$out/untraced" 2>&1
    t=$(rate "$out/traced") u=$(rate "$out/untraced")
    r=$(awk -v t="$t" -v u="$u" 'BEGIN { printf "%.3f", t / u }')
    if [ "$i" = 0 ]; then
        echo "warm-up: traced $t/s, untraced $u/s ($r)"
        continue
    fi
    echo "pair $i: traced $t/s, untraced $u/s, ratio $r"
    ratios+=("$r")
done
printf '%s\n' "${ratios[@]}" | sort -n | awk '{ v[NR] = $1 } END {
    m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
    printf "traced / untraced over %d pairs: median %.3f (min %.3f, max %.3f)\n", NR, m, v[1], v[NR] }'
