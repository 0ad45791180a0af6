/* SPDX-License-Identifier: GPL-2.0 */
/* Stacks: kernel and user (frame-pointer) walks of the current task, and user-stack copies
 * for unwinding with CFI in user space. */

/* Kernel stack of the current task into s->frames[0..]; sets kst/nk. */
static __always_inline void cur_kstack(void *ctx, struct ev_stk *s)
{
	long r = bpf_get_stack(ctx, s->frames, MAX_FRAMES * 8, 0);
	if (r < 0) {
		s->h.kst = ST_FAILED;
		s->h.nk = 0;
	} else {
		s->h.kst = ST_PRESENT;
		s->h.nk = (__u8)(r / 8);
	}
}

#define PF_EXITING 0x00000004
#define PF_USER_WORKER 0x00004000
#define USER_CS 0x33 /* __USER_CS: 64-bit user code segment */

struct uframe {
	__u64 next;
	__u64 ret;
};

/* User stack of the current task after the kernel frames; sets ust/nu.
 *
 * Frame-pointer walks through code built without frame pointers usually end after one or
 * two frames at a garbage frame pointer, and when that pointer is a small number the
 * kernel's walker stops only after taking a page fault (~0.8 us here, most of a user
 * walk). Such walks are finished here without the fault: the first one or two frame
 * records are read with bpf_probe_read_user and, when the chain continues at an address
 * below vm.mmap_min_addr (never mapped), the stack is complete; the kernel walker would
 * have stored the same frames and then faulted there. Anything else (a chain that goes on,
 * 32-bit tasks, user workers) is walked by the kernel as before. */
static __always_inline void cur_ustack_fp(void *ctx, struct ev_stk *s)
{
	__u32 off = s->h.nk;
	long r;
	if (off > MAX_FRAMES)
		off = MAX_FRAMES;
	{
		/* An exiting task past exit_mm (e.g. do_exit waking its parent) has no user
		 * stack left to walk: say so instead of counting a failed walk. */
		struct task_struct *cur = bpf_get_current_task_btf();

		if ((cur->flags & PF_EXITING) && !cur->mm) {
			s->h.ust = ST_EXITING;
			s->h.nu = 0;
			return;
		}
	}
	if (user_walk_shortcut) {
		struct task_struct *cur = bpf_get_current_task_btf();
		struct pt_regs *ur = (struct pt_regs *)bpf_task_pt_regs(cur);

		if (ur && ur->cs == USER_CS && cur->mm && !(cur->flags & PF_USER_WORKER) &&
		    off <= MAX_FRAMES) {
			struct uframe f1 = {};
			__u64 fp = ur->bp;
			__u8 n = 0;

			s->frames[off & 0xff] = ur->ip;
			if (fp < min_user_addr) {
				n = 1;
			} else if (bpf_probe_read_user(&f1, sizeof(f1), (void *)fp) == 0 &&
				   f1.next < min_user_addr) {
				s->frames[(off + 1) & 0xff] = f1.ret;
				n = 2;
			}
			if (n) {
				s->h.ust = ST_PRESENT;
				s->h.nu = n;
				count(C_UWALK_SHORT);
				if (verify_user_walk) {
					/* after the shortcut frames: off + 2 + MAX_FRAMES <= 256 */
					__u32 v = (off + 2) & 0xff;
					bool same;

					if (v > MAX_FRAMES + 2)
						return;
					r = bpf_get_stack(ctx, &s->frames[v], MAX_FRAMES * 8,
							  BPF_F_USER_STACK);
					same = r == n * 8 && s->frames[v] == s->frames[off & 0xff];
					if (same && n == 2)
						same = s->frames[(v + 1) & 0xff] ==
						       s->frames[(off + 1) & 0xff];
					if (!same)
						count(C_UWALK_MISMATCH);
				}
				return;
			}
		}
	}
	r = bpf_get_stack(ctx, &s->frames[off], MAX_FRAMES * 8, BPF_F_USER_STACK);
	if (r < 0) {
		s->h.ust = ST_FAILED;
		s->h.nu = 0;
	} else {
		s->h.ust = ST_PRESENT;
		s->h.nu = (__u8)(r / 8);
	}
}

/* What the consumer learned of each thread's user stack (struct ustack_learned), keyed by
 * tid: copies stop at the learned top instead of taking the whole UCOPY_MAX (main threads
 * stop at mm->start_stack), and take the learned windows too. Written by user space,
 * deleted at the thread's exit. Preallocated, like every map here. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, struct ustack_learned);
} ustack_learned SEC(".maps");

/* CPython processes (struct py_proc), written by user space, deleted at their exit. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct py_proc);
} py_procs SEC(".maps");

#define PY_MAX_THREADS 32 /* thread states searched for the current tid */

struct py_out {
	__u64 f[UCOPY_WINDOW / 8];
};

/* The current thread's Python frames into `out` (see UCOPY_PY_FRAMES); returns how many.
 * A global function: the verifier checks its loops once. */
__noinline int py_frames(struct py_proc *py, struct py_out *out)
{
	__u64 interp = 0, ts = 0, cframe = 0, frame = 0;
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	int i, n;

	if (!py || !out)
		return 0;
	if (bpf_probe_read_user(&interp, 8, (void *)py->interp_head) || !interp ||
	    bpf_probe_read_user(&ts, 8, (void *)(interp + py->threads_head)))
		return 0;
	for (i = 0; i < PY_MAX_THREADS && ts; i++) {
		__u64 native = 0;

		if (bpf_probe_read_user(&native, 8, (void *)(ts + py->ts_native_tid)))
			return 0;
		if (native == tid)
			break;
		if (bpf_probe_read_user(&ts, 8, (void *)(ts + py->ts_next)))
			return 0;
	}
	if (!ts || i >= PY_MAX_THREADS ||
	    bpf_probe_read_user(&cframe, 8, (void *)(ts + py->ts_cframe)) || !cframe ||
	    bpf_probe_read_user(&frame, 8, (void *)(cframe + py->cframe_current)))
		return 0;
	for (n = 0; n < UCOPY_WINDOW / 8 - 1 && frame; n++) {
		__u64 code = 0;
		__u8 entry = 0;

		if (bpf_probe_read_user(&code, 8, (void *)(frame + py->fr_code)) ||
		    bpf_probe_read_user(&entry, 1, (void *)(frame + py->fr_is_entry)) ||
		    bpf_probe_read_user(&frame, 8, (void *)(frame + py->fr_previous)))
			break;
		out->f[n] = code | (entry & 1);
	}
	out->f[n & (UCOPY_WINDOW / 8 - 1)] = 0;
	return n;
}

/* A copy block as a global function's argument: the header and the most bytes it can
 * hold (the verifier gives a pointer argument exactly its type's size). */
struct ucopy_block {
	struct ucopy h;
	__u8 bytes[UCOPY_MAX + UCOPY_SLACK];
};

/* Copy the current task's user stack (from its user sp up, at most ucopy_max bytes, page by page
 * until a page cannot be read) into the block at `dst`, with the user ip/sp/bp, so the
 * consumer can unwind it with the objects' CFI (code built without frame pointers, and
 * the callers of leaf functions that set up no frame). The main thread's copy stops at
 * mm->start_stack (argc): nothing above it is a frame; other threads' at their learned top.
 * Then the thread's learned windows above the copy (a frame larger than the copy leaves
 * its return address there), and in a CPython process the thread's Python frames, in the
 * bytes the copy leaves for them. A global function: the verifier checks its loops once,
 * whichever program and path calls it. Returns the block's size, 0 when there is
 * nothing to copy. */
/* How many windows a copy from `sp` of the current thread takes: its learned windows
 * above what the copy reaches (a window may begin below the top and end above it: the main
 * thread's argv lies above its start_stack; one beginning above it is stale), and one for
 * its Python frames in a CPython process. A global function, like the two below: the
 * verifier checks each once, with a state space of its own (inlined together they
 * multiplied it: on_waking 6 k -> 74 k instructions processed). */
__noinline __u32 count_windows(__u64 sp, __u64 top)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)pid_tgid, tgid = pid_tgid >> 32, n = 0;
	struct ustack_learned *learned = bpf_map_lookup_elem(&ustack_learned, &tid);
	int i;

	if (learned) {
		for (i = 0; i < UCOPY_LEARNED; i++) {
			__u64 at = learned->win_at[i];

			if (at > sp + UCOPY_WINDOW && at - sp <= UCOPY_REACH && (!top || at < top))
				n++;
		}
	}
	if (bpf_map_lookup_elem(&py_procs, &tgid))
		n++;
	return n;
}

/* The windows [count_windows] counted, after the `got` bytes of the copy in `blk` (room
 * for `nwin` of them is left there): each learned window the copy does not already cover
 * and that can be read, then the Python frames. Sets the block's nwin; returns its new
 * length. */
__noinline __u32 copy_windows(struct ucopy_block *blk, __u64 top, __u32 got, __u32 nwin)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)pid_tgid, tgid = pid_tgid >> 32, n = 0;
	struct ustack_learned *learned = bpf_map_lookup_elem(&ustack_learned, &tid);
	struct py_proc *py = bpf_map_lookup_elem(&py_procs, &tgid);
	__u64 sp;
	int i;

	if (!blk)
		return got;
	sp = blk->h.sp;
	got &= UCOPY_MAX - 1; /* got <= UCOPY_MAX - nwin * UCOPY_WINDOW, nwin > 0 */
	if (learned) {
		for (i = 0; i < UCOPY_LEARNED; i++) {
			__u64 at = learned->win_at[i];

			if (n >= nwin)
				break;
			if (at < sp + got || at - sp > UCOPY_REACH || (top && at >= top))
				continue;
			if (bpf_probe_read_user(blk->bytes + (got & (UCOPY_MAX - 1)), UCOPY_WINDOW,
						(void *)at))
				continue;
			blk->h.win_at[n & (UCOPY_WINDOWS - 1)] = at;
			got += UCOPY_WINDOW;
			n++;
		}
	}
	if (py && n < nwin && n < UCOPY_WINDOWS &&
	    py_frames(py, (struct py_out *)(blk->bytes + (got & (UCOPY_MAX - 1)))) > 0) {
		blk->h.win_at[n & (UCOPY_WINDOWS - 1)] = UCOPY_PY_FRAMES;
		got += UCOPY_WINDOW;
		n++;
	}
	blk->h.nwin = n;
	return got;
}

__noinline __u32 copy_ustack_block(struct ucopy_block *blk)
{
	struct task_struct *t = bpf_get_current_task_btf();
	struct ucopy *dst = blk ? &blk->h : NULL;
	struct pt_regs *ur;
	__u64 sp, limit = ucopy_max, top = 0;
	__u32 got = 0, nwin;
	int i;

	if (!dst)
		return 0;
	ur = (struct pt_regs *)bpf_task_pt_regs(t);
	if (!ur || ur->cs != USER_CS || !t->mm || (t->flags & PF_USER_WORKER))
		return 0;
	if (ring_busy()) {
		count_atomic(C_UCOPY_BUSY);
		return 0;
	}
	sp = ur->sp;
	dst->ip = ur->ip;
	dst->sp = sp;
	dst->bp = ur->bp;
	dst->nwin = 0;
	if (limit > UCOPY_MAX)
		limit = UCOPY_MAX;
	if (t->pid == t->tgid) {
		top = t->mm->start_stack; /* the main thread runs on the [stack] mapping */
	} else {
		__u32 tid = t->pid;
		struct ustack_learned *learned = bpf_map_lookup_elem(&ustack_learned, &tid);

		if (learned)
			top = learned->top;
	}
	if (top > sp && top - sp < limit)
		limit = top - sp;
	nwin = count_windows(sp, top);
	/* The windows' room comes out of the copy only where copy and windows would not
	 * fit in the block together (at most 2 KiB of 16). */
	if (nwin > UCOPY_WINDOWS)
		nwin = UCOPY_WINDOWS;
	if (nwin && limit + nwin * UCOPY_WINDOW > UCOPY_MAX)
		limit = UCOPY_MAX - nwin * UCOPY_WINDOW;
	for (i = 0; i < UCOPY_MAX / 4096 + 1; i++) {
		__u64 piece = 4096 - ((sp + got) & 4095);

		if (got >= limit)
			break;
		if (piece > limit - got)
			piece = limit - got;
		got &= UCOPY_MAX - 1; /* bounds for the verifier: got < limit <= UCOPY_MAX */
		/* clang knows piece <= 4096 here and drops the clamp below; the 6.1 verifier
		 * does not (it sees piece = limit - got, up to UCOPY_MAX): hide the range. */
		asm volatile("" : "+r"(piece));
		if (piece > 4096)
			piece = 4096;
		/* a no-op mask (piece <= 4096) that gives the 6.1 verifier a non-negative size */
		asm volatile("" : "+r"(piece));
		piece &= 0x1fff;
		if (bpf_probe_read_user(blk->bytes + got, piece, (void *)(sp + got)))
			break;
		got += piece;
	}
	if (nwin)
		got = copy_windows(blk, top, got, nwin);
	dst->len = got;
	return got ? sizeof(*dst) + got : 0;
}

/* cur_ustack's copy of the current task's stack: after the nk + nu frames of s. A global
 * function, so the verifier checks its page loop once, not once for every path of
 * on_switch that reaches one of its three stack takers (that was 84 % of on_switch's
 * verified instructions and most of the load time; docs/RECORDER.md, "Load time"). */
__noinline int copy_ustack(struct ev_stk *s)
{
	__u32 n;

	if (!s) /* a global function's pointer argument may be NULL to the verifier */
		return 0;
	n = (__u32)s->h.nk + (__u32)s->h.nu;
	if (!ucopy_max || n > 2 * MAX_FRAMES)
		return 0;
	if (copy_ustack_block((struct ucopy_block *)&s->frames[n])) {
		if (s->h.ust != ST_PRESENT) { /* the frame-pointer walk failed: the copy is it */
			s->h.ust = ST_PRESENT;
			s->h.nu = 0;
		}
		s->h.ust |= UST_COPY;
	}
	return 0;
}

/* User stack of the current task after the kernel frames (sets ust/nu): the frame-pointer
 * walk, plus a copy of the stack for CFI unwinding when ucopy_max is set. */
static __always_inline void cur_ustack(void *ctx, struct ev_stk *s)
{
	cur_ustack_fp(ctx, s);
	if (s->h.ust == ST_PRESENT || s->h.ust == ST_FAILED)
		copy_ustack(s);
}
