#!/usr/bin/env bash
# The kernel matrix (`./x.sh kernels`): boots each kernel of MATRIX below in QEMU and runs
# tools/kernels/check.sh inside with the packaged chainrec (`./x.sh package`), then the
# same check on the running (host) kernel. One line per kernel with its counts.
#
# Each VM: Debian's kernel image (`apt-get download`, cached under target/kernels) and an
# initramfs of busybox-static, tools/kernels/init, check.sh and the packaged binary only:
# nothing of the host is mounted, so the binary shows it needs nothing installed. The
# console is the first serial port, the demo's trace comes back base64 on the second.
# KVM is used when it boots (probed once per run); otherwise QEMU's TCG, which needs no
# KVM and is 10-50x slower.
#
# Usage: tools/kernels/run.sh [--update-golden] [NAME...]   (NAME: a MATRIX name or host)
# Environment:
#   CHAINREC_REQUIRE_KERNELS=1  a kernel that cannot be booted fails instead of skipping
#   CHAINREC_VM_ACCEL=kvm|tcg   skip the KVM probe
#   CHAINREC_VM_TIMEOUT=SECS    per VM boot (default 300; a VM takes 25-105 s under TCG)
#   CHAINREC_PACKAGE_BIN=PATH   the binary to test (default target/package/chainrec)
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
CACHE=$ROOT/target/kernels
BIN=${CHAINREC_PACKAGE_BIN:-$ROOT/target/package/chainrec}
TIMEOUT=${CHAINREC_VM_TIMEOUT:-300}
REQUIRE=${CHAINREC_REQUIRE_KERNELS:-0}
GOLDEN=$ROOT/testdata/kernels

# name | Debian package that depends on the image (meta package) | fallbacks the recorder
# must report there (the features it cannot use: each one is thus exercised on a kernel
# that needs it; "," separated, sorted).
MATRIX=(
    "6.1|linux-image-amd64|bpf_rdonly_cast,task_work user stacks"
    "6.1-cloud|linux-image-cloud-amd64|bpf_rdonly_cast,task_work user stacks"
    "6.1-rt|linux-image-rt-amd64|bpf_rdonly_cast,task_work user stacks"
    "6.12|linux-image-6.12-amd64|task_work user stacks"
    "host||fentry on do_softirq"
)

log() { printf '\033[1mkernels:\033[0m %s\n' "$*" >&2; }

update_golden=0
want=()
for a in "$@"; do
    case "$a" in
    --update-golden) update_golden=1 ;;
    -*)
        echo "usage: tools/kernels/run.sh [--update-golden] [NAME...]" >&2
        exit 2
        ;;
    *) want+=("$a") ;;
    esac
done

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

mkdir -p "$CACHE/runs"

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

# The kernel image of package $1, downloaded once into $CACHE/$1/.
kernel_image() {
    local pkg=$1 dir=$CACHE/$1 tmp
    if ! ls "$dir"/vmlinuz-* >/dev/null 2>&1; then
        tmp=$(mktemp -d "$CACHE/dl.XXXXXX")
        log "downloading $pkg"
        (cd "$tmp" && apt-get download -qq "$pkg" 2>&1 | grep -v '^W: Download is performed unsandboxed' >&2) || true
        local deb
        deb=$(ls "$tmp"/*.deb 2>/dev/null | head -1)
        [ -n "$deb" ] || {
            rm -rf "$tmp"
            return 1
        }
        mkdir -p "$tmp/x"
        dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$tmp/x" --wildcards './boot/vmlinuz-*' './boot/config-*'
        mkdir -p "$dir"
        mv "$tmp"/x/boot/* "$dir"/
        rm -rf "$tmp"
    fi
    ls "$dir"/vmlinuz-* | head -1
}

# The initramfs: busybox, init, check.sh and the binary under test (uncompressed cpio).
INITRD=$CACHE/initramfs.cpio
build_initramfs() {
    local d=$CACHE/initramfs
    rm -rf "$d"
    mkdir -p "$d/bin"
    cp "$BUSYBOX" "$d/bin/busybox"
    cp tools/kernels/init "$d/init"
    cp tools/kernels/check.sh "$d/check.sh"
    cp tools/kernels/watchdog "$d/watchdog"
    cp "$BIN" "$d/chainrec"
    chmod +x "$d/init" "$d/chainrec"
    (cd "$d" && find . | "$BUSYBOX" cpio -o -H newc >"$INITRD" 2>/dev/null)
    rm -rf "$d"
}
build_initramfs

# Boots $1 (kernel image) with accelerator $2; console in $3/console.log, data in
# $3/data.b64. With $4 > 0, gives up after $4 s if the init did not start (KVM probe).
# Returns 0 when the VM ran to its end (the check's own verdict is in the console).
boot() {
    local image=$1 accel=$2 out=$3 probe=${4:-0} cpu pid t=0
    rm -f "$out/console.log" "$out/data.b64" "$out"/monitor.*
    : >"$out/console.log"
    # QEMU's monitor on a pair of FIFOs (QEMU opens both read-write: nothing blocks),
    # asked at a timeout where the vCPUs are.
    mkfifo "$out/monitor.in" "$out/monitor.out"
    if [ "$accel" = kvm ]; then
        cpu="host,-arch-capabilities"
    else
        accel="tcg,thread=multi"
        cpu=max
    fi
    qemu-system-x86_64 -nodefaults -no-user-config -machine q35 -accel "$accel" -cpu "$cpu" \
        -smp 2 -m 1536 -display none -no-reboot -bios /usr/share/qemu/qboot.rom \
        -kernel "$image" -initrd "$INITRD" \
        -append "console=ttyS0 panic=-1 quiet loglevel=5 tsc=reliable unknown_nmi_panic softlockup_all_cpu_backtrace=1 no_timer_check chainrec.watchdog=$((TIMEOUT / 2))" \
        -serial "file:$out/console.log" -serial "file:$out/data.b64" -monitor "pipe:$out/monitor" \
        </dev/null >"$out/qemu.log" 2>&1 &
    pid=$!
    while kill -0 "$pid" 2>/dev/null; do
        sleep 1
        t=$((t + 1))
        if [ "$probe" -gt 0 ] && [ "$t" -ge "$probe" ] && ! grep -q CHAINREC-VM-BOOTED "$out/console.log"; then
            kill "$pid" 2>/dev/null
            wait "$pid" 2>/dev/null || true
            return 2
        fi
        if [ "$t" -ge "$TIMEOUT" ]; then
            vcpus_of "$out" >"$out/vcpus.log"
            log "timeout after $TIMEOUT s; vCPUs (CPL 0: kernel, 3: user; HLT=1: idle): $(awk '{n[$1 " " $3 " " $4]++} END {for (k in n) printf "%s x%d; ", k, n[k]}' "$out/vcpus.log")"
            # An NMI makes the kernel (booted with unknown_nmi_panic) panic and print where the
            # CPU that took it was, symbolized, even when both CPUs spin in the kernel with
            # interrupts off and the watchdog task cannot run. TCG prints slowly: give it 30 s.
            # (Each write to the monitor FIFO is bounded: a VM that ended meanwhile has
            # no reader left, and an open for writing would block for ever.)
            timeout 5 sh -c 'echo nmi >"$1"' sh "$out/monitor.in" || true
            for _ in $(seq 30); do
                kill -0 "$pid" 2>/dev/null || break
                grep -q 'Kernel Offset\|end Kernel panic' "$out/console.log" && break
                sleep 1
            done
            sed -n '/NMI received for unknown reason/,$p' "$out/console.log" | grep -v '\] \(Code: \|R[A-Z0-9]*: [0-9a-f]\{16\}\)' |
                head -40 | sed 's/^/    nmi| /' >&2
            kill "$pid" 2>/dev/null
            wait "$pid" 2>/dev/null || true
            return 1
        fi
    done
    wait "$pid" 2>/dev/null || true
    rm -f "$out"/monitor.*
    grep -q '^CHAINREC-VM-EXIT' "$out/console.log"
}

# Where the vCPUs of a VM that timed out are: each one's instruction pointer and privilege
# level (CPL 0: the kernel, 3: user space), sampled 5 times, 1 s apart (QEMU's monitor).
vcpus_of() {
    local out=$1 i
    timeout 30 cat "$out/monitor.out" >"$out/monitor.raw" 2>/dev/null &
    for i in 1 2 3 4 5; do
        timeout 5 sh -c 'echo "info registers -a" >"$1"' sh "$out/monitor.in" || true
        sleep 1
    done
    sleep 1
    kill $! 2>/dev/null
    wait $! 2>/dev/null || true
    tr -d '\r' <"$out/monitor.raw" | sed 's/\x1b\[[0-9;]*[A-Za-z]//g' |
        awk '/^CPU#/{cpu=$1} /^RIP=/{rip=$1} /CPL=/{match($0,/CPL=[0-9]/); c = substr($0, RSTART, RLENGTH); match($0, /HLT=[0-9]/); print cpu, rip, c, substr($0, RSTART, RLENGTH)}'
}

# KVM where it works: nested KVM on these VMs hangs right after the boot stub.
accel=${CHAINREC_VM_ACCEL:-}
if [ -z "$accel" ]; then
    if [ -r /dev/kvm ] && [ -w /dev/kvm ]; then accel=probe; else accel=tcg; fi
fi

# "a,b" sorted and joined, from FALLBACK lines.
fallbacks_of() { sed -n 's/^FALLBACK //p' "$1" | tr -d '\r' | sort -u | paste -sd, -; }

results=()
failures=0
for entry in "${MATRIX[@]}"; do
    IFS='|' read -r name meta expect <<<"$entry"
    if [ ${#want[@]} -gt 0 ] && ! printf '%s\n' "${want[@]}" | grep -qx "$name"; then
        continue
    fi
    out=$CACHE/runs/$name
    rm -rf "$out"
    mkdir -p "$out"
    t0=$(date +%s)
    how=""
    retried=""
    if [ "$name" = host ]; then
        how=native
        sh tools/kernels/check.sh "$BIN" "$out/work" "$out/data.b64" >"$out/console.log" 2>&1 || true
        echo "CHAINREC-VM-EXIT done" >>"$out/console.log"
        kernel=$(uname -r)
    else
        pkg=$(resolve "$meta")
        if [ -z "$pkg" ]; then
            skip_or_fail "$name: apt-cache cannot resolve $meta"
        fi
        image=$(kernel_image "$pkg") || skip_or_fail "$name: cannot download $pkg"
        kernel=${pkg#linux-image-}
        log "$name: booting $kernel"
        if [ "$accel" = probe ]; then
            if boot "$image" kvm "$out" 60; then
                accel=kvm
            else
                log "KVM did not boot within 60 s (nested KVM here hangs after the boot stub): using TCG"
                accel=tcg
            fi
        fi
        if ! grep -q '^CHAINREC-VM-EXIT' "$out/console.log" 2>/dev/null; then
            boot "$image" "$accel" "$out" || true
        fi
        # A kernel that died before its init ran (a boot-time check starved by a loaded
        # host under TCG) is booted once more; a check that ran and failed is not.
        if ! grep -q CHAINREC-VM-BOOTED "$out/console.log"; then
            log "$name: the kernel did not reach its init; booting once more"
            cp "$out/console.log" "$out/console.first.log"
            boot "$image" "$accel" "$out" || true
        fi
        # A VM that booted but never finished its checks is booted again, up to twice,
        # and the line says so: a kernel whose checks hang three times in a row fails.
        # The hangs seen are Debian 6.1 under TCG (in CI, up to two boots in a row): at
        # the timeout's NMI both vCPUs sat at the entry of the int3 handler, which
        # points at the int3-based live code patching that enabling a tracepoint does,
        # under QEMU's multi-threaded TCG (docs/RECORDER.md, after the matrix's lines).
        hung=0
        while [ "$hung" -lt 2 ] && grep -q CHAINREC-VM-BOOTED "$out/console.log" &&
            ! grep -q '^CHAINREC-VM-EXIT' "$out/console.log"; do
            hung=$((hung + 1))
            last=$(grep '^CHECK ' "$out/console.log" | tail -1 | cut -c1-60)
            log "$name: the VM did not finish within $TIMEOUT s (last: ${last:-no check}); booting again ($hung of 2)"
            cp "$out/console.log" "$out/console.hung$hung.log"
            [ ! -e "$out/vcpus.log" ] || mv "$out/vcpus.log" "$out/vcpus.hung$hung.log"
            boot "$image" "$accel" "$out" || true
            retried="retried: $hung boot(s) hung, the last after '${last:-boot}' ($out/console.hung$hung.log)"
        done
        how=$accel
    fi
    secs=$(($(date +%s) - t0))
    console=$out/console.log
    checks=$(grep -c '^CHECK .* PASS' "$console" || true)
    bad=$(grep -c '^CHECK .* FAIL' "$console" || true)
    got=$(fallbacks_of "$console")
    verdict=PASS
    note=""
    if ! grep -q '^CHAINREC-VM-EXIT' "$console"; then
        verdict=FAIL
        note="the VM did not finish (see $console)"
    elif [ "$bad" -gt 0 ] || [ "$checks" -eq 0 ]; then
        verdict=FAIL
        note="$(grep '^CHECK .* FAIL' "$console" | head -3 | tr '\n' ' ')"
    elif [ "$got" != "$expect" ]; then
        verdict=FAIL
        note="fallbacks reported: '$got', expected: '$expect' (tools/kernels/run.sh MATRIX)"
    fi
    # The analysis side reads the trace recorded there.
    info=""
    if [ -s "$out/data.b64" ]; then
        tr -d '\r' <"$out/data.b64" | sed -n '/^BEGIN-TRACE$/,/^END-TRACE$/p' | sed '1d;$d' |
            base64 -d >"$out/trace.zst" 2>/dev/null || true
    fi
    if [ -s "$out/trace.zst" ] && "$BIN" info --verify "$out/trace.zst" >"$out/info.txt" 2>&1; then
        info="trace $(stat -c %s "$out/trace.zst") B read back"
        if [ "$update_golden" = 1 ] && [ "$verdict" = PASS ]; then
            mkdir -p "$GOLDEN"
            cp "$out/trace.zst" "$GOLDEN/$name.zst"
        fi
    else
        verdict=FAIL
        note="$note; the demo trace did not come back readable"
    fi
    [ "$verdict" = PASS ] || failures=$((failures + 1))
    demo=$(sed -n 's/^CHECK demo PASS \(.*\) (.*/\1/p' "$console" | head -1)
    line=$(printf '%-10s %-24s %s  %d passed, %d failed  %s, %d s  fallbacks: %s  %s  demo: %s' \
        "$name" "$kernel" "$verdict" "$checks" "$bad" "$how" "$secs" "${got:-none}" "$info" "${demo:-?}")
    [ -z "$note" ] || line="$line  — $note"
    [ -z "${retried:-}" ] || line="$line  ($retried)"
    results+=("$line")
    echo "kernels: $line"
    if [ "$verdict" != PASS ]; then
        sed 's/^/    | /' "$console" | tail -60 >&2
    fi
done

echo
echo "Kernel matrix ($BIN, $(stat -c %s "$BIN") bytes):"
printf '  %s\n' "${results[@]}"
if [ "$failures" -gt 0 ]; then
    echo "kernels: $failures kernel(s) failed"
    exit 1
fi
