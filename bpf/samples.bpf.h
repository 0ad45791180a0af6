/* SPDX-License-Identifier: GPL-2.0 */

/* ======================================================================================
 * On-CPU samples (perf_event program, crates/record/src/samples.rs).
 *
 * Kept apart from the scheduler programs above: its own per-CPU scratch record (a cycles
 * sample is an NMI and may interrupt any program, including one using `scratch`), its own
 * counters (a sample lost to a full ring buffer is counted as a lost *sample*, never as a
 * Lost marker: it does not make the scheduler state unreliable). It shares the ring buffer
 * and the stack helpers.
 * ====================================================================================== */

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SC_NR);
	__type(key, __u32);
	__type(value, __u64);
} sample_counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ev_stk);
} sample_scratch SEC(".maps");

static __always_inline void sample_count(__u32 idx)
{
	__u64 *c = bpf_map_lookup_elem(&sample_counters, &idx);
	if (c)
		*c += 1;
}

SEC("perf_event")
int on_sample(struct bpf_perf_event_data *ctx)
{
	struct task_struct *cur = bpf_get_current_task_btf();
	__u32 zero = 0;
	struct ev_stk *s;
	__u64 n, size;
	long r;

	if (filter_enabled && (cur->pid == 0 || !interesting(cur, tst(cur, false)))) {
		sample_count(SC_FILTERED);
		return 0;
	}
	s = bpf_map_lookup_elem(&sample_scratch, &zero);
	if (!s)
		return 0;
	s->h.ts = bpf_ktime_get_ns();
	s->h.kind = EV_SAMPLE;
	s->h.aux = 0;
	s->h.cpu = bpf_get_smp_processor_id();
	s->h.task.tid = cur->pid;
	s->h.task.tgid = cur->tgid;
	s->h.task.flags = 0;
	s->h.task.unused = 0;
	/* Kernel stack at the interrupted point: none when the CPU was in user mode. */
	r = bpf_get_stack(ctx, s->frames, MAX_FRAMES * 8, 0);
	if (r < 0) {
		s->h.kst = ST_FAILED;
		s->h.nk = 0;
	} else {
		s->h.kst = r > 0 ? ST_PRESENT : ST_NONE;
		s->h.nk = (__u8)(r / 8);
	}
	if (cur->pid == 0 || no_user_mode(cur) || !user_stacks) {
		s->h.ust = ST_NONE;
		s->h.nu = 0;
	} else {
		cur_ustack(ctx, s);
	}
	n = (__u64)s->h.nk + (__u64)s->h.nu;
	if (n > 2 * MAX_FRAMES)
		n = 2 * MAX_FRAMES;
	size = sizeof(struct ev) + n * 8 + ucopy_size(s, n);
	if (size > sizeof(struct ev_stk))
		size = sizeof(struct ev_stk);
	if (bpf_ringbuf_output(&rb, s, size, rb_flags()))
		sample_count(SC_LOST);
	return 0;
}
