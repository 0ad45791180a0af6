/* SPDX-License-Identifier: GPL-2.0 */
/* exec, rename and exit of tasks: comm and Exit records. */

SEC("tp_btf/sched_process_exec")
int BPF_PROG(on_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	__u64 ts = bpf_ktime_get_ns();
	struct task_st *s = tst(p, true);
	__u64 cgid;
	if (s && stack_mode == MODE_LAZY && user_stacks && user_half_due(s)) {
		/* The wait was inside execve (or before it, in the same syscall): the user stack
		 * it waited with belonged to the old program, which is gone now. */
		user_half_done(s);
		count_atomic(C_USER_AT_EXEC);
		emit_ev(ts, EV_OFFCPU, 1, ST_NONE, ST_EXEC, p->pid, p->tgid, 0, 0);
	}
	if (!interesting(p, s)) {
		if (s)
			s->flags |= TS_SEEN;
		return 0;
	}
	cgid = task_cgid(p);
	/* Seen only once its new name is out: else its next event names it. */
	if (emit_comm(p, p->comm, CR_EXEC, ts, cgid) && s)
		s->flags |= TS_SEEN;
	if (s)
		s->cgid = cgid;
	return 0;
}

SEC("tp_btf/task_rename")
int BPF_PROG(on_rename, struct task_struct *t, const char *comm)
{
	/* Fires before the copy, with the new name as argument. Skipped during exec
	 * (sched_process_exec reports that one, after the name changed). */
	__u64 ts = bpf_ktime_get_ns();
	struct task_st *s = tst(t, false);
	if (BPF_CORE_READ_BITFIELD_PROBED(t, in_execve))
		return 0;
	if (!interesting(t, s))
		return 0;
	emit_comm(t, comm, CR_RENAME, ts, task_cgid(t));
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(on_exit, struct task_struct *p, bool group_dead)
{
	__u64 ts = bpf_ktime_get_ns();
	struct task_st *s = tst(p, false);
	if (s && stack_mode == MODE_LAZY && user_stacks && user_half_due(s)) {
		/* Exiting before its return to user space (killed mid-wait): the user half that
		 * was due says so, rather than leaving the wait without one. */
		user_half_done(s);
		count_atomic(C_USER_AT_EXIT);
		emit_ev(ts, EV_OFFCPU, 1, ST_NONE, ST_EXITING, p->pid, p->tgid, 0, 0);
	}
	if (s && (s->flags & TS_TWSLOT)) {
		__u32 tid = p->pid;

		s->flags &= ~TS_TWSLOT;
		bpf_map_delete_elem(&twmap, &tid); /* cancels a callback still pending */
	}
	if (ucopy_max) {
		__u32 tid = p->pid;

		bpf_map_delete_elem(&ustack_learned, &tid); /* a reused tid learns its own */
		if (p->pid == p->tgid)
			bpf_map_delete_elem(&py_procs, &tid);
	}
	if (!interesting(p, s))
		return 0;
	emit_ev(ts, EV_EXIT, 0, ST_NONE, ST_NONE, p->pid, p->tgid, 0, 0);
	return 0;
}
