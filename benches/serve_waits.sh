#!/usr/bin/env bash
# `chainrec serve`: a frame's waits (/api/waits) on 1 s ranges, as the page asks for them
# after a click: for each range start, the heaviest root frame of the range's graph and its
# heaviest child; wall time and server CPU (utime+stime of the serve process) per request;
# then /api/info asked while a waits request runs (docs/BENCHMARKS.md session 21).
#
# Usage: benches/serve_waits.sh BIN PORT [TRACE] [STARTS_S]
#   e.g. benches/serve_waits.sh target/release/chainrec 7491 /tmp/busy20m.zst "1 8 16"
set -u
BIN=$1; PORT=$2; T=${3:-/tmp/busy20m.zst}; STARTS=${4:-1 8 16}
$BIN serve -q --port $PORT $T > /dev/null 2>&1 &
pid=$!
tmp=$(mktemp -d)
trap 'kill $pid 2>/dev/null; rm -rf "$tmp"' EXIT
cpu() { awk '{print ($14+$15)/100}' /proc/$pid/stat; }
for i in $(seq 600); do
  curl -s "http://127.0.0.1:$PORT/api/info" 2>/dev/null | grep -q '"done":true' && break; sleep 1; done
echo "indexed after ${i}s; rss $(grep VmRSS /proc/$pid/status)"
for s in $STARTS; do
  from=$((s*1000000000)); to=$(((s+1)*1000000000))
  # the heaviest root frame and one of its children from the range's graph
  curl -s "http://127.0.0.1:$PORT/api/chains?from=$from&to=$to" > "$tmp/chains.json"
  read root child < <(python3 "$(dirname "$0")/heaviest_frames.py" "$tmp/chains.json")
  for f in $root $child; do
    c0=$(cpu); t0=$(date +%s.%N)
    curl -s "http://127.0.0.1:$PORT/api/waits?frame=$f&from=$from&to=$to&limit=10" > $tmp/waits.json
    t1=$(date +%s.%N)
    m=$(python3 -c "import json;d=json.load(open('$tmp/waits.json'));print(d.get('matched_waits'), len(d.get('waits',[])), d.get('message',''))")
    echo "  ${s}s frame ${f:0:40}: wall $(echo "$t1-$t0"|bc) s, server cpu $(echo "$(cpu)-$c0"|bc) s, matched/returned $m"
  done
done
# concurrency: info while a waits request runs
curl -s "http://127.0.0.1:$PORT/api/waits?frame=$root&from=$from&to=$to" >/dev/null &
waits=$!
sleep 0.2; t0=$(date +%s.%N); curl -s "http://127.0.0.1:$PORT/api/info" >/dev/null; t1=$(date +%s.%N)
echo "  /api/info during a waits request: $(echo "$t1-$t0"|bc) s"
wait $waits
echo "  rss after: $(grep VmRSS /proc/$pid/status)"
