#!/usr/bin/env bash
# Throttling records (issue #23): paired pipe-benchmark rounds, untraced / recorder BEFORE /
# recorder AFTER (lazy, system-wide), then bpf_stats runs of each (all-program ns per run).
# Usage: sudo benches/throttle_cost.sh ROUNDS BEFORE_BIN AFTER_BIN  (LOOPS=200000)
set -u
ROUNDS=${1:-6}; BEFORE=$2; AFTER=$3; LOOPS=${LOOPS:-200000}
exec 9>/tmp/chainrec-cpu.lock
pipe() { taskset -c 0 perf bench sched pipe -T -l $LOOPS 2>/dev/null | awk '/ops\/sec/ {print $1}'; }
traced() { local bin=$1 f=/tmp/thrb.$$.zst; "$bin" record -q -o $f & local p=$!; while [ ! -s $f ]; do sleep 0.05; done; sleep 0.5; local s; s=$(pipe); kill -INT $p; wait $p; rm -f $f; echo $s; }
for r in $(seq 1 $ROUNDS); do
  flock 9
  u=$(pipe); b=$(traced $BEFORE); a=$(traced $AFTER)
  flock -u 9
  python3 -c "print('round $r untraced $u before %.3f after %.3f' % ($b/$u, $a/$u))"
done
flock 9
sysctl -qw kernel.bpf_stats_enabled=1
for bin in $BEFORE $AFTER $BEFORE $AFTER; do
  f=/tmp/thrb.$$.zst; "$bin" record -q -o $f --summary-json $f.json & p=$!; while [ ! -s $f ]; do sleep 0.05; done; sleep 0.5
  pipe >/dev/null
  kill -INT $p; wait $p; rm -f $f
  python3 -c "
import json; j=json.load(open('$f.json'))
print('$bin', 'bpf ns/run %.1f' % (j['bpf_run_time_ns']/j['bpf_run_cnt']), 'bpf ns/event %.1f' % (j['bpf_run_time_ns']/j['events']), 'runs', j['bpf_run_cnt'], 'events', j['events'])"
done
sysctl -qw kernel.bpf_stats_enabled=0
flock -u 9
