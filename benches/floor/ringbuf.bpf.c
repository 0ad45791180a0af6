// SPDX-License-Identifier: GPL-2.0
/* The floor of *recording* the scheduler: on the same hooks as chainrec, read the clock and
 * put one 32-byte record per event into a BPF ring buffer (no wakeup; the loader polls it),
 * nothing else: no per-task state, no filters, no stacks. Reserve failures (a full ring
 * buffer) are counted in `dropped`. Loaded by benches/suite.sh (config floor-ringbuf). */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "GPL";

#include "record.h"

SEC("tp_btf/sched_switch")
int BPF_PROG(floor_rb_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	put(bpf_ktime_get_ns(), 1, prev->pid, next->pid, prev->__state);
	return 0;
}

SEC("tp_btf/sched_waking")
int BPF_PROG(floor_rb_waking, struct task_struct *p)
{
	put(bpf_ktime_get_ns(), 2, p->pid, bpf_get_smp_processor_id(), 0);
	return 0;
}
