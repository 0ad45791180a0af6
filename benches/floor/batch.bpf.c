// SPDX-License-Identifier: GPL-2.0
/* What batching would win: the same 32-byte records as ringbuf.bpf.c, but staged in a
 * per-CPU buffer and committed to the ring buffer 32 at a time (one 1 KiB
 * bpf_ringbuf_output). Not a recorder: a CPU's last partial batch is never flushed, which a
 * real design would have to do on the switch to idle and by a timer, and the consumer would
 * have to reorder whole batches. Loaded by benches/suite.sh (config floor-batch). */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "GPL";

#define BATCH 32

#include "record.h"

struct stage {
	__u32 n;
	__u32 pad;
	struct rec recs[BATCH];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct stage);
} staging SEC(".maps");

static __always_inline void stage(__u32 kind, __u32 a, __u32 b, __u32 c)
{
	__u32 zero = 0;
	struct stage *s = bpf_map_lookup_elem(&staging, &zero);
	__u32 i;

	if (!s)
		return;
	i = s->n;
	if (i >= BATCH)
		i = 0;
	s->recs[i].ts = bpf_ktime_get_ns();
	s->recs[i].kind = kind;
	s->recs[i].a = a;
	s->recs[i].b = b;
	s->recs[i].c = c;
	s->recs[i].pad = 0;
	i++;
	if (i == BATCH) {
		if (bpf_ringbuf_output(&rb, s->recs, sizeof(s->recs), BPF_RB_NO_WAKEUP))
			__sync_fetch_and_add(&dropped, BATCH);
		i = 0;
	}
	s->n = i;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(floor_batch_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	stage(1, prev->pid, next->pid, prev->__state);
	return 0;
}

SEC("tp_btf/sched_waking")
int BPF_PROG(floor_batch_waking, struct task_struct *p)
{
	stage(2, p->pid, bpf_get_smp_processor_id(), 0);
	return 0;
}
