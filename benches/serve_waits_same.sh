#!/usr/bin/env bash
# `chainrec serve` of two builds: their /api/waits answers byte for byte (every wait, the
# range's heaviest root frame and its heaviest child; limit 50) for 1 s ranges at each
# start (docs/BENCHMARKS.md session 25: a change to /api/waits that must not change it).
#
# Usage: benches/serve_waits_same.sh BIN_A BIN_B TRACE PORT [STARTS_S]
#   e.g. benches/serve_waits_same.sh /tmp/chainrec-base target/release/chainrec /tmp/busy20m.zst 7493 "1 8 16"
set -u
A=$1; B=$2; T=$3; PORT=$4; STARTS=${5:-1 8 16}
out=$(mktemp -d)
for which in A B; do
  bin=${!which}
  $bin serve -q --port $PORT $T > /dev/null 2>&1 &
  pid=$!
  for i in $(seq 600); do curl -s "http://127.0.0.1:$PORT/api/info" 2>/dev/null | grep -q '"done":true' && break; sleep 1; done
  for s in $STARTS; do
    from=$((s*1000000000)); to=$(((s+1)*1000000000))
    curl -s "http://127.0.0.1:$PORT/api/chains?from=$from&to=$to" > $out/chains-$which-$s.json
    read root child < <(python3 "$(dirname "$0")/heaviest_frames.py" $out/chains-A-$s.json)
    for f in "" $root $child; do
      curl -s "http://127.0.0.1:$PORT/api/waits?frame=$f&from=$from&to=$to&limit=50" > "$out/w-$which-$s-$(echo "$f" | md5sum | cut -c1-8).json"
    done
  done
  kill $pid; wait $pid 2>/dev/null
done
n=0; bad=0
for f in $out/w-A-*; do g=${f/w-A-/w-B-}; n=$((n+1)); cmp -s $f $g || { bad=$((bad+1)); echo "DIFFERENT: $f"; }; done
echo "$n answers compared, $bad different; sizes: $(cat $out/w-A-* | wc -c) bytes"
rm -rf $out
