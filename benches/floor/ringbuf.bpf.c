// SPDX-License-Identifier: GPL-2.0
/* The floor of *recording* the scheduler: on the same hooks as chainrec, read the clock and
 * put one 32-byte record per event into a BPF ring buffer (no wakeup; the loader polls it),
 * nothing else: no per-task state, no filters, no stacks. Reserve failures (a full ring
 * buffer) are counted in `dropped`. Loaded by benches/suite.sh (config floor-ringbuf). */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "GPL";

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 32 << 20);
} rb SEC(".maps");

__u64 dropped = 0;

struct rec {
	__u64 ts;
	__u32 kind, a, b, c;
	__u64 pad;
};

static __always_inline void put(__u32 kind, __u32 a, __u32 b, __u32 c)
{
	struct rec *r = bpf_ringbuf_reserve(&rb, sizeof(*r), 0);

	if (!r) {
		__sync_fetch_and_add(&dropped, 1);
		return;
	}
	r->ts = bpf_ktime_get_ns();
	r->kind = kind;
	r->a = a;
	r->b = b;
	r->c = c;
	r->pad = 0;
	bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
}

SEC("tp_btf/sched_switch")
int BPF_PROG(floor_rb_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	put(1, prev->pid, next->pid, prev->__state);
	return 0;
}

SEC("tp_btf/sched_waking")
int BPF_PROG(floor_rb_waking, struct task_struct *p)
{
	put(2, p->pid, bpf_get_smp_processor_id(), 0);
	return 0;
}
