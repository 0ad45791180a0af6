#!/usr/bin/env bash
# Recorder overhead: chainrec record (each stack mode) vs perf, on a context-switch-heavy
# workload. Paired rounds: each round runs the workload untraced, then under every
# tracer, so each ratio compares runs a few seconds apart (this machine is shared and
# noisy). Reports the median ratio over the rounds.
#
#   sudo benches/record_vs_perf.sh                 # 6 rounds, 200k loops
#   ROUNDS=8 LOOPS=400000 sudo benches/record_vs_perf.sh
#   CONFIGS="untraced lazy eager" sudo benches/record_vs_perf.sh
#   RT=1 sudo benches/record_vs_perf.sh         # workload SCHED_FIFO (busy shared machine)
#
# Needs: root, perf, taskset, python3, a release build (cargo build --release) or
# CHAINREC=/path/to/chainrec. tracefs is mounted if missing (perf needs it).
# Output: a table on stdout; raw per-run rows in $OUT/runs.tsv.
set -euo pipefail

ROUNDS=${ROUNDS:-6}
LOOPS=${LOOPS:-200000}
CONFIGS=${CONFIGS:-"untraced lazy eager none perf-sched-g perf-record"}
HERE=$(cd "$(dirname "$0")/.." && pwd)
CHAINREC=${CHAINREC:-$HERE/target/release/chainrec}
OUT=${OUT:-$(mktemp -d /tmp/chainrec-bench.XXXXXX)}
mkdir -p "$OUT"
WORKLOAD=(taskset -c 0 perf bench sched pipe -T -l "$LOOPS")
# RT=1: run the workload as SCHED_FIFO so that other load on a shared machine cannot
# preempt it on CPU 0 (RT throttling still leaves 5 % to others); tracer costs stay in.
if [ "${RT:-0}" = 1 ]; then WORKLOAD=(taskset -c 0 chrt -f 50 perf bench sched pipe -T -l "$LOOPS"); fi

die() { echo "record_vs_perf: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root (BPF, perf system-wide)"
[ -x "$CHAINREC" ] || die "no chainrec binary at $CHAINREC (cargo build --release, or set CHAINREC)"
command -v perf >/dev/null || die "perf not installed (apt-get install linux-perf)"
command -v python3 >/dev/null || die "python3 needed for the statistics"
if ! mountpoint -q /sys/kernel/tracing; then
    mount -t tracefs nodev /sys/kernel/tracing || die "cannot mount tracefs"
fi
sysctl -qw kernel.bpf_stats_enabled=0 || true

# ops/sec of one workload run
run_workload() {
    "${WORKLOAD[@]}" 2>&1 | awk '/ops\/sec/ {print $1}'
}

wait_for_file() { # path
    for _ in $(seq 1 200); do [ -s "$1" ] && return 0; sleep 0.05; done
    return 1
}

# run one config; prints "ops bytes events consumer_cpu_s duration_s lost"
run_config() { # config round
    local cfg=$1 r=$2 f ops pid
    case $cfg in
    untraced)
        ops=$(run_workload)
        echo "$ops 0 0 0 0 0"
        ;;
    lazy | eager | none)
        f=$OUT/$cfg.$r.zst
        rm -f "$f" "$f.json"
        "$CHAINREC" record -q -o "$f" --stacks "$cfg" --summary-json "$f.json" 2>"$f.log" &
        pid=$!
        wait_for_file "$f" || die "chainrec did not start: $(cat "$f.log")"
        sleep 1 # attach + kallsyms snapshot done, idle state recorded
        ops=$(run_workload)
        kill -INT $pid
        wait $pid || die "chainrec failed: $(cat "$f.log")"
        python3 - "$f.json" "$ops" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
l = j["lost"]
lost = l["ringbuf_full"] + l["out_of_order"] + l["malformed"]
print(sys.argv[2], j["bytes"], j["events"], j["consumer_cpu_s"], j["duration_s"], lost)
EOF
        rm -f "$f"
        ;;
    perf-sched-g | perf-record)
        f=$OUT/$cfg.$r.data
        rm -f "$f"
        if [ "$cfg" = perf-sched-g ]; then
            perf sched record -g -o "$f" >"$f.log" 2>&1 &
        else
            perf record -a -e sched:sched_switch -e sched:sched_waking -o "$f" >"$f.log" 2>&1 &
        fi
        pid=$!
        wait_for_file "$f" || die "perf did not start: $(cat "$f.log")"
        sleep 1
        ops=$(run_workload)
        kill -INT $pid
        wait $pid || true
        local bytes events=0
        bytes=$(stat -c %s "$f")
        if [ "$r" = 1 ]; then # counting samples is slow; once is enough
            events=$(perf script -i "$f" -F event 2>/dev/null | wc -l)
        fi
        echo "$ops $bytes $events 0 0 0"
        rm -f "$f"
        ;;
    *) die "unknown config $cfg" ;;
    esac
}

echo "# uptime before: $(uptime)" | tee "$OUT/info.txt"
echo "# workload: ${WORKLOAD[*]}; rounds: $ROUNDS; chainrec: $CHAINREC" | tee -a "$OUT/info.txt"
printf "round\tconfig\tops_per_s\tbytes\tevents\tconsumer_cpu_s\tduration_s\tlost\n" >"$OUT/runs.tsv"
for r in $(seq 1 "$ROUNDS"); do
    # odd rounds in the given order, even rounds reversed: slow drifts of the machine's
    # load then hit every config from both sides
    order=$CONFIGS
    if [ $((r % 2)) = 0 ]; then order=$(echo "$CONFIGS" | tr ' ' '\n' | tac | tr '\n' ' '); fi
    for cfg in $order; do
        read -r ops bytes events cpu dur lost < <(run_config "$cfg" "$r")
        printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n" "$r" "$cfg" "$ops" "$bytes" "$events" "$cpu" "$dur" "$lost" >>"$OUT/runs.tsv"
        echo "round $r $cfg: $ops ops/s" >&2
    done
done

# BPF cost per event: one extra lazy and eager run each with kernel.bpf_stats_enabled=1
# (the stats themselves add a little, so they are not on during the timed rounds).
BPFNS=$OUT/bpf_ns.tsv
printf "config\tbpf_run_time_ns\tbpf_run_cnt\tevents\n" >"$BPFNS"
sysctl -qw kernel.bpf_stats_enabled=1
for cfg in lazy eager none; do
    f=$OUT/stats.$cfg.zst
    "$CHAINREC" record -q -o "$f" --stacks "$cfg" --summary-json "$f.json" 2>"$f.log" &
    pid=$!
    wait_for_file "$f"
    sleep 1
    run_workload >/dev/null
    kill -INT $pid
    wait $pid
    python3 - "$f.json" "$cfg" >>"$BPFNS" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
print(sys.argv[2], j["bpf_run_time_ns"], j["bpf_run_cnt"], j["events"], sep="\t")
EOF
    rm -f "$f"
done
sysctl -qw kernel.bpf_stats_enabled=0
echo "# uptime after: $(uptime)" | tee -a "$OUT/info.txt"

python3 - "$OUT/runs.tsv" "$BPFNS" <<'EOF'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
bpf = {r["config"]: r for r in csv.DictReader(open(sys.argv[2]), delimiter="\t")}
by_round = {}
for r in rows:
    by_round.setdefault(r["round"], {})[r["config"]] = r
configs = []
for r in rows:
    if r["config"] not in configs:
        configs.append(r["config"])
base = [float(v["untraced"]["ops_per_s"]) for v in by_round.values() if "untraced" in v]
print(f"untraced: median {statistics.median(base):.0f} ops/s over {len(base)} rounds "
      f"(min {min(base):.0f}, max {max(base):.0f})")
print("| config | median ratio | min..max ratio | bytes/event | consumer CPU % of a core | lost | BPF ns/event |")
print("|---|---|---|---|---|---|---|")
for c in configs:
    if c == "untraced":
        continue
    ratios, bpe, cpu, lost = [], [], [], 0
    for v in by_round.values():
        if c in v and "untraced" in v:
            x = v[c]
            ratios.append(float(x["ops_per_s"]) / float(v["untraced"]["ops_per_s"]))
            if int(x["events"]) > 0:
                bpe.append(int(x["bytes"]) / int(x["events"]))
            if float(x["duration_s"]) > 0:
                cpu.append(100 * float(x["consumer_cpu_s"]) / float(x["duration_s"]))
            lost += int(x["lost"])
    ns = ""
    if c in bpf and int(bpf[c]["events"]) > 0:
        ns = f"{int(bpf[c]['bpf_run_time_ns']) / int(bpf[c]['events']):.0f}"
    print(f"| {c} | {statistics.median(ratios):.3f} | {min(ratios):.3f}..{max(ratios):.3f} | "
          f"{statistics.median(bpe):.2f} | " + (f"{statistics.median(cpu):.1f}" if cpu else "n/a") +
          f" | {lost if c in ('lazy', 'eager', 'none') else 'n/a'} | {ns or 'n/a'} |")
EOF
echo "raw runs: $OUT/runs.tsv, $BPFNS"
