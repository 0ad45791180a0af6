// SPDX-License-Identifier: GPL-2.0
/* The least per-task state a lazy recorder needs, on top of ringbuf.bpf.c: at each switch,
 * store prev's switch-out time and read (and clear) next's in task storage, which is what
 * deciding "was this wait longer than the stack threshold" takes. Loaded by
 * benches/suite.sh (config floor-taskstate). */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "GPL";

#include "record.h"

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, __u64);
} off_ts SEC(".maps");

__u64 long_waits = 0;

SEC("tp_btf/sched_switch")
int BPF_PROG(floor_ts_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	__u64 ts = bpf_ktime_get_ns();
	__u64 *p = bpf_task_storage_get(&off_ts, prev, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	__u64 *n = bpf_task_storage_get(&off_ts, next, 0, 0);

	if (p)
		*p = ts;
	if (n && *n) {
		if (ts - *n > 100000)
			__sync_fetch_and_add(&long_waits, 1);
		*n = 0;
	}
	put(ts, 1, prev->pid, next->pid, prev->__state);
	return 0;
}

SEC("tp_btf/sched_waking")
int BPF_PROG(floor_ts_waking, struct task_struct *p)
{
	put(bpf_ktime_get_ns(), 2, p->pid, bpf_get_smp_processor_id(), 0);
	return 0;
}
