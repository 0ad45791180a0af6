/* SPDX-License-Identifier: GPL-2.0 */
/* Interrupt state per CPU (hardirq, softirq, do_softirq, hrtimer expiry) for the waking
 * context and its source. */

SEC("tp_btf/irq_handler_entry")
int BPF_PROG(on_irq_entry, int irq, struct irqaction *action)
{
	struct irq_state *is = irq_state();
	if (is) {
		is->hardirq = SRC_HARDIRQ | ((__u32)irq & 0xffff);
		is->last_hardirq = is->hardirq;
	}
	return 0;
}

SEC("tp_btf/irq_handler_exit")
int BPF_PROG(on_irq_exit, int irq, struct irqaction *action, int ret)
{
	struct irq_state *is = irq_state();
	if (is)
		is->hardirq = 0;
	return 0;
}

SEC("tp_btf/softirq_entry")
int BPF_PROG(on_softirq_entry, unsigned int vec)
{
	struct irq_state *is = irq_state();
	if (is) {
		is->softirq = SRC_SOFTIRQ | (vec & 0x7fff);
		is->last_softirq = is->softirq;
	}
	return 0;
}

SEC("tp_btf/softirq_exit")
int BPF_PROG(on_softirq_exit, unsigned int vec)
{
	struct irq_state *is = irq_state();
	if (is)
		is->softirq = 0;
	return 0;
}

SEC("tp_btf/hrtimer_expire_entry")
int BPF_PROG(on_hrtimer_entry, struct hrtimer *t, ktime_t *now)
{
	struct irq_state *is = irq_state();
	__u64 fn;

	/* A flag, not a counter: an exit missed (e.g. an expiry running while the programs
	 * were being attached) must not leave this CPU "in a timer" for the whole recording. */
	if (is) {
		is->timer = 1;
		is->last_hardirq = SRC_TIMER;
	}
	if (!cfs_period_timer_fn)
		return 0;
	fn = (__u64)t->function;
	if (fn == cfs_period_timer_fn || fn == cfs_slack_timer_fn) {
		/* container_of: the timer is in the group's cfs_bandwidth, in its task_group */
		__u64 off = fn == cfs_period_timer_fn ?
				    bpf_core_field_offset(struct cfs_bandwidth, period_timer) :
				    bpf_core_field_offset(struct cfs_bandwidth, slack_timer);
		__u64 b = (__u64)t - off;
		struct cfs_bandwidth *cfs_b = (struct cfs_bandwidth *)b;
		__u64 head = b + bpf_core_field_offset(struct cfs_bandwidth, throttled_cfs_rq);
		__u64 first = (__u64)BPF_CORE_READ(cfs_b, throttled_cfs_rq.next);

		/* Only a refill that may unthrottle something is worth a record. */
		if (first && first != head)
			emit_throttle(bpf_ktime_get_ns(), THR_REFILL, 0,
				      (struct task_group *)(b - bpf_core_field_offset(
								       struct task_group,
								       cfs_bandwidth)));
	}
	return 0;
}

SEC("tp_btf/hrtimer_expire_exit")
int BPF_PROG(on_hrtimer_exit, struct hrtimer *t)
{
	struct irq_state *is = irq_state();
	if (is)
		is->timer = 0;
	return 0;
}
