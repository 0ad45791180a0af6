#!/usr/bin/env bash
# `chainrec serve`: when the page is served, RSS once the checkpoints are taken, and the
# wall time and server CPU (utime+stime of the serve process, /proc/PID/stat) of 1 s
# ranges of /api/chains (docs/BENCHMARKS.md "Explorer", session 15).
#
# Usage: [PX=N] benches/serve_ranges.sh BIN TRACE PORT [STARTS_S] [-- SERVE_OPTIONS...]
#   STARTS_S: range starts in seconds from the trace start (default "0 4 8 12 16")
#   PX: ask as the page does, its graph N px wide (`&px=N`, session 24; the bytes shown)
#   e.g. benches/serve_ranges.sh target/release/chainrec /tmp/busy20m.zst 7482 "1.99 5.99" -- --checkpoint-every 2
set -euo pipefail
BIN=$1 TRACE=$2 PORT=$3
STARTS=${4:-0 4 8 12 16}
shift $(( $# < 4 ? $# : 4 ))
[ "${1:-}" = "--" ] && shift
t0=$(date +%s.%N)
"$BIN" serve --port "$PORT" -q "$@" "$TRACE" 2>/dev/null &
PID=$!
trap 'kill $PID 2>/dev/null || true' EXIT
until curl -s -o /dev/null "http://127.0.0.1:$PORT/api/info"; do sleep 0.05; done
t1=$(date +%s.%N)
# Older builds listen only once indexed (no indexing.done field).
while curl -s "http://127.0.0.1:$PORT/api/info" | grep -q '"done":false'; do sleep 0.1; done
t2=$(date +%s.%N)
cpu() { awk '{print ($14+$15)/100}' "/proc/$PID/stat"; }
rss() { awk '/VmRSS|VmHWM/{printf "%s %d MB ", $1, $2/1024}' "/proc/$PID/status"; }
info=$(curl -s "http://127.0.0.1:$PORT/api/info" | grep -o '"checkpoints":[0-9]*')
echo "$BIN $*: served after $(echo "$t1-$t0" | bc) s, indexed after $(echo "$t2-$t0" | bc) s, $info, cpu $(cpu) s; $(rss)"
FMT='%{time_total} s'
[ -n "${PX:-}" ] && FMT='%{time_total} s, %{size_download} B'
for s in $STARTS; do
  f=$(echo "$s*1000000000/1" | bc); t=$((f + 1000000000)); c0=$(cpu)
  w=$(curl -s -o /dev/null -w "$FMT" "http://127.0.0.1:$PORT/api/chains?from=$f&to=$t${PX:+&px=$PX}")
  echo "  1 s range from $s s: wall $w, server cpu $(echo "$(cpu)-$c0" | bc) s"
done
echo "  after the ranges: $(rss)"
