#!/usr/bin/env bash
# The explorer's heat-map colour scale on a trace: how much of the scale the cells between
# the 10th and 90th percentile span, under the page's percentile scale (crates/explore/assets
# app.js `S.intensity`: rank among the distinct non-empty values, the outer 5 % at the ends)
# and under the log scale it replaced (docs/BENCHMARKS.md, session 21).
#
# Usage: benches/heat_span.sh BIN TRACE [PORT]
set -euo pipefail
BIN=$1 TRACE=$2 PORT=${3:-7495}
"$BIN" serve -q --port "$PORT" "$TRACE" >/dev/null 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null' EXIT
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$PORT/api/info" >/dev/null && break; sleep 0.2; done
curl -sf "http://127.0.0.1:$PORT/api/heatmap" | python3 -c '
import bisect, json, math, sys
h = json.load(sys.stdin)
cells = sorted(v for col in h["cells"] for v in col if v > 0)
d = sorted(set(cells))
n = len(d)
def pct(v):  # the page: S.intensity
    q = 1 if n == 1 else bisect.bisect_left(d, v) / (n - 1)
    return min(1, max(0.04, (q - 0.05) / 0.9))
log = lambda v: math.log1p(v) / math.log1p(h["max"])
at = lambda s, q: s[round(q * (len(s) - 1))]
print(h["columns"], "columns,", len(cells), "non-empty cells,", n, "distinct values")
for name, s in (("cells", cells), ("distinct values", d)):
    print(f"{name}: p10..p90 span, percentile scale {pct(at(s, .9)) - pct(at(s, .1)):.3f}, "
          f"log scale {log(at(s, .9)) - log(at(s, .1)):.3f}; median on the log scale {log(at(s, .5)):.3f}")
'
