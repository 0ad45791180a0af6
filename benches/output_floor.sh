#!/bin/bash
# The output floor (session 28): how long this machine takes merely to write as many bytes as
# `chainrec chains TRACE` prints, to each place a chain graph goes (a file on tmpfs, a file on
# disk, a pipe), against the wall-time budget a throughput target leaves for the whole run.
# dd writes zeros in 1 MiB blocks, the cheapest producer there is: no formatting, no engine.
# If dd alone needs longer than the budget, the target is below a physical floor for that
# output, whatever the engine does.
#
# Usage: CHAINREC=target/release/chainrec benches/output_floor.sh TRACE [EVENTS_PER_S] [ROUNDS]
#   EVENTS_PER_S: the target (default 18000000, issue 37's busy20m target); ROUNDS default 5.
#   DISK_DIR: where the on-disk file goes (default /var/tmp); SHM_DIR: tmpfs (default /dev/shm).
# Prints each destination's median and range of ROUNDS, and chainrec's own run to /dev/null and to
# tmpfs for comparison.
set -euo pipefail
trace=${1:?usage: CHAINREC=... benches/output_floor.sh TRACE [EVENTS_PER_S] [ROUNDS]}
target=${2:-18000000}
rounds=${3:-5}
bin=${CHAINREC:-target/release/chainrec}
disk=${DISK_DIR:-/var/tmp}
shm=${SHM_DIR:-/dev/shm}
[ -x "$bin" ] || { echo "output_floor: $bin is not an executable; set CHAINREC=path/to/chainrec" >&2; exit 1; }
[ -r "$trace" ] || { echo "output_floor: cannot read $trace" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work" "$disk/output_floor.$$" "$shm/output_floor.$$"' EXIT

if ! "$bin" chains "$trace" 2>"$work/err" | wc -c >"$work/bytes"; then
    echo "output_floor: $bin chains $trace failed:" >&2
    tail -3 "$work/err" >&2
    exit 1
fi
bytes=$(cat "$work/bytes")
events=$(sed -n 's/^chainrec: chains: \([0-9]*\) events in .*/\1/p' "$work/err" | head -1)
[ -n "$events" ] || { echo "output_floor: chainrec printed no event count:" >&2; tail -3 "$work/err" >&2; exit 1; }
budget=$(awk -v e="$events" -v t="$target" 'BEGIN{printf "%.3f", e / t}')
printf '%s: %d events, %d bytes of folded output (%.2f GB); at %d events/s the whole run has %s s\n' \
    "$trace" "$events" "$bytes" "$(awk -v b="$bytes" 'BEGIN{print b / 1e9}')" "$target" "$budget"

# Wall seconds of one run of "$@", from /usr/bin/time.
wall() { /usr/bin/time -o "$work/t" -f "%e" "$@" >/dev/null 2>&1; cat "$work/t"; }
# "median (min–max)" of ROUNDS runs of "$@".
measure() {
    for _ in $(seq "$rounds"); do wall "$@"; done | sort -n |
        awk '{v[NR]=$1} END{printf "%.2f s (%.2f–%.2f)", v[int((NR+1)/2)], v[1], v[NR]}'
}
dd_to() { dd if=/dev/zero bs=1M count="$bytes" iflag=count_bytes of="$1" status=none; }
export -f dd_to
export bytes

printf '%-34s %s\n' "destination" "wall, median of $rounds (range)"
printf '%-34s %s\n' "dd -> /dev/null (no copy)" "$(measure bash -c 'dd_to /dev/null')"
printf '%-34s %s\n' "dd -> file on tmpfs ($shm)" "$(measure bash -c "dd_to $shm/output_floor.$$; rm -f $shm/output_floor.$$")"
printf '%-34s %s\n' "dd -> file on disk ($disk)" "$(measure bash -c "dd_to $disk/output_floor.$$; rm -f $disk/output_floor.$$")"
printf '%-34s %s\n' "dd -> pipe -> cat > /dev/null" "$(measure bash -c 'dd_to /dev/stdout | cat >/dev/null')"
printf '%-34s %s\n' "chainrec chains > /dev/null" "$(measure bash -c "'$bin' chains '$trace' >/dev/null 2>&1")"
printf '%-34s %s\n' "chainrec chains > file on tmpfs" "$(measure bash -c "'$bin' chains '$trace' >$shm/output_floor.$$ 2>/dev/null; rm -f $shm/output_floor.$$")"
