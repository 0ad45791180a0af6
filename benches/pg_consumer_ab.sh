#!/bin/bash
# Consumer CPU of `chainrec record` while pgbench runs, two builds paired (A B A B ...).
# Needs a PostgreSQL cluster with the cr_bench database (benches/suite.sh's pgbench workload
# sets it up). Run as root.
#   benches/pg_consumer_ab.sh OLD_BINARY NEW_BINARY [PAIRS=3] [SECS=10]
# Prints, per run: pgbench tps, the consumer CPU line of the record summary, stacks unwound.
set -euo pipefail
A=$1 B=$2 PAIRS=${3:-3} SECS=${4:-10}
OUT=${OUT:-$(mktemp -d /tmp/pg-consumer-XXXX)}
one() {
    local bin=$1 tag=$2
    "$bin" record -o "$OUT/$tag.zst" >"$OUT/$tag.log" 2>&1 &
    local rec=$!
    sleep 2
    su postgres -c "pgbench -c 2 -j 2 -T $SECS cr_bench" 2>&1 | grep -E "^tps" | sed "s/^/$tag /"
    kill -INT $rec
    wait $rec
    grep -o "consumer CPU [0-9.]* s ([0-9.]* % of a core)" "$OUT/$tag.log" | sed "s/^/$tag /"
    grep -o "[0-9]* unwound from stack copies" "$OUT/$tag.log" | sed "s/^/$tag /"
}
for i in $(seq "$PAIRS"); do
    one "$A" "A$i"
    one "$B" "B$i"
done
echo "logs and traces: $OUT"
