/* SPDX-License-Identifier: GPL-2.0 */
/* chainrec BPF ABI: everything bpf/chainrec.bpf.c and user space (crates/record) share.
 *
 * The one definition of the ring-buffer records (struct ev and its per-kind views, struct
 * ev_comm, struct ucopy), the record kinds, stack statuses and flags, waking contexts,
 * interrupt source codes, counter indexes of the per-CPU counter maps (values: __u64) and
 * the other constants both sides need. crates/record/build.rs generates the Rust side from
 * this file with bindgen (OUT_DIR/chainrec_abi.rs, included by crates/record/src/raw.rs),
 * so a change here changes both sides; bindgen's layout tests fail the build if a struct
 * is not what the Rust side reads. Constants only the BPF side uses stay in bpf/.
 *
 * Include vmlinux.h (BPF) or <linux/types.h> (user space) first, for the __u* types.
 * All records are little endian (the host's byte order). The trace file format
 * (crates/format, docs/FORMAT.md) is a different thing: these records never reach it. */
#ifndef CHAINREC_ABI_H
#define CHAINREC_ABI_H

/* record kinds (struct ev.kind) */
#define EV_SWITCH 0
#define EV_WAKING 1
#define EV_WAKEUP_NEW 2
#define EV_COMM 3
#define EV_EXIT 4
#define EV_OFFCPU 5
#define EV_CGROUP 6 /* a task's cgroup changed: struct ev_cgroup */
#define EV_SAMPLE 7 /* on-CPU sample (perf_event program): struct ev_task */
#define EV_THROTTLE 8 /* aux THR_*: struct ev_throttle */
#define EV_GO 9 /* a goroutine parked or was readied (uprobes on a Go runtime): struct ev_go, aux GO_* */

/* EV_GO kinds (= chainrec_format::GoEventKind) */
#define GO_PARK 0  /* entry of runtime.gopark: goid parks; arg = its waitReason byte */
#define GO_READY 1 /* entry of runtime.ready: goid is readied; arg = the waker's goid (0: none) */
#define GO_EXECUTE 2 /* entry of runtime.execute: goid starts running on this M; arg = 0, no stack */
/* entry of runtime.stopTheWorldWithSema: the process stops the world; goid = the goroutine
 * stopping it (m.curg); arg = the reason (Go 1.22+'s stwReason numbering: 1 GC mark
 * termination, 2 GC sweep termination, 0 unknown), no stack */
#define GO_STW_STOP 3
/* runtime.startTheWorldWithSema at its call of runtime.wakep: the world has started
 * again (its Ps handed to their Ms); arg = 0, no stack */
#define GO_STW_START 4
/* Go binaries probed at once (the uprobes' cookie indexes go_layouts and go_hits). */
#define GO_SLOTS 64
/* User frames of a goroutine record (frame-pointer walk; the innermost are kept). */
#define GO_FRAMES 64

/* EV_THROTTLE kinds (= chainrec_format::ThrottleKind) */
#define THR_SWITCH_OUT 0 /* prev (a) switched out because its cgroup ran out of CPU quota */
#define THR_REFILL 1     /* the group's period/slack timer ran while cfs_rqs were throttled */

/* stack status bytes */
#define ST_NONE 0
#define ST_SKIPPED 1
#define ST_FAILED 2
#define ST_UPREEMPT 3
#define ST_PRESENT 4
#define ST_EXITING 5 /* user stack: the task was exiting (no user address space left) */
#define ST_EXEC 6    /* user stack: replaced by an exec before it could be taken */

/* comm reasons (= chainrec_format::CommReason) */
#define CR_SEEN 0
#define CR_EXEC 1
#define CR_RENAME 2
#define CR_FORK 3

/* stack modes */
#define MODE_LAZY 0
#define MODE_EAGER 1
#define MODE_NONE 2

/* waking contexts (= chainrec_format::WakeContext) */
#define CTX_TASK 0
#define CTX_SOFTIRQ 1
#define CTX_HARDIRQ 2
#define CTX_NMI 3
#define CTX_SOFTIRQ_TASK 4 /* softirq run by the task itself (local_bh_enable -> do_softirq) */

/* source codes: kind << 16 | number */
#define SRC_HARDIRQ (1u << 16)
#define SRC_SOFTIRQ (2u << 16)
#define SRC_TIMER (3u << 16)
#define SRC_SOFTIRQ_KSOFTIRQD 0x8000 /* with SRC_SOFTIRQ: the vector ran in ksoftirqd */
#define SRC_SOFTIRQ_UNKNOWN 0x7fff  /* with SRC_SOFTIRQ: no softirq_entry seen on this CPU yet */

#define MAX_FRAMES 127

/* User-stack copies (see copy_ustack): at most UCOPY_MAX bytes from the user sp, read in
 * page-sized pieces; the buffers have UCOPY_SLACK more so the verifier can bound a piece
 * at any offset below UCOPY_MAX. ust carries UST_COPY when a copy block follows the frames.
 * A copy may end with up to UCOPY_WINDOWS windows of UCOPY_WINDOW bytes each, farther up
 * the stack (struct ucopy, win_at): where the consumer found, unwinding an earlier stack of
 * the same thread, that the copy stopped short of a return address (a frame larger than
 * the copy: `char buf[16384]` in coreutils' wc). */
#define UCOPY_MAX 16384
#define UCOPY_SLACK 4096
#define UCOPY_WINDOWS 4
#define UCOPY_LEARNED 3 /* windows learned per thread; the last slot may carry Python frames */
#define UCOPY_WINDOW 512
/* win_at of the window that holds a thread's Python frames instead of stack bytes (see
 * struct py_proc): UCOPY_WINDOW / 8 u64, each a code object's address | 1 when its frame
 * is the first one its _PyEval_EvalFrameDefault call ran (is_entry), innermost first,
 * ended by 0. No stack is at address 1. */
#define UCOPY_PY_FRAMES 1
#define UCOPY_REACH (64u << 20) /* a learned address farther above sp is not this stack's */
#define UST_COPY 0x80

/* counters (per-CPU array indexes) */
#define C_RB_FULL 0
#define C_SKIP_OFFCPU 1
#define C_SKIP_WAKER 2 /* unused: counted in user space */
#define C_USER_PENDING_OVERWRITTEN 3 /* a long wait served by a user half already due */
#define C_CTX_FALLBACK 4
#define C_TW_FAILED 5 /* task_work could not be scheduled (user stack status FAILED) */
#define C_UWALK_SHORT 6 /* user walks finished without the kernel walker */
#define C_UWALK_MISMATCH 7 /* verify_user_walk: the kernel walker disagreed */
#define C_USER_AT_SWITCH 8 /* user halves taken at a switch-out before the return to user */
#define C_USER_AT_EXIT 9 /* user halves due when the task exited (status EXITING) */
#define C_USER_AT_EXEC 10 /* user halves due when the task exec'd (status EXEC) */
#define C_SIRQ_TASK 11 /* softirq wakings decided as run by the task itself */
#define C_SIRQ_IRQ 12 /* softirq wakings decided as at an interrupt's exit */
#define C_SIRQ_KSOFTIRQD 13 /* softirq wakings in ksoftirqd */
#define C_SIRQ_UNTRACKED 14 /* softirq wakings not told apart (kept metal) */
#define C_USTASH_TAKEN 15 /* user stacks taken at a switch-out because the wait was predicted long */
#define C_USTASH_USED 16  /* ... and used: the wait was long (no task_work needed) */
#define C_USTASH_MISSED 17 /* long waits of user tasks predicted short (task_work path) */
#define C_UHALF_INPLACE 18 /* lazy user halves reserved at full size (the scratch was taken) */
#define C_UCOPY_BUSY 19 /* user-stack copies not taken: the ring buffer was over ucopy_ring_budget */
#define C_TSLOT_FULL 20 /* per-task state not created: the preallocated map was full */
#define C_USTASH_EVICTED 21 /* stashed user stacks overwritten by another task before use */
#define C_USTASH_BUSY 22 /* stash slots skipped: held by a program on another CPU */
#define C_GO_BUSY 23 /* goroutine records without a stack: the scratch was held (preempted) */
#define C_GO_READ_FAILED 24 /* goroutine records dropped: the g (or its goid) was unreadable */
#define C_GO_LOST 25 /* goroutine records lost to a full ring buffer (not scheduler events) */
/* --profile-bpf: per section, ns spent (C_PROF + 2p) and times entered (C_PROF + 2p + 1) */
#define C_PROF 26
#define P_SW_ALL 0    /* on_switch, whole */
#define P_SW_SEEN 1   /* on_switch: task state of prev and next (first sightings) */
#define P_SW_UHALF 2  /* on_switch: a lazy user half still due, taken at switch-out */
#define P_SW_KSTACK 3 /* on_switch: bpf_get_task_stack(next) after a long wait */
#define P_SW_ARM 4    /* on_switch: arm_user_stack (twmap, task_work kfunc) */
#define P_SW_OUT 5    /* on_switch: output_stk of the off-CPU kernel half */
#define P_SW_EAGER 6  /* on_switch, eager: kernel + user stack of prev */
#define P_WK_ALL 7    /* on_waking, whole */
#define P_WK_CTX 8    /* on_waking: wake_context */
#define P_WK_KSTACK 9 /* on_waking: kernel stack of the waker */
#define P_WK_USTACK 10 /* on_waking: user stack of the waker */
#define P_WK_OUT 11   /* on_waking: output_stk */
#define P_CB_ALL 12   /* task_work callback, whole */
#define P_CB_USTACK 13 /* task_work callback: bpf_get_task_stack(user) */
#define P_TW_SCHED 14 /* arm_user_stack: the task_work kfunc alone */
#define P_SW_EMIT 15  /* on_switch: the stack-less Switch record */
#define P_SW_STASH 16 /* on_switch: user stack of prev taken at switch-out (predicted long) */
#define P_SW_KSTACK1 17 /* --profile-bpf only: bpf_get_task_stack(next) of one frame */
#define P_WK_KSTACK1 18 /* --profile-bpf only: the waker's kernel stack, one frame */
#define P_SW_CGROUP 19 /* on_switch: prev's cgroup id against the one it had (moves) */
#define P_NR 20
#define C_NR (C_PROF + 2 * P_NR)

/* sample counters (per-CPU array `sample_counters` indexes) */
#define SC_LOST 0     /* ring buffer full */
#define SC_FILTERED 1 /* not recorded: -p filter */
#define SC_NR 2

/* struct ev_task.flags of comm records */
#define COMM_KTHREAD 1 /* a kernel thread (PF_KTHREAD) */

/* The four words after the header, per record kind. Every view is four __u32, so the
 * record's bytes are the same whichever view wrote them. */
struct ev_words { /* generic (emit_ev) */
	__u32 a;
	__u32 b;
	__u32 c;
	__u32 d;
};

struct ev_switch { /* EV_SWITCH */
	__u32 prev_tid;
	__u32 next_tid;
	__u32 prev_state;
	__u32 prev_tgid;
};

struct ev_waking { /* EV_WAKING; aux: waking context (CTX_*) */
	__u32 waker_tid;
	__u32 target_tid;
	__u32 source; /* SRC_* | number, 0 when none */
	__u32 waker_tgid;
};

struct ev_wakeup_new { /* EV_WAKEUP_NEW */
	__u32 parent_tid;
	__u32 child_tid;
	__u32 child_tgid;
	__u32 unused;
};

/* EV_COMM (aux: reason CR_*, flags COMM_*), EV_EXIT, EV_OFFCPU (aux 1: the user half of a
 * lazy stack pair), EV_SAMPLE */
struct ev_task {
	__u32 tid;
	__u32 tgid;
	__u32 flags;
	__u32 unused;
};

struct ev_cgroup { /* EV_CGROUP: the task's cgroup changed */
	__u32 tid;
	__u32 tgid;
	__u32 cgid_lo; /* the new cgroup v2 id, low and high half */
	__u32 cgid_hi;
};

/* EV_GO; aux: GO_*; kst: the binary's slot (the probe's cookie; a goroutine record has no
 * kernel stack). The record's nk is 1: the one word after the header is not a kernel
 * frame but the kind's argument (GO_PARK: the waitReason byte; GO_READY: the goid of the
 * waker, m.curg of the thread, 0 when none: the runtime's own context); then nu user
 * frames (the parking goroutine's stack; the waker's), ip first. */
struct ev_go {
	__u32 tid;
	__u32 tgid;
	__u32 goid_lo; /* the goroutine that parks, or the one readied */
	__u32 goid_hi;
};

/* Where the Go runtime keeps what the goroutine probes read, for one binary (the map
 * go_layouts, indexed by the uprobes' cookie; from the binary's DWARF or the table of
 * known versions, crates/record/src/golang.rs): offsets in runtime.g of goid and m, in
 * runtime.m of curg, in runtime.pollDesc of rg and wg (the goroutines parked on a network
 * poll), in runtime.m of preemptoff (Go before 1.22: the stop-the-world reason is that
 * string; 0: the reason is stopTheWorldWithSema's argument, in al). The current g is in r14
 * (the register ABI, amd64). */
struct go_layout {
	__u16 g_goid;
	__u16 g_m;
	__u16 m_curg;
	__u16 pd_rg;
	__u16 pd_wg;
	__u16 m_preemptoff;
};

struct ev_throttle { /* EV_THROTTLE; aux: THR_* */
	__u32 tid;     /* THR_SWITCH_OUT: prev; THR_REFILL: 0 */
	__u32 cgid_lo; /* the group's cgroup id, low and high half */
	__u32 cgid_hi;
	__u32 hierarchy; /* its cgroup hierarchy id */
};

/* Every ring-buffer record starts with this header (32 bytes); then nk + nu __u64 frames
 * (kernel first), and a struct ucopy block when ust & UST_COPY; comm records are struct
 * ev_comm instead. */
struct ev {
	__u64 ts;
	__u8 kind;
	__u8 aux;  /* waking: context; comm: reason; offcpu: 1 = user half; throttle: THR_* */
	__u8 kst;  /* kernel stack status */
	__u8 ust;  /* user stack status */
	__u16 cpu;
	__u8 nk;   /* kernel frames following */
	__u8 nu;   /* user frames following (after the kernel frames) */
	union {
		struct ev_words w;
		struct ev_switch sw;
		struct ev_waking wk;
		struct ev_wakeup_new wn;
		struct ev_task task;
		struct ev_cgroup cg;
		struct ev_throttle thr;
		struct ev_go go;
	};
};

struct ev_comm {
	struct ev h;
	char comm[16];
	__u64 cgid; /* the task's cgroup v2 id (kernfs node id), 0 when not tracked */
};

/* A user-stack copy block, right after the record's nk + nu frames (ust & UST_COPY): the
 * user registers the consumer unwinds from, then len bytes of stack: read from sp up, then
 * nwin windows of UCOPY_WINDOW bytes, window i read from win_at[i]. */
struct ucopy {
	__u64 ip;
	__u64 sp;
	__u64 bp;
	__u32 len;
	__u32 nwin;
	__u64 win_at[UCOPY_WINDOWS];
};

/* What the consumer learned of a thread's user stack from unwinding its copies (the BPF
 * map ustack_learned, keyed by tid): top, the highest address a whole unwind read (0:
 * unknown; main threads use mm->start_stack); win_at, the window addresses to copy too
 * (0: unused). */
struct ustack_learned {
	__u64 top;
	__u64 win_at[UCOPY_LEARNED];
};

/* A CPython process whose threads' Python frames go with their user stacks (the BPF map
 * py_procs, keyed by tgid, written by the consumer when it finds the interpreter's
 * symbols): where the interpreter list's head is, and the offsets of the structures the
 * walk reads, for this Python version. The walk: the first interpreter's thread list
 * (threads_head), the thread state whose native thread id is the current tid, its
 * cframe, the cframe's current frame, then each frame's code object, is_entry flag and
 * previous frame. */
struct py_proc {
	__u64 interp_head; /* address of _PyRuntime.interpreters.head */
	__u16 threads_head;
	__u16 ts_next;
	__u16 ts_native_tid;
	__u16 ts_cframe;
	__u16 cframe_current;
	__u16 fr_code;
	__u16 fr_previous;
	__u16 fr_is_entry;
};

#endif /* CHAINREC_ABI_H */
