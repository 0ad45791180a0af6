/* SPDX-License-Identifier: GPL-2.0 */
/* CPU-quota throttling records (docs/RECORDER.md, "Throttling"). */

/* The group a throttled cfs_rq belongs to, as (cgroup id, hierarchy id): the kernfs node
 * id of its cgroup (= the inode of its directory) and 0 for cgroup v2, the v1 hierarchy
 * (the one the cpu controller is mounted on) otherwise. */
static __always_inline void emit_throttle(__u64 ts, __u8 what, __u32 tid, struct task_group *tg)
{
	struct cgroup *cg = BPF_CORE_READ(tg, css.cgroup);
	__u64 id = BPF_CORE_READ(cg, kn, id);
	__u32 hier = BPF_CORE_READ(cg, root, hierarchy_id);

	emit_ev(ts, EV_THROTTLE, what, ST_NONE, ST_NONE, tid, (__u32)id, (__u32)(id >> 32), hier);
}

/* The nearest throttled group of a task found held by throttling, recorded. A global
 * function, so the verifier checks its 16-step walk once, not once for every path of
 * on_switch that reaches a preemption (that tripled on_switch's verified instructions and
 * made loading take seconds; docs/RECORDER.md, "Load time"). The task is current (prev of
 * a switch is the task switching out): a global function takes only scalars and memory
 * before 6.8's argument tags, so it is read as an address and every read is a probe read.
 * throttle_count of a cfs_rq counts the throttled groups among itself and its ancestors,
 * so the nearest throttled one is the first whose count exceeds its parent's. (Read as
 * ints: cfs_rq.throttled is a bitfield on 6.18, an int before.) */
__noinline int throttle_walk(__u32 tid, __u64 ts)
{
	struct task_struct *prev = (struct task_struct *)bpf_get_current_task();
	struct sched_entity *se = &prev->se;
	struct cfs_rq *cfs_rq = BPF_CORE_READ(se, cfs_rq);
	int i;

	for (i = 0; i < 16 && cfs_rq; i++) {
		struct sched_entity *gse = BPF_CORE_READ(se, parent);
		struct cfs_rq *up = gse ? BPF_CORE_READ(gse, cfs_rq) : 0;
		int n = BPF_CORE_READ(cfs_rq, throttle_count);

		if (!up || n > BPF_CORE_READ(up, throttle_count))
			break;
		se = gse;
		cfs_rq = up;
	}
	if (cfs_rq)
		emit_throttle(ts, THR_SWITCH_OUT, tid, BPF_CORE_READ(cfs_rq, tg));
	return 0;
}

/* A runnable switch-out: was prev held off by CPU-quota throttling? On kernels with
 * task-based throttling (6.18+: task_struct.throttled) the task is dequeued on its return
 * to user space and switched out with `throttled` set; before, the whole cfs_rq was
 * dequeued and its tasks preempted, with throttle_count > 0 on their cfs_rq. Then the
 * nearest throttled group (the one whose quota ran out) is recorded. One load per
 * preemption; the rest only on throttled switch-outs (at most one per task and period). */
static __always_inline void throttle_mark(struct task_struct *prev, __u32 prev_pid, __u64 ts)
{
	bool held;

	if (bpf_core_field_exists(prev->throttled))
		held = BPF_CORE_READ(prev, throttled);
	else
		held = BPF_CORE_READ(prev, se.cfs_rq, throttle_count) > 0;
	if (!held || prev_pid == 0)
		return;
	throttle_walk(prev_pid, ts); /* prev is current */
}
