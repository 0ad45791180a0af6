//! The words a user reads after a run: the headline of a command's summary, what the
//! output misses or cannot vouch for (lost events, anomalies, run-queue time) and the
//! on-CPU sample counts. Kept above the engine, analyses and drivers (which only count),
//! so that a change of wording touches no layer below; `docs/ENGINE.md` ("Anomaly
//! counters") lists the same anomalies with their causes.

use crate::analyses::oncpu::OnCpuStats;
use crate::{GoChains, Stats, Summary};
use chainrec_format::{fmt_ns, RecordingMeta};

impl Summary {
    /// The first line a command prints after the run (after its name): `N events in T s
    /// (R M events/s); W waits (...), L lines`, and with dedup on how many waits it
    /// showed inside other chains only. `secs`: the run's wall time; `lines`: lines (or
    /// paths) written.
    pub fn headline(&self, secs: f64, lines: usize) -> String {
        let st = &self.stats;
        format!(
            "{} events in {:.3} s ({:.1} M events/s); {} waits ({} woken, {} runnable), {} lines{}",
            st.events,
            secs,
            st.events as f64 / secs.max(1e-9) / 1e6,
            st.waits,
            st.woken_waits,
            st.preemptions,
            lines,
            if self.dedup {
                format!(
                    ", {} waits shown inside other chains (dedup; --no-dedup shows them)",
                    st.dedup_hidden
                )
            } else {
                String::new()
            }
        )
    }
}

impl Stats {
    /// What the output of a run over the trace of `meta` misses or cannot vouch for, one
    /// line each for the command to print after its name: lost events and missing stacks
    /// (`warning: ...`), stacks skipped or not captured and every anomaly
    /// ([`Stats::anomaly_notes`], `note: ...`), and where run-queue time went
    /// (`run queue: ...`). Counters of the recording (in `meta`) count even when no
    /// shown wait was hit.
    pub fn output_notes(&self, meta: &RecordingMeta, trace_start_ns: u64) -> Vec<String> {
        let mut v = Vec::new();
        let l = &meta.lost;
        if self.lost_events > 0 || l.events() > 0 {
            v.push(format!(
                "warning: LOST EVENTS: {} lost (markers: {}; recording: ring buffer full {}, malformed {}, out of order {}); {} waits overlap a loss and are marked [lost events]",
                self.lost_events, self.lost_markers, l.ringbuf_full, l.malformed, l.out_of_order, self.waits_with_lost
            ));
        }
        if self.stacks_missing > 0 || l.kernel_stack_failed + l.user_stack_failed > 0 {
            v.push(format!(
                "warning: missing stacks: {} shown waits have a failed stack ([missing stack]); recording: kernel {} / user {} failed",
                self.stacks_missing, l.kernel_stack_failed, l.user_stack_failed
            ));
        }
        if self.stacks_skipped > 0 || l.stacks_skipped > 0 {
            v.push(format!(
                "note: {} shown waits have stacks skipped by the lazy policy (waits < {} us, [no stack: ...]); recording skipped {}",
                self.stacks_skipped,
                meta.stack_threshold_ns / 1000,
                l.stacks_skipped
            ));
        }
        if self.stacks_exiting + self.stacks_not_captured > 0 {
            v.push(format!(
                "note: {} shown waits have a user stack of an exiting task ([no user stack: exiting]; not a failure); {} waits or wakings longer than the lazy threshold got no stack ([no stack: not captured])",
                self.stacks_exiting, self.stacks_not_captured
            ));
        }
        v.extend(
            self.anomaly_notes(trace_start_ns)
                .into_iter()
                .map(|n| format!("note: {n}")),
        );
        if self.runq_root_ns + self.runq_inner_ns > 0 {
            v.push(format!(
                "run queue: {} runnable after a waking or a preemption, {} of wakers runnable inside chains: shown as [run queue] levels behind the tasks that held the CPU (--no-runqueue leaves them out)",
                fmt_ns(self.runq_root_ns),
                fmt_ns(self.runq_inner_ns),
            ));
        }
        if self.throttled_ns > 0 {
            v.push(format!(
                "throttled: {} held off by CPU-quota throttling (any level): shown as [throttled: <cgroup>] levels ended by what unthrottled them (--no-runqueue leaves them out)",
                fmt_ns(self.throttled_ns),
            ));
        }
        let oncpu = self.oncpu_sampled_ns + self.oncpu_estimated_ns + self.oncpu_no_sample_ns;
        if oncpu > 0 {
            v.push(format!(
                "on cpu: wakers ran {} inside chains: {} with a sample of theirs inside ([on cpu]), {} estimated from their samples nearest in time ([on cpu: estimated]; --oncpu exact leaves it [on cpu: no sample]), {} with no sample in or near it ([on cpu: no sample])",
                fmt_ns(oncpu),
                fmt_ns(self.oncpu_sampled_ns),
                fmt_ns(self.oncpu_estimated_ns),
                fmt_ns(self.oncpu_no_sample_ns),
            ));
        }
        v
    }

    /// One line per non-zero anomaly counter: the count, what it means, and what was done
    /// with the time. `trace_start_ns` turns example timestamps into seconds from the
    /// trace start (as `chainrec script` prints them).
    pub fn anomaly_notes(&self, trace_start_ns: u64) -> Vec<String> {
        let mut v = Vec::new();
        // Seconds, but never "0.000 s" for a small non-zero amount.
        let secs = |ns: u64| match ns {
            1..=999_999 => format!("{:.1} us", ns as f64 / 1e3),
            _ => format!("{:.3} s", ns as f64 / 1e9),
        };
        if self.oncpu_short_history_ns > 0 {
            v.push(format!(
                "[on cpu] levels older than the waker's kept samples: {} (split by the samples kept, the waker's last 4096)",
                secs(self.oncpu_short_history_ns)
            ));
        }
        if self.waits_before_trace > 0 {
            v.push(format!(
                "waits begun before the trace: {} (a thread first seen woken or switched in; its wait's start is unknown: not shown as a root, {} of its in-trace off-CPU time not shown; its waking still serves as a cause)",
                self.waits_before_trace,
                secs(self.waits_before_trace_ns)
            ));
        }
        if self.waits_without_waker > 0 {
            v.push(format!(
                "waits without a waking: {} (a blocked thread switched in with no sched_waking seen for it; shown as [waker unknown] with their whole off-CPU time)",
                self.waits_without_waker
            ));
        }
        if self.woken_before_block > 0 {
            v.push(format!(
                "waits woken before they blocked: {} (the waking came while the thread still ran, just before its blocking switch-out, and no other waking followed: it ended the wait; no blocked time, the whole wait is run-queue time, the chain goes on through that waker)",
                self.woken_before_block
            ));
        }
        if self.threads_exited + self.threads_reused + self.reused_waits_dropped > 0 {
            v.push(format!(
                "threads ended: {} exited (their final switch-out, state x, closed them: no wait starts there, and a later task with the same tid is a new thread); {} tids taken by a new thread before the old one's end was seen; {} open waits of ended threads dropped ({} not shown; never ended by an unrelated task's first run)",
                self.threads_exited,
                self.threads_reused,
                self.reused_waits_dropped,
                secs(self.reused_dropped_ns)
            ));
        }
        if self.waits_open_at_end > 0 {
            v.push(format!(
                "waits open at the end: {} (switched out, not yet switched in when the trace ended; shown up to the waking when one was seen, else not shown)",
                self.waits_open_at_end
            ));
        }
        if self.wakings_ignored > 0 {
            v.push(format!(
                "wakings ignored: {} (the target was running, runnable or already woken, as when a wakeup races a thread about to sleep; no wait ended there, no time affected)",
                self.wakings_ignored
            ));
        }
        if self.wakings_of_idle > 0 {
            v.push(format!(
                "wakings of the idle task ignored: {} (no time affected)",
                self.wakings_of_idle
            ));
        }
        if self.inconsistent > 0 {
            let ex: Vec<String> = self
                .inconsistent_examples
                .iter()
                .map(|e| {
                    format!(
                        "tid {} {} at {:.6} s",
                        e.tid,
                        if e.switch_in { "in" } else { "out" },
                        e.ts.saturating_sub(trace_start_ns) as f64 / 1e9
                    )
                })
                .collect();
            v.push(format!(
                "inconsistent switch sequences: {} ({} switch-ins of a thread believed running: nothing dropped; {} switch-outs of a thread believed off-CPU: its open wait was dropped, {} from those waits' switch-outs to these, partly on-CPU after an untraced switch-in, not shown; first: {}; `chainrec script TRACE -t TID` shows the events)",
                self.inconsistent,
                self.inconsistent_in,
                self.inconsistent_out,
                secs(self.inconsistent_dropped_ns),
                ex.join(", ")
            ));
        }
        if self.untraced_switches > 0 {
            let ex: Vec<String> = self
                .untraced_examples
                .iter()
                .map(|&(ts, cpu, expected, found)| {
                    format!(
                        "CPU {cpu} at {:.6} s: switch-out of tid {expected} and switch-in of tid {found} not traced",
                        ts.saturating_sub(trace_start_ns) as f64 / 1e9
                    )
                })
                .collect();
            v.push(format!(
                "untraced context switches: {} (a switch on a CPU whose prev is not the task the previous switch there put on it: the switch in between has no sched_switch event, because events were lost or because the kernel did not trace it; each causes at most one inconsistent switch-in and one inconsistent switch-out; first: {})",
                self.untraced_switches,
                ex.join(", ")
            ));
        }
        if self.stacks_unmatched > 0 {
            v.push(format!(
                "off-CPU stacks unmatched: {} (lazily captured stacks of a thread with no wait to attach them to, e.g. one begun before the trace; stacks discarded, no time affected)",
                self.stacks_unmatched
            ));
        }
        if self.runq_unknown_ns > 0 {
            v.push(format!(
                "run queue behind [unknown]: {} (runnable time on a CPU whose switch history did not reach back that far; shown as [run queue];[unknown])",
                secs(self.runq_unknown_ns)
            ));
        }
        if self.throttle_unknown_end > 0 {
            v.push(format!(
                "throttled switch-outs without a refill record: {} (the trace has no quota-timer record of their group before the switch-in; throttled up to the switch-in, shown ended by [unthrottle unknown])",
                self.throttle_unknown_end
            ));
        }
        if self.runq_unsplit_ns > 0 {
            v.push(format!(
                "inner levels not checked for run-queue time: {} (older than the waker's run-queue history, whose safety cap dropped them; left with the waker, as with --no-runqueue)",
                secs(self.runq_unsplit_ns)
            ));
        }
        if self.blocked_not_followed_ns > 0 {
            v.push(format!(
                "wakers' blocked time not followed: {} (earlier waits of a waker inside the root's wait that are not ended by an interrupt, beyond the {} longest per wait, inside another earlier wait, without a waking in the trace, or past the depth limit; shown as [blocked: not followed], never as running)",
                secs(self.blocked_not_followed_ns),
                crate::engine::walk::BRANCH_BUDGET
            ));
        }
        if self.past_unchecked_ns > 0 {
            v.push(format!(
                "wakers' time not checked for earlier waits: {} (older than the waits the engine keeps per thread, {} to {} of them, fewer when many threads have some; left with the level unsplit, not shown as running)",
                secs(self.past_unchecked_ns),
                crate::engine::past::MIN_PER_THREAD,
                crate::engine::past::MAX_PER_THREAD
            ));
        }
        if self.history_reach_cuts > 0 {
            v.push(format!(
                "histories cut at {} s back while a wait was open longer: {} times (memory bounded by trace time, not by the longest wait; that wait's older levels show as [run queue];[unknown], unsplit, or not checked for earlier waits, counted above)",
                crate::engine::machine::HISTORY_REACH_NS / 1_000_000_000,
                self.history_reach_cuts
            ));
        }
        if self.runq_capped > 0 {
            v.push(format!(
                "run-queue history capped: {} entries dropped while a wait was still open (at most {} switch-ins per CPU, {} runnable periods per thread are kept; the time they covered is shown as [run queue];[unknown] or left with the waker)",
                self.runq_capped,
                crate::engine::runqueue::CPU_HISTORY_CAP,
                crate::engine::runqueue::TASK_RQ_CAP
            ));
        }
        v
    }
}

impl OnCpuStats {
    /// The lines a command prints after folding the samples of the trace of `meta`
    /// (after its name): how many samples were shown and what each weighs, and a note
    /// on the samples the recording lost or took without a stack.
    pub fn summary_lines(&self, meta: &RecordingMeta) -> Vec<String> {
        let mut v = vec![format!(
            "{} samples in the trace, {} shown ({} of the idle task, {} without any stack), {} ns of CPU time each",
            self.samples, self.shown, self.idle, self.no_stack, self.period_ns
        )];
        if let Some(sm) = meta.sampling() {
            if sm.lost + sm.no_kstack + sm.no_ustack > 0 {
                v.push(format!(
                    "note: recording lost {} samples (ring buffer full); {} without kernel stack, {} without user stack ([missing stack])",
                    sm.lost, sm.no_kstack, sm.no_ustack
                ));
            }
        }
        v
    }
}

impl GoChains {
    /// What `chains --goroutines` counted, one line each (after the command's name): the
    /// waits, parked and runnable time and lines; the netpoll readies' shares, when there
    /// are any; then notes on what the output leaves out (runnable time unknown, readies
    /// without a park, waits never readied, chains cut at `max_depth`, capped processes).
    pub fn notes(&self, max_depth: usize) -> Vec<String> {
        let s = &self.stats;
        let mut out = vec![format!(
            "{} goroutine waits ({:.3} s parked, {:.3} s runnable), {} lines; {} readied by the runtime; {} shown inside other chains (dedup; --no-dedup shows them)",
            s.waits,
            (s.waits_ns - s.runnable_ns) as f64 / 1e9,
            s.runnable_ns as f64 / 1e9,
            self.lines.len(),
            s.by_runtime,
            s.hidden_by_dedup
        )];
        let n = &s.netpoll;
        let total = n.joined.1 + n.polled.1 + n.unjoined.1;
        if total > 0 {
            let pct = |ns: u64| 100.0 * ns as f64 / total as f64;
            out.push(format!(
                "netpoll: {:.1} % of the time behind netpoll readies joined to the wakeup of the poller thread's epoll_wait ({} readies; {:.1} % the poller thread's own time after it, {:.1} % on into the waker thread's goroutine), {:.1} % found by a non-blocking poll ({}, [go runtime: netpoll, polled]), {:.1} % not joined ({}: no thread-level wait of the poller thread)",
                pct(n.joined.1),
                n.joined.0,
                pct(n.poller_ns),
                pct(n.into_goroutine.1),
                pct(n.polled.1),
                n.polled.0,
                pct(n.unjoined.1),
                n.unjoined.0
            ));
        }
        if s.stw_periods > 0 {
            out.push(format!(
                "stop-the-world: {} periods recorded; {:.3} s of the roots' runnable time inside them ({:.1} %), shown as [go runtime: ... stop-the-world ...] instead of [run queue]",
                s.stw_periods,
                s.stw_ns as f64 / 1e9,
                100.0 * s.stw_ns as f64 / s.runnable_ns.max(1) as f64
            ));
        }
        if s.runnable_unknown == s.waits && s.waits > 0 {
            out.push("note: no goroutine execute records in this trace (recorded before format 2.3): the runnable part of each wait (ready to execute, waiting for a P) is unknown, only the parked part is shown".into());
        } else if s.runnable_unknown > 0 {
            out.push(format!("note: {} waits without an execute after their ready in the trace (at its end, or capped): their runnable part is not shown", s.runnable_unknown));
        }
        if s.readies_without_park > 0 {
            out.push(format!("note: {} readies of goroutines parked before the probes attached (no wait shown; they still serve as causes)", s.readies_without_park));
        }
        if s.open_at_end > 0 {
            out.push(format!("note: {} goroutines parked and never readied in the trace (still parked at its end, or made runnable without runtime.ready, as GC workers are): not shown", s.open_at_end));
        }
        if s.truncated > 0 {
            out.push(format!(
                "note: {} chains cut at --max-depth {max_depth} ([truncated])",
                s.truncated
            ));
        }
        if s.capped_processes > 0 {
            out.push(format!("note: {} Go processes had their probes detached by the rate cap (record --go-max-rate): no goroutine waits after that", s.capped_processes));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use crate::{Config, Engine, Inconsistency};
    use chainrec_format::{Event, RecordingMeta, StackId, Switch, Tables};

    const MS: u64 = 1_000_000;
    const T0: u64 = 1_000 * MS;

    fn switch(ms: u64, cpu: u32, prev_tid: u32, prev_state: u32, next_tid: u32) -> Event {
        Event::Switch(Switch {
            ts: T0 + ms * MS,
            cpu,
            prev_tid,
            prev_state,
            next_tid,
            prev_kstack: StackId::NONE,
            prev_ustack: StackId::NONE,
        })
    }

    /// The pattern seen on real recordings with 0 lost events: one switch `20 -> 30` on
    /// CPU 0 is not traced. 30 then switches out while believed off-CPU (its open wait,
    /// 50 ms..300 ms, is dropped) and 20 switches in elsewhere while believed running.
    #[test]
    fn one_untraced_switch_explains_two_inconsistent_sequences() {
        let tables = Tables::default();
        let meta = RecordingMeta {
            start_ns: T0,
            ..RecordingMeta::default()
        };
        let mut engine = Engine::new(&tables, &meta, Config::default());
        let events = [
            switch(50, 1, 30, 1, 0),
            switch(100, 0, 10, 1, 20),
            // untraced: switch(200, 0, 20, 1, 30)
            switch(300, 0, 30, 1, 10),
            switch(400, 1, 0, 0, 20),
        ];
        let mut sink = |_: &crate::WaitRecord, _: &crate::NodeTable| {};
        engine.process(&events, &mut sink);
        let st = engine.finish(&mut sink);
        assert_eq!(st.untraced_switches, 1);
        assert_eq!(st.untraced_examples, [(T0 + 300 * MS, 0, 20, 30)]);
        assert_eq!(
            (st.inconsistent, st.inconsistent_in, st.inconsistent_out),
            (2, 1, 1)
        );
        assert_eq!(st.inconsistent_dropped_ns, 250 * MS);
        assert_eq!(
            st.inconsistent_examples,
            [
                Inconsistency {
                    ts: T0 + 300 * MS,
                    tid: 30,
                    switch_in: false
                },
                Inconsistency {
                    ts: T0 + 400 * MS,
                    tid: 20,
                    switch_in: true
                },
            ]
        );
        let notes = st.anomaly_notes(T0);
        let find = |p: &str| {
            notes
                .iter()
                .find(|n| n.starts_with(p))
                .unwrap_or_else(|| panic!("no {p:?} in {notes:#?}"))
                .as_str()
        };
        assert_eq!(
            find("inconsistent"),
            "inconsistent switch sequences: 2 (1 switch-ins of a thread believed running: nothing dropped; \
             1 switch-outs of a thread believed off-CPU: its open wait was dropped, 0.250 s from those waits' \
             switch-outs to these, partly on-CPU after an untraced switch-in, not shown; \
             first: tid 30 out at 0.300000 s, tid 20 in at 0.400000 s; `chainrec script TRACE -t TID` shows the events)"
        );
        assert_eq!(
            find("untraced"),
            "untraced context switches: 1 (a switch on a CPU whose prev is not the task the previous switch \
             there put on it: the switch in between has no sched_switch event, because events were lost or \
             because the kernel did not trace it; each causes at most one inconsistent switch-in and one \
             inconsistent switch-out; first: CPU 0 at 0.300000 s: switch-out of tid 20 and switch-in of tid 30 not traced)"
        );
        // Every counter that is not zero has its note, and only those.
        assert_eq!(st.waits_before_trace, 1);
        assert_eq!(st.waits_without_waker, 1);
        assert_eq!(st.waits_open_at_end, 1);
        assert_eq!(notes.len(), 5, "{notes:#?}");
    }
}

#[cfg(test)]
mod output_notes_tests {
    use crate::Stats;
    use chainrec_format::RecordingMeta;

    /// Lost events and run-queue time are shown in the words of the summary, in order;
    /// a recording's own losses count even when no shown wait was hit; nothing is said
    /// of a clean run.
    #[test]
    fn output_notes_say_what_the_output_misses() {
        let mut meta = RecordingMeta::default();
        assert!(Stats::default().output_notes(&meta, 0).is_empty());
        meta.lost.ringbuf_full = 3;
        let st = Stats {
            runq_root_ns: 1_500_000,
            runq_inner_ns: 2_000,
            ..Stats::default()
        };
        assert_eq!(
            st.output_notes(&meta, 0),
            [
                "warning: LOST EVENTS: 0 lost (markers: 0; recording: ring buffer full 3, malformed 0, out of order 0); 0 waits overlap a loss and are marked [lost events]",
                "run queue: 1.50 ms runnable after a waking or a preemption, 2.0 us of wakers runnable inside chains: shown as [run queue] levels behind the tasks that held the CPU (--no-runqueue leaves them out)",
            ]
        );
    }

    /// `chains --goroutines`' lines after the output: the headline always, the netpoll
    /// shares and each note only when there is something to say.
    #[test]
    fn goroutine_notes_say_only_what_applies() {
        use crate::{GoChainStats, GoChains, NetpollShares};
        let mut g = GoChains {
            lines: vec![("goroutine;wait: chan receive".into(), 3_000_000_000)],
            stats: GoChainStats {
                waits: 2,
                waits_ns: 3_000_000_000,
                runnable_ns: 500_000_000,
                by_runtime: 1,
                ..GoChainStats::default()
            },
        };
        assert_eq!(
            g.notes(8),
            ["2 goroutine waits (2.500 s parked, 0.500 s runnable), 1 lines; 1 readied by the runtime; 0 shown inside other chains (dedup; --no-dedup shows them)"]
        );
        g.stats.truncated = 3;
        g.stats.runnable_unknown = 2;
        g.stats.netpoll = NetpollShares {
            joined: (1, 300),
            polled: (1, 100),
            ..NetpollShares::default()
        };
        let notes = g.notes(8);
        assert_eq!(notes.len(), 4, "{notes:?}");
        assert!(
            notes[1].starts_with("netpoll: 75.0 % of the time"),
            "{notes:?}"
        );
        assert!(
            notes[2].starts_with("note: no goroutine execute records"),
            "{notes:?}"
        );
        assert_eq!(
            notes[3],
            "note: 3 chains cut at --max-depth 8 ([truncated])"
        );
    }
}
