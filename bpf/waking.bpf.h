/* SPDX-License-Identifier: GPL-2.0 */
/* sched_waking and sched_wakeup_new: Waking and WakeupNew records with the waker's stacks. */

static __always_inline int do_waking(void *ctx, struct task_struct *p, __u64 ts)
{
	struct task_struct *cur = bpf_get_current_task_btf();
	__u32 cur_pid = cur->pid;
	__u32 src;
	__u64 t0 = prof_t0();
	__u8 ctx8 = wake_context(cur, &src);
	/* The running task is the waker: task context, or a softirq it runs itself. */
	bool task_waker = (ctx8 == CTX_TASK || ctx8 == CTX_SOFTIRQ_TASK) && cur_pid != 0;
	bool want_stacks = false;
	bool skipped = false;
	struct task_st *ts_target = 0;

	prof_add(P_WK_CTX, t0, false);

	if (filter_enabled || stack_mode == MODE_LAZY)
		ts_target = tst(p, false);
	if (filter_enabled) {
		if (!interesting(p, ts_target))
			return 0;
		/* The waker is part of an interesting chain from now on. */
		if (task_waker) {
			struct task_st *ws = tst(cur, true);
			if (ws)
				ws->flags |= TS_INTERESTING;
		}
	}
	if (stack_mode == MODE_EAGER) {
		want_stacks = true;
	} else if (stack_mode == MODE_LAZY) {
		/* skipped waker stacks are counted by user space (status byte) */
		if (ts_target && ts_target->off_ts) {
			if (ts - ts_target->off_ts > threshold_ns)
				want_stacks = true;
			else
				skipped = true;
		}
		/* else: the target's switch-out was not seen (it blocked before the recording
		 * started): the lazy policy does not apply, the stacks are NONE. */
	}

	if (want_stacks) {
		struct ev_stk *s = scratch_ev();
		if (!s)
			return 0;
		s->h.ts = ts;
		s->h.kind = EV_WAKING;
		s->h.aux = ctx8;
		s->h.cpu = bpf_get_smp_processor_id();
		s->h.wk.waker_tid = cur_pid;
		s->h.wk.target_tid = p->pid;
		s->h.wk.source = src;
		s->h.wk.waker_tgid = cur->tgid;
		s->h.nu = 0;
		if (profile) {
			/* the fixed part of a walk: stop after one frame */
			t0 = prof_t0();
			bpf_get_stack(ctx, s->frames, 8, 0);
			prof_add(P_WK_KSTACK1, t0, false);
		}
		t0 = prof_t0();
		cur_kstack(ctx, s);
		prof_add(P_WK_KSTACK, t0, false);
		if (task_waker && !no_user_mode(cur) && user_stacks) {
			t0 = prof_t0();
			cur_ustack(ctx, s);
			prof_add(P_WK_USTACK, t0, false);
		} else {
			s->h.ust = ST_NONE;
		}
		t0 = prof_t0();
		output_stk(s);
		prof_add(P_WK_OUT, t0, false);
	} else {
		bool user_skip = skipped && task_waker && !no_user_mode(cur);

		emit_ev(ts, EV_WAKING, ctx8, skipped ? ST_SKIPPED : ST_NONE,
			user_skip ? ST_SKIPPED : ST_NONE, cur_pid, p->pid, src, cur->tgid);
	}
	return 0;
}

SEC("tp_btf/sched_waking")
int BPF_PROG(on_waking, struct task_struct *p)
{
	__u64 ts = bpf_ktime_get_ns();

	do_waking(ctx, p, ts);
	prof_add(P_WK_ALL, ts, false);
	return 0;
}

SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(on_wakeup_new, struct task_struct *p)
{
	__u64 ts = bpf_ktime_get_ns();
	struct task_struct *cur = bpf_get_current_task_btf();
	struct task_st *ps = tst(cur, false);

	if (filter_enabled) {
		if (!interesting(cur, ps) && !interesting(p, 0))
			return 0;
		if (ps && (ps->flags & TS_INTERESTING)) {
			struct task_st *cs = tst(p, true);
			if (cs)
				cs->flags |= TS_INTERESTING;
		}
	}
	seen(p, ts, CR_FORK);
	emit_ev(ts, EV_WAKEUP_NEW, 0, ST_NONE, ST_NONE, cur->pid, p->pid, p->tgid, 0);
	return 0;
}
