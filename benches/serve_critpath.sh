#!/usr/bin/env bash
# `chainrec serve`: a wait's critical path (/api/critpath) as the page asks for it after a
# click on a wait card: for each range start, the longest wait of the range's heaviest root
# frame, its thread from the wait's switch-out minus a margin to its switch-in plus the
# margin (half the wait, 1 ms .. 1 s: app.js loadCritpath). Wall time and server CPU per
# request; beside it `chainrec critical-path -t TID --window` of the same range (the
# whole decode from the trace start) and whether the two give the same segments.
#
# Usage: benches/serve_critpath.sh BIN PORT [TRACE] [STARTS_S]
#   e.g. benches/serve_critpath.sh target/release/chainrec 7492 /tmp/busy20m.zst "1 8 16"
set -u
BIN=$1; PORT=$2; T=${3:-/tmp/busy20m.zst}; STARTS=${4:-1 8 16}
$BIN serve -q --port $PORT $T > /dev/null 2>&1 &
pid=$!
tmp=$(mktemp -d)
trap 'kill $pid 2>/dev/null; rm -rf "$tmp"' EXIT
cpu() { awk '{print ($14+$15)/100}' /proc/$pid/stat; }
for i in $(seq 600); do
  curl -s "http://127.0.0.1:$PORT/api/info" 2>/dev/null | grep -q '"done":true' && break; sleep 1; done
info=$(curl -s "http://127.0.0.1:$PORT/api/info")
start_ns=$(python3 -c "import json,sys;print(json.loads(sys.argv[1])['start_ns'])" "$info")
dur_ns=$(python3 -c "import json,sys;print(json.loads(sys.argv[1])['duration_ns'])" "$info")
echo "indexed after ${i}s; rss $(grep VmRSS /proc/$pid/status)"
for s in $STARTS; do
  from=$((s*1000000000)); to=$(((s+1)*1000000000))
  curl -s "http://127.0.0.1:$PORT/api/waits?frame=&from=$from&to=$to&limit=1" > "$tmp/waits.json"
  read tid cfrom cto < <(python3 - "$tmp/waits.json" "$start_ns" "$dur_ns" <<'PY'
import json,sys
d=json.load(open(sys.argv[1])); start=int(sys.argv[2]); dur=int(sys.argv[3])
w=d["waits"][0]["wait"]
end=w["switch_in_ns"] if w.get("switch_in_ns") is not None else start+dur
margin=min(10**9,max(10**6,round((end-w["switch_out_ns"])/2)))
print(w["tid"], max(0,w["switch_out_ns"]-start-margin), min(dur,end-start+margin))
PY
)
  c0=$(cpu); t0=$(date +%s.%N)
  curl -s "http://127.0.0.1:$PORT/api/critpath?tid=$tid&from=$cfrom&to=$cto" > $tmp/cp.json
  t1=$(date +%s.%N)
  c1=$(cpu)
  t2=$(date +%s.%N)
  win=$(python3 -c "print(f'{$cfrom/1e9:.9f}..{$cto/1e9:.9f}')")
  $BIN critical-path -t $tid --window "$win" --json $T > $tmp/cli.json 2>/dev/null
  t3=$(date +%s.%N)
  same=$(python3 -c "
import json
a=json.load(open('$tmp/cp.json')); b=json.load(open('$tmp/cli.json'))
print('same' if a.get('segments')==b.get('segments') else 'DIFFERENT', len(a.get('segments',[])))")
  echo "  ${s}s tid $tid ($cfrom..$cto ns): serve wall $(echo "$t1-$t0"|bc) s, cpu $(echo "$c1-$c0"|bc) s; critical-path CLI wall $(echo "$t3-$t2"|bc) s; segments $same"
done
echo "  rss after: $(grep VmRSS /proc/$pid/status)"
