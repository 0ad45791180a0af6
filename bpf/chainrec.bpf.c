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

/* The program, by concern; each part uses only what the parts before it define. */
#include "maps.bpf.h"
#include "emit.bpf.h"
#include "tasks.bpf.h"
#include "stacks.bpf.h"
#include "wake_context.bpf.h"
#include "softirq_fentry.bpf.h"
#include "user_half.bpf.h"
#include "predict.bpf.h"
#include "throttle.bpf.h"
#include "switch.bpf.h"
#include "waking.bpf.h"
#include "task_events.bpf.h"
#include "irq.bpf.h"
#include "samples.bpf.h"
#include "goroutines.bpf.h"
