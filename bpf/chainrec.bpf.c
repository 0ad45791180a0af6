// SPDX-License-Identifier: GPL-2.0
// chainrec recorder: scheduler events (switch, waking, wakeup_new, comm, exit) plus
// lazily or eagerly captured stacks, streamed through one BPF ring buffer.
//
// The records and constants shared with user space are in chainrec_abi.h (the Rust side is
// generated from it by crates/record/build.rs).

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

char LICENSE[] SEC("license") = "GPL";

#include "chainrec_abi.h"

struct ev_stk {
	struct ev h;
	__u64 frames[2 * MAX_FRAMES + 2];
	__u8 tail[sizeof(struct ucopy) + UCOPY_MAX + UCOPY_SLACK];
};

/* The user-stack half of a lazy off-CPU stack pair, reserved in the ring buffer at its
 * maximal size (the consumer reads nu frames, then the copy block, and ignores the rest). */
struct ev_ustk {
	struct ev h;
	__u64 frames[MAX_FRAMES];
	__u8 tail[sizeof(struct ucopy) + UCOPY_MAX + UCOPY_SLACK];
};

/* Read-only configuration, set by user space before load. */
const volatile __u32 stack_mode = MODE_LAZY;
const volatile __u64 threshold_ns = 100000;
const volatile __u64 wake_mark = 1 << 20;   /* force a consumer wakeup past this fill */
/* No user-stack copy while more than this is waiting in the ring buffer: the copies are
 * what fills it when the consumer falls behind, and an event lost breaks chains while a
 * stack without its copy still has its frame-pointer walk. */
const volatile __u64 ucopy_ring_budget = 1 << 24;
const volatile __s64 preempt_delta = 0;     /* &__preempt_count - &runqueues (per-CPU) */
const volatile bool have_preempt_delta = false;
const volatile bool filter_enabled = false;
const volatile bool user_stacks = true;
/* Lazy user stacks: true = a task_work callback on the task's return to user space
 * (bpf_task_work_schedule_resume_impl, 6.18+); false = the sys_exit program (fallback). */
const volatile bool use_task_work = false;
/* Finish short frame-pointer chains without the kernel walker (see cur_ustack). */
const volatile bool user_walk_shortcut = false;
const volatile __u64 min_user_addr = 4096; /* vm.mmap_min_addr */
/* Tests: also let the kernel walk every shortcut stack and count disagreements. */
const volatile bool verify_user_walk = false;
/* --profile-bpf: time the sections of the programs (P_*); off, the verifier removes it. */
const volatile bool profile = false;
/* Lazy mode: take the user stack of a task at its switch-out when its wait is predicted to
 * be long (see predict_long), instead of scheduling a task_work at the switch-in. */
const volatile bool user_stash = false;
/* Copy up to this many bytes of the user stack with every user stack taken (0 = frame
 * pointers only), for unwinding with the objects' CFI in user space (--user-unwind). */
const volatile __u32 ucopy_max = 0;
/* Record each task's cgroup (v2) at its first sighting and when it changes. */
const volatile bool track_cgroups = true;

/* CPU-quota throttling (docs/RECORDER.md, "Throttling"): the kallsyms addresses of the
 * CFS bandwidth timers; 0 = unknown (no refill records: the engine then ends throttled
 * time at the switch-in). */
const volatile __u64 cfs_period_timer_fn = 0;
const volatile __u64 cfs_slack_timer_fn = 0;

/* Global pending user-stack counter: gates the sys_exit program (fallback path only). */
__u64 user_pending = 0;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 24);
} rb SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, C_NR);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

/* Per-CPU scratch record for the programs that run with interrupts disabled
 * (sched_switch, sched_waking under pi_lock). The user-stack halves (task_work callback,
 * sys_exit) may be preempted, so they have their own scratch, claimed with a
 * compare-and-swap (uhalf_scratch, emit_user_half). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ev_stk);
} scratch SEC(".maps");

/* The lazy user half's scratch: busy while a (possibly preempted) program fills it. */
struct uhalf_slot {
	__u64 busy;
	struct ev_ustk e;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct uhalf_slot);
} uhalf_scratch SEC(".maps");

/* Per-CPU interrupt state for metal node identity. */
struct irq_state {
	__u32 hardirq;   /* SRC_HARDIRQ|irq of the running handler, 0 when none */
	__u32 softirq;   /* SRC_SOFTIRQ|vec of the running softirq, 0 when none */
	__u32 timer;     /* hrtimer expiry nesting depth */
	__u32 task_sirq; /* 1 inside do_softirq: softirqs run by the task itself */
	__u32 last_softirq; /* SRC_SOFTIRQ|vec of the last softirq entered, kept after its exit
			     * (wakeup_softirqd runs after the last vector's softirq_exit) */
	__u32 last_hardirq; /* SRC_HARDIRQ|irq or SRC_TIMER of the last interrupt handler or
			     * hrtimer expiry entered, kept after its exit (see irq_exit_waking) */
};

/* True once user space attached both do_softirq programs (see CTX_SOFTIRQ_TASK). */
bool sirq_tracked = false;
/* Without them: decide by the irq stack (see softirq_by_irqstack); false = all metal. */
const volatile bool softirq_heuristic = true;
/* Per-CPU hardirq_stack_ptr / hardirq_stack_inuse minus runqueues, and the code ranges
 * of __local_bh_enable_ip and do_softirq (kallsyms), for softirq_by_irqstack. */
const volatile bool have_irqstack = false;
const volatile __s64 irqstack_ptr_delta = 0;
const volatile __s64 irqstack_inuse_delta = 0;
const volatile __u64 bh_enable_start = 0;
const volatile __u64 bh_enable_end = 0;
const volatile __u64 do_softirq_start = 0;
const volatile __u64 do_softirq_end = 0;
#define IRQSTACK_WORDS 12

/* &ksoftirqd - &runqueues (per-CPU; kernels without CONFIG_KALLSYMS_ALL have no ksym
 * address for it). Without it, softirqs run by ksoftirqd are named like those at an
 * interrupt's exit. */
const volatile __s64 ksoftirqd_delta = 0;
const volatile bool have_ksoftirqd_delta = false;

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct irq_state);
} irqst SEC(".maps");

/* -p filter: thread group ids to record. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u8);
} filter_tgids SEC(".maps");

#define TS_SEEN 1
#define TS_BLOCKED 2
#define TS_UPENDING 4
#define TS_INTERESTING 8
#define TS_TWSLOT 16 /* has a twmap entry (deleted at exit) */

struct task_st {
	__u64 off_ts;   /* last switch-out (0 = on CPU / unknown) */
	__u64 uip;      /* user ip/sp at switch-in (lazy user stack check) */
	__u64 usp;
	__u32 flags;
	__u32 tw_armed; /* task_work path: a user stack is due at the return to user space.
			 * Its own word, not a flag bit: the callback clears it while it may be
			 * preempted by sched_switch updating flags. */
	__u32 tw_queued; /* task_work path: a callback is queued and has not run yet (it may
			  * have nothing left to do: tw_armed cleared by a switch-out) */
	__u32 wait_key;  /* predictor key of the current wait (see wait_key) */
	/* Predictor: per key k, a 2-bit count (bit k of hi and lo) set to 3 by a wait longer
	 * than T and lowered by each shorter one; a wait is predicted long while it is > 0. */
	__u64 long_hi;
	__u64 long_lo;
	__u64 cgid;      /* cgroup id last reported for the task (0 = none yet) */
};

/* Per-task task_work slot (lazy user stacks, task_work path), keyed by tid. Task storage
 * cannot hold a struct bpf_task_work (hash, LRU hash and array maps only). Entries are
 * created at a task's first long wait and deleted at its exit. */
struct tw_val {
	struct bpf_task_work tw;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 65536); /* set to 1 by user space when the path is not used */
	__type(key, __u32);
	__type(value, struct tw_val);
} twmap SEC(".maps");

extern int bpf_task_work_schedule_resume_impl(struct task_struct *task, struct bpf_task_work *tw,
					      void *map__map, bpf_task_work_callback_t callback,
					      void *aux__prog) __ksym __weak;

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct task_st);
} tstore SEC(".maps");

/* The user stack of a task taken at its switch-out (lazy mode, user_stash), used at its
 * switch-in when the wait was long. h.ts is the switch-out it was taken at, so a stale one
 * (an earlier wait) is never used. Task storage: 2 KiB per task that had a long wait. */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct ev_stk);
} ustash SEC(".maps");

static __always_inline void count(__u32 idx)
{
	__u64 *c = bpf_map_lookup_elem(&counters, &idx);
	if (c)
		*c += 1;
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

static __always_inline __u64 rb_flags(void)
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

static __always_inline bool is_kthread(struct task_struct *t)
{
	return t->flags & 0x00200000; /* PF_KTHREAD */
}

/* A task that never runs in user mode: a kernel thread, or an io_uring worker (iou-wrk-*,
 * iou-sqp-*: PF_IO_WORKER, same bit since 5.12). Io workers share their process's mm but
 * never return to user space, so a user stack walk of theirs finds nothing ([missing
 * stack]) or the stale registers of their creation ([unknown] frames). */
static __always_inline bool no_user_mode(struct task_struct *t)
{
	return t->flags & (0x00200000 /* PF_KTHREAD */ | 0x00000010 /* PF_IO_WORKER */);
}

/* The cgroup v2 id of t (what bpf_get_current_cgroup_id() gives for current): the kernfs
 * node id of its cgroup on the default hierarchy. */
static __always_inline __u64 task_cgid(struct task_struct *t)
{
	if (!track_cgroups)
		return 0;
	return BPF_CORE_READ(t, cgroups, dfl_cgrp, kn, id);
}

/* Comm record of t; returns the cgroup id it carries (to remember in task storage). */
static __always_inline __u64 emit_comm(struct task_struct *t, __u8 reason, __u64 ts)
{
	__u64 cgid = task_cgid(t);
	struct ev_comm *e = bpf_ringbuf_reserve(&rb, sizeof(*e), 0);
	if (!e) {
		count(C_RB_FULL);
		return 0;
	}
	e->h.ts = ts;
	e->h.kind = EV_COMM;
	e->h.aux = reason;
	e->h.kst = 0;
	e->h.ust = 0;
	e->h.cpu = bpf_get_smp_processor_id();
	e->h.nk = 0;
	e->h.nu = 0;
	e->h.task.tid = t->pid;
	e->h.task.tgid = t->tgid;
	e->h.task.flags = is_kthread(t) ? COMM_KTHREAD : 0;
	e->h.task.unused = 0;
	e->cgid = cgid;
	bpf_probe_read_kernel_str(e->comm, sizeof(e->comm), t->comm);
	bpf_ringbuf_submit(e, rb_flags());
	return cgid;
}

static __always_inline struct task_st *tst(struct task_struct *t, bool create)
{
	return bpf_task_storage_get(&tstore, t, 0, create ? BPF_LOCAL_STORAGE_GET_F_CREATE : 0);
}

/* First sighting: emit the task's identity once. */
static __always_inline struct task_st *seen(struct task_struct *t, __u64 ts, __u8 reason)
{
	struct task_st *s;
	if (t->pid == 0)
		return 0;
	s = tst(t, true);
	if (s && !(s->flags & TS_SEEN)) {
		s->flags |= TS_SEEN;
		s->cgid = emit_comm(t, reason, ts);
	}
	return s;
}

static __always_inline bool interesting(struct task_struct *t, struct task_st *s)
{
	__u32 tgid;
	if (!filter_enabled)
		return true;
	if (s && (s->flags & TS_INTERESTING))
		return true;
	tgid = t->tgid;
	return bpf_map_lookup_elem(&filter_tgids, &tgid) != 0;
}

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

/* The top of each thread's user stack as the consumer learned it from a whole unwound
 * stack (the highest address its unwinding read), keyed by tid: a thread's copies stop
 * there instead of taking the whole UCOPY_MAX (main threads stop at mm->start_stack).
 * Written by user space, deleted at the thread's exit. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, __u64);
} ustack_top SEC(".maps");

/* Counter increment for the programs that may be preempted (task_work callback, sys_exit):
 * the plain increment of count() could lose an update to a program running in between. */
static __always_inline void count_atomic(__u32 idx)
{
	__u64 *c = bpf_map_lookup_elem(&counters, &idx);
	if (c)
		__sync_fetch_and_add(c, 1);
}

/* Copy the user stack of `t` (from its user sp up, at most ucopy_max bytes, page by page
 * until a page cannot be read) into the block at `dst`, with the user ip/sp/bp, so the
 * consumer can unwind it with the objects' CFI (code built without frame pointers, and
 * the callers of leaf functions that set up no frame). The main thread's copy stops at
 * mm->start_stack (argc): nothing above it is a frame. Returns the block's size, 0 when
 * there is nothing to copy. */
static __always_inline __u32 copy_ustack_to(struct task_struct *t, struct ucopy *dst)
{
	struct pt_regs *ur = (struct pt_regs *)bpf_task_pt_regs(t);
	__u64 sp, limit = ucopy_max, top;
	__u32 got = 0;
	int i;

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
	dst->pad = 0;
	top = t->mm->start_stack;
	if (top > sp && top - sp < limit) {
		limit = top - sp;
	} else {
		__u32 tid = t->pid;
		__u64 *learned = bpf_map_lookup_elem(&ustack_top, &tid);

		if (learned && *learned > sp && *learned - sp < limit)
			limit = *learned - sp;
	}
	if (limit > UCOPY_MAX)
		limit = UCOPY_MAX;
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
		if (bpf_probe_read_user((__u8 *)(dst + 1) + got, piece, (void *)(sp + got)))
			break;
		got += piece;
	}
	dst->len = got;
	return got ? sizeof(*dst) + got : 0;
}

/* cur_ustack's copy: after the nk + nu frames of s. */
static __always_inline void copy_ustack(struct ev_stk *s)
{
	__u32 n = (__u32)s->h.nk + (__u32)s->h.nu;

	if (!ucopy_max || n > 2 * MAX_FRAMES)
		return;
	if (copy_ustack_to(bpf_get_current_task_btf(), (struct ucopy *)&s->frames[n])) {
		if (s->h.ust != ST_PRESENT) { /* the frame-pointer walk failed: the copy is it */
			s->h.ust = ST_PRESENT;
			s->h.nu = 0;
		}
		s->h.ust |= UST_COPY;
	}
}

/* User stack of the current task after the kernel frames (sets ust/nu): the frame-pointer
 * walk, plus a copy of the stack for CFI unwinding when ucopy_max is set. */
static __always_inline void cur_ustack(void *ctx, struct ev_stk *s)
{
	cur_ustack_fp(ctx, s);
	if (s->h.ust == ST_PRESENT || s->h.ust == ST_FAILED)
		copy_ustack(s);
}

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

/* Fill the user-stack half of a lazy off-CPU stack pair (EV_OFFCPU, aux 1), taken in the
 * task's own context on its way back to user space. uip/usp are the user registers read at
 * switch-in: when they still match, the task is returning from the same wait and the user
 * stack is the one it waited with; otherwise (e.g. a signal handler frame was set up first)
 * the status is USER_PREEMPTED. */
static __always_inline void fill_user_half(struct ev_ustk *e, struct task_struct *cur, __u64 uip,
					   __u64 usp)
{
	struct pt_regs *ur;

	e->h.ts = bpf_ktime_get_ns();
	e->h.kind = EV_OFFCPU;
	e->h.aux = 1; /* user-stack half */
	e->h.kst = ST_NONE;
	e->h.cpu = bpf_get_smp_processor_id();
	e->h.nk = 0;
	e->h.nu = 0;
	e->h.task.tid = cur->pid;
	e->h.task.tgid = cur->tgid;
	e->h.task.flags = 0;
	e->h.task.unused = 0;
	ur = (struct pt_regs *)bpf_task_pt_regs(cur);
	if (cur->flags & PF_EXITING) {
		e->h.ust = ST_EXITING;
	} else if (ur && ur->ip == uip && ur->sp == usp) {
		__u64 t0 = prof_t0();
		long r = bpf_get_task_stack(cur, e->frames, sizeof(e->frames), BPF_F_USER_STACK);

		prof_add(P_CB_USTACK, t0, true);
		if (r < 0) {
			e->h.ust = ST_FAILED;
		} else {
			e->h.ust = ST_PRESENT;
			e->h.nu = (__u8)(r / 8);
		}
		if (ucopy_max) {
			__u32 nu = e->h.nu;

			if (nu > MAX_FRAMES)
				nu = MAX_FRAMES;
			if (copy_ustack_to(cur, (struct ucopy *)&e->frames[nu])) {
				if (e->h.ust != ST_PRESENT) /* the walk failed (nu = 0) */
					e->h.ust = ST_PRESENT;
				e->h.ust |= UST_COPY;
			}
		}
	} else {
		e->h.ust = ST_UPREEMPT;
	}
}

/* Bytes of a filled user half: header, nu frames, the copy block (if any). */
static __always_inline __u64 user_half_size(struct ev_ustk *e)
{
	__u64 n = e->h.nu, size;

	if (n > MAX_FRAMES)
		n = MAX_FRAMES;
	size = sizeof(struct ev) + n * 8;
	if ((e->h.ust & UST_COPY) && ring_busy()) {
		drop_copy(&e->h);
		count_atomic(C_UCOPY_BUSY);
	}
	if (e->h.ust & UST_COPY) {
		struct ucopy *u = (struct ucopy *)&e->frames[n];
		__u64 len = u->len;

		if (len > UCOPY_MAX)
			len = UCOPY_MAX;
		size += sizeof(struct ucopy) + len;
	}
	if (size > sizeof(*e))
		size = sizeof(*e);
	return size;
}

/* Emit the user half. The program may be preempted (task_work callback, sys_exit), so a
 * per-CPU scratch can be in use by a preempted owner: it is claimed with a compare-and-swap.
 * A claimed scratch is output at the record's real size (typically 1-4 KiB with a stack
 * copy); reserving in place would hold sizeof(struct ev_ustk), ~21 KiB, of the ring buffer
 * per record until the consumer reads it, which is what filled the ring buffer when many
 * threads' long waits ended at once. Only when the scratch is taken is the record reserved
 * in place at its maximal size (counted: C_UHALF_INPLACE). */
static __always_inline void emit_user_half(struct task_struct *cur, __u64 uip, __u64 usp)
{
	__u32 zero = 0;
	struct uhalf_slot *slot = bpf_map_lookup_elem(&uhalf_scratch, &zero);
	struct ev_ustk *e;

	if (slot && __sync_val_compare_and_swap(&slot->busy, 0, 1) == 0) {
		e = &slot->e;
		fill_user_half(e, cur, uip, usp);
		if (bpf_ringbuf_output(&rb, e, user_half_size(e), rb_flags()))
			count_atomic(C_RB_FULL);
		__sync_lock_test_and_set(&slot->busy, 0);
		return;
	}
	count_atomic(C_UHALF_INPLACE);
	e = bpf_ringbuf_reserve(&rb, sizeof(*e), 0);
	if (!e) {
		count_atomic(C_RB_FULL);
		return;
	}
	fill_user_half(e, cur, uip, usp);
	bpf_ringbuf_submit(e, rb_flags());
}

/* task_work callback: runs in the task that waited, before it returns to user space. */
static int user_stack_cb(struct bpf_map *map, void *key, void *value)
{
	__u64 t0 = prof_t0();
	struct task_struct *cur = bpf_get_current_task_btf();
	struct task_st *s = tst(cur, false);

	if (!s)
		return 0;
	s->tw_queued = 0;
	if (s->tw_armed) { /* else already taken at a switch-out (user_half_at_switch) */
		s->tw_armed = 0;
		emit_user_half(cur, s->uip, s->usp);
	}
	prof_add(P_CB_ALL, t0, true);
	return 0;
}

/* Arrange for the user stack of `next`, which is being switched in after a long wait, to be
 * taken on its way back to user space. Returns the user stack status of the kernel-half
 * record: NONE when a user half will follow, FAILED or USER_PREEMPTED when it will not. */
static __always_inline __u8 arm_user_stack(struct task_struct *next, __u32 tid, struct task_st *ns)
{
	struct pt_regs *regs;

	/* sys_exit path: a task preempted in user mode makes no syscall exit soon. */
	if (!use_task_work && !(ns->flags & TS_BLOCKED))
		return ST_UPREEMPT;
	regs = (struct pt_regs *)bpf_task_pt_regs(next);
	if (!regs)
		return ST_FAILED;
	ns->uip = regs->ip;
	ns->usp = regs->sp;
	if (use_task_work) {
		/* Blocked and preempted waits alike: the callback runs at the return to user
		 * space, where the user registers are those of the blocking syscall or of the
		 * user-mode preemption point, i.e. the user stack the task waited with. */
		struct tw_val *v;
		__u64 t0;
		int err;

		if (!bpf_ksym_exists(bpf_task_work_schedule_resume_impl))
			return ST_FAILED;
		v = bpf_map_lookup_elem(&twmap, &tid);
		if (!v) {
			struct tw_val z = {};

			bpf_map_update_elem(&twmap, &tid, &z, BPF_NOEXIST);
			v = bpf_map_lookup_elem(&twmap, &tid);
			if (!v) {
				count(C_TW_FAILED);
				return ST_FAILED;
			}
			ns->flags |= TS_TWSLOT;
		}
		t0 = prof_t0();
		err = bpf_task_work_schedule_resume_impl(next, &v->tw, &twmap, user_stack_cb, 0);
		prof_add(P_TW_SCHED, t0, false);
		if (err == 0) {
			ns->tw_armed = 1;
			ns->tw_queued = 1;
			return ST_NONE;
		}
		if (ns->tw_queued) {
			/* Still queued from an earlier wait in the same syscall (no return to user
			 * space since; that wait got its user half at the switch-out in between):
			 * the queued callback takes this wait's stack, with the same registers. */
			ns->tw_armed = 1;
			count(C_USER_PENDING_OVERWRITTEN);
			return ST_NONE;
		}
		count(C_TW_FAILED);
		return ST_FAILED;
	}
	if (!(ns->flags & TS_UPENDING)) {
		ns->flags |= TS_UPENDING;
		__sync_fetch_and_add(&user_pending, 1);
	} else {
		count(C_USER_PENDING_OVERWRITTEN);
	}
	return ST_NONE;
}

/* True when a lazy user half is due for this task (its last long wait's user stack has not
 * been taken yet: no return to user space since that wait's switch-in). */
static __always_inline bool user_half_due(struct task_st *s)
{
	return use_task_work ? s->tw_armed != 0 : (s->flags & TS_UPENDING) != 0;
}

static __always_inline void user_half_done(struct task_st *s)
{
	if (use_task_work) {
		s->tw_armed = 0; /* the queued callback finds nothing to do */
	} else {
		s->flags &= ~TS_UPENDING;
		__sync_fetch_and_add(&user_pending, -1);
	}
}

/* prev is switched out again before its last long wait's user half was taken (preempted on
 * its way back to user space, or blocked again inside the same syscall). Take that half now,
 * in prev's own context: it has not returned to user space, so its user registers are still
 * those of the wait (checked against the stored ip/sp). Emitted before the Switch record with
 * the same timestamp, so the engine attaches it to the wait that just ended, not to the one
 * that starts (which the user half used to be given when it arrived after this switch). */
static __always_inline void user_half_at_switch(void *ctx, struct task_struct *prev,
						struct task_st *ps, __u64 ts)
{
	struct ev_stk *s;
	struct pt_regs *ur;

	user_half_done(ps);
	count(C_USER_AT_SWITCH);
	s = scratch_ev();
	if (!s)
		return;
	s->h.ts = ts;
	s->h.kind = EV_OFFCPU;
	s->h.aux = 1; /* user-stack half */
	s->h.kst = ST_NONE;
	s->h.cpu = bpf_get_smp_processor_id();
	s->h.nk = 0;
	s->h.nu = 0;
	s->h.task.tid = prev->pid;
	s->h.task.tgid = prev->tgid;
	s->h.task.flags = 0;
	s->h.task.unused = 0;
	ur = (struct pt_regs *)bpf_task_pt_regs(prev);
	if (prev->flags & PF_EXITING)
		s->h.ust = ST_EXITING;
	else if (ur && ur->ip == ps->uip && ur->sp == ps->usp)
		cur_ustack(ctx, s);
	else
		s->h.ust = ST_UPREEMPT;
	output_stk(s);
}

/* Predictor key of a wait that starts now: the syscall number (mod 63) for a task blocked
 * or preempted in a syscall, 63 for a task preempted in user mode. A task's waits in one
 * syscall tend to be alike (a server's recv short, its nanosleep long). */
static __always_inline __u32 wait_key(struct task_struct *t)
{
	struct pt_regs *r = (struct pt_regs *)bpf_task_pt_regs(t);
	__s64 nr;

	if (!r)
		return 63;
	nr = (__s64)r->orig_ax;
	if (nr < 0)
		return 63; /* not in a syscall: preempted in user mode (or an exception) */
	return (__u32)(nr % 63);
}

/* Lazy mode, user_stash: prev's wait is predicted long (its last wait with the same key
 * was): take its user stack now, in prev itself, into its ustash. Its user registers are
 * those it will return to user space with, whatever happens in between (a signal frame is
 * set up only on the way out), so this is the stack it waits with. */
static __always_inline void stash_user_stack(void *ctx, struct task_struct *prev,
					     struct task_st *ps, __u64 ts)
{
	struct ev_stk *st;

	__u64 bit;

	ps->wait_key = wait_key(prev);
	bit = 1ull << (ps->wait_key & 63);
	if (!((ps->long_hi | ps->long_lo) & bit))
		return;
	st = bpf_task_storage_get(&ustash, prev, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!st)
		return;
	st->h.ts = ts;
	st->h.nk = 0;
	st->h.nu = 0;
	cur_ustack(ctx, st);
	count(C_USTASH_TAKEN);
}

/* At the switch-in after a wait: count it under its key. A long wait sets the count to 3,
 * a short one lowers it: after a long wait, the next three waits with that key are taken
 * as long. A wasted walk at the switch-out (~1.5 us here) is far cheaper than a long wait
 * predicted short (task_work kfunc, its irq_work IPI and the callback: ~11 us). */
static __always_inline void learn_wait(struct task_st *ns, bool long_wait)
{
	__u64 bit = 1ull << (ns->wait_key & 63);

	if (long_wait) {
		ns->long_hi |= bit;
		ns->long_lo |= bit;
	} else if (ns->long_lo & bit) { /* 3 -> 2, 1 -> 0 */
		ns->long_lo &= ~bit;
	} else if (ns->long_hi & bit) { /* 2 -> 1 */
		ns->long_hi &= ~bit;
		ns->long_lo |= bit;
	}
}

/* The user stack of next taken at its switch-out, appended after the kernel frames of s;
 * false when there is none for this wait (switched out at `off`). */
static __always_inline bool use_stash(struct task_struct *next, struct ev_stk *s, __u64 off)
{
	struct ev_stk *st = bpf_task_storage_get(&ustash, next, 0, 0);
	__u32 nk = s->h.nk, nu;

	if (!st || st->h.ts != off)
		return false;
	st->h.ts = 0;
	nu = st->h.nu;
	if (nk > MAX_FRAMES)
		nk = MAX_FRAMES;
	if (nu > MAX_FRAMES)
		nu = MAX_FRAMES;
	if (st->h.ust & UST_COPY) {
		/* the frames and the copy block after them, in one read */
		struct ucopy *u = (struct ucopy *)&st->frames[nu];
		__u64 len = u->len;

		if (len > UCOPY_MAX)
			len = UCOPY_MAX;
		if (bpf_probe_read_kernel(&s->frames[nk], nu * 8 + sizeof(struct ucopy) + len,
					  st->frames))
			return false;
	} else if (nu && bpf_probe_read_kernel(&s->frames[nk], nu * 8, st->frames)) {
		return false;
	}
	s->h.ust = st->h.ust;
	s->h.nu = nu;
	count(C_USTASH_USED);
	return true;
}

/* The group a throttled cfs_rq belongs to, as (cgroup id, hierarchy id): the kernfs node
 * id of its cgroup (= the inode of its directory) and 0 for cgroup v2, the v1 hierarchy
 * (the one the cpu controller is mounted on) otherwise. */
static __always_inline void emit_throttle(__u64 ts, __u8 what, __u32 tid, struct task_group *tg)
{
	struct cgroup *cg = BPF_CORE_READ(tg, css.cgroup);
	__u64 id = BPF_CORE_READ(cg, kn, id);
	__u32 hier = BPF_CORE_READ(cg, root, hierarchy_id);

	emit_ev(ts, EV_THROTTLE, what, ST_NONE, ST_NONE, tid, (__u32)id, (__u32)(id >> 32), hier);
}

/* A runnable switch-out: was prev held off by CPU-quota throttling? On kernels with
 * task-based throttling (6.18+: task_struct.throttled) the task is dequeued on its return
 * to user space and switched out with `throttled` set; before, the whole cfs_rq was
 * dequeued and its tasks preempted, with throttle_count > 0 on their cfs_rq. Then the
 * nearest throttled group (the one whose quota ran out) is recorded. One load per
 * preemption; the rest only on throttled switch-outs (at most one per task and period). */
static __always_inline void throttle_mark(struct task_struct *prev, __u32 prev_pid, __u64 ts)
{
	struct sched_entity *se;
	struct cfs_rq *cfs_rq = 0;
	bool held;
	int i;

	if (bpf_core_field_exists(prev->throttled))
		held = BPF_CORE_READ(prev, throttled);
	else
		held = BPF_CORE_READ(prev, se.cfs_rq, throttle_count) > 0;
	if (!held || prev_pid == 0)
		return;
	/* throttle_count of a cfs_rq counts the throttled groups among itself and its
	 * ancestors, so the nearest throttled one is the first whose count exceeds its
	 * parent's. (Read as ints: cfs_rq.throttled is a bitfield on 6.18, an int before.) */
	se = &prev->se;
	cfs_rq = BPF_CORE_READ(se, cfs_rq);
	for (i = 0; i < 16 && cfs_rq; i++) {
		struct sched_entity *gse = BPF_CORE_READ(se, parent);
		struct cfs_rq *up = gse ? BPF_CORE_READ(gse, cfs_rq) : 0;
		int n = BPF_CORE_READ(cfs_rq, throttle_count);

		if (!up || n > BPF_CORE_READ(up, throttle_count))
			break;
		se = gse;
		cfs_rq = up;
	}
	if (cfs_rq)
		emit_throttle(ts, THR_SWITCH_OUT, prev_pid, BPF_CORE_READ(cfs_rq, tg));
}

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
	prof_add(P_SW_ALL, ts, false);
	return 0;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(on_sys_exit, struct pt_regs *regs, long ret)
{
	struct task_struct *cur;
	struct task_st *s;

	if (user_pending == 0)
		return 0;
	cur = bpf_get_current_task_btf();
	s = tst(cur, false);
	if (!s || !(s->flags & TS_UPENDING))
		return 0;
	s->flags &= ~TS_UPENDING;
	__sync_fetch_and_add(&user_pending, -1);
	emit_user_half(cur, s->uip, s->usp);
	return 0;
}

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

SEC("tp_btf/sched_process_exec")
int BPF_PROG(on_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	__u64 ts = bpf_ktime_get_ns();
	struct task_st *s = tst(p, true);
	if (s)
		s->flags |= TS_SEEN;
	if (s && stack_mode == MODE_LAZY && user_stacks && user_half_due(s)) {
		/* The wait was inside execve (or before it, in the same syscall): the user stack
		 * it waited with belonged to the old program, which is gone now. */
		user_half_done(s);
		count_atomic(C_USER_AT_EXEC);
		emit_ev(ts, EV_OFFCPU, 1, ST_NONE, ST_EXEC, p->pid, p->tgid, 0, 0);
	}
	if (!interesting(p, s))
		return 0;
	if (s)
		s->cgid = emit_comm(p, CR_EXEC, ts);
	else
		emit_comm(p, CR_EXEC, ts);
	return 0;
}

SEC("tp_btf/task_rename")
int BPF_PROG(on_rename, struct task_struct *t, const char *comm)
{
	/* Fires before the copy, with the new name as argument. Skipped during exec
	 * (sched_process_exec reports that one, after the name changed). */
	__u64 ts = bpf_ktime_get_ns();
	struct task_st *s = tst(t, false);
	struct ev_comm *e;
	if (BPF_CORE_READ_BITFIELD_PROBED(t, in_execve))
		return 0;
	if (!interesting(t, s))
		return 0;
	e = bpf_ringbuf_reserve(&rb, sizeof(*e), 0);
	if (!e) {
		count(C_RB_FULL);
		return 0;
	}
	e->h.ts = ts;
	e->h.kind = EV_COMM;
	e->h.aux = CR_RENAME;
	e->h.kst = 0;
	e->h.ust = 0;
	e->h.cpu = bpf_get_smp_processor_id();
	e->h.nk = 0;
	e->h.nu = 0;
	e->h.task.tid = t->pid;
	e->h.task.tgid = t->tgid;
	e->h.task.flags = is_kthread(t) ? COMM_KTHREAD : 0;
	e->h.task.unused = 0;
	e->cgid = task_cgid(t);
	bpf_probe_read_kernel_str(e->comm, sizeof(e->comm), comm);
	bpf_ringbuf_submit(e, rb_flags());
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
	if (ucopy_max && p->pid != p->tgid) {
		__u32 tid = p->pid;

		bpf_map_delete_elem(&ustack_top, &tid); /* a reused tid learns its own */
	}
	if (!interesting(p, s))
		return 0;
	emit_ev(ts, EV_EXIT, 0, ST_NONE, ST_NONE, p->pid, p->tgid, 0, 0);
	return 0;
}

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
