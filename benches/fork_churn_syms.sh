#!/bin/sh
# User symbols under fork churn (docs/BENCHMARKS.md, "User symbols from the mapping history"):
# short-lived processes (true, gzip, ls), hackbench-like process messaging (perf bench), tar | gzip,
# recorded with OLD and NEW alternately; prints the consumer CPU, max RSS and the unnamed share of
# the workload's user symbols. Root; run from the checkout after
#   cargo build --release && cargo build --release -p chainrec-symbols --example unresolved
# Traces land in the current directory (fc-*.zst).
W='for i in $(seq 300); do /bin/true; echo hi | gzip -c >/dev/null; ls /usr >/dev/null; done; perf bench sched messaging -p -g 2 -l 300 >/dev/null; tar cf - /usr/share/doc 2>/dev/null | gzip -1 >/dev/null'
EX=${EX:-target/release/examples/unresolved}
for round in 1 2; do
for b in ${OLD:?OLD=path of the chainrec binary to compare with} ${NEW:-target/release/chainrec}; do
  n=$(basename $b)-$round
  /usr/bin/time -f "maxrss %M KiB" $b record -q -o fc-$n.zst --summary-json fc-$n.json -- sh -c "$W" 2> fc-$n.err
  echo "== $n: $(python3 -c "import json; j=json.load(open('fc-$n.json')); print('consumer cpu %.2f s in %.1f s' % (j['consumer_cpu_s'], j['duration_s']))") $(grep maxrss fc-$n.err)"
  $EX fc-$n.zst sh true gzip ls perf sched-messaging tar | grep -v "^  "
done; done
