#!/usr/bin/env bash
# Cost of on-CPU sampling per rate (docs/BENCHMARKS.md, "On-CPU sample rate"): record SECS
# seconds of whatever the machine runs at each rate, with kernel.bpf_stats_enabled=1; the
# `on_sample` program's run count and time from bpftool just before the stop; consumer CPU,
# trace bytes, events and samples from --summary-json. Prints one TSV row per config.
#
#   sudo benches/sample_rate.sh                       # nosamples 49 99 499 997, 10 s each
#   CONFIGS="99 997" SECS=20 sudo benches/sample_rate.sh
#
# Needs root, bpftool, python3 and a release build (or CHAINREC=/path/to/chainrec).
set -euo pipefail
HERE=$(cd "$(dirname "$0")/.." && pwd)
CHAINREC=${CHAINREC:-$HERE/target/release/chainrec}
SECS=${SECS:-10}
OUT=${OUT:-$(mktemp -d /tmp/chainrec-rate.XXXXXX)}
mkdir -p "$OUT"
sysctl -qw kernel.bpf_stats_enabled=1
printf "config\tsamples\tbytes\tevents\tduration_s\tconsumer_cpu_s\ton_sample_cnt\ton_sample_ns\tall_bpf_ns\n"
for cfg in ${CONFIGS:-nosamples 49 99 499 997}; do
    f=$OUT/$cfg.zst
    rm -f "$f" "$f.json"
    if [ "$cfg" = nosamples ]; then a=(--no-samples); else a=(--sample-freq "$cfg"); fi
    "$CHAINREC" record -q -o "$f" "${a[@]}" --summary-json "$f.json" 2>"$f.log" &
    pid=$!
    sleep "$SECS"
    bpftool prog show -j >"$f.progs.json"
    kill -INT $pid
    wait $pid || true
    python3 - "$f.json" "$f.progs.json" "$cfg" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
progs = json.load(open(sys.argv[2]))
cnt = ns = 0
for p in progs:
    if p.get("name") == "on_sample" and "run_cnt" in p:
        cnt += p["run_cnt"]; ns += p.get("run_time_ns", 0)
s = (j.get("samples") or {}).get("samples", 0)
print(sys.argv[3], s, j["bytes"], j["events"], round(j["duration_s"], 3), j["consumer_cpu_s"], cnt, ns, j["bpf_run_time_ns"], sep="\t")
PY
    rm -f "$f"
done
sysctl -qw kernel.bpf_stats_enabled=0
