/* SPDX-License-Identifier: GPL-2.0 */
/* The optional fentry/fexit programs on do_softirq. Included before every other program:
 * libbpf loads programs in the object's order and a refusal fails the whole load, which
 * user space then repeats without these. Placed first, a refusal comes before the verifier has
 * spent ~1 s on on_switch, not after (this kernel refuses every fentry program: EPERM). */

/* Softirqs run by a task itself: __local_bh_enable_ip calls do_softirq only from process
 * context (an interrupt's exit runs them through invoke_softirq, ksoftirqd through
 * run_ksoftirqd). A flag, not a depth: do_softirq does not nest (in_interrupt() is true
 * inside). User space attaches the fexit program first and detaches it last, so that the
 * flag is never left set; it sets sirq_tracked once both are attached. */
SEC("fentry/do_softirq")
int BPF_PROG(on_do_softirq)
{
	struct irq_state *is = irq_state();
	if (is)
		is->task_sirq = 1;
	return 0;
}

SEC("fexit/do_softirq")
int BPF_PROG(on_do_softirq_exit)
{
	struct irq_state *is = irq_state();
	if (is)
		is->task_sirq = 0;
	return 0;
}
