//! Emitting a finished wait record: filter, stack labels, root node, run-queue holders,
//! counters, sink.

use crate::engine::config::Groups;
use crate::engine::filter::Filter;
use crate::engine::nodes::{is_throttled_holder, NodeTable, HOLDER_UNKNOWN};
use crate::engine::record::{LevelKind, RunqPart, WaitRecord, WaitSink};
use crate::engine::stats::Stats;
use chainrec_format::StackId;

/// Filter, intern the root node, count, and pass to the sink. True when emitted.
/// Takes the engine's parts rather than the engine, so that `rec` can be a record the
/// engine owns (a task's held record, a slot's record), emitted where it lies.
#[allow(clippy::too_many_arguments)]
pub(crate) fn emit_rec(
    nodes: &mut NodeTable,
    st: &mut Stats,
    filter: &Filter,
    filter_all: bool,
    threshold_ns: u64,
    groups: Option<Groups<'_>>,
    rec: &mut WaitRecord,
    sink: &mut impl WaitSink,
) -> bool {
    if !filter_all && !filter.matches(rec) {
        return false;
    }
    // The recorder marks every switch-out SKIPPED and replaces that with the stacks it
    // takes once the wait proves longer than the threshold. If none arrived (recording
    // ended first, ring buffer full, ...), the placeholder would claim "wait <
    // threshold" for a longer wait: say "not captured" instead.
    let end = rec.switch_in_ns.or(rec.wake_ns);
    if threshold_ns > 0 && end.is_some_and(|e| e.saturating_sub(rec.switch_out_ns) > threshold_ns) {
        let mut fixed = false;
        for s in [&mut rec.kstack, &mut rec.ustack] {
            if *s == StackId::SKIPPED {
                *s = StackId::NOT_CAPTURED;
                fixed = true;
            }
        }
        st.stacks_not_captured += u64::from(fixed);
    }
    rec.node = nodes.task(rec.ident, rec.kstack, rec.ustack);
    // Earlier-wait levels carry their stacks until here (the walk cannot intern nodes).
    for h in &mut rec.hops {
        match h.kind {
            LevelKind::Waker => {}
            LevelKind::EarlierWait => {
                st.earlier_waits += u64::from(h.waits);
                h.node = nodes.blocked(Some((h.kstack, h.ustack)));
            }
            LevelKind::NotFollowed => {
                st.blocked_not_followed_ns += h.ns;
                h.node = nodes.blocked(None);
            }
        }
    }
    rec.group = groups.map(|g| {
        let cgroup = g
            .kinds
            .cgroup
            .then(|| g.tables.cgroup_at(rec.tid, rec.switch_out_ns));
        let process = g.kinds.process.then_some((rec.tgid, g.leader));
        nodes.group(g.tables, cgroup, process)
    });
    // Run-queue parts carry holder codes until here (the walk cannot intern nodes).
    // Level 0 (added at switch-in) comes after the levels of the walk (at the waking).
    sort_by_level(&mut rec.runq);
    for p in &mut rec.runq {
        if is_throttled_holder(p.holder) {
            st.throttled_ns += p.ns;
        } else if p.level == 0 {
            st.runq_root_ns += p.ns;
            if p.holder == HOLDER_UNKNOWN {
                st.runq_unknown_ns += p.ns;
            }
        } else {
            st.runq_inner_ns += p.ns;
        }
        p.holder = nodes.runq(p.holder);
    }
    // No two parts of a level share a node: the walk and the switch-in merge a level's
    // parts by holder code (`PartIndex`, `add_runq`), and each code has its own node
    // (comms, idle, unknown and throttled codes are interned apart in `NodeTable::runq`).
    debug_assert!(rec.runq.iter().enumerate().all(|(i, p)| rec.runq[..i]
        .iter()
        .all(|q| q.level != p.level || q.holder != p.holder)));
    // On-CPU parts carry stacks until here, like the run-queue holders.
    rec.oncpu.clear();
    for p in &rec.oncpu_raw {
        match (p.stacks, p.estimated) {
            (None, _) => st.oncpu_no_sample_ns += p.ns,
            (Some(_), true) => st.oncpu_estimated_ns += p.ns,
            (Some(_), false) => st.oncpu_sampled_ns += p.ns,
        }
        rec.oncpu.push(crate::OnCpuPart {
            level: p.level,
            node: nodes.oncpu(p.stacks, p.estimated),
            ns: p.ns,
        });
    }
    // Stack pairs that render alike share a node: merge their parts (same level).
    let mut i = 1;
    while i < rec.oncpu.len() {
        let (level, node, ns) = (rec.oncpu[i].level, rec.oncpu[i].node, rec.oncpu[i].ns);
        match rec.oncpu[..i]
            .iter_mut()
            .find(|p| p.level == level && p.node == node)
        {
            Some(p) => {
                p.ns += ns;
                rec.oncpu.remove(i);
            }
            None => i += 1,
        }
    }
    st.records_emitted += 1;
    st.dedup_hidden += u64::from(!rec.root);
    st.truncated += u64::from(rec.truncated);
    st.cycles += u64::from(rec.cycle);
    st.waits_with_lost += u64::from(rec.lost);
    let is_skip = |s: StackId| s == StackId::SKIPPED;
    // Dangling ids are rendered as [missing stack] too, but checking them here would
    // cost a table lookup per stack; `chainrec info --verify` reports them.
    let is_missing = |s: StackId| s == StackId::FAILED;
    if is_skip(rec.kstack)
        || is_skip(rec.ustack)
        || rec
            .hops
            .iter()
            .any(|h| is_skip(h.kstack) || is_skip(h.ustack))
    {
        st.stacks_skipped += 1;
    }
    if is_missing(rec.kstack)
        || is_missing(rec.ustack)
        || rec
            .hops
            .iter()
            .any(|h| is_missing(h.kstack) || is_missing(h.ustack))
    {
        st.stacks_missing += 1;
    }
    let exiting = StackId::USER_EXITING;
    if rec.ustack == exiting || rec.hops.iter().any(|h| h.ustack == exiting) {
        st.stacks_exiting += 1;
    }
    sink.on_wait(rec, nodes);
    true
}

/// Order `parts` by level, stably (as `sort_by_key`): the walk adds levels 1, 2, … in order
/// and the switch-in adds level 0 after them, so a rotation usually does it (the stable
/// sort's merge and its scratch buffer showed in the profile of a real trace).
fn sort_by_level(parts: &mut [RunqPart]) {
    let zeros = parts.iter().rev().take_while(|p| p.level == 0).count();
    let rest = parts.len() - zeros;
    if parts[..rest].is_sorted_by_key(|p| p.level) && parts[..rest].iter().all(|p| p.level > 0) {
        parts.rotate_right(zeros);
    } else {
        parts.sort_by_key(|p| p.level);
    }
}
