/* SPDX-License-Identifier: GPL-2.0 */
/* Counters, --profile-bpf sections, and writing records to the ring buffer. */

static __always_inline void count(__u32 idx)
{
	__u64 *c = bpf_map_lookup_elem(&counters, &idx);
	if (c)
		*c += 1;
}

/* Counter increment for the programs that may be preempted (task_work callback, sys_exit):
 * the plain increment of count() could lose an update to a program running in between. */
static __always_inline void count_atomic(__u32 idx)
{
	__u64 *c = bpf_map_lookup_elem(&counters, &idx);
	if (c)
		__sync_fetch_and_add(c, 1);
}

/* --profile-bpf: the start of a section (0 when profiling is off). */
static __always_inline __u64 prof_t0(void)
{
	return profile ? bpf_ktime_get_ns() : 0;
}

/* --profile-bpf: add the time since t0 to section p. `atomic` in programs that may be
 * preempted (the task_work callback). */
static __always_inline void prof_add(__u32 p, __u64 t0, bool atomic)
{
	__u32 idx = C_PROF + 2 * p;
	__u64 *ns, *n;

	if (!profile)
		return;
	ns = bpf_map_lookup_elem(&counters, &idx);
	idx++;
	n = bpf_map_lookup_elem(&counters, &idx);
	if (!ns || !n)
		return;
	if (atomic) {
		__sync_fetch_and_add(ns, bpf_ktime_get_ns() - t0);
		__sync_fetch_and_add(n, 1);
	} else {
		*ns += bpf_ktime_get_ns() - t0;
		*n += 1;
	}
}

/* Per-CPU event counter: the fill level is checked on every 64th record only (a query
 * costs ~30 ns here; 64 records are far below any sensible fill mark). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} tick SEC(".maps");

/* A global function: checked once by the verifier, not at each of the ~20 submits it is
 * called from (docs/RECORDER.md, "Load time"). */
__noinline __u64 rb_flags(void)
{
	__u32 zero = 0;
	__u64 *t = bpf_map_lookup_elem(&tick, &zero);
	if (t && ((*t)++ & 63) == 0 && bpf_ringbuf_query(&rb, BPF_RB_AVAIL_DATA) > wake_mark)
		return BPF_RB_FORCE_WAKEUP;
	return BPF_RB_NO_WAKEUP;
}

static __always_inline struct ev *reserve_ev(void)
{
	struct ev *e = bpf_ringbuf_reserve(&rb, sizeof(struct ev), 0);
	if (!e)
		count(C_RB_FULL);
	return e;
}

static __always_inline void submit_ev(struct ev *e)
{
	bpf_ringbuf_submit(e, rb_flags());
}

/* One stack-less ring-buffer record (stacks, if any, are reserved ST_* codes). Returns
 * false when the ring buffer was full (already counted). */
static __always_inline bool emit_ev(__u64 ts, __u8 kind, __u8 aux, __u32 kst, __u32 ust,
				    __u32 a, __u32 b, __u32 c, __u32 d)
{
	struct ev *e = reserve_ev();

	if (!e)
		return false;
	e->ts = ts;
	e->kind = kind;
	e->aux = aux;
	e->kst = kst;
	e->ust = ust;
	e->cpu = bpf_get_smp_processor_id();
	e->nk = 0;
	e->nu = 0;
	e->w.a = a;
	e->w.b = b;
	e->w.c = c;
	e->w.d = d;
	submit_ev(e);
	return true;
}

/* The header of a record about task t that carries no stack frames (comm records, user
 * halves): the caller fills the stack statuses it has and the kind's own fields. */
static __always_inline void fill_task_header(struct ev *h, __u64 ts, __u8 kind, __u8 aux,
					     struct task_struct *t, __u32 task_flags)
{
	h->ts = ts;
	h->kind = kind;
	h->aux = aux;
	h->kst = ST_NONE;
	h->ust = ST_NONE;
	h->cpu = bpf_get_smp_processor_id();
	h->nk = 0;
	h->nu = 0;
	h->task.tid = t->pid;
	h->task.tgid = t->tgid;
	h->task.flags = task_flags;
	h->task.unused = 0;
}

static __always_inline struct ev_stk *scratch_ev(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&scratch, &zero);
}

/* Bytes of the copy block after n frames of s (0 without one). */
/* More than ucopy_ring_budget bytes wait in the ring buffer: the consumer is behind. */
static __always_inline bool ring_busy(void)
{
	return bpf_ringbuf_query(&rb, BPF_RB_AVAIL_DATA) > ucopy_ring_budget;
}

/* Drop the copy block of s (the ring buffer is busy): the frame-pointer walk stays; a
 * stack that had only the copy becomes FAILED. */
static __always_inline void drop_copy(struct ev *h)
{
	h->ust &= ~UST_COPY;
	if (h->nu == 0)
		h->ust = ST_FAILED;
}

static __always_inline __u64 ucopy_size(struct ev_stk *s, __u64 n)
{
	struct ucopy *u;
	__u64 len;

	if (!(s->h.ust & UST_COPY) || n > 2 * MAX_FRAMES)
		return 0;
	/* A copy taken earlier (the stash at a predicted switch-out) is dropped here if the
	 * consumer fell behind meanwhile: an event lost breaks chains, a stack without its
	 * copy keeps its frame-pointer walk. */
	if (ring_busy()) {
		drop_copy(&s->h);
		count(C_UCOPY_BUSY);
		return 0;
	}
	u = (struct ucopy *)&s->frames[n];
	len = u->len;
	if (len > UCOPY_MAX)
		len = UCOPY_MAX;
	return sizeof(struct ucopy) + len;
}

static __always_inline void output_stk(struct ev_stk *s)
{
	__u64 n = (__u64)s->h.nk + (__u64)s->h.nu;
	__u64 size;
	if (n > 2 * MAX_FRAMES)
		n = 2 * MAX_FRAMES;
	size = sizeof(struct ev) + n * 8 + ucopy_size(s, n);
	if (size > sizeof(struct ev_stk))
		size = sizeof(struct ev_stk);
	if (bpf_ringbuf_output(&rb, s, size, rb_flags()))
		count(C_RB_FULL);
}
