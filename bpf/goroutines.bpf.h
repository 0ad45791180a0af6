/* SPDX-License-Identifier: GPL-2.0 */
/* Goroutine waits and wakings of Go programs (issue 38; docs/RECORDER.md "Goroutines"):
 * entry uprobes on runtime.gopark (a goroutine parks, on its own stack), runtime.ready
 * (a goroutine is readied, on the system stack of the readying thread) and
 * runtime.execute (a goroutine starts running: the end of its runnable time) and
 * runtime.stopTheWorldWithSema / startTheWorldWithSema (a GC stop-the-world), attached by user
 * space per Go binary with the binary's slot in go_layouts as the cookie. Entry probes
 * only: a uretprobe rewrites the return address on the stack, which Go's stack moves and
 * tracebacks do not expect. */

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, GO_SLOTS);
	__type(key, __u32);
	__type(value, struct go_layout);
} go_layouts SEC(".maps");

/* Probe hits per binary slot: the consumer's rate cap reads them (per CPU, summed). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, GO_SLOTS);
	__type(key, __u32);
	__type(value, __u64);
} go_hits SEC(".maps");

struct go_rec {
	struct ev h;
	__u64 arg;
	__u64 frames[GO_FRAMES + 1];
};

/* Per-CPU scratch of the goroutine programs, claimed with a compare-and-swap on busy:
 * uprobe programs run in the task with preemption possible, so another task's probe may
 * run on this CPU in between (then the record goes out without a stack, counted). */
struct go_scratch {
	__u64 busy;
	struct go_rec r;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct go_scratch);
} go_scratch SEC(".maps");

static __always_inline __u64 go_read_u64(__u64 addr)
{
	__u64 v = 0;

	if (bpf_probe_read_user(&v, sizeof(v), (void *)addr))
		return 0;
	return v;
}

/* The user stack at a function's entry: the frame-pointer walk starts at ip and then at
 * the caller's frame (the callee has not pushed rbp yet), which skips the direct caller;
 * its return address is at sp, put in after ip. Returns the number of frames. */
static __always_inline __u32 go_stack(struct pt_regs *ctx, struct go_rec *r)
{
	long n = bpf_get_stack(ctx, &r->frames[1], GO_FRAMES * sizeof(__u64), BPF_F_USER_STACK);
	__u64 ret;

	if (n <= 0)
		return 0;
	if (bpf_probe_read_user(&ret, sizeof(ret), (void *)PT_REGS_SP(ctx)))
		return 0;
	r->frames[0] = r->frames[1];
	r->frames[1] = ret;
	n /= sizeof(__u64);
	if (n > GO_FRAMES)
		n = GO_FRAMES;
	return n + 1;
}

/* The header and argument of a goroutine record (the stack is the caller's). */
static __always_inline void go_fill(struct go_rec *r, __u8 kind, __u32 slot, __u64 goid,
				    __u64 arg)
{
	__u64 id = bpf_get_current_pid_tgid();

	r->h.ts = bpf_ktime_get_ns();
	r->h.kind = EV_GO;
	r->h.aux = kind;
	r->h.kst = slot; /* no kernel stack: the binary's slot */
	r->h.ust = ST_FAILED;
	r->h.cpu = bpf_get_smp_processor_id();
	r->h.nk = 1;
	r->h.nu = 0;
	r->h.go.tid = (__u32)id;
	r->h.go.tgid = id >> 32;
	r->h.go.goid_lo = (__u32)goid;
	r->h.go.goid_hi = goid >> 32;
	r->arg = arg;
}

/* Output one goroutine record with the user stack of the probe. */
static __always_inline void go_emit(struct pt_regs *ctx, __u8 kind, __u32 slot, __u64 goid,
				    __u64 arg)
{
	__u32 zero = 0;
	struct go_scratch *s;
	struct go_rec *r;
	__u64 size;
	__u32 nu;

	s = bpf_map_lookup_elem(&go_scratch, &zero);
	if (!s)
		return;
	if (__sync_val_compare_and_swap(&s->busy, 0, 1) != 0) {
		/* Held by a preempted probe on this CPU: the record alone, no stack. */
		struct go_rec *e = bpf_ringbuf_reserve(&rb, sizeof(struct ev) + 8, 0);

		count_atomic(C_GO_BUSY);
		if (!e) {
			count_atomic(C_GO_LOST);
			return;
		}
		go_fill(e, kind, slot, goid, arg);
		bpf_ringbuf_submit(e, rb_flags());
		return;
	}
	r = &s->r;
	go_fill(r, kind, slot, goid, arg);
	nu = go_stack(ctx, r);
	r->h.nu = nu;
	r->h.ust = nu ? ST_PRESENT : ST_FAILED;
	size = sizeof(struct ev) + 8 + (__u64)nu * 8;
	if (size > sizeof(struct go_rec))
		size = sizeof(struct go_rec);
	if (bpf_ringbuf_output(&rb, r, size, rb_flags()))
		count_atomic(C_GO_LOST);
	__sync_lock_test_and_set(&s->busy, 0);
}

/* The binary's layout and a hit counted, or NULL (no layout for the cookie). */
static __always_inline struct go_layout *go_hit(struct pt_regs *ctx, __u32 *slot)
{
	struct go_layout *l;
	__u64 *hits;

	*slot = bpf_get_attach_cookie(ctx);
	l = bpf_map_lookup_elem(&go_layouts, slot);
	hits = bpf_map_lookup_elem(&go_hits, slot);
	if (!l || !hits)
		return NULL;
	__sync_fetch_and_add(hits, 1);
	return l;
}

/* The goroutine running on this thread (m.curg of g's m, g being r14: g0 on the system
 * stack), 0 when none (the scheduler). */
static __always_inline __u64 go_curg_id(struct pt_regs *ctx, struct go_layout *l)
{
	__u64 m = go_read_u64(ctx->r14 + l->g_m);
	__u64 cur = m ? go_read_u64(m + l->m_curg) : 0;

	return cur ? go_read_u64(cur + l->g_goid) : 0;
}

static __always_inline int go_event(struct pt_regs *ctx, __u8 kind)
{
	struct go_layout *l;
	__u64 goid, arg;
	__u32 slot;

	l = go_hit(ctx, &slot);
	if (!l)
		return 0;
	if (kind == GO_PARK) {
		/* gopark(unlockf, lock, reason waitReason, traceEv, traceskip): rax, rbx, cl */
		goid = go_read_u64(ctx->r14 + l->g_goid);
		arg = ctx->cx & 0xff;
	} else {
		/* ready(gp *g, traceskip, next): rax */
		goid = go_read_u64(ctx->ax + l->g_goid);
		arg = go_curg_id(ctx, l);
	}
	if (!goid) {
		count_atomic(C_GO_READ_FAILED);
		return 0;
	}
	go_emit(ctx, kind, slot, goid, arg);
	return 0;
}

/* netpollready(toRun *gList, pd *pollDesc, mode int32): rbx = pd, ecx = mode ('r', 'w'
 * or both). The goroutines it will make runnable are those parked in pd's rg / wg (a g
 * pointer, not pdReady = 1, pdWait = 2 or nil): netpollunblock (inlined) takes them, and
 * they are readied without runtime.ready (findrunnable and injectglist). The waker is
 * whatever runs on the thread: normally the scheduler (0). */
static __always_inline void go_poll_side(struct pt_regs *ctx, struct go_layout *l, __u32 slot,
					 __u16 off, __u64 waker)
{
	__u64 gp = go_read_u64(ctx->bx + off), goid;

	if (gp <= 2)
		return;
	goid = go_read_u64(gp + l->g_goid);
	if (!goid) {
		count_atomic(C_GO_READ_FAILED);
		return;
	}
	go_emit(ctx, GO_READY, slot, goid, waker);
}

SEC("uprobe")
int go_netpoll(struct pt_regs *ctx)
{
	__u32 mode = (__u32)ctx->cx, slot;
	struct go_layout *l = go_hit(ctx, &slot);
	__u64 waker;

	if (!l)
		return 0;
	waker = go_curg_id(ctx, l);
	if (mode == 'r' || mode == 'r' + 'w')
		go_poll_side(ctx, l, slot, l->pd_rg, waker);
	if (mode == 'w' || mode == 'r' + 'w')
		go_poll_side(ctx, l, slot, l->pd_wg, waker);
	return 0;
}

/* Output one goroutine record without a stack: header and argument word, one ring
 * reservation, no stack walk. */
static __always_inline void go_emit_nostack(__u8 kind, __u32 slot, __u64 goid, __u64 arg)
{
	struct go_rec *e = bpf_ringbuf_reserve(&rb, sizeof(struct ev) + 8, 0);

	if (!e) {
		count_atomic(C_GO_LOST);
		return;
	}
	go_fill(e, kind, slot, goid, arg);
	bpf_ringbuf_submit(e, rb_flags());
}

/* execute(gp *g, inheritTime bool): rax = gp, about to run on this M (on g0). The record
 * has no stack (always the scheduler's): header and argument word only, so a hit costs a
 * ring reservation, not a stack walk. */
SEC("uprobe")
int go_execute(struct pt_regs *ctx)
{
	struct go_layout *l;
	__u64 goid;
	__u32 slot;

	l = go_hit(ctx, &slot);
	if (!l)
		return 0;
	goid = go_read_u64(ctx->ax + l->g_goid);
	if (!goid) {
		count_atomic(C_GO_READ_FAILED);
		return 0;
	}
	go_emit_nostack(GO_EXECUTE, slot, goid, 0);
	return 0;
}

SEC("uprobe")
int go_park(struct pt_regs *ctx)
{
	return go_event(ctx, GO_PARK);
}

SEC("uprobe")
int go_ready(struct pt_regs *ctx)
{
	return go_event(ctx, GO_READY);
}

/* The stop-the-world reason of Go before 1.22, from m.preemptoff (a string) of the thread
 * stopping the world: "" in gcStart (sweep termination), "gcing" in gcMarkDone (mark
 * termination), the caller's reason in stopTheWorld (not decoded: 0, unknown). Mapped onto
 * Go 1.22+'s stwReason numbers. */
static __always_inline __u64 go_stw_reason_m(struct pt_regs *ctx, struct go_layout *l)
{
	__u64 m = go_read_u64(ctx->r14 + l->g_m), ptr, len;
	char s[5] = {};

	if (!m)
		return 0;
	ptr = go_read_u64(m + l->m_preemptoff);
	len = go_read_u64(m + l->m_preemptoff + 8);
	if (len == 0)
		return 2;
	if (len != 5 || bpf_probe_read_user(s, sizeof(s), (void *)ptr))
		return 0;
	return s[0] == 'g' && s[1] == 'c' && s[2] == 'i' && s[3] == 'n' && s[4] == 'g' ? 1 : 0;
}

/* Entry of stopTheWorldWithSema(reason stwReason) (Go 1.22+: reason in al; before: no
 * argument), and startTheWorldWithSema's call of wakep (user space finds its offset: the
 * Ps have been handed to their Ms and those woken, where the execution tracer ends a
 * stop-the-world; the function's entry when not found), on the system stack of the thread
 * stopping or starting the world. Header and argument word, no stack. */
static __always_inline int go_stw(struct pt_regs *ctx, __u8 kind)
{
	struct go_layout *l;
	__u64 reason;
	__u32 slot;

	l = go_hit(ctx, &slot);
	if (!l)
		return 0;
	if (kind == GO_STW_START)
		reason = 0; /* the stop's reason holds (the probe is inside the function) */
	else if (l->m_preemptoff)
		reason = go_stw_reason_m(ctx, l);
	else
		reason = ctx->ax & 0xff;
	go_emit_nostack(kind, slot, go_curg_id(ctx, l), reason);
	return 0;
}

SEC("uprobe")
int go_stw_stop(struct pt_regs *ctx)
{
	return go_stw(ctx, GO_STW_STOP);
}

SEC("uprobe")
int go_stw_start(struct pt_regs *ctx)
{
	return go_stw(ctx, GO_STW_START);
}
