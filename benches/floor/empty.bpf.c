// SPDX-License-Identifier: GPL-2.0
/* The floor of tracing the scheduler with BPF at all: programs on the same tp_btf hooks as
 * chainrec (sched_switch, sched_waking) that do nothing. Loaded
 * by benches/suite.sh (config floor-empty) through benches/floor/attach.py. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "GPL";

SEC("tp_btf/sched_switch")
int BPF_PROG(floor_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	return 0;
}

SEC("tp_btf/sched_waking")
int BPF_PROG(floor_waking, struct task_struct *p)
{
	return 0;
}
