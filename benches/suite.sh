#!/usr/bin/env bash
# Recorder cost on a workload suite: chainrec record (lazy, eager, none) against
# `perf sched record -g`, `perf record --off-cpu` (when this perf has it) and libbpf-tools
# `offcputime` (and, in CONFIGS only on request, `perf-record`: perf record -a -e
# sched:sched_switch -e sched:sched_waking, no stacks), each as a throughput ratio against an untraced run of the same round.
# Two floors can be added to CONFIGS: floor-empty (BPF programs on chainrec's hooks that do
# nothing: the cost of hooking the scheduler at all) and floor-ringbuf (each event: clock +
# one 32-byte ring buffer record, drained every 20 ms), and a third, floor-batch, shows what
# batching would win (the same records staged per CPU, committed 32 at a time; its events
# column counts batches); floor-taskstate adds the least per-task state a lazy recorder
# needs (switch-out time in task storage), benches/floor/.
#
# `lazy-fN` (e.g. lazy-f997) is lazy with on-CPU samples at N Hz per CPU (`--sample-freq N`;
# plain lazy, eager and none sample at the recorder's default rate), `lazy-nosamples` lazy
# with `--no-samples`.
#
# Workloads (WORKLOADS, default all):
#   pipe       taskset -c 0 perf bench sched pipe -T -l $PIPE_LOOPS       ops/s
#              (PIPE_RT=1: as SCHED_FIFO, for a busy shared machine)
#   messaging  perf bench sched messaging -g $MSG_GROUPS -l $MSG_LOOPS     1 / runtime
#   tcp        benches/tcp_rr.c: 16 loopback connections, the server waits 1 ms per request
#   targz      tar cf - $TAR_DIRS | gzip -1 after dropping the page cache  1 / runtime
#   pgbench    PostgreSQL + pgbench -c 2 -j 2 -T $SECS (TPC-B like)         tps
#
# Paired rounds: in each round every workload runs untraced and under every tracer, one
# after the other (odd rounds in CONFIGS order, even rounds reversed, so slow drifts of
# the shared machine's load hit every config from both sides); a ratio compares runs of
# one round. The table gives the median ratio over ROUNDS rounds (use >= 6 for numbers to
# quote). After the timed rounds, one run per workload and chainrec mode with
# kernel.bpf_stats_enabled=1 gives the BPF time per program run (on_switch, on_waking,
# all programs) and per event; the stats are off during the timed rounds.
#
#   sudo benches/suite.sh                               # 6 rounds, everything
#   ROUNDS=2 WORKLOADS="tcp pgbench" sudo benches/suite.sh
#   CONFIGS="untraced lazy" STATS=0 sudo benches/suite.sh
#
# Needs: root, perf, cc, python3, a release build (cargo build --release) or
# CHAINREC=/path/to/chainrec. Installs libbpf-tools (offcputime) and postgresql with
# apt-get when missing (NO_APT=1: skip those configs / workloads instead). tracefs is
# mounted if missing (perf sched record needs it). PostgreSQL is started for the run and
# stopped after it if it was not running before; a database `cr_bench` is created
# (scale $PG_SCALE) and dropped at the end.
# Each paired group runs under flock $LOCK (default /tmp/chainrec-cpu.lock; LOCK= for none):
# run the script itself outside the lock.
# Tracer CPU is the tracer process's CPU time (all threads) over the workload's run, as a
# share of one core; events/s counts the whole recording (1 s before the workload too).
# Output: tables on stdout; raw rows in $OUT/runs.tsv and $OUT/bpf.tsv.
set -euo pipefail

ROUNDS=${ROUNDS:-6}
SECS=${SECS:-5}
WORKLOADS=${WORKLOADS:-"pipe messaging tcp targz pgbench"}
CONFIGS=${CONFIGS:-"untraced lazy eager none perf-sched-g perf-offcpu offcputime"}
STATS=${STATS:-1}
PIPE_LOOPS=${PIPE_LOOPS:-500000}
MSG_GROUPS=${MSG_GROUPS:-5}
MSG_LOOPS=${MSG_LOOPS:-1000}
TAR_DIRS=${TAR_DIRS:-"/usr/lib/gcc /usr/lib/python3 /usr/lib/python3.11"}
TCP_ARGS=${TCP_ARGS:-"16 1000 20"}
PG_SCALE=${PG_SCALE:-10}
HERE=$(cd "$(dirname "$0")/.." && pwd)
CHAINREC=${CHAINREC:-$HERE/target/release/chainrec}
OUT=${OUT:-$(mktemp -d /tmp/chainrec-suite.XXXXXX)}
mkdir -p "$OUT"
# Taken around each paired group (and the stats runs); LOCK= to run without it.
LOCK=${LOCK-/tmp/chainrec-cpu.lock}
if [ -n "$LOCK" ]; then exec {LOCKFD}>>"$LOCK"; fi

die() { echo "suite: $*" >&2; exit 1; }
note() { echo "suite: $*" >&2; echo "# $*" >>"$OUT/info.txt"; }
[ "$(id -u)" = 0 ] || die "needs root (BPF, perf system-wide, drop_caches)"
[ -x "$CHAINREC" ] || die "no chainrec binary at $CHAINREC (cargo build --release, or set CHAINREC)"
command -v perf >/dev/null || die "perf not installed (apt-get install linux-perf)"
command -v python3 >/dev/null || die "python3 needed for the statistics"
if ! mountpoint -q /sys/kernel/tracing; then
    mount -t tracefs nodev /sys/kernel/tracing || die "cannot mount tracefs"
fi
sysctl -qw kernel.bpf_stats_enabled=0 || true

apt_install() { # command package
    command -v "$1" >/dev/null && return 0
    [ "${NO_APT:-0}" = 1 ] && return 1
    note "installing $2 (apt-get)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$2" >"$OUT/apt-$2.log" 2>&1 || return 1
    command -v "$1" >/dev/null
}

# --- configs that cannot run here are dropped with a message -------------------------
declare -A SKIP=()
for cfg in $CONFIGS; do
    case $cfg in
    perf-offcpu)
        # perf ignores --off-cpu (with a warning) unless it was built with BUILD_BPF_SKEL=1
        help=$(perf record --off-cpu -h 2>&1 || true)
        if grep -q "off-cpu.*ignored" <<<"$help"; then
            SKIP[$cfg]="this perf ($(perf version)) was built without BPF skeletons: --off-cpu is ignored"
        fi
        ;;
    offcputime)
        apt_install offcputime libbpf-tools || SKIP[$cfg]="libbpf-tools (offcputime) not installed"
        ;;
    floor-empty | floor-ringbuf | floor-batch | floor-taskstate)
        # The floors: benches/floor/*.bpf.c on chainrec's hooks, built against the system
        # libbpf headers and loaded by benches/floor/attach.py through libbpf.so.1.
        if [ ! -f /usr/include/bpf/bpf_helpers.h ]; then
            DEBIAN_FRONTEND=noninteractive apt-get install -y -q libbpf-dev >"$OUT/apt-libbpf-dev.log" 2>&1 || true
        fi
        src=$HERE/benches/floor/${cfg#floor-}.bpf.c
        clang -O2 -g -target bpf -D__TARGET_ARCH_x86 -I"$HERE/bpf" -c "$src" -o "$OUT/$cfg.o" 2>"$OUT/$cfg.build.log" ||
            SKIP[$cfg]="$src did not build (clang, libbpf-dev; see $OUT/$cfg.build.log)"
        ;;
    esac
done
for cfg in "${!SKIP[@]}"; do note "config $cfg skipped: ${SKIP[$cfg]}"; done
RUN_CONFIGS=""
for cfg in $CONFIGS; do [ -z "${SKIP[$cfg]:-}" ] && RUN_CONFIGS="$RUN_CONFIGS $cfg"; done

# --- workloads ------------------------------------------------------------------------
TCP_RR=$OUT/tcp_rr
PG_STARTED=0
PG_CLUSTER=""
setup_workload() { # name; returns 1 (with a note) when it cannot run here
    case $1 in
    pipe | messaging) return 0 ;;
    tcp)
        command -v cc >/dev/null || { note "workload tcp skipped: no C compiler (cc)"; return 1; }
        cc -O2 -pthread -o "$TCP_RR" "$HERE/benches/tcp_rr.c" || { note "workload tcp skipped: tcp_rr.c did not build"; return 1; }
        ;;
    targz)
        for d in $TAR_DIRS; do [ -d "$d" ] || { note "workload targz skipped: no $d (set TAR_DIRS)"; return 1; }; done
        ;;
    pgbench)
        if ! command -v pg_lsclusters >/dev/null || ! command -v pgbench >/dev/null; then
            apt_install pgbench postgresql || { note "workload pgbench skipped: postgresql not installed"; return 1; }
        fi
        PG_CLUSTER=$(pg_lsclusters -h | awk 'NR==1 {print $1" "$2}')
        [ -n "$PG_CLUSTER" ] || { note "workload pgbench skipped: no PostgreSQL cluster (pg_createcluster)"; return 1; }
        if ! pg_lsclusters -h | awk 'NR==1 {exit $4 != "online"}'; then
            # shellcheck disable=SC2086
            pg_ctlcluster $PG_CLUSTER start || { note "workload pgbench skipped: pg_ctlcluster $PG_CLUSTER start failed"; return 1; }
            PG_STARTED=1
        fi
        su postgres -c "dropdb --if-exists cr_bench && createdb cr_bench && pgbench -q -i -s $PG_SCALE cr_bench" \
            >"$OUT/pgbench-init.log" 2>&1 || { note "workload pgbench skipped: init failed (see $OUT/pgbench-init.log)"; return 1; }
        ;;
    *) die "unknown workload $1" ;;
    esac
}
teardown() {
    if [ -n "$PG_CLUSTER" ]; then
        su postgres -c "dropdb --if-exists cr_bench" >/dev/null 2>&1 || true
        # shellcheck disable=SC2086
        [ "$PG_STARTED" = 1 ] && pg_ctlcluster $PG_CLUSTER stop || true
    fi
    sysctl -qw kernel.bpf_stats_enabled=0 || true
}
trap teardown EXIT

# One run of a workload: prints its score (higher is better).
run_workload() { # name
    case $1 in
    pipe)
        # PIPE_RT=1: SCHED_FIFO, so that other load on a shared machine cannot preempt it
        # on CPU 0 (RT throttling still leaves 5 % to others); tracer costs stay in.
        if [ "${PIPE_RT:-0}" = 1 ]; then
            taskset -c 0 chrt -f 50 perf bench sched pipe -T -l "$PIPE_LOOPS"
        else
            taskset -c 0 perf bench sched pipe -T -l "$PIPE_LOOPS"
        fi 2>&1 | awk '/ops\/sec/ {print $1}'
        ;;
    messaging)
        perf bench sched messaging -g "$MSG_GROUPS" -l "$MSG_LOOPS" 2>&1 |
            awk '/Total time/ {printf "%.6f\n", 1 / $3}'
        ;;
    # shellcheck disable=SC2086
    tcp) "$TCP_RR" $TCP_ARGS "$SECS" | awk '/requests/ {print $2}' ;;
    targz)
        sync
        echo 3 >/proc/sys/vm/drop_caches
        local t0 t1
        t0=$(date +%s.%N)
        # shellcheck disable=SC2086
        tar cf - $TAR_DIRS 2>/dev/null | gzip -1 >/dev/null
        t1=$(date +%s.%N)
        python3 -c "print(f'{1 / ($t1 - $t0):.6f}')"
        ;;
    pgbench)
        su postgres -c "pgbench -c 2 -j 2 -T $SECS cr_bench" 2>&1 |
            awk '/^tps/ {print $3}'
        ;;
    esac
}

wait_for_file() { # path
    for _ in $(seq 1 200); do [ -s "$1" ] && return 0; sleep 0.05; done
    return 1
}
# CPU seconds (user + system) a process used so far
proc_cpu_s() { # pid
    awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15) / hz}' "/proc/$1/stat" 2>/dev/null || echo 0
}

# Run workload $1 beside the tracer $2 (running), then stop the tracer with SIGINT and wait
# for it (a child of this shell: not in a subshell); sets TR_SCORE, TR_CPU (the tracer's
# CPU seconds over the workload's run) and TR_SECS.
traced_run() { # workload pid
    local c0 c1 t0 t1
    c0=$(proc_cpu_s "$2")
    t0=$(date +%s.%N)
    TR_SCORE=$(run_workload "$1")
    c1=$(proc_cpu_s "$2")
    t1=$(date +%s.%N)
    kill -INT "$2"
    wait "$2" || true
    TR_CPU=$(python3 -c "print($c1 - $c0)")
    TR_SECS=$(python3 -c "print($t1 - $t0)")
}

# chainrec as config $1 runs it: lazy / eager / none (--stacks), lazy-fp (lazy with
# frame-pointer user stacks only, --user-unwind fp), lazy-base (lazy with the binary
# $CHAINREC_BASE, e.g. main built into another directory: A/B in one run).
chainrec_for() { # config args... (exec: run as a background job, the job is chainrec itself,
    # so that kill -INT $! reaches it)
    local cfg=$1
    shift
    case $cfg in
    lazy-fp) exec "$CHAINREC" "$@" --stacks lazy --user-unwind fp ;;
    lazy-base) exec "${CHAINREC_BASE:?lazy-base needs CHAINREC_BASE}" "$@" --stacks lazy ;;
    lazy-f[0-9]*) exec "$CHAINREC" "$@" --stacks lazy --sample-freq "${cfg#lazy-f}" ;;
    lazy-nosamples) exec "$CHAINREC" "$@" --stacks lazy --no-samples ;;
    *) exec "$CHAINREC" "$@" --stacks "$cfg" ;;
    esac
}

# Run one config; prints "score bytes events tracer_cpu_s duration_s lost"
run_config() { # workload config round
    local w=$1 cfg=$2 r=$3 f score pid
    case $cfg in
    untraced)
        echo "$(run_workload "$w") 0 0 0 0 0"
        ;;
    lazy | eager | none | lazy-fp | lazy-base | lazy-f[0-9]* | lazy-nosamples)
        f=$OUT/$w.$cfg.$r.zst
        rm -f "$f" "$f.json"
        chainrec_for "$cfg" record -q -o "$f" --summary-json "$f.json" 2>"$f.log" &
        pid=$!
        wait_for_file "$f" || die "chainrec did not start: $(cat "$f.log")"
        sleep 1 # attach + kallsyms snapshot done, idle state recorded
        traced_run "$w" $pid
        [ -s "$f.json" ] || die "chainrec failed: $(cat "$f.log")"
        python3 - "$f.json" "$TR_SCORE" "$TR_CPU" "$TR_SECS" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
l = j["lost"]
lost = l["ringbuf_full"] + l["out_of_order"] + l["malformed"]
print(sys.argv[2], j["bytes"], j["events"], sys.argv[3], sys.argv[4], lost)
EOF
        rm -f "$f"
        ;;
    perf-sched-g | perf-offcpu | perf-record)
        f=$OUT/$w.$cfg.$r.data
        rm -f "$f"
        case $cfg in
        perf-sched-g) perf sched record -g -o "$f" >"$f.log" 2>&1 & ;;
        perf-offcpu) perf record -a -g --off-cpu -o "$f" >"$f.log" 2>&1 & ;;
        *) perf record -a -e sched:sched_switch -e sched:sched_waking -o "$f" >"$f.log" 2>&1 & ;;
        esac
        pid=$!
        wait_for_file "$f" || die "perf did not start: $(cat "$f.log")"
        sleep 1
        traced_run "$w" $pid
        local bytes events=0 lost
        bytes=$(stat -c %s "$f")
        if [ "$r" = 1 ]; then # counting samples is slow; once per workload is enough
            events=$(perf script -i "$f" -F event 2>/dev/null | wc -l)
        fi
        lost=$({ grep -oiE "lost [0-9]+ chunks" "$f.log" || true; } | awk '{s += $2} END {print s + 0}')
        echo "$TR_SCORE $bytes $events $TR_CPU $TR_SECS $lost"
        rm -f "$f"
        ;;
    offcputime)
        f=$OUT/$w.$cfg.$r.txt
        offcputime >"$f" 2>"$f.log" &
        pid=$!
        sleep 2 # load + attach (it prints nothing until the end)
        kill -0 $pid 2>/dev/null || die "offcputime exited: $(cat "$f.log")"
        traced_run "$w" $pid
        echo "$TR_SCORE $(stat -c %s "$f") 0 $TR_CPU $TR_SECS 0"
        rm -f "$f"
        ;;
    floor-empty | floor-ringbuf | floor-batch | floor-taskstate)
        f=$OUT/$w.$cfg.$r.ready
        rm -f "$f"
        python3 "$HERE/benches/floor/attach.py" "$OUT/$cfg.o" "$f" >"$f.out" 2>"$f.log" &
        pid=$!
        wait_for_file "$f" || die "$cfg did not attach: $(cat "$f.log")"
        sleep 1
        traced_run "$w" $pid
        # `consumed N dropped N` (records; the ring buffer config only)
        read -r _ consumed _ dropped <"$f.out" || { consumed=0; dropped=0; }
        echo "$TR_SCORE 0 ${consumed:-0} $TR_CPU $TR_SECS ${dropped:-0}"
        rm -f "$f"
        ;;
    *) die "unknown config $cfg" ;;
    esac
}

RUN_WORKLOADS=""
for w in $WORKLOADS; do setup_workload "$w" && RUN_WORKLOADS="$RUN_WORKLOADS $w"; done
[ -n "$RUN_WORKLOADS" ] || die "no workload can run"

echo "# uptime before: $(uptime)" | tee -a "$OUT/info.txt"
echo "# workloads:$RUN_WORKLOADS; configs:$RUN_CONFIGS; rounds: $ROUNDS; chainrec: $CHAINREC ($(git -C "$HERE" rev-parse --short HEAD 2>/dev/null || echo '?'))" | tee -a "$OUT/info.txt"
printf "round\tworkload\tconfig\tscore\tbytes\tevents\ttracer_cpu_s\tduration_s\tlost\n" >"$OUT/runs.tsv"
for r in $(seq 1 "$ROUNDS"); do
    order=$RUN_CONFIGS
    if [ $((r % 2)) = 0 ]; then order=$(echo "$RUN_CONFIGS" | tr ' ' '\n' | tac | tr '\n' ' '); fi
    for w in $RUN_WORKLOADS; do
        # One workload's configs of one round run under the CPU lock, so that builds of
        # others sharing the machine run between paired groups, not inside them.
        [ -n "$LOCK" ] && flock "$LOCKFD"
        for cfg in $order; do
            read -r score bytes events cpu dur lost < <(run_config "$w" "$cfg" "$r")
            printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n" "$r" "$w" "$cfg" "$score" "$bytes" "$events" "$cpu" "$dur" "$lost" >>"$OUT/runs.tsv"
            echo "round $r $w $cfg: $score" >&2
        done
        [ -n "$LOCK" ] && flock -u "$LOCKFD"
    done
done

# BPF time per program run: one run per workload and chainrec mode with
# kernel.bpf_stats_enabled=1; per program from bpftool just before stopping.
BPF=$OUT/bpf.tsv
printf "workload\tconfig\tprog\trun_time_ns\trun_cnt\tevents\n" >"$BPF"
if [ "$STATS" = 1 ] && command -v bpftool >/dev/null; then
    [ -n "$LOCK" ] && flock "$LOCKFD"
    sysctl -qw kernel.bpf_stats_enabled=1
    for w in $RUN_WORKLOADS; do
        for cfg in lazy eager none lazy-fp lazy-base; do
            case " $RUN_CONFIGS " in *" $cfg "*) ;; *) continue ;; esac
            f=$OUT/stats.$w.$cfg.zst
            chainrec_for "$cfg" record -q -o "$f" --summary-json "$f.json" 2>"$f.log" &
            pid=$!
            wait_for_file "$f"
            sleep 1
            run_workload "$w" >/dev/null
            bpftool prog show -j >"$f.progs.json"
            kill -INT $pid
            wait $pid
            python3 - "$f.json" "$f.progs.json" "$w" "$cfg" >>"$BPF" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
progs = json.load(open(sys.argv[2]))
w, cfg = sys.argv[3], sys.argv[4]
for p in progs:
    if p.get("name") in ("on_switch", "on_waking") and "run_cnt" in p:
        print(w, cfg, p["name"], p.get("run_time_ns", 0), p["run_cnt"], j["events"], sep="\t")
print(w, cfg, "all", j["bpf_run_time_ns"], j["bpf_run_cnt"], j["events"], sep="\t")
EOF
            rm -f "$f"
        done
    done
    sysctl -qw kernel.bpf_stats_enabled=0
    [ -n "$LOCK" ] && flock -u "$LOCKFD"
fi
echo "# uptime after: $(uptime)" | tee -a "$OUT/info.txt"

python3 - "$OUT/runs.tsv" "$BPF" <<'EOF'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
bpf = list(csv.DictReader(open(sys.argv[2]), delimiter="\t"))
med = statistics.median
workloads, configs = [], []
for r in rows:
    if r["workload"] not in workloads:
        workloads.append(r["workload"])
    if r["config"] not in configs:
        configs.append(r["config"])
traced = [c for c in configs if c != "untraced"]
cell = {}
for w in workloads:
    by_round = {}
    for r in rows:
        if r["workload"] == w:
            by_round.setdefault(r["round"], {})[r["config"]] = r
    for c in traced:
        rat = [float(v[c]["score"]) / float(v["untraced"]["score"])
               for v in by_round.values()
               if c in v and "untraced" in v and v[c]["score"] and v["untraced"]["score"]]
        cell[w, c] = rat
print("Throughput ratio vs untraced (median over rounds, min..max):\n")
print("| workload | " + " | ".join(traced) + " |")
print("|---|" + "---|" * len(traced))
for w in workloads:
    out = []
    for c in traced:
        r = cell[w, c]
        out.append(f"**{med(r):.3f}** ({min(r):.2f}..{max(r):.2f})" if r else "n/a")
    print(f"| {w} | " + " | ".join(out) + " |")
print("\nPer workload and tracer: events/s, bytes per event, tracer CPU (% of one core), lost:\n")
print("| workload | config | events/s | bytes/event | tracer CPU % | lost (sum) |")
print("|---|---|---|---|---|---|")
for w in workloads:
    for c in traced:
        rs = [r for r in rows if r["workload"] == w and r["config"] == c]
        if not rs:
            continue
        evs = [int(r["events"]) / float(r["duration_s"]) for r in rs
               if int(r["events"]) > 0 and float(r["duration_s"]) > 0]
        bpe = [int(r["bytes"]) / int(r["events"]) for r in rs if int(r["events"]) > 0]
        cpu = [100 * float(r["tracer_cpu_s"]) / float(r["duration_s"]) for r in rs
               if float(r["duration_s"]) > 0]
        lost = sum(int(r["lost"]) for r in rs)
        f = lambda xs, fmt: (fmt.format(med(xs)) if xs else "n/a")
        print(f"| {w} | {c} | {f(evs, '{:.0f}')} | {f(bpe, '{:.1f}')} | {f(cpu, '{:.1f}')} | {lost} |")
if bpf:
    print("\nBPF time per program run (kernel.bpf_stats_enabled=1, one run each), ns:\n")
    print("| workload | mode | on_switch | on_waking | all programs | all BPF ns per event |")
    print("|---|---|---|---|---|---|")
    keyed = {}
    for b in bpf:
        keyed[b["workload"], b["config"], b["prog"]] = b
    for w in workloads:
        for c in ("lazy", "eager", "none", "lazy-fp", "lazy-base"):
            def per(p):
                b = keyed.get((w, c, p))
                return f"{int(b['run_time_ns']) / int(b['run_cnt']):.0f}" if b and int(b["run_cnt"]) else "n/a"
            a = keyed.get((w, c, "all"))
            if not a:
                continue
            pe = f"{int(a['run_time_ns']) / int(a['events']):.0f}" if int(a["events"]) else "n/a"
            print(f"| {w} | {c} | {per('on_switch')} | {per('on_waking')} | {per('all')} | {pe} |")
EOF
echo "raw runs: $OUT/runs.tsv, $BPF; notes: $OUT/info.txt"
