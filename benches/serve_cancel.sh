#!/usr/bin/env bash
# `chainrec serve`: what a new selection costs while the previous one is still being
# computed, with and without the page's session id (a newer request of the same page
# cancels the running one: 409). Three 1 s ranges asked 0.3 s apart, as a user dragging
# over the heat map would; the wall time until the last range's graph is answered, the
# server CPU in all, and the status of each answer.
#
# Usage: benches/serve_cancel.sh BIN PORT [TRACE] [STARTS_S]
#   e.g. benches/serve_cancel.sh target/release/chainrec 7498 /tmp/busy20m.zst "4 8 12"
set -u
BIN=$1; PORT=$2; T=${3:-/tmp/busy20m.zst}; STARTS=${4:-4 8 12}
$BIN serve -q --port $PORT $T > /dev/null 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null' EXIT
cpu() { awk '{print ($14+$15)/100}' /proc/$pid/stat; }
for i in $(seq 600); do
  curl -s "http://127.0.0.1:$PORT/api/info" 2>/dev/null | grep -q '"done":true' && break; sleep 1; done
for mode in without with; do
  sess=""; [ $mode = with ] && sess="&session=bench$RANDOM"
  c0=$(cpu); t0=$(date +%s.%N); pids=(); n=0
  for s in $STARTS; do
    from=$((s*1000000000)); to=$(((s+1)*1000000000))
    curl -s -o /dev/null -w "%{http_code} " "http://127.0.0.1:$PORT/api/chains?from=$from&to=$to$sess" > /tmp/serve_cancel.$n &
    pids+=($!); n=$((n+1)); sleep 0.3
  done
  wait "${pids[@]}"
  t1=$(date +%s.%N)
  # the server may still be computing the ones nobody waits for: let it finish
  sleep 0.5; while [ "$(awk '{print $3}' /proc/$pid/stat)" = R ]; do sleep 0.1; done
  echo "$mode session: statuses $(cat /tmp/serve_cancel.* | tr -d '\n'), last answer after $(echo "$t1-$t0"|bc) s, server cpu $(echo "$(cpu)-$c0"|bc) s"
  rm -f /tmp/serve_cancel.*
done
