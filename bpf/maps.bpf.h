/* SPDX-License-Identifier: GPL-2.0 */
/* Record scratch layouts, the read-only configuration user space sets before load, and the
 * maps: ring buffer, counters, per-CPU scratch, interrupt state, -p filter, task storage. */

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

/* No program allocates memory (docs/RECORDER.md, "No allocation in the scheduler path"):
 * the scheduler programs run inside __schedule and under the runqueue and pi locks, with
 * preemption and interrupts off, where an allocation may take a lock that sleeps
 * (PREEMPT_RT: the page allocator's zone lock, the slab's local lock), fail under memory
 * pressure or stall. Every map is therefore allocated whole when user space creates it:
 * hash maps are preallocated (an insert takes a free element from a per-CPU list under a
 * raw spinlock), and task storage, which allocates at its first use per task, is not used.
 * tests/bpf_no_alloc.rs checks this on the loaded object. */

/* Per-task task_work slot (lazy user stacks, task_work path), keyed by tid. A struct
 * bpf_task_work can live in hash, LRU hash and array maps only. Entries are created at a
 * task's first long wait and deleted at its exit. */
struct tw_val {
	struct bpf_task_work tw;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536); /* set by user space (1 when the path is not used) */
	__type(key, __u32);
	__type(value, struct tw_val);
} twmap SEC(".maps");

extern int bpf_task_work_schedule_resume_impl(struct task_struct *task, struct bpf_task_work *tw,
					      void *map__map, bpf_task_work_callback_t callback,
					      void *aux__prog) __ksym __weak;

/* Per-task state, keyed by the task_struct's address: one entry per task as task storage
 * would be (the key survives an exec's tid exchange in de_thread, and a recycled tid is a
 * new task), created at the task's first event and deleted at its last switch-out
 * (TASK_DEAD), before its task_struct can be freed and its address reused. max_entries is
 * set by user space from the number of threads (load.rs); an insert into a full map fails
 * and is counted (C_TSLOT_FULL): the task is then recorded without per-task state. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64);
	__type(value, struct task_st);
} tslots SEC(".maps");

/* The user stack of a task taken at its switch-out (lazy mode, user_stash), used at its
 * switch-in when the wait was long: a fixed array of slots, each ~22 KiB, allocated at map
 * creation. A slot is stamped with its owner's tid and the switch-out it was taken at, which
 * together name one wait of one task (a recycled tid has other switch-outs). A task may use
 * the two slots its tid hashes to (stash_slot): its own, a
 * free one (consumed or never used), or else the older of the two, whose owner then finds
 * nothing at its switch-in and takes the task_work / sys_exit path (counted:
 * C_USTASH_EVICTED). A slot is read and written only by who holds `busy` (compare and
 * swap: the owner's switch-in may run on another CPU than a thief's switch-out). */
struct stash_slot {
	__u64 busy;
	__u32 owner; /* tid; 0 = never used */
	__u32 unused;
	struct ev_stk st; /* st.h.ts: the switch-out it was taken at; 0 = consumed */
};

#define USTASH_BITS 9
#define USTASH_SLOTS (1 << USTASH_BITS) /* ~11.6 MiB in all */

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, USTASH_SLOTS);
	__type(key, __u32);
	__type(value, struct stash_slot);
} ustash SEC(".maps");
