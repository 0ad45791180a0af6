/* SPDX-License-Identifier: GPL-2.0 */
/* Lazy mode, user_stash: predicting long waits and taking the user stack at the switch-out. */

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

/* The two stash slots a task may use (maps.bpf.h, ustash): a multiplicative hash of its
 * tid and the neighbouring slot. */
static __always_inline __u32 stash_slot(__u32 tid)
{
	return (tid * 2654435761u) >> (32 - USTASH_BITS);
}

static __always_inline struct stash_slot *stash_at(__u32 i)
{
	i &= USTASH_SLOTS - 1;
	return bpf_map_lookup_elem(&ustash, &i);
}

static __always_inline bool stash_claim(struct stash_slot *sl)
{
	if (__sync_val_compare_and_swap(&sl->busy, 0, 1) == 0)
		return true;
	count(C_USTASH_BUSY);
	return false;
}

static __always_inline void stash_release(struct stash_slot *sl)
{
	__sync_lock_test_and_set(&sl->busy, 0);
}

/* Lazy mode, user_stash: prev's wait is predicted long (its last wait with the same key
 * was): take its user stack now, in prev itself, into a stash slot. Its user registers are
 * those it will return to user space with, whatever happens in between (a signal frame is
 * set up only on the way out), so this is the stack it waits with. */
static __always_inline void stash_user_stack(void *ctx, struct task_struct *prev,
					     struct task_st *ps, __u64 ts)
{
	__u32 me = prev->pid, i = stash_slot(me);
	__u64 bit;
	struct stash_slot *a, *b, *sl;

	ps->wait_key = wait_key(prev);
	bit = 1ull << (ps->wait_key & 63);
	if (!((ps->long_hi | ps->long_lo) & bit))
		return;
	a = stash_at(i);
	b = stash_at(i ^ 1);
	if (!a || !b)
		return;
	/* Its own slot, else a free one, else the one stashed longer ago. The choice is made
	 * without the lock (a race only picks a worse slot; the owner check below is exact). */
	if (a->owner == me)
		sl = a;
	else if (b->owner == me)
		sl = b;
	else if (a->st.h.ts == 0)
		sl = a;
	else if (b->st.h.ts == 0)
		sl = b;
	else
		sl = a->st.h.ts <= b->st.h.ts ? a : b;
	if (!stash_claim(sl))
		return;
	if (sl->owner != me && sl->st.h.ts != 0)
		count(C_USTASH_EVICTED);
	sl->owner = me;
	sl->st.h.ts = ts;
	sl->st.h.nk = 0;
	sl->st.h.nu = 0;
	cur_ustack(ctx, &sl->st);
	stash_release(sl);
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
	__u32 me = next->pid, i = stash_slot(me);
	struct stash_slot *sl = stash_at(i);
	struct ev_stk *st;
	__u32 nk = s->h.nk, nu;
	bool ok = false;

	if (sl && sl->owner != me)
		sl = stash_at(i ^ 1);
	if (!sl || sl->owner != me || sl->st.h.ts != off || !stash_claim(sl))
		return false;
	st = &sl->st;
	if (sl->owner != me || st->h.ts != off) /* taken over before the claim */
		goto out;
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
			goto out;
	} else if (nu && bpf_probe_read_kernel(&s->frames[nk], nu * 8, st->frames)) {
		goto out;
	}
	s->h.ust = st->h.ust;
	s->h.nu = nu;
	count(C_USTASH_USED);
	ok = true;
out:
	stash_release(sl);
	return ok;
}
