/* SPDX-License-Identifier: GPL-2.0 */
/* What the floor programs that record share: the ring buffer, the 32-byte record, the
 * reserve-failure counter, and `put`, which commits one record (no wakeup; attach.py
 * drains the buffer every 20 ms). */
#ifndef FLOOR_RECORD_H
#define FLOOR_RECORD_H

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 32 << 20);
} rb SEC(".maps");

/* Records the ring buffer had no room for (read by attach.py). */
__u64 dropped = 0;

struct rec {
	__u64 ts;
	__u32 kind, a, b, c;
	__u64 pad;
};

static __always_inline void put(__u64 ts, __u32 kind, __u32 a, __u32 b, __u32 c)
{
	struct rec *r = bpf_ringbuf_reserve(&rb, sizeof(*r), 0);

	if (!r) {
		__sync_fetch_and_add(&dropped, 1);
		return;
	}
	r->ts = ts;
	r->kind = kind;
	r->a = a;
	r->b = b;
	r->c = c;
	r->pad = 0;
	bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
}

#endif
