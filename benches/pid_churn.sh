#!/bin/bash
# Fork churn with PIDs wrapping (issue 23, item 0): record shell loops of /bin/true,
# hackbench (perf bench sched messaging) and tar | gzip for DURATION seconds with
# kernel.pid_max lowered to max(8192, live tasks + 4096) (restored on exit), then print,
# for each chainrec binary given, the share of the chain graph under [waker unknown], the
# longest wait against the trace length, and the waits that start at a dead switch-out.
#
#   benches/pid_churn.sh OUT_DIR DURATION RECORDER [ANALYZER...]
#
# RECORDER is a chainrec built with `record`; each ANALYZER (default: RECORDER) analyses the
# same trace, e.g. main's binary against a branch's. Needs root.
set -euo pipefail
out=${1:?OUT_DIR}
dur=${2:?DURATION}
rec=${3:?RECORDER}
shift 3
analyzers=("$@")
[ ${#analyzers[@]} -gt 0 ] || analyzers=("$rec")
mkdir -p "$out"

old_max=$(cat /proc/sys/kernel/pid_max)
live=$(ls -d /proc/[0-9]*/task/[0-9]* 2>/dev/null | wc -l)
new_max=$((live + 4096 > 8192 ? live + 4096 : 8192))
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    echo "$old_max" >/proc/sys/kernel/pid_max
}
trap cleanup EXIT
if [ "$new_max" -lt "$old_max" ]; then
    echo "$new_max" >/proc/sys/kernel/pid_max
fi
echo "pid_max $(cat /proc/sys/kernel/pid_max) (was $old_max; $live live tasks)"

"$rec" record -o "$out/churn.zst" --duration "$dur" &
rec_pid=$!
sleep 2
first_pid=$(cat /proc/sys/kernel/ns_last_pid)
for _ in 1 2; do
    (while :; do /bin/true; done) &
    pids+=($!)
done
(while :; do perf bench sched messaging -g 2 -l 200 >/dev/null 2>&1; done) &
pids+=($!)
(while :; do tar cf - /usr/share/doc 2>/dev/null | gzip -1 >/dev/null; done) &
pids+=($!)
wait "$rec_pid"
for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
echo "last pid $(cat /proc/sys/kernel/ns_last_pid) (first $first_pid)"

for a in "${analyzers[@]}"; do
    echo "== $a"
    "$a" chains "$out/churn.zst" --unit ns 2>"$out/chains.err" |
        awk '{ w = $NF; t += w; if ($0 ~ /\[waker unknown\]/) u += w }
             END { printf "[waker unknown] %.0f of %.0f ns = %.3f %% of the chain graph\n", u, t, 100 * u / t }'
    grep -E "threads ended|waits without" "$out/chains.err" || true
    "$a" waits "$out/churn.zst" --json --no-dedup |
        python3 -c '
import json, sys
n = dead = 0
longest = (0, None)
first = last = None
for line in sys.stdin:
    w = json.loads(line)
    n += 1
    if w["state"] & 0xb0:
        dead += 1
    end = w["switch_in_ns"] or w["wake_ns"] or w["switch_out_ns"]
    if end - w["switch_out_ns"] > longest[0]:
        longest = (end - w["switch_out_ns"], w["comm"], w["state_str"])
print(f"{n} waits; {dead} start at a dead switch-out; longest {longest[0] / 1e9:.3f} s ({longest[1]}, state {longest[2]})")
'
    "$a" info "$out/churn.zst" | grep -E "^  (duration|events) "
done
