/* SPDX-License-Identifier: GPL-2.0 */
/* Lazy user stacks: the user half of an off-CPU stack pair, taken by a task_work callback
 * on the task's return to user space, by the sys_exit program (fallback), or at the next
 * switch-out. */

/* Fill the user-stack half of a lazy off-CPU stack pair (EV_OFFCPU, aux 1), taken in the
 * task's own context on its way back to user space. uip/usp are the user registers read at
 * switch-in: when they still match, the task is returning from the same wait and the user
 * stack is the one it waited with; otherwise (e.g. a signal handler frame was set up first)
 * the status is USER_PREEMPTED. */
static __always_inline void fill_user_half(struct ev_ustk *e, struct task_struct *cur, __u64 uip,
					   __u64 usp)
{
	struct pt_regs *ur;

	fill_task_header(&e->h, bpf_ktime_get_ns(), EV_OFFCPU, 1 /* user-stack half */, cur, 0);
	ur = (struct pt_regs *)bpf_task_pt_regs(cur);
	if (cur->flags & PF_EXITING) {
		e->h.ust = ST_EXITING;
	} else if (ur && ur->ip == uip && ur->sp == usp) {
		__u64 t0 = prof_t0();
		long r = bpf_get_task_stack(cur, e->frames, sizeof(e->frames), BPF_F_USER_STACK);

		prof_add(P_CB_USTACK, t0, true);
		if (r < 0) {
			e->h.ust = ST_FAILED;
		} else {
			e->h.ust = ST_PRESENT;
			e->h.nu = (__u8)(r / 8);
		}
		if (ucopy_max) {
			__u32 nu = e->h.nu;

			if (nu > MAX_FRAMES)
				nu = MAX_FRAMES;
			if (copy_ustack_block((struct ucopy_block *)&e->frames[nu])) {
				if (e->h.ust != ST_PRESENT) /* the walk failed (nu = 0) */
					e->h.ust = ST_PRESENT;
				e->h.ust |= UST_COPY;
			}
		}
	} else {
		e->h.ust = ST_UPREEMPT;
	}
}

/* Bytes of a filled user half: header, nu frames, the copy block (if any). */
static __always_inline __u64 user_half_size(struct ev_ustk *e)
{
	__u64 n = e->h.nu, size;

	if (n > MAX_FRAMES)
		n = MAX_FRAMES;
	size = sizeof(struct ev) + n * 8;
	if ((e->h.ust & UST_COPY) && ring_busy()) {
		drop_copy(&e->h);
		count_atomic(C_UCOPY_BUSY);
	}
	if (e->h.ust & UST_COPY) {
		struct ucopy *u = (struct ucopy *)&e->frames[n];
		__u64 len = u->len;

		if (len > UCOPY_MAX)
			len = UCOPY_MAX;
		size += sizeof(struct ucopy) + len;
	}
	if (size > sizeof(*e))
		size = sizeof(*e);
	return size;
}

/* Emit the user half. The program may be preempted (task_work callback, sys_exit), so a
 * per-CPU scratch can be in use by a preempted owner: it is claimed with a compare-and-swap.
 * A claimed scratch is output at the record's real size (typically 1-4 KiB with a stack
 * copy); reserving in place would hold sizeof(struct ev_ustk), ~21 KiB, of the ring buffer
 * per record until the consumer reads it, which is what filled the ring buffer when many
 * threads' long waits ended at once. Only when the scratch is taken is the record reserved
 * in place at its maximal size (counted: C_UHALF_INPLACE). */
static __always_inline void emit_user_half(struct task_struct *cur, __u64 uip, __u64 usp)
{
	__u32 zero = 0;
	struct uhalf_slot *slot = bpf_map_lookup_elem(&uhalf_scratch, &zero);
	struct ev_ustk *e;

	if (slot && __sync_val_compare_and_swap(&slot->busy, 0, 1) == 0) {
		e = &slot->e;
		fill_user_half(e, cur, uip, usp);
		if (bpf_ringbuf_output(&rb, e, user_half_size(e), rb_flags()))
			count_atomic(C_RB_FULL);
		__sync_lock_test_and_set(&slot->busy, 0);
		return;
	}
	count_atomic(C_UHALF_INPLACE);
	e = bpf_ringbuf_reserve(&rb, sizeof(*e), 0);
	if (!e) {
		count_atomic(C_RB_FULL);
		return;
	}
	fill_user_half(e, cur, uip, usp);
	bpf_ringbuf_submit(e, rb_flags());
}

/* task_work callback: runs in the task that waited, before it returns to user space. */
static int user_stack_cb(struct bpf_map *map, void *key, void *value)
{
	__u64 t0 = prof_t0();
	struct task_struct *cur = bpf_get_current_task_btf();
	struct task_st *s = tst(cur, false);

	if (!s)
		return 0;
	s->tw_queued = 0;
	if (s->tw_armed) { /* else already taken at a switch-out (user_half_at_switch) */
		s->tw_armed = 0;
		emit_user_half(cur, s->uip, s->usp);
	}
	prof_add(P_CB_ALL, t0, true);
	return 0;
}

/* Arrange for the user stack of `next`, which is being switched in after a long wait, to be
 * taken on its way back to user space. Returns the user stack status of the kernel-half
 * record: NONE when a user half will follow, FAILED or USER_PREEMPTED when it will not. */
static __always_inline __u8 arm_user_stack(struct task_struct *next, __u32 tid, struct task_st *ns)
{
	struct pt_regs *regs;

	/* sys_exit path: a task preempted in user mode makes no syscall exit soon. */
	if (!use_task_work && !(ns->flags & TS_BLOCKED))
		return ST_UPREEMPT;
	regs = (struct pt_regs *)bpf_task_pt_regs(next);
	if (!regs)
		return ST_FAILED;
	ns->uip = regs->ip;
	ns->usp = regs->sp;
	if (use_task_work) {
		/* Blocked and preempted waits alike: the callback runs at the return to user
		 * space, where the user registers are those of the blocking syscall or of the
		 * user-mode preemption point, i.e. the user stack the task waited with. */
		struct tw_val *v;
		__u64 t0;
		int err;

		if (!bpf_ksym_exists(bpf_task_work_schedule_resume_impl))
			return ST_FAILED;
		v = bpf_map_lookup_elem(&twmap, &tid);
		if (!v) {
			struct tw_val z = {};

			bpf_map_update_elem(&twmap, &tid, &z, BPF_NOEXIST);
			v = bpf_map_lookup_elem(&twmap, &tid);
			if (!v) {
				count(C_TW_FAILED);
				return ST_FAILED;
			}
			ns->flags |= TS_TWSLOT;
		}
		t0 = prof_t0();
		err = bpf_task_work_schedule_resume_impl(next, &v->tw, &twmap, user_stack_cb, 0);
		prof_add(P_TW_SCHED, t0, false);
		if (err == 0) {
			ns->tw_armed = 1;
			ns->tw_queued = 1;
			return ST_NONE;
		}
		if (ns->tw_queued) {
			/* Still queued from an earlier wait in the same syscall (no return to user
			 * space since; that wait got its user half at the switch-out in between):
			 * the queued callback takes this wait's stack, with the same registers. */
			ns->tw_armed = 1;
			count(C_USER_PENDING_OVERWRITTEN);
			return ST_NONE;
		}
		count(C_TW_FAILED);
		return ST_FAILED;
	}
	if (!(ns->flags & TS_UPENDING)) {
		ns->flags |= TS_UPENDING;
		__sync_fetch_and_add(&user_pending, 1);
	} else {
		count(C_USER_PENDING_OVERWRITTEN);
	}
	return ST_NONE;
}

/* True when a lazy user half is due for this task (its last long wait's user stack has not
 * been taken yet: no return to user space since that wait's switch-in). */
static __always_inline bool user_half_due(struct task_st *s)
{
	return use_task_work ? s->tw_armed != 0 : (s->flags & TS_UPENDING) != 0;
}

static __always_inline void user_half_done(struct task_st *s)
{
	if (use_task_work) {
		s->tw_armed = 0; /* the queued callback finds nothing to do */
	} else {
		s->flags &= ~TS_UPENDING;
		__sync_fetch_and_add(&user_pending, -1);
	}
}

/* prev is switched out again before its last long wait's user half was taken (preempted on
 * its way back to user space, or blocked again inside the same syscall). Take that half now,
 * in prev's own context: it has not returned to user space, so its user registers are still
 * those of the wait (checked against the stored ip/sp). Emitted before the Switch record with
 * the same timestamp, so the engine attaches it to the wait that just ended, not to the one
 * that starts (which the user half used to be given when it arrived after this switch). */
static __always_inline void user_half_at_switch(void *ctx, struct task_struct *prev,
						struct task_st *ps, __u64 ts)
{
	struct ev_stk *s;
	struct pt_regs *ur;

	user_half_done(ps);
	count(C_USER_AT_SWITCH);
	s = scratch_ev();
	if (!s)
		return;
	fill_task_header(&s->h, ts, EV_OFFCPU, 1 /* user-stack half */, prev, 0);
	ur = (struct pt_regs *)bpf_task_pt_regs(prev);
	if (prev->flags & PF_EXITING)
		s->h.ust = ST_EXITING;
	else if (ur && ur->ip == ps->uip && ur->sp == ps->usp)
		cur_ustack(ctx, s);
	else
		s->h.ust = ST_UPREEMPT;
	output_stk(s);
}


SEC("tp_btf/sys_exit")
int BPF_PROG(on_sys_exit, struct pt_regs *regs, long ret)
{
	struct task_struct *cur;
	struct task_st *s;

	if (user_pending == 0)
		return 0;
	cur = bpf_get_current_task_btf();
	s = tst(cur, false);
	if (!s || !(s->flags & TS_UPENDING))
		return 0;
	s->flags &= ~TS_UPENDING;
	__sync_fetch_and_add(&user_pending, -1);
	emit_user_half(cur, s->uip, s->usp);
	return 0;
}
