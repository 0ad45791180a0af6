/* SPDX-License-Identifier: GPL-2.0 */
/* sched_switch: Switch records, off-CPU stacks, the bookkeeping of waits. */

static __always_inline int do_switch(void *ctx, bool preempt, struct task_struct *prev,
				     struct task_struct *next, unsigned int prev_state, __u64 ts)
{
	__u64 t0 = prof_t0();
	struct task_st *ps = seen(prev, ts, CR_SEEN);
	struct task_st *ns = seen(next, ts, CR_SEEN);
	__u32 prev_pid = prev->pid;
	__u32 next_pid = next->pid;
	bool pk = prev_pid == 0 || no_user_mode(prev);
	__u32 state = preempt ? 0 : (prev_state & 0xff);

	prof_add(P_SW_SEEN, t0, false);
	if (track_cgroups && ps) {
		/* A task moved to another cgroup is noticed at its next switch-out: prev is
		 * current here, and its cgroup id is a few loads. */
		__u64 cg;

		t0 = prof_t0();
		cg = bpf_get_current_cgroup_id();
		if (cg != ps->cgid) {
			ps->cgid = cg;
			if (interesting(prev, ps))
				emit_ev(ts, EV_CGROUP, 0, ST_NONE, ST_NONE, prev_pid, prev->tgid,
					(__u32)cg, (__u32)(cg >> 32));
		}
		prof_add(P_SW_CGROUP, t0, false);
	}
	if (stack_mode == MODE_LAZY && user_stacks && ps && user_half_due(ps)) {
		t0 = prof_t0();
		user_half_at_switch(ctx, prev, ps, ts);
		prof_add(P_SW_UHALF, t0, false);
	}

	if (!interesting(prev, ps) && !interesting(next, ns))
		goto bookkeeping;

	if (stack_mode == MODE_EAGER && prev_pid != 0) {
		struct ev_stk *s = scratch_ev();
		if (!s)
			goto bookkeeping;
		s->h.ts = ts;
		s->h.kind = EV_SWITCH;
		s->h.aux = 0;
		s->h.cpu = bpf_get_smp_processor_id();
		s->h.sw.prev_tid = prev_pid;
		s->h.sw.next_tid = next_pid;
		s->h.sw.prev_state = state;
		s->h.sw.prev_tgid = prev->tgid;
		s->h.nu = 0;
		t0 = prof_t0();
		cur_kstack(ctx, s);
		if (!pk && user_stacks)
			cur_ustack(ctx, s);
		else
			s->h.ust = ST_NONE;
		prof_add(P_SW_EAGER, t0, false);
		output_stk(s);
	} else {
		bool lazy_skip = stack_mode == MODE_LAZY && prev_pid != 0;

		t0 = prof_t0();
		emit_ev(ts, EV_SWITCH, 0, lazy_skip ? ST_SKIPPED : ST_NONE,
			lazy_skip && !pk ? ST_SKIPPED : ST_NONE, prev_pid, next_pid, state,
			prev->tgid);
		prof_add(P_SW_EMIT, t0, false);
	}
	if (state == 0)
		throttle_mark(prev, prev_pid, ts);

bookkeeping:
	if (stack_mode != MODE_LAZY)
		return 0;
	if (ps) {
		if (user_stash && user_stacks && !pk) {
			t0 = prof_t0();
			stash_user_stack(ctx, prev, ps, ts);
			prof_add(P_SW_STASH, t0, false);
		}
		ps->off_ts = ts;
		if (state)
			ps->flags |= TS_BLOCKED;
		else
			ps->flags &= ~TS_BLOCKED;
	}
	if (ns && ns->off_ts) {
		__u64 off = ns->off_ts;
		bool long_wait = ts - off > threshold_ns;

		ns->off_ts = 0;
		if (user_stash)
			learn_wait(ns, long_wait);
		if (!interesting(next, ns))
			return 0;
		if (!long_wait) {
			count(C_SKIP_OFFCPU);
			return 0;
		}
		/* Long wait: kernel off-CPU stack of next, now, and arm its user stack. */
		{
			struct ev_stk *s = scratch_ev();
			if (!s)
				return 0;
			s->h.ts = ts;
			s->h.kind = EV_OFFCPU;
			s->h.aux = 0;
			s->h.cpu = bpf_get_smp_processor_id();
			s->h.task.tid = next_pid;
			s->h.task.tgid = next->tgid;
			s->h.task.flags = 0;
			s->h.task.unused = 0;
			s->h.nu = 0;
			{
				long r;

				if (profile) {
					/* the fixed part of a walk: stop after one frame */
					t0 = prof_t0();
					bpf_get_task_stack(next, s->frames, 8, 0);
					prof_add(P_SW_KSTACK1, t0, false);
				}
				t0 = prof_t0();
				r = bpf_get_task_stack(next, s->frames, MAX_FRAMES * 8, 0);
				prof_add(P_SW_KSTACK, t0, false);
				if (r < 0) {
					s->h.kst = ST_FAILED;
					s->h.nk = 0;
				} else {
					s->h.kst = ST_PRESENT;
					s->h.nk = (__u8)(r / 8);
				}
			}
			s->h.ust = ST_NONE;
			if (user_stacks && !no_user_mode(next) &&
			    !(user_stash && use_stash(next, s, off))) {
				if (user_stash)
					count(C_USTASH_MISSED);
				t0 = prof_t0();
				s->h.ust = arm_user_stack(next, next_pid, ns);
				prof_add(P_SW_ARM, t0, false);
			}
			t0 = prof_t0();
			output_stk(s);
			prof_add(P_SW_OUT, t0, false);
		}
	}
	return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(on_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	__u64 ts = bpf_ktime_get_ns();

	do_switch(ctx, preempt, prev, next, prev_state, ts);
	if (!preempt && (prev_state & 0x80 /* TASK_DEAD */))
		tst_forget(prev);
	prof_add(P_SW_ALL, ts, false);
	return 0;
}
