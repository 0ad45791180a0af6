#!/usr/bin/env bash
# `chainrec serve`: each /api/chains request's peak RSS (VmHWM, reset before it through
# /proc/PID/clear_refs) and the RSS after it, for the requests a page makes: three 1 s
# ranges, a differential view, the whole trace (docs/BENCHMARKS.md, session 24).
#
# Usage: benches/serve_memory.sh BIN TRACE PORT [PX]
#   PX: the page's width for px= (empty: no px=, every frame as before session 24)
#   e.g. benches/serve_memory.sh target/release/chainrec /tmp/busy20m.zst 7490 1165
set -euo pipefail
BIN=$1 TRACE=$2 PORT=$3 PX=${4:-}
"$BIN" serve --port "$PORT" -q "$TRACE" 2>/dev/null &
PID=$!
trap 'kill $PID 2>/dev/null || true' EXIT
until curl -s -o /dev/null "http://127.0.0.1:$PORT/api/info"; do sleep 0.1; done
while curl -s "http://127.0.0.1:$PORT/api/info" | grep -q '"done":false'; do sleep 0.2; done
mem() { awk '/VmHWM|VmRSS/{printf "%s %d MB ", $1, $2/1024}' "/proc/$PID/status"; }
echo "$BIN px=$PX: indexed: $(mem)"
P=${PX:+&px=$PX}
for q in "from=1000000000&to=2000000000" "from=8000000000&to=9000000000" "from=16000000000&to=17000000000" \
         "from=8000000000&to=9000000000&base_from=1000000000&base_to=2000000000" "all=1"; do
  echo 5 > "/proc/$PID/clear_refs"
  qs=${q#all=1}
  curl -s -o /dev/null -w "  [${qs:-whole trace}] %{time_total} s %{size_download} B: " \
    "http://127.0.0.1:$PORT/api/chains?$qs$P"
  echo "$(mem)"
done
