//! Flight-recorder triggers: long waits and long run-queue waits, found in the event
//! stream as it passes to the output.
//!
//! The consumer already decodes every event, so a trigger costs one hash-map update per
//! switch or waking there, and nothing in BPF (docs/RECORDER.md, "Flight recorder").

use crate::{parse_duration_ns, InvalidOption, RecordError, Result};
use chainrec_format::{Event, FlightTrigger, TaskEntry, TriggerKind, STATE_RUNNABLE};
use chainrec_format::{ThreadIdentity, ThreadSelector, Tid};
// hashbrown (foldhash) as in the converter: one lookup per switch and waking.
use hashbrown::HashMap;

/// One `--trigger` rule: `wait>50ms` or `runqueue>10ms`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TriggerRule {
    /// What is measured.
    pub kind: TriggerKind,
    /// Fires when the measured time is strictly above this.
    pub threshold_ns: u64,
    /// The rule as written.
    pub text: String,
}

impl std::str::FromStr for TriggerRule {
    type Err = RecordError;

    fn from_str(s: &str) -> Result<TriggerRule> {
        let bad = || {
            RecordError::Invalid(InvalidOption::NotATrigger {
                text: s.to_string(),
            })
        };
        let (what, limit) = s.split_once('>').ok_or_else(bad)?;
        let kind = match what.trim() {
            "wait" | "offcpu" => TriggerKind::Wait,
            "runqueue" | "rq" => TriggerKind::RunQueue,
            _ => return Err(bad()),
        };
        let threshold_ns = parse_duration_ns(limit)?;
        Ok(TriggerRule {
            kind,
            threshold_ns,
            text: s.trim().to_string(),
        })
    }
}

/// Which threads' waits may fire a trigger: the analysis filters' thread selector (`-p`,
/// `-t`, `--comm`; the name as of the wait's end) and `--state`. Empty: every thread.
#[derive(Clone, Debug, Default)]
pub struct TriggerFilter {
    /// Which threads.
    pub threads: ThreadSelector,
    /// `prev_state & mask != 0` at switch-out (`wait` rules only; 0 means preempted).
    pub state_mask: Option<u32>,
}

/// What one thread is doing, as far as the stream has said.
#[derive(Clone, Copy, Debug)]
struct Watched {
    /// Who it is (the task table, then comm events and forks).
    who: ThreadIdentity,
    /// Switch-out time while off CPU; None while running or unknown.
    out_ts: Option<u64>,
    /// Task state at that switch-out.
    state: u32,
    /// Since when it waits for a CPU (woken or preempted); None when not runnable.
    runnable_ts: Option<u64>,
}

/// Finds trigger-worthy waits in a stream of events (fed in time order).
#[derive(Debug, Default)]
pub struct TriggerWatch {
    rules: Vec<TriggerRule>,
    filter: TriggerFilter,
    tasks: HashMap<Tid, Watched>,
    fired: Vec<FlightTrigger>,
    /// Waits that passed a rule's threshold but not the filter.
    pub filtered_out: u64,
}

impl TriggerWatch {
    /// A watch for `rules` restricted by `filter`.
    pub fn new(rules: Vec<TriggerRule>, filter: TriggerFilter) -> TriggerWatch {
        TriggerWatch {
            rules,
            filter,
            ..TriggerWatch::default()
        }
    }

    /// Waits that fired since the last call, in the order they ended.
    pub fn take_fired(&mut self) -> Vec<FlightTrigger> {
        std::mem::take(&mut self.fired)
    }

    fn task(&mut self, tid: Tid) -> &mut Watched {
        self.tasks.entry(tid).or_insert(Watched {
            who: ThreadIdentity::unknown(tid),
            out_ts: None,
            state: 0,
            runnable_ts: None,
        })
    }

    /// Learn names and thread groups from the task table.
    pub fn add_tasks(&mut self, tasks: &[TaskEntry]) {
        for t in tasks {
            self.task(t.tid).who = ThreadIdentity {
                comm: t.comm,
                tgid: t.tgid,
                kernel_thread: t.kernel_thread,
            };
        }
    }

    /// Take one event into account.
    pub fn observe(&mut self, event: &Event) {
        match event {
            Event::Switch(s) => {
                if s.prev_tid != 0 {
                    let prev = self.task(s.prev_tid);
                    prev.out_ts = Some(s.ts);
                    prev.state = s.prev_state;
                    prev.runnable_ts = (s.prev_state == STATE_RUNNABLE).then_some(s.ts);
                }
                if s.next_tid != 0 {
                    let next = *self.task(s.next_tid);
                    self.check(s.next_tid, &next, s.ts);
                    let n = self.task(s.next_tid);
                    n.out_ts = None;
                    n.runnable_ts = None;
                }
            }
            Event::Waking(w) => {
                let t = self.task(w.target_tid);
                if t.runnable_ts.is_none() && t.out_ts.is_some() {
                    t.runnable_ts = Some(w.ts);
                }
            }
            Event::WakeupNew(n) => {
                let parent = self.tasks.get(&n.parent_tid).map(|p| p.who);
                let fresh = !self.tasks.contains_key(&n.child_tid);
                let t = self.task(n.child_tid);
                // Fork copies the name and kind (as in `chainrec_format::Threads`).
                if let (true, Some(p)) = (fresh, parent) {
                    t.who = p;
                }
                t.who.tgid = n.child_tgid;
                t.runnable_ts = Some(n.ts);
            }
            Event::Comm(c) => {
                let t = self.task(c.tid);
                t.who.tgid = c.tgid;
                t.who.comm = c.comm;
            }
            Event::Exit(e) => {
                self.tasks.remove(&e.tid);
            }
            Event::OffCpuStacks(_) | Event::Lost(_) | Event::Sample(_) => {}
        }
    }

    /// `tid` switches in at `now` after `w`: does any rule fire?
    fn check(&mut self, tid: Tid, w: &Watched, now: u64) {
        for i in 0..self.rules.len() {
            let rule = &self.rules[i];
            let start = match (rule.kind, w.out_ts, w.runnable_ts) {
                (TriggerKind::Wait, Some(out), _) if w.state != STATE_RUNNABLE => out,
                (TriggerKind::RunQueue, _, Some(since)) => since,
                _ => continue,
            };
            if now.saturating_sub(start) <= rule.threshold_ns {
                continue;
            }
            if !self.passes(tid, w, rule.kind) {
                self.filtered_out += 1;
                continue;
            }
            self.fired.push(FlightTrigger {
                kind: rule.kind,
                rule: rule.text.clone(),
                tid,
                tgid: w.who.tgid,
                comm: w.who.comm.as_str().into_owned(),
                start_ns: start,
                end_ns: now,
            });
            // One trigger per wait, whichever rule saw it first.
            return;
        }
    }

    fn passes(&self, tid: Tid, w: &Watched, kind: TriggerKind) -> bool {
        let f = &self.filter;
        if let (Some(mask), TriggerKind::Wait) = (f.state_mask, kind) {
            if !chainrec_format::state_matches(mask, w.state) {
                return false;
            }
        }
        f.threads.matches_identity(tid, &w.who)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chainrec_format::{Comm, StackId, Switch, TaskComm, WakeContext, Waking};

    fn switch(ts: u64, prev: Tid, state: u32, next: Tid) -> Event {
        Event::Switch(Switch {
            ts,
            cpu: 0,
            prev_tid: prev,
            prev_state: state,
            next_tid: next,
            prev_kstack: StackId(0),
            prev_ustack: StackId(0),
        })
    }

    fn waking(ts: u64, target: Tid) -> Event {
        Event::Waking(Waking {
            ts,
            cpu: 0,
            waker_tid: 9,
            target_tid: target,
            context: WakeContext::Task,
            source: 0,
            waker_kstack: StackId(0),
            waker_ustack: StackId(0),
        })
    }

    fn named(tid: Tid, tgid: Tid, comm: &str) -> Event {
        Event::Comm(TaskComm {
            ts: 0,
            tid,
            tgid,
            comm: Comm::new(comm),
            reason: chainrec_format::CommReason::Seen,
        })
    }

    const MS: u64 = 1_000_000;

    #[test]
    fn rules_parse_and_bad_ones_say_what_is_expected() {
        let r: TriggerRule = "wait>50ms".parse().unwrap();
        assert_eq!((r.kind, r.threshold_ns), (TriggerKind::Wait, 50 * MS));
        let r: TriggerRule = "runqueue>10ms".parse().unwrap();
        assert_eq!((r.kind, r.threshold_ns), (TriggerKind::RunQueue, 10 * MS));
        for bad in ["wait<5ms", "latency>5ms", "wait>5 parsecs", "wait>"] {
            let e = bad.parse::<TriggerRule>().unwrap_err().to_string();
            assert!(
                e.contains(bad.split('>').nth(1).unwrap_or(bad)),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn long_blocked_waits_fire_once_with_their_bounds_and_short_or_preempted_ones_do_not() {
        let mut w = TriggerWatch::new(vec!["wait>50ms".parse().unwrap()], TriggerFilter::default());
        for e in [
            named(10, 7, "victim"),
            switch(MS, 10, 1, 0),       // blocks
            waking(200 * MS, 10),       // woken after ~199 ms
            switch(201 * MS, 0, 0, 10), // back on CPU: fires
            switch(210 * MS, 10, 0, 0), // preempted
            switch(400 * MS, 0, 0, 10), // 190 ms runnable: not a blocked wait
            switch(401 * MS, 10, 1, 0), // blocks briefly
            switch(402 * MS, 0, 0, 10),
        ] {
            w.observe(&e);
        }
        let fired = w.take_fired();
        assert_eq!(
            fired,
            vec![FlightTrigger {
                kind: TriggerKind::Wait,
                rule: "wait>50ms".into(),
                tid: 10,
                tgid: 7,
                comm: "victim".into(),
                start_ns: MS,
                end_ns: 201 * MS,
            }]
        );
        assert!(w.take_fired().is_empty());
    }

    #[test]
    fn run_queue_waits_count_from_the_waking_or_the_preemption() {
        let mut w = TriggerWatch::new(
            vec!["runqueue>10ms".parse().unwrap()],
            TriggerFilter::default(),
        );
        for e in [
            switch(0, 10, 1, 0),
            waking(100 * MS, 10),
            switch(115 * MS, 0, 0, 10),  // 15 ms after the waking
            switch(120 * MS, 10, 0, 11), // preempted
            switch(125 * MS, 11, 1, 10), // 5 ms: no
            switch(130 * MS, 10, 0, 11),
            switch(150 * MS, 11, 1, 10), // 20 ms
        ] {
            w.observe(&e);
        }
        let got: Vec<_> = w
            .take_fired()
            .iter()
            .map(|t| (t.tid, t.start_ns, t.end_ns))
            .collect();
        assert_eq!(
            got,
            vec![(10, 100 * MS, 115 * MS), (10, 130 * MS, 150 * MS)]
        );
    }

    #[test]
    fn the_filter_keeps_only_matching_threads_and_counts_the_rest() {
        let filter = TriggerFilter {
            threads: ThreadSelector {
                comm: Some(regex::Regex::new("^cr-").unwrap()),
                ..ThreadSelector::default()
            },
            ..TriggerFilter::default()
        };
        let mut w = TriggerWatch::new(vec!["wait>1ms".parse().unwrap()], filter);
        for e in [
            named(10, 10, "cr-victim"),
            named(11, 11, "bash"),
            switch(0, 10, 1, 11),
            switch(5 * MS, 11, 1, 10),
            switch(10 * MS, 10, 1, 11),
        ] {
            w.observe(&e);
        }
        let fired = w.take_fired();
        assert_eq!(fired.len(), 1);
        assert_eq!(fired[0].comm, "cr-victim");
        assert_eq!(w.filtered_out, 1);
    }
}
