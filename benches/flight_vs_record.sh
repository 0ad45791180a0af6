#!/usr/bin/env bash
# Flight recorder vs plain recording on the context-switch worst case (#16: "flight mode
# costs no more than record on the pipe benchmark"). Paired rounds: untraced, `record -o
# FILE`, `record --flight 30s`, odd rounds in that order and even rounds reversed; ratios
# against the same round's untraced run; medians over the rounds.
#
#   sudo benches/flight_vs_record.sh                # 6 rounds, 200k loops
#   ROUNDS=8 LOOPS=400000 sudo benches/flight_vs_record.sh
#
# Needs: root, perf, taskset, python3, a release build or CHAINREC=/path/to/chainrec.
set -euo pipefail
ROUNDS=${ROUNDS:-6}
LOOPS=${LOOPS:-200000}
HERE=$(cd "$(dirname "$0")/.." && pwd)
CHAINREC=${CHAINREC:-$HERE/target/release/chainrec}
OUT=${OUT:-$(mktemp -d /tmp/chainrec-flight.XXXXXX)}
WORKLOAD=(taskset -c 0 perf bench sched pipe -T -l "$LOOPS")
die() { echo "flight_vs_record: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root (BPF)"
[ -x "$CHAINREC" ] || die "no chainrec binary at $CHAINREC (cargo build --release, or set CHAINREC)"
command -v perf >/dev/null || die "perf not installed (apt-get install linux-perf)"

run_workload() { "${WORKLOAD[@]}" 2>&1 | awk '/ops\/sec/ {print $1}'; }

# one config; prints "ops consumer_cpu_s duration_s lost peak_ring_bytes"
run_config() { # config round
    local cfg=$1 r=$2 ops pid args
    if [ "$cfg" = untraced ]; then echo "$(run_workload) 0 0 0 0"; return; fi
    rm -rf "$OUT/$cfg.$r"; mkdir -p "$OUT/$cfg.$r"
    case $cfg in
    record) args=(-o "$OUT/$cfg.$r/t.zst") ;;
    flight) args=(-o "$OUT/$cfg.$r/dump" --flight 30s) ;;
    esac
    "$CHAINREC" record -q "${args[@]}" --summary-json "$OUT/$cfg.$r/s.json" 2>"$OUT/$cfg.$r/log" &
    pid=$!
    for _ in $(seq 1 200); do grep -q . "$OUT/$cfg.$r/log" 2>/dev/null && break; [ -e "$OUT/$cfg.$r/t.zst" ] && break; sleep 0.05; done
    sleep 2 # loaded and attached (a flight recorder writes nothing to wait for)
    ops=$(run_workload)
    kill -INT $pid
    wait $pid || die "chainrec failed: $(cat "$OUT/$cfg.$r/log")"
    python3 - "$OUT/$cfg.$r/s.json" "$ops" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
l = j["lost"]
peak = (j.get("flight") or {}).get("peak_memory_bytes", 0)
print(sys.argv[2], j["consumer_cpu_s"], j["duration_s"], l["ringbuf_full"] + l["out_of_order"] + l["malformed"], peak)
PY
    rm -rf "$OUT/$cfg.$r"
}

CONFIGS="untraced record flight"
printf "round\tconfig\tops\tcpu_s\tdur_s\tlost\tpeak\n" >"$OUT/runs.tsv"
for r in $(seq 1 "$ROUNDS"); do
    order=$CONFIGS
    if [ $((r % 2)) = 0 ]; then order=$(echo "$CONFIGS" | tr ' ' '\n' | tac | tr '\n' ' '); fi
    for cfg in $order; do
        read -r ops cpu dur lost peak < <(run_config "$cfg" "$r")
        printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\n" "$r" "$cfg" "$ops" "$cpu" "$dur" "$lost" "$peak" >>"$OUT/runs.tsv"
        echo "round $r $cfg: $ops ops/s" >&2
    done
done
python3 - "$OUT/runs.tsv" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
rounds = {}
for r in rows:
    rounds.setdefault(r["round"], {})[r["config"]] = r
print("| config | median ratio to untraced | min..max | consumer CPU % of a core | lost | peak ring memory |")
print("|---|---|---|---|---|---|")
for c in ["record", "flight"]:
    ratios = [float(v[c]["ops"]) / float(v["untraced"]["ops"]) for v in rounds.values()]
    cpu = [100 * float(v[c]["cpu_s"]) / float(v[c]["dur_s"]) for v in rounds.values()]
    lost = sum(int(v[c]["lost"]) for v in rounds.values())
    peak = max(int(v[c]["peak"]) for v in rounds.values())
    print(f"| {c} | {statistics.median(ratios):.3f} | {min(ratios):.3f}..{max(ratios):.3f} | "
          f"{statistics.median(cpu):.1f} | {lost} | " + (f"{peak / 2**20:.1f} MiB" if peak else "n/a") + " |")
fr = [float(v["flight"]["ops"]) / float(v["record"]["ops"]) for v in rounds.values()]
print(f"flight / record, paired: median {statistics.median(fr):.3f} (min {min(fr):.3f}, max {max(fr):.3f})")
PY
echo "raw runs: $OUT/runs.tsv"
