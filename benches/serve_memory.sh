#!/usr/bin/env bash
# `chainrec serve`: each /api/chains request's peak RSS (VmHWM, reset before it through
# /proc/PID/clear_refs) and the RSS after it, for the requests a page makes: three 1 s
# ranges, a differential view, the whole trace (docs/BENCHMARKS.md, session 24); then a
# frame's waits and a critical path of three ranges (session 25).
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
# A frame's waits (every wait: frame=) and the critical path of each range's longest wait,
# as the page asks after a click (session 25: one fold reused per wait, critical paths
# that skip ahead keep an earlier run's node table while its records need it).
for s in 1 8 16; do
  from=$((s*1000000000)); to=$(((s+1)*1000000000))
  echo 5 > "/proc/$PID/clear_refs"
  W=$(mktemp); I=$(mktemp)
  curl -s "http://127.0.0.1:$PORT/api/waits?frame=&from=$from&to=$to&limit=10" > "$W"
  echo "  [waits $from..$to] $(mem)"
  curl -s "http://127.0.0.1:$PORT/api/info" > "$I"
  read -r tid cfrom cto < <(python3 -c '
import json,sys
d=json.load(open(sys.argv[1])); i=json.load(open(sys.argv[2])); w=d["waits"][0]["wait"]
start=i["start_ns"]; dur=i["duration_ns"]
end=w["switch_in_ns"] if w.get("switch_in_ns") is not None else start+dur
m=min(10**9,max(10**6,round((end-w["switch_out_ns"])/2)))
print(w["tid"], max(0,w["switch_out_ns"]-start-m), min(dur,end-start+m))' "$W" "$I")
  rm -f "$W" "$I"
  echo 5 > "/proc/$PID/clear_refs"
  curl -s -o /dev/null "http://127.0.0.1:$PORT/api/critpath?tid=$tid&from=$cfrom&to=$cto"
  echo "  [critpath tid $tid $cfrom..$cto] $(mem)"
done
sleep 3
echo "  3 s later: $(mem)"
