#!/usr/bin/env bash
# On-CPU samples, chainrec against perf, side by side (issue 15): both sample the whole
# system at the same time, at the same frequency, with the same event (cpu-clock), while a
# CPU mix runs; then the per-comm split of the samples is compared. Not a timing: both see
# the same seconds, so the shares agree up to sampling noise (about 1/sqrt(samples)).
#
# Also measures what sampling costs: the sample program's BPF run time per sample
# (kernel.bpf_stats_enabled) times the samples per second, as a share of the machine's CPU
# time (the perf_event interrupt itself is the same for any sampler).
#
#   sudo benches/oncpu_vs_perf.sh                 # 20 s at 49 Hz
#   SECS=60 FREQ=99 OUT=/tmp/ovp sudo benches/oncpu_vs_perf.sh
#
# Needs root, perf (Debian linux-perf) and a release build (CHAINREC=path overrides).
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${SECS:-20}
FREQ=${FREQ:-49}
OUT=${OUT:-$(mktemp -d /tmp/oncpu-vs-perf.XXXX)}
CHAINREC=${CHAINREC:-target/release/chainrec}
mkdir -p "$OUT"
[ -x "$CHAINREC" ] || cargo build --release -q
command -v perf >/dev/null || { echo "needs perf (apt-get install linux-perf)" >&2; exit 1; }

# The CPU mix: a compressor, a hash, and chainrec's chain workload (cr-* threads).
mix() {
    timeout $((SECS + 4)) sh -c 'head -c 4000000000 /dev/urandom | gzip -1 > /dev/null' &
    timeout $((SECS + 4)) sh -c 'while :; do head -c 200000000 /dev/zero | sha256sum > /dev/null; done' &
    "$CHAINREC" workload --duration $((SECS + 4)) > /dev/null &
    wait
}
mix &
MIX=$!
sleep 1

old_stats=$(sysctl -n kernel.bpf_stats_enabled)
sysctl -q kernel.bpf_stats_enabled=1
perf record -q -a -g -F "$FREQ" -e cpu-clock -o "$OUT/perf.data" -- sleep "$SECS" 2> "$OUT/perf.log" &
PERF=$!
"$CHAINREC" record -q -o "$OUT/trace.zst" --duration "$SECS" --sample-freq "$FREQ" \
    --summary-json "$OUT/summary.json" > "$OUT/record.log" 2>&1 &
REC=$!
# The sample program's run time, read while it is still loaded.
sleep $((SECS - 1))
bpftool prog show --json > "$OUT/progs-end.json"
wait $PERF || { cat "$OUT/perf.log" >&2; exit 1; }
wait $REC || { cat "$OUT/record.log" >&2; exit 1; }
sysctl -q kernel.bpf_stats_enabled="$old_stats"
kill $MIX 2>/dev/null || true
wait 2>/dev/null || true

perf script -i "$OUT/perf.data" -F comm 2> /dev/null | sed 's/^ *//; s/ *$//' |
    sort | uniq -c | awk '{c=$1; $1=""; sub(/^ /,""); print $0 "\t" c}' > "$OUT/perf.comms"
"$CHAINREC" oncpu --unit ns "$OUT/trace.zst" 2> "$OUT/oncpu.log" |
    awk -v period=$((1000000000 / FREQ)) '{
        w = $NF; line = $0; sub(/ [0-9]+$/, "", line); split(line, f, ";");
        n[f[1]] += w / period } END { for (c in n) printf "%s\t%.0f\n", c, n[c] }' \
    > "$OUT/chainrec.comms"

python3 - "$OUT" "$FREQ" <<'EOF'
import json, sys
out, freq = sys.argv[1], int(sys.argv[2])
def load(p):
    d = {}
    for line in open(p):
        c, n = line.rstrip("\n").rsplit("\t", 1)
        d[c] = d.get(c, 0) + float(n)
    return d
perf, cr = load(f"{out}/perf.comms"), load(f"{out}/chainrec.comms")
tp, tc = sum(perf.values()), sum(cr.values())
print(f"samples: perf {tp:.0f}, chainrec {tc:.0f} ({tc / tp:.3f} of perf's)")
print(f"{'comm':<20} {'perf':>7} {'share':>7} {'chainrec':>8} {'share':>7} {'ratio':>6}")
worst = 0.0
for c in sorted(set(perf) | set(cr), key=lambda c: -perf.get(c, 0)):
    p, q = perf.get(c, 0), cr.get(c, 0)
    sp, sq = p / tp, q / tc
    if max(sp, sq) < 0.05:
        continue
    ratio = sq / sp if sp else float("inf")
    worst = max(worst, abs(ratio - 1))
    print(f"{c[:20]:<20} {p:7.0f} {sp:7.1%} {q:8.0f} {sq:7.1%} {ratio:6.3f}")
print(f"largest share difference among comms with >= 5 % of the samples: {worst:.1%}")
# Cost: sample program run time per sample, and its share of the machine's CPU time.
progs = {p.get("name"): p for p in json.load(open(f"{out}/progs-end.json"))}
s = progs.get("on_sample", {})
if s.get("run_cnt"):
    ns = s["run_time_ns"] / s["run_cnt"]
    cpus = json.load(open(f"{out}/summary.json")).get("cpus") or 2
    share = ns * freq * cpus / (cpus * 1e9)
    print(f"on_sample: {s['run_cnt']} runs, {ns:.0f} ns per sample; at {freq} Hz per CPU "
          f"that is {share:.4%} of each CPU")
EOF
echo "files in $OUT"
