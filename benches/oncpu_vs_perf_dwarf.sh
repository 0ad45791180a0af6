#!/usr/bin/env bash
# Whole user stacks of CPU samples, chainrec against `perf record --call-graph dwarf`
# (issue 22 item 5): both sample the same stock Debian program (python3, built without
# frame pointers, stripped, 1,400 exported functions) at the same time and frequency; then
# the per-function shares are compared: inclusive (the share of samples whose user stack
# holds the function anywhere, which only a whole unwind gets right) and self (the leaf).
# Not a timing: both see the same seconds, so shares agree up to sampling noise (about
# 1/sqrt(samples)) plus what each unwinder fails on.
#
#   sudo benches/oncpu_vs_perf_dwarf.sh                # 20 s at 99 Hz
#   SECS=60 FREQ=199 OUT=/tmp/ovd sudo benches/oncpu_vs_perf_dwarf.sh
#
# Needs root, perf (Debian linux-perf) and a release build (CHAINREC=path overrides).
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${SECS:-20}
FREQ=${FREQ:-99}
OUT=${OUT:-$(mktemp -d /tmp/oncpu-vs-dwarf.XXXX)}
CHAINREC=${CHAINREC:-target/release/chainrec}
mkdir -p "$OUT"
[ -x "$CHAINREC" ] || cargo build --release -q
command -v perf >/dev/null || { echo "needs perf (apt-get install linux-perf)" >&2; exit 1; }

# A CPU-bound python3 that spends its time in distinct exported C functions: the
# interpreter loop, rich comparisons (sorting), zlib's deflate, hashing, float formatting.
cat > "$OUT/work.py" <<'EOF'
import hashlib, random, sys, time, zlib
end = time.time() + float(sys.argv[1])
data = bytes(random.getrandbits(8) for _ in range(200000)) * 4
def sort_work():
    xs = [random.random() for _ in range(20000)]
    xs.sort(key=lambda x: -x)
def zlib_work():
    zlib.compress(data, 9)
def hash_work():
    h = hashlib.sha256()
    for _ in range(50):
        h.update(data)
def format_work():
    return ",".join("%.17g" % (i / 7) for i in range(50000))
while time.time() < end:
    sort_work(); zlib_work(); hash_work(); format_work()
EOF
# Debian's own python3 (not one from pyenv or a venv earlier in PATH).
PYTHON=${PYTHON:-/usr/bin/python3}
"$PYTHON" "$OUT/work.py" $((SECS + 3)) &
PY=$!
sleep 1

perf record -q -F "$FREQ" -e cpu-clock --call-graph dwarf,16384 -p "$PY" -o "$OUT/perf.data" \
    -- sleep "$SECS" 2> "$OUT/perf.log" &
PERF=$!
"$CHAINREC" record -q -o "$OUT/trace.zst" --duration "$SECS" --sample-freq "$FREQ" \
    --summary-json "$OUT/summary.json" > "$OUT/record.log" 2>&1 &
REC=$!
wait $PERF || { cat "$OUT/perf.log" >&2; exit 1; }
wait $REC || { cat "$OUT/record.log" >&2; exit 1; }
wait $PY 2>/dev/null || true

# perf: one stack per sample, user frames only (perf script marks kernel frames
# with [kernel.kallsyms]), leaf first.
perf script -i "$OUT/perf.data" -F ip,sym,dso 2> "$OUT/perf-script.log" > "$OUT/perf.txt"
"$CHAINREC" oncpu --unit ns -p "$PY" "$OUT/trace.zst" 2> "$OUT/oncpu.log" > "$OUT/chainrec.folded"

python3 - "$OUT" "$FREQ" <<'EOF'
import collections, re, sys
out, freq = sys.argv[1], int(sys.argv[2])

def norm(name, dso=""):
    # chainrec marks inlined frames " [inlined]"; perf may add "+0x..". An unnamed
    # frame is "[object]" in both: perf says "[unknown] (path)", chainrec "[object+0x..]".
    name = name.replace(" [inlined]", "")
    if name == "[unknown]":
        return "[" + dso.rsplit("/", 1)[-1] + "]"
    return re.sub(r"\+0x[0-9a-f]+(\])?$", r"\1", name)

def perf_stacks():
    stack = []
    for line in open(f"{out}/perf.txt"):
        line = line.strip()
        if not line:
            if stack:
                yield stack, 1.0
            stack = []
            continue
        parts = line.split(None, 1)
        if len(parts) < 2:
            continue
        rest = parts[1]
        dso = rest[rest.rfind("(") + 1:-1] if rest.endswith(")") else ""
        sym = rest[:rest.rfind("(")].strip() if "(" in rest else rest
        if "kernel.kallsyms" in dso or dso.startswith("[kernel"):
            continue
        stack.append(norm(sym, dso))
    if stack:
        yield stack, 1.0

def chainrec_stacks():
    for line in open(f"{out}/chainrec.folded"):
        frames, w = line.rstrip("\n").rsplit(" ", 1)
        user = frames.split(";-;")[0].split(";")[1:]  # drop the comm
        yield [norm(f) for f in reversed(user)], float(w)

def shares(stacks):
    incl, leaf, total = collections.Counter(), collections.Counter(), 0.0
    for stack, w in stacks:
        total += w
        for f in set(stack):
            incl[f] += w
        if stack:
            leaf[stack[0]] += w
    return {f: v / total for f, v in incl.items()}, {f: v / total for f, v in leaf.items()}, total

pi, pl, pt = shares(perf_stacks())
ci, cl, ct = shares(chainrec_stacks())
print(f"samples: perf {pt:.0f}, chainrec {ct * freq / 1e9:.0f}")
for title, p, c in (("inclusive", pi, ci), ("self", pl, cl)):
    print(f"\n{title} shares (functions with >= 5 % in either):")
    print(f"{'function':<40} {'perf':>7} {'chainrec':>8} {'diff':>6} {'noise':>6}")
    worst = 0.0
    n = pt  # samples on each side (the same frequency and seconds)
    for f in sorted(set(p) | set(c), key=lambda f: -max(p.get(f, 0), c.get(f, 0))):
        a, b = p.get(f, 0), c.get(f, 0)
        if max(a, b) < 0.05:
            continue
        rel = abs(b - a) / max(a, b)
        worst = max(worst, rel)
        # Two standard deviations of the difference of two independent sample shares,
        # relative to the share: what sampling alone gives.
        m = (a + b) / 2
        noise = 2 * (2 * m * (1 - m) / n) ** 0.5 / m if 0 < m < 1 else 0.0
        print(f"{f[:40]:<40} {a:7.1%} {b:8.1%} {rel:6.1%} {noise:6.1%}")
    print(f"largest relative difference ({title}): {worst:.1%}")
EOF
echo "files in $OUT"
