/* SPDX-License-Identifier: GPL-2.0 */
/* Task identity: kernel threads, cgroup ids, comm records, task storage, first sightings,
 * the -p filter. */

static __always_inline bool is_kthread(struct task_struct *t)
{
	return t->flags & 0x00200000; /* PF_KTHREAD */
}

/* A task that never runs in user mode: a kernel thread, or an io_uring worker (iou-wrk-*,
 * iou-sqp-*: PF_IO_WORKER, same bit since 5.12). Io workers share their process's mm but
 * never return to user space, so a user stack walk of theirs finds nothing ([missing
 * stack]) or the stale registers of their creation ([unknown] frames). */
static __always_inline bool no_user_mode(struct task_struct *t)
{
	return t->flags & (0x00200000 /* PF_KTHREAD */ | 0x00000010 /* PF_IO_WORKER */);
}

/* The cgroup v2 id of t (what bpf_get_current_cgroup_id() gives for current): the kernfs
 * node id of its cgroup on the default hierarchy. */
static __always_inline __u64 task_cgid(struct task_struct *t)
{
	if (!track_cgroups)
		return 0;
	return BPF_CORE_READ(t, cgroups, dfl_cgrp, kn, id);
}

/* Comm record of t, named `name` (t->comm, or the new name at a rename) and carrying its
 * cgroup id. Returns false when the ring buffer is full (counted): a first sighting is then
 * not marked seen, so the next event of the task tries again and it does not stay
 * unnamed. */
static __always_inline bool emit_comm(struct task_struct *t, const char *name, __u8 reason,
				      __u64 ts, __u64 cgid)
{
	struct ev_comm *e = bpf_ringbuf_reserve(&rb, sizeof(*e), 0);
	if (!e) {
		count(C_RB_FULL);
		return false;
	}
	fill_task_header(&e->h, ts, EV_COMM, reason, t, is_kthread(t) ? COMM_KTHREAD : 0);
	e->cgid = cgid;
	bpf_probe_read_kernel_str(e->comm, sizeof(e->comm), name);
	bpf_ringbuf_submit(e, rb_flags());
	return true;
}

/* The state of t; with `create`, inserted when missing (a preallocated element: no
 * allocation, see maps.bpf.h). NULL when missing, or when the map is full (counted). */
static __always_inline struct task_st *tst(struct task_struct *t, bool create)
{
	__u64 key = (__u64)t;
	struct task_st *s = bpf_map_lookup_elem(&tslots, &key);
	struct task_st fresh = {};
	long err;

	if (s || !create)
		return s;
	err = bpf_map_update_elem(&tslots, &key, &fresh, BPF_NOEXIST);
	if (err && err != -17 /* EEXIST: inserted meanwhile by another CPU */) {
		count_atomic(C_TSLOT_FULL);
		return 0;
	}
	return bpf_map_lookup_elem(&tslots, &key);
}

/* t's last switch-out (TASK_DEAD): its state goes, before its task_struct can be freed and
 * its address given to a new task. */
static __always_inline void tst_forget(struct task_struct *t)
{
	__u64 key = (__u64)t;

	bpf_map_delete_elem(&tslots, &key);
}

/* First sighting: emit the task's identity once. */
static __always_inline struct task_st *seen(struct task_struct *t, __u64 ts, __u8 reason)
{
	struct task_st *s;
	if (t->pid == 0)
		return 0;
	s = tst(t, true);
	if (s && !(s->flags & TS_SEEN)) {
		s->cgid = task_cgid(t);
		if (emit_comm(t, t->comm, reason, ts, s->cgid))
			s->flags |= TS_SEEN;
	}
	return s;
}

static __always_inline bool interesting(struct task_struct *t, struct task_st *s)
{
	__u32 tgid;
	if (!filter_enabled)
		return true;
	if (s && (s->flags & TS_INTERESTING))
		return true;
	tgid = t->tgid;
	return bpf_map_lookup_elem(&filter_tgids, &tgid) != 0;
}
