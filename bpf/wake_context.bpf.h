/* SPDX-License-Identifier: GPL-2.0 */
/* The context of a waking (task, softirq run by the task, softirq at an interrupt's exit,
 * ksoftirqd, hardirq, NMI) and its interrupt source code. */

extern void *bpf_rdonly_cast(const void *obj, __u32 btf_id) __ksym __weak;

static __always_inline __u32 irq_source(__u8 ctx)
{
	__u32 zero = 0;
	struct irq_state *is;
	if (ctx == CTX_TASK || ctx == CTX_NMI)
		return 0;
	is = bpf_map_lookup_elem(&irqst, &zero);
	if (!is)
		return 0;
	if (is->timer)
		return SRC_TIMER;
	return ctx == CTX_HARDIRQ ? is->hardirq : is->softirq;
}

static __always_inline struct irq_state *irq_state(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&irqst, &zero);
}

/* A waking in softirq context: run by the task itself (inside do_softirq, called only from
 * process context by local_bh_enable), at an interrupt's exit, or by ksoftirqd. Sets *src
 * to the vector (SRC_SOFTIRQ|vec, with SRC_SOFTIRQ_KSOFTIRQD in ksoftirqd; SRC_TIMER for
 * an hrtimer expiring in an interrupt's softirq, as before). `pc` is the preempt count, or
 * ~0 when unknown (irq tracepoint fallback). */
/* Whether the softirq running on this CPU was entered through do_softirq, i.e. by the task
 * itself (1), not at an interrupt's exit (0); -1 when unknown. Both run on the irq stack
 * when the interrupt came from kernel mode: call_on_irqstack saves the previous stack
 * pointer at the top of the irq stack, and only in the do_softirq case does the return
 * address into __local_bh_enable_ip / do_softirq follow within a few words there (an
 * interrupt's frame is followed by its pt_regs, 21 words). An interrupt from user mode
 * runs on the task stack (hardirq_stack_inuse false): not do_softirq, which always
 * switches. */
static __always_inline int softirq_by_irqstack(struct rq *rq)
{
	__u64 tos = 0, sp = 0, w[IRQSTACK_WORDS];
	__u8 inuse = 0;
	int i;

	if (bpf_probe_read_kernel(&inuse, 1, (void *)((__u64)rq + irqstack_inuse_delta)))
		return -1;
	if (!inuse)
		return 0;
	if (bpf_probe_read_kernel(&tos, 8, (void *)((__u64)rq + irqstack_ptr_delta)) || !tos ||
	    bpf_probe_read_kernel(&sp, 8, (void *)tos) || !sp ||
	    bpf_probe_read_kernel(w, sizeof(w), (void *)sp))
		return -1;
	for (i = 0; i < IRQSTACK_WORDS; i++) {
		if ((w[i] > bh_enable_start && w[i] < bh_enable_end) ||
		    (w[i] > do_softirq_start && w[i] < do_softirq_end))
			return 1;
	}
	return 0;
}

static __always_inline __u8 softirq_context(struct task_struct *cur, struct rq *rq, __u32 *src)
{
	struct irq_state *is = irq_state();
	__u32 vec;
	int by_stack;

	if (!is) {
		*src = 0;
		return CTX_SOFTIRQ;
	}
	/* The running vector, else the last one (wakeup_softirqd after the last exit). */
	vec = is->softirq ? is->softirq : is->last_softirq;
	if (!vec)
		vec = SRC_SOFTIRQ | SRC_SOFTIRQ_UNKNOWN;
	*src = vec;
	if (sirq_tracked && is->task_sirq) {
		count(C_SIRQ_TASK);
		return CTX_SOFTIRQ_TASK;
	}
	if (have_ksoftirqd_delta && rq) {
		__u64 k = 0;

		if (!bpf_probe_read_kernel(&k, sizeof(k), (void *)((__u64)rq + ksoftirqd_delta)) &&
		    k == (__u64)cur) {
			count(C_SIRQ_KSOFTIRQD);
			*src = vec | SRC_SOFTIRQ_KSOFTIRQD;
			return CTX_SOFTIRQ;
		}
	}
	if (sirq_tracked)
		goto irq;
	if (!softirq_heuristic || !have_irqstack || !rq) {
		count(C_SIRQ_UNTRACKED);
		goto metal;
	}
	by_stack = softirq_by_irqstack(rq);
	if (by_stack < 0) {
		count(C_SIRQ_UNTRACKED);
		goto metal;
	}
	if (by_stack && cur->pid != 0) {
		count(C_SIRQ_TASK);
		return CTX_SOFTIRQ_TASK;
	}
irq:
	count(C_SIRQ_IRQ);
metal:
	if (is->timer)
		*src = SRC_TIMER;
	return CTX_SOFTIRQ;
}

/* A waking on the irq stack with neither the hardirq count nor a serving softirq in the
 * preempt count: the interrupt's own exit code, __irq_exit_rcu, which has already dropped
 * the hardirq count when it wakes ksoftirqd (or, on PREEMPT_RT, the ktimers thread) for
 * the softirqs the handler raised. The interrupt's doing, not the interrupted task's (the
 * idle task, mostly): metal, named after the last handler or hrtimer expiry on this CPU.
 * Softirqs a task runs itself (do_softirq) are on the irq stack too but serving. An
 * interrupt from user mode runs on the task stack, so its exit is not seen here. */
static __always_inline bool irq_exit_waking(struct rq *rq)
{
	__u64 addr;

	if (!have_irqstack || !rq)
		return false;
	addr = (__u64)rq + irqstack_inuse_delta;
	if (bpf_ksym_exists(bpf_rdonly_cast)) {
		/* one byte (bool), read through the first byte of an untrusted static_key */
		struct static_key *k =
			bpf_rdonly_cast((void *)addr, bpf_core_type_id_kernel(struct static_key));
		return (k->enabled.counter & 0xff) != 0;
	} else {
		__u8 inuse = 0;

		return !bpf_probe_read_kernel(&inuse, 1, (void *)addr) && inuse;
	}
}

/* Context of a waking, and its interrupt source code in *src (0 when none). */
static __always_inline __u8 wake_context(struct task_struct *cur, __u32 *src)
{
	*src = 0;
	if (have_preempt_delta) {
		struct rq *rq = cur->se.cfs_rq->rq;
		if (rq) {
			/* Read the int at rq + delta without a helper call: bpf_rdonly_cast is
			 * inlined, and the load through the untrusted pointer is fault-safe
			 * (PROBE_MEM). struct static_key starts with an int (enabled.counter). */
			__u64 addr = (__u64)rq + preempt_delta;
			__u32 pc = 0;
			if (bpf_ksym_exists(bpf_rdonly_cast)) {
				struct static_key *k = bpf_rdonly_cast(
					(void *)addr, bpf_core_type_id_kernel(struct static_key));
				pc = k->enabled.counter;
			} else if (bpf_probe_read_kernel(&pc, sizeof(pc), (void *)addr)) {
				goto fallback;
			}
			if (pc & 0x00f00000)
				return CTX_NMI;
			if (pc & 0x000f0000) {
				*src = irq_source(CTX_HARDIRQ);
				return CTX_HARDIRQ;
			}
			if (pc & 0x00000100)
				return softirq_context(cur, rq, src);
			if (irq_exit_waking(rq)) {
				struct irq_state *is = irq_state();
				*src = is ? is->last_hardirq : 0;
				return CTX_HARDIRQ;
			}
			return CTX_TASK;
		}
	}
fallback:
	/* Fallback: the interrupt tracepoints' per-CPU state. */
	count(C_CTX_FALLBACK);
	{
		struct irq_state *is = irq_state();
		if (is && (is->hardirq || is->timer)) {
			*src = irq_source(CTX_HARDIRQ);
			return CTX_HARDIRQ;
		}
		if (is && is->softirq)
			return softirq_context(cur, cur->se.cfs_rq->rq, src);
	}
	return CTX_TASK;
}
