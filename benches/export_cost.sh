#!/bin/bash
# Export cost (sessions 15, 16): before (main copy) and after (a branch), interleaved per command;
# CPU seconds = user + sys from /usr/bin/time.
# Usage: BEFORE=old-chainrec AFTER=new-chainrec TRACES=/dir benches/export_cost.sh ROUNDS
# TRACES holds busy5m.zst (chainrec synth --scenario busy-server --events 5000000) and
# real.zst (a real recording).
o=${OUT:-/tmp/export_cost}; mkdir -p $o
declare -A BIN=([before]=${BEFORE:?} [after]=${AFTER:?})
m() { local tag=$1; shift; /usr/bin/time -o $o/t -f "%e %U %S %M" "$@" >/dev/null 2>$o/err || { echo "FAIL $tag"; tail -3 $o/err; }
  echo "$tag $(awk '{printf "wall %.2f cpu %.2f rss %d", $1, $2+$3, $4/1024}' $o/t)"; }
for r in $(seq 1 ${1:-1}); do
for T in busy5m real; do
  for cmd in chains export3 pprof+parquet pprof parquet perfetto; do
    for v in before after; do
      B=${BIN[$v]}; f=${TRACES:?}/$T.zst
      case $cmd in
        chains) m "$r $T $cmd $v" $B chains $f ;;
        export3) m "$r $T $cmd $v" $B export $f -q --pprof $o/p.pb.gz --parquet $o/w.parquet --perfetto $o/t.pftrace ;;
        pprof+parquet) m "$r $T $cmd $v" $B export $f -q --pprof $o/p.pb.gz --parquet $o/w.parquet ;;
        pprof) m "$r $T $cmd $v" $B export $f -q --pprof $o/p.pb.gz ;;
        parquet) m "$r $T $cmd $v" $B export $f -q --parquet $o/w.parquet ;;
        perfetto) m "$r $T $cmd $v" $B export $f -q --perfetto $o/t.pftrace ;;
      esac
    done
  done
done
done
