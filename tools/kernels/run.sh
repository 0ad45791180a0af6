#!/usr/bin/env bash
# The kernel matrix (`./x.sh kernels`): boots each kernel of MATRIX below in QEMU and runs
# tools/kernels/check.sh inside with the packaged chainrec (`./x.sh package`), then the
# same check on the running (host) kernel. One line per kernel and boot with its counts.
#
# Each VM: Debian's kernel image (`apt-get download`, cached under target/kernels) and an
# initramfs of busybox-static, tools/kernels/init, check.sh, the packaged binary and the
# kernel's own virtio modules where it builds them as modules (6.1): nothing of the host
# is mounted, so the binary shows it needs nothing installed. The console is the only
# serial port; the demo's trace comes back base64 on a raw virtio disk (data.img), read
# after the VM powered off (no emulated UART interrupt on the data path). KVM is used when
# it boots (probed once per run); otherwise QEMU's TCG, which needs no KVM and is 10-50x
# slower.
#
# No boot is ever retried. After each boot the whole console is scanned for kernel failure
# lines (KERNEL_FAILURES below: BUG:, Oops, soft lockup, RCU stalls, panics, WARNING:,
# general protection faults, "nobody cared", hung tasks); any one fails the kernel, naming
# the first such line and the console, whatever the checks said. A VM that does not finish
# within the timeout fails too (with its last CHECK line and last kernel lines). Every
# kernel runs; the summary follows; the exit status is non-zero when anything failed.
#
# Usage: tools/kernels/run.sh [--update-golden] [--vms] [NAME...]   (NAME: a MATRIX name or host;
#        --vms: every kernel but the host's, which `./x.sh test` checks apart, after the VMs)
# Environment:
#   CHAINREC_REQUIRE_KERNELS=1  a kernel that cannot be booted fails instead of skipping
#   CHAINREC_VM_ACCEL=kvm|tcg   skip the KVM probe
#   CHAINREC_VM_TIMEOUT=SECS    per VM boot (default 600; a VM takes ~50 s under single-threaded
#                               TCG on a quiet host; the BPF verifier makes it minutes under load)
#   CHAINREC_PACKAGE_BIN=PATH   the binary to test (default target/package/chainrec)
# For evidence about intermittent kernel failures (docs/RECORDER.md, the kernel matrix):
#   CHAINREC_VM_LOOPS=N         boot each kernel N times (default 1); a tally per kernel at
#                               the end: boots, passes, hangs, each failure class with the
#                               first line; consoles in target/kernels/runs/NAME/boot-I/
#   CHAINREC_VM_HOG=N           N busy-looping processes on the host beside the VMs
#   CHAINREC_VM_TCG_THREAD=single|multi   QEMU TCG: one host thread for all vCPUs
#                               (default) or one per vCPU. Multi-threaded TCG hangs Debian's
#                               kernels while they live-patch code (text_poke_bp: enabling or
#                               disabling a tracepoint, as attaching BPF programs does), with
#                               no chainrec in the guest too (CHAINREC_VM_MODE=tracefs):
#                               docs/RECORDER.md, the kernel matrix
#   CHAINREC_VM_SMP=N           vCPUs (default 2)
#   CHAINREC_VM_CLOCK=tsc|hpet  the guest's clocksource= (default: tsc=reliable only)
#   CHAINREC_VM_MODE=full|nosampler|norecord|tracefs|noflip   what check.sh runs (chainrec.mode=
#                               on the guest's command line; check.sh says what each does)
#   CHAINREC_VM_APPEND=ARGS     more kernel command-line arguments
#   CHAINREC_VM_EXTRA_ROOT=DIR  a file tree copied into each initramfs: the shared libraries
#                               of a non-static CHAINREC_PACKAGE_BIN (a release build, for
#                               evidence while no package is built; the matrix proper runs the
#                               static package with nothing added)
#   CHAINREC_VM_RUNS=DIR        where the consoles go (default target/kernels/runs): two
#                               loops of the same kernel at once need two
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
CACHE=$ROOT/target/kernels
BIN=${CHAINREC_PACKAGE_BIN:-$ROOT/target/package/chainrec}
TIMEOUT=${CHAINREC_VM_TIMEOUT:-600}
REQUIRE=${CHAINREC_REQUIRE_KERNELS:-0}
GOLDEN=$ROOT/testdata/kernels
LOOPS=${CHAINREC_VM_LOOPS:-1}
HOG=${CHAINREC_VM_HOG:-0}
THREAD=${CHAINREC_VM_TCG_THREAD:-single}
SMP=${CHAINREC_VM_SMP:-2}
CLOCK=${CHAINREC_VM_CLOCK:-}
MODE=${CHAINREC_VM_MODE:-full}
EXTRA_APPEND=${CHAINREC_VM_APPEND:-}
RUNS=${CHAINREC_VM_RUNS:-$CACHE/runs}
EXTRA_ROOT=${CHAINREC_VM_EXTRA_ROOT:-}

# name | Debian package that depends on the image (meta package) | fallbacks the recorder
# must report there (the features it cannot use: each one is thus exercised on a kernel
# that needs it; "," separated, sorted; ";" between sets that are each right). The host
# kernel is what the machine runs: 6.18 had BPF task_work, and 6.18.44 refuses its
# callback from a non-sleepable program (EPERM, "sleepable callback in a program that is
# not sleepable"), where the recorder falls back to sys_exit and says so.
MATRIX=(
    "6.1|linux-image-amd64|bpf_rdonly_cast,task_work user stacks"
    "6.1-cloud|linux-image-cloud-amd64|bpf_rdonly_cast,task_work user stacks"
    "6.1-rt|linux-image-rt-amd64|bpf_rdonly_cast,task_work user stacks"
    "6.12|linux-image-6.12-amd64|task_work user stacks"
    "host||fentry on do_softirq;fentry on do_softirq,task_work user stacks"
)

# Console lines that fail a boot whatever its checks said (extended regular expression).
KERNEL_FAILURES='BUG:|Oops|soft lockup|hard LOCKUP|rcu_(preempt|sched|bh) detected stall|rcu: INFO: rcu_.* detected stall|self-detected stall|kthread timer wakeup didn.t happen|Kernel panic|WARNING: CPU:|general protection fault|nobody cared|blocked for more than [0-9]+ seconds'

# The virtio modules the data disk needs (with their dependencies, read from the modules
# themselves); a kernel that builds one in has no file for it.
DATA_MODULES="virtio_pci virtio_blk"

log() { printf '\033[1mkernels:\033[0m %s\n' "$*" >&2; }
die() {
    echo "kernels: $*" >&2
    exit 2
}

update_golden=0
vms_only=0
want=()
for a in "$@"; do
    case "$a" in
    --update-golden) update_golden=1 ;;
    --vms) vms_only=1 ;;
    -*)
        echo "usage: tools/kernels/run.sh [--update-golden] [--vms] [NAME...]" >&2
        exit 2
        ;;
    *) want+=("$a") ;;
    esac
done
case "$LOOPS" in '' | *[!0-9]* | 0) die "CHAINREC_VM_LOOPS must be a positive number" ;; esac
case "$HOG" in '' | *[!0-9]*) die "CHAINREC_VM_HOG must be a number" ;; esac
case "$SMP" in '' | *[!0-9]* | 0) die "CHAINREC_VM_SMP must be a positive number" ;; esac
case "$THREAD" in multi | single) ;; *) die "CHAINREC_VM_TCG_THREAD must be multi or single" ;; esac
case "$CLOCK" in '' | tsc | hpet) ;; *) die "CHAINREC_VM_CLOCK must be tsc or hpet" ;; esac
case "$MODE" in full | nosampler | norecord | tracefs | noflip) ;; *) die "CHAINREC_VM_MODE must be full, nosampler, norecord, tracefs or noflip" ;; esac

# Preconditions of the whole matrix.
skip_or_fail() {
    if [ "$REQUIRE" = 1 ]; then
        log "FAILED: $* (CHAINREC_REQUIRE_KERNELS=1)"
        exit 1
    fi
    log "SKIPPED: $* — the kernel matrix did not run (CHAINREC_REQUIRE_KERNELS=1 makes this a failure)"
    exit 0
}

[ -x "$BIN" ] || {
    echo "kernels: $BIN not found: run ./x.sh package first" >&2
    exit 1
}
command -v qemu-system-x86_64 >/dev/null || skip_or_fail "qemu-system-x86_64 not installed"
BUSYBOX=$(command -v busybox || true)
if [ -z "$BUSYBOX" ] || ! (LC_ALL=C ldd "$BUSYBOX" 2>&1 || true) | grep -q 'not a dynamic'; then
    skip_or_fail "no static busybox (Debian package busybox-static)"
fi

mkdir -p "$RUNS"

# The host CPU hogs (CHAINREC_VM_HOG), stopped at the end.
hogs=()
stop_hogs() {
    local p
    for p in "${hogs[@]}"; do kill "$p" 2>/dev/null; done
    hogs=()
}
trap stop_hogs EXIT
trap 'stop_hogs; exit 130' INT TERM
for _ in $(seq "$HOG"); do
    sh -c 'while :; do :; done' &
    hogs+=($!)
done
[ "$HOG" = 0 ] || log "$HOG CPU hog(s) running beside the VMs (pids ${hogs[*]})"

# The image package a meta package currently depends on (e.g. linux-image-6.1.0-56-amd64).
resolve() {
    local p
    p=$(apt-cache depends "$1" 2>/dev/null | awk '/Depends: linux-image-/{print $2; exit}')
    if [ -z "$p" ]; then
        apt-get update -qq >&2 || true
        p=$(apt-cache depends "$1" 2>/dev/null | awk '/Depends: linux-image-/{print $2; exit}')
    fi
    printf '%s' "$p"
}

# The modules of $DATA_MODULES and their dependencies from the kernel tree unpacked in $1,
# uncompressed, into $2 as NN-NAME.ko in load order. A module with no file is built in
# (it must then be in modules.builtin).
data_modules() {
    local tree=$1 dest=$2 order=() m
    visit() {
        local name=$1 f dep
        case " ${order[*]} " in *" $name "*) return 0 ;; esac
        f=$(find "$tree" \( -name "$name.ko" -o -name "$name.ko.xz" -o -name "$name.ko.zst" \) | head -1)
        if [ -z "$f" ]; then
            grep -q "/$name\.ko" "$tree"/modules.builtin 2>/dev/null || {
                log "module $name: neither a file nor built in"
                return 1
            }
            return 0
        fi
        case "$f" in
        *.xz) if command -v xz >/dev/null; then xz -dc "$f"; else "$BUSYBOX" xzcat "$f"; fi >"$tree/$name.raw" ;;
        *.zst) zstd -qdc "$f" >"$tree/$name.raw" ;;
        *) cp "$f" "$tree/$name.raw" ;;
        esac
        for dep in $(tr '\0' '\n' <"$tree/$name.raw" | sed -n 's/^depends=//p' | tr ',' ' '); do
            visit "$dep" || return 1
        done
        order+=("$name")
    }
    for m in $DATA_MODULES; do visit "$m" || return 1; done
    mkdir -p "$dest"
    local i=10
    for m in "${order[@]}"; do
        cp "$tree/$m.raw" "$dest/$i-$m.ko"
        i=$((i + 1))
    done
    return 0
}

# The kernel image of package $1 and its data-disk modules, unpacked once into $CACHE/$1/.
kernel_image() {
    local pkg=$1 dir=$CACHE/$1 tmp deb
    if ! ls "$dir"/vmlinuz-* >/dev/null 2>&1 || [ ! -e "$dir/modules/.done" ]; then
        tmp=$(mktemp -d "$CACHE/dl.XXXXXX")
        log "downloading $pkg"
        (cd "$tmp" && apt-get download -qq "$pkg" 2>&1 | grep -v '^W: Download is performed unsandboxed' >&2) || true
        deb=$(ls "$tmp"/*.deb 2>/dev/null | head -1)
        [ -n "$deb" ] || {
            rm -rf "$tmp"
            return 1
        }
        mkdir -p "$tmp/x"
        dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$tmp/x" --wildcards './boot/vmlinuz-*' './boot/config-*' \
            './lib/modules/*/modules.builtin' './lib/modules/*/kernel/drivers/virtio/*' \
            './lib/modules/*/kernel/drivers/block/virtio_blk.ko*' 2>/dev/null
        rm -rf "$dir"
        mkdir -p "$dir"
        mv "$tmp"/x/boot/* "$dir"/
        data_modules "$(ls -d "$tmp"/x/lib/modules/* | head -1)" "$dir/modules" || {
            rm -rf "$tmp"
            return 1
        }
        touch "$dir/modules/.done"
        rm -rf "$tmp"
    fi
    ls "$dir"/vmlinuz-* | head -1
}

# The initramfs of a kernel: busybox, init, check.sh, the watchdog, the binary under test
# and the modules in $2 (uncompressed cpio) into $1.
build_initramfs() {
    local cpio=$1 mods=$2 d
    d=$(mktemp -d "$CACHE/initramfs.XXXXXX")
    mkdir -p "$d/bin" "$d/modules"
    cp "$BUSYBOX" "$d/bin/busybox"
    cp tools/kernels/init "$d/init"
    cp tools/kernels/check.sh "$d/check.sh"
    cp tools/kernels/watchdog "$d/watchdog"
    cp "$BIN" "$d/chainrec"
    cp "$mods"/*.ko "$d/modules/" 2>/dev/null
    [ -z "$EXTRA_ROOT" ] || cp -a "$EXTRA_ROOT"/. "$d"/
    chmod +x "$d/init" "$d/chainrec"
    (cd "$d" && find . | "$BUSYBOX" cpio -o -H newc >"$cpio" 2>/dev/null)
    rm -rf "$d"
}

# initcall_blacklist=jent_mod_init: 6.12 builds the jitter entropy RNG in, and its boot
# self-test (timing loops) under TCG on a loaded host ran for minutes before init with a
# "soft lockup - CPU#1 stuck for 22s! [swapper/0:1]" in jent_entropy_init (1 of ~30 6.12
# boots of issue 34's loops); nothing in the guest needs it (6.1 has it as a module).
APPEND="console=ttyS0 panic=-1 quiet loglevel=5 tsc=reliable unknown_nmi_panic softlockup_all_cpu_backtrace=1 no_timer_check initcall_blacklist=jent_mod_init chainrec.watchdog=$((TIMEOUT / 2))"
[ -z "$CLOCK" ] || APPEND="$APPEND clocksource=$CLOCK"
[ "$MODE" = full ] || APPEND="$APPEND chainrec.mode=$MODE"
[ -z "$EXTRA_APPEND" ] || APPEND="$APPEND $EXTRA_APPEND"

# Boots $1 (kernel image) with initramfs $2 and accelerator $3; console in $4/console.log,
# data disk $4/data.img. With $5 > 0, gives up after $5 s if the init did not start (KVM
# probe). Returns 0 when QEMU ended by itself, 1 at the timeout, 2 when the probe gave up.
boot() {
    local image=$1 initrd=$2 accel=$3 out=$4 probe=${5:-0} cpu pid t=0 failed_at=0
    rm -f "$out/console.log" "$out/data.img" "$out"/monitor.* "$out/nmi.sent"
    : >"$out/console.log"
    truncate -s 16M "$out/data.img"
    # QEMU's monitor on a pair of FIFOs (QEMU opens both read-write: nothing blocks),
    # asked at a timeout where the vCPUs are.
    mkfifo "$out/monitor.in" "$out/monitor.out"
    if [ "$accel" = kvm ]; then
        cpu="host,-arch-capabilities"
    else
        accel="tcg,thread=$THREAD"
        cpu=max
    fi
    qemu-system-x86_64 -nodefaults -no-user-config -machine q35 -accel "$accel" -cpu "$cpu" \
        -smp "$SMP" -m 1536 -display none -no-reboot -bios /usr/share/qemu/qboot.rom \
        -kernel "$image" -initrd "$initrd" -append "$APPEND" \
        -serial "file:$out/console.log" -monitor "pipe:$out/monitor" \
        -drive "file=$out/data.img,format=raw,if=none,id=data" -device virtio-blk-pci,drive=data \
        </dev/null >"$out/qemu.log" 2>&1 &
    pid=$!
    while kill -0 "$pid" 2>/dev/null; do
        sleep 1
        t=$((t + 1))
        if [ "$probe" -gt 0 ] && [ "$t" -ge "$probe" ] && ! grep -aq CHAINREC-VM-BOOTED "$out/console.log"; then
            kill "$pid" 2>/dev/null
            wait "$pid" 2>/dev/null
            return 2
        fi
        # A console with a kernel failure line: the VM gets 60 s more to end by itself (and
        # print its backtraces), then is stopped as at the timeout.
        if [ "$failed_at" = 0 ] && [ $((t % 5)) = 0 ] && [ -n "$(first_kernel_failure "$out/console.log")" ]; then
            failed_at=$t
        fi
        if [ "$t" -ge "$TIMEOUT" ] || { [ "$failed_at" -gt 0 ] && [ "$t" -ge $((failed_at + 60)) ]; }; then
            STOP_WHY="the VM did not finish within $TIMEOUT s"
            [ "$t" -ge "$TIMEOUT" ] || STOP_WHY="the VM was stopped 60 s after its first kernel failure line, at $t s"
            vcpus_of "$out" >"$out/vcpus.log"
            log "$STOP_WHY; vCPUs (CPL 0: kernel, 3: user; HLT=1: idle): $(awk '{n[$1 " " $3 " " $4]++} END {for (k in n) printf "%s x%d; ", k, n[k]}' "$out/vcpus.log")"
            # An NMI makes the kernel (booted with unknown_nmi_panic) panic and print where the
            # CPU that took it was, symbolized, even when both CPUs spin in the kernel with
            # interrupts off and the watchdog task cannot run. TCG prints slowly: give it 30 s.
            # (Each write to the monitor FIFO is bounded: a VM that ended meanwhile has
            # no reader left, and an open for writing would block for ever.)
            echo "CHAINREC-HOST: NMI sent at the timeout" >"$out/nmi.sent"
            timeout 5 sh -c 'echo nmi >"$1"' sh "$out/monitor.in"
            for _ in $(seq 30); do
                kill -0 "$pid" 2>/dev/null || break
                grep -aq 'Kernel Offset\|end Kernel panic' "$out/console.log" && break
                sleep 1
            done
            sed -n '/NMI received for unknown reason/,$p' "$out/console.log" | grep -a -v '\] \(Code: \|R[A-Z0-9]*: [0-9a-f]\{16\}\)' |
                head -40 | sed 's/^/    nmi| /' >&2
            kill "$pid" 2>/dev/null
            wait "$pid" 2>/dev/null
            return 1
        fi
    done
    wait "$pid" 2>/dev/null
    rm -f "$out"/monitor.*
    return 0
}

# Where the vCPUs of a VM that timed out are: each one's instruction pointer and privilege
# level (CPL 0: the kernel, 3: user space), sampled 5 times, 1 s apart (QEMU's monitor).
vcpus_of() {
    local out=$1 i
    timeout 30 cat "$out/monitor.out" >"$out/monitor.raw" 2>/dev/null &
    for i in 1 2 3 4 5; do
        timeout 5 sh -c 'echo "info registers -a" >"$1"' sh "$out/monitor.in"
        sleep 1
    done
    sleep 1
    kill $! 2>/dev/null
    wait $! 2>/dev/null
    tr -d '\r' <"$out/monitor.raw" | sed 's/\x1b\[[0-9;]*[A-Za-z]//g' |
        awk '/^CPU#/{cpu=$1} /^RIP=/{rip=$1} /CPL=/{match($0,/CPL=[0-9]/); c = substr($0, RSTART, RLENGTH); match($0, /HLT=[0-9]/); print cpu, rip, c, substr($0, RSTART, RLENGTH)}'
}

# The failure class of a kernel console line.
kclass() {
    case "$1" in
    *"soft lockup"*) echo soft-lockup ;;
    *"hard LOCKUP"*) echo hard-lockup ;;
    *stall* | *"kthread timer wakeup"*) echo rcu-stall ;;
    *"nobody cared"*) echo irq-nobody-cared ;;
    *"blocked for more than"*) echo hung-task ;;
    *"general protection fault"*) echo gpf ;;
    *Oops*) echo oops ;;
    *BUG:*) echo bug ;;
    *"Kernel panic"*) echo panic ;;
    *"WARNING: CPU:"*) echo warning ;;
    *) echo kernel ;;
    esac
}

# The first kernel failure line of console $1, before the NMI the host sends at a timeout
# (its panic is the host's doing; the timeout is reported on its own).
first_kernel_failure() {
    local cut=''
    [ ! -e "${1%/*}/nmi.sent" ] || cut='/NMI received for unknown reason/,$d'
    tr -d '\r' <"$1" | sed "$cut" | grep -a -E -m1 "$KERNEL_FAILURES" | cut -c1-200
}

# The console's last kernel lines ("[  12.345] ..."), joined.
last_kernel_lines() {
    tr -d '\r' <"$1" | sed '/NMI received for unknown reason/,$d' | grep -a '^\[ *[0-9]*\.[0-9]*\] [^ ]' |
        grep -a -v -E '\] (R[A-Z0-9]{1,2}: |Code: |CS: |FS: |CR2: |PKRU|Call Trace|Hardware name|Modules linked|</?(TASK|IRQ)>)' |
        tail -n "${2:-3}" | cut -c1-160 | paste -sd'|' -
}

# KVM where it works: nested KVM on these VMs hangs right after the boot stub.
accel=${CHAINREC_VM_ACCEL:-}
if [ -z "$accel" ]; then
    if [ -r /dev/kvm ] && [ -w /dev/kvm ]; then accel=probe; else accel=tcg; fi
fi

# "a,b" sorted and joined, from FALLBACK lines.
# Whether $1 is one of the ";"-separated sets in $2.
one_of() {
    local IFS=';' set
    for set in $2; do [ "$1" = "$set" ] && return 0; done
    return 1
}
fallbacks_of() { sed -n 's/^FALLBACK //p' "$1" | tr -d '\r' | sort -u | paste -sd, -; }

results=()
fail_lines=()
failures=0
declare -A T_BOOTS T_PASS T_HANG T_CLASSES T_COUNT T_FIRST
names=()

# Records boot $2 of kernel $1: verdict $3, class $4 (empty when it passed), first line $5,
# hung ($6: 1 when the VM did not finish).
tally() {
    local name=$1 i=$2 verdict=$3 class=$4 first=$5 hung=$6 key
    T_BOOTS[$name]=$((${T_BOOTS[$name]:-0} + 1))
    [ "$verdict" != PASS ] || T_PASS[$name]=$((${T_PASS[$name]:-0} + 1))
    [ "$hung" = 0 ] || T_HANG[$name]=$((${T_HANG[$name]:-0} + 1))
    [ -n "$class" ] || return 0
    key="$name|$class"
    if [ -z "${T_COUNT[$key]:-}" ]; then
        T_CLASSES[$name]="${T_CLASSES[$name]:-} $class"
        T_FIRST[$key]="boot $i: $first"
    fi
    T_COUNT[$key]=$((${T_COUNT[$key]:-0} + 1))
}

for entry in "${MATRIX[@]}"; do
    IFS='|' read -r name meta expect <<<"$entry"
    if [ ${#want[@]} -gt 0 ] && ! printf '%s\n' "${want[@]}" | grep -qx "$name"; then
        continue
    fi
    [ "$vms_only" = 0 ] || [ "$name" != host ] || continue
    names+=("$name")
    base=$RUNS/$name
    rm -rf "$base"
    mkdir -p "$base"
    image=""
    initrd=""
    kernel=$(uname -r)
    if [ "$name" != host ]; then
        pkg=$(resolve "$meta")
        if [ -n "$pkg" ]; then image=$(kernel_image "$pkg") || image=""; fi
        if [ -z "$image" ]; then
            why="$name: cannot resolve or download ${pkg:-$meta} (apt-cache, apt-get download)"
            if [ "$REQUIRE" = 1 ]; then
                line="$name FAIL  $why (CHAINREC_REQUIRE_KERNELS=1)"
                failures=$((failures + 1))
                fail_lines+=("FAIL $name: $why")
            else
                line="$name SKIPPED  $why (CHAINREC_REQUIRE_KERNELS=1 makes this a failure)"
            fi
            results+=("$line")
            log "$line"
            continue
        fi
        kernel=${pkg#linux-image-}
        initrd=$base/initramfs.cpio
        build_initramfs "$initrd" "$CACHE/$pkg/modules"
    fi
    for i in $(seq "$LOOPS"); do
        out=$base
        [ "$LOOPS" = 1 ] || out=$base/boot-$i
        mkdir -p "$out"
        console=$out/console.log
        t0=$(date +%s)
        timed_out=0
        STOP_WHY=""
        if [ "$name" = host ]; then
            how=native
            data=$out/data.b64
            CHAINREC_CHECK_MODE=$MODE sh tools/kernels/check.sh "$BIN" "$out/work" "$data" >"$console" 2>&1
            echo "CHAINREC-VM-EXIT done" >>"$console"
        else
            data=$out/data.img
            log "$name: booting $kernel${LOOPS:+ ($i of $LOOPS)}"
            if [ "$accel" = probe ]; then
                boot "$image" "$initrd" kvm "$out" 60
                if [ $? = 0 ] && grep -aq '^CHAINREC-VM-EXIT' "$console"; then
                    accel=kvm
                else
                    log "KVM did not boot within 60 s (nested KVM here hangs after the boot stub): using TCG"
                    accel=tcg
                fi
            fi
            if ! grep -aqs '^CHAINREC-VM-EXIT' "$console"; then
                boot "$image" "$initrd" "$accel" "$out"
                [ $? != 1 ] || timed_out=1
            fi
            how=$accel
            [ "$accel" != tcg ] || how="tcg $THREAD"
        fi
        secs=$(($(date +%s) - t0))
        checks=$(grep -a -c '^CHECK .* PASS' "$console")
        bad=$(grep -a -c '^CHECK .* FAIL' "$console")
        got=$(fallbacks_of "$console")
        finished=0
        grep -aq '^CHAINREC-VM-EXIT' "$console" && finished=1
        kline=$(first_kernel_failure "$console")
        verdict=PASS
        class=""
        first=""
        note=""
        if [ -n "$kline" ]; then
            class=$(kclass "$kline")
            first=$kline
            note="kernel failure ($class): '$kline'"
        fi
        if [ "$finished" = 0 ]; then
            last=$(grep -a '^CHECK ' "$console" | tail -1 | tr -d '\r' | cut -c1-80)
            if ! grep -aq CHAINREC-VM-BOOTED "$console"; then
                c=no-init
                n="the kernel did not reach its init"
            elif [ "$timed_out" = 1 ]; then
                c=timeout
                n="$STOP_WHY (last: ${last:-no check})"
            else
                c=died
                n="the VM stopped before the checks ended (last: ${last:-no check})"
            fi
            n="$n; last kernel lines: $(last_kernel_lines "$console")"
            [ -n "$class" ] || {
                class=$c
                first=$n
            }
            note="${note:+$note; }$n"
        elif [ "$bad" -gt 0 ] || [ "$checks" -eq 0 ]; then
            n="$(grep -a '^CHECK .* FAIL' "$console" | head -3 | tr -d '\r' | tr '\n' ' ')"
            [ -n "$n" ] || n="no check passed"
            [ -n "$class" ] || {
                class=check
                first=$n
            }
            note="${note:+$note; }$n"
        elif [ "$MODE" = full ] && ! one_of "$got" "$expect"; then
            n="fallbacks reported: '$got', expected: '$expect' (tools/kernels/run.sh MATRIX)"
            [ -n "$class" ] || {
                class=fallbacks
                first=$n
            }
            note="${note:+$note; }$n"
        fi
        # The analysis side reads the trace recorded there (full and nosampler modes).
        info=""
        rm -f "$out/trace.zst"
        if [ -s "$data" ]; then
            tr -d '\r\0' <"$data" | sed -n '/^BEGIN-TRACE$/,/^END-TRACE$/p' | sed '1d;$d' |
                base64 -d >"$out/trace.zst" 2>/dev/null
        fi
        # A failing flight check's dump (check.sh send_flight_dump), at the 8 MiB mark.
        rm -f "$out/flight-dump.zst"
        if [ -s "$data" ] && [ "$(stat -c %s "$data")" -gt 8388608 ]; then
            dd if="$data" bs=1048576 skip=8 2>/dev/null | tr -d '\r\0' |
                sed -n '/^BEGIN-FLIGHT$/,/^END-FLIGHT$/p' | sed '1d;$d' |
                base64 -d >"$out/flight-dump.zst" 2>/dev/null
            [ -s "$out/flight-dump.zst" ] || rm -f "$out/flight-dump.zst"
        fi
        if [ "$MODE" = full ] || [ "$MODE" = nosampler ]; then
            if [ -s "$out/trace.zst" ] && "$BIN" info --verify "$out/trace.zst" >"$out/info.txt" 2>&1; then
                info="trace $(stat -c %s "$out/trace.zst") B read back"
            else
                n="the demo trace did not come back readable"
                [ -n "$class" ] || {
                    class=trace
                    first=$n
                }
                note="${note:+$note; }$n"
            fi
        fi
        [ -z "$class" ] || verdict=FAIL
        if [ "$verdict" = PASS ] && [ "$update_golden" = 1 ] && [ "$MODE" = full ] && [ -s "$out/trace.zst" ]; then
            mkdir -p "$GOLDEN"
            cp "$out/trace.zst" "$GOLDEN/$name.zst"
        fi
        hung=0
        [ "$finished" = 1 ] || hung=1
        tally "$name" "$i" "$verdict" "$class" "$first" "$hung"
        demo=$(sed -n 's/^CHECK demo PASS \(.*\) (.*/\1/p' "$console" | head -1)
        tag=$name
        [ "$LOOPS" = 1 ] || tag="$name#$i"
        line=$(printf '%-10s %-24s %s  %d passed, %d failed  %s, %d s  fallbacks: %s  %s  demo: %s' \
            "$tag" "$kernel" "$verdict" "$checks" "$bad" "$how" "$secs" "${got:-none}" "$info" "${demo:-?}")
        [ -z "$note" ] || line="$line  — $note"
        [ ! -s "$out/flight-dump.zst" ] || line="$line  (the failing flight dump: $out/flight-dump.zst)"
        results+=("$line")
        echo "kernels: $line"
        if [ "$verdict" != PASS ]; then
            failures=$((failures + 1))
            fl="FAIL $tag ($kernel): $class: $first ($console)"
            fail_lines+=("$fl")
            echo "kernels: $fl"
            tr -d '\r' <"$console" | sed 's/^/    | /' | tail -60 >&2
        fi
    done
done

echo
echo "Kernel matrix ($BIN, $(stat -c %s "$BIN") bytes; mode $MODE; tcg thread=$THREAD, $SMP vCPUs, clock ${CLOCK:-tsc=reliable}; $HOG host hog(s); $LOOPS boot(s) per kernel):"
printf '  %s\n' "${results[@]}"
if [ "$LOOPS" != 1 ]; then
    echo "Tally:"
    for name in "${names[@]}"; do
        [ -n "${T_BOOTS[$name]:-}" ] || continue
        printf '  %-10s boots %d, passed %d, hangs %d\n' "$name" "${T_BOOTS[$name]}" "${T_PASS[$name]:-0}" "${T_HANG[$name]:-0}"
        for c in ${T_CLASSES[$name]:-}; do
            printf '      %s x%d, first: %s\n' "$c" "${T_COUNT[$name|$c]}" "${T_FIRST[$name|$c]}"
        done
    done
fi
if [ "$failures" -gt 0 ]; then
    printf '%s\n' "${fail_lines[@]}" | sed 's/^/kernels: /'
    echo "kernels: $failures failure(s)"
    exit 1
fi
exit 0
