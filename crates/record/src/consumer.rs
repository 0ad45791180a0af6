//! The consumer loop: drain the ring buffer into a batch, convert it, write new tables,
//! read the per-CPU counters, write events in time order, symbolize new addresses, flush,
//! and draw the status line; then the final counts for the metadata and the summary.

use crate::convert::{lost_counts, Converter, Reorder};
use crate::load::{bpf_err, prog_stats, SoftirqLinks, UserStackPath};
use crate::options::{
    LazyUserCounts, RecordOptions, SoftirqCounts, StopCondition, UserStashCounts,
};
use crate::output::Output;
use crate::progress::{ConsumerProgress, ConsumerStep};
use crate::raw::{self, RawEv};
use crate::skel::{ChainrecLinks, ChainrecSkel};
use crate::usyms::UserSymbolizer;
use crate::workload::monotonic_ns;
use crate::Result;
use chainrec_format::*;
use libbpf_rs::skel::Skel;
use libbpf_rs::{MapCore, MapFlags, RingBuffer, RingBufferBuilder};
use std::cell::RefCell;
use std::io::{IsTerminal, Write};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Events are written once they are older than now minus this (the ring buffer is shared
/// by all CPUs and only nearly ordered).
const REORDER_WINDOW_NS: u64 = 10_000_000;
/// Counters, metadata, flush and status line this often.
const PERIOD: Duration = Duration::from_millis(500);

/// Records decoded by the ring-buffer callback, converted after each drain.
#[derive(Default)]
pub(crate) struct Batch {
    evs: Vec<RawEv>,
    /// Stack frames of `evs` (`RawEv::frames_at` indexes it).
    pool: Vec<u64>,
    /// User-stack copies of `evs` (`RawEv::copy_at` indexes it).
    bytes: Vec<u8>,
    /// Records too short or of an unknown kind.
    malformed: u64,
}

impl Batch {
    pub(crate) fn new() -> Self {
        Batch {
            evs: Vec::with_capacity(1 << 16),
            ..Batch::default()
        }
    }

    /// Decode one ring-buffer record (a malformed one is only counted).
    fn decode(&mut self, data: &[u8]) {
        match raw::decode(data, &mut self.pool, &mut self.bytes) {
            Some(e) => self.evs.push(e),
            None => self.malformed += 1,
        }
    }
}

/// The ring buffer of `skel`, decoding each record into `batch`.
pub(crate) fn ring_buffer<'a>(
    skel: &ChainrecSkel<'_>,
    batch: &'a RefCell<Batch>,
) -> Result<RingBuffer<'a>> {
    let mut rbb = RingBufferBuilder::new();
    rbb.add(&skel.maps.rb, |data: &[u8]| {
        batch.borrow_mut().decode(data);
        0
    })
    .map_err(|e| bpf_err("ring buffer", e))?;
    rbb.build().map_err(|e| bpf_err("ring buffer", e))
}

/// The consumer's state from attach to the end.
pub(crate) struct Consumer {
    pub(crate) conv: Converter,
    pub(crate) reorder: Reorder,
    /// Events written, by kind.
    pub(crate) by_kind: [u64; EventKind::COUNT],
    /// Ring-buffer reserve failures already turned into Lost markers, per CPU.
    lost_seen: Vec<u64>,
    /// The per-CPU counters summed over CPUs, as last read.
    pub(crate) counters_total: [u64; raw::C_NR],
    usyms: UserSymbolizer,
    /// Cgroup ids → paths, for the cgroup sections.
    pub(crate) cgroups: crate::cgroups::CgroupResolver,
    /// The live status line (stderr is a terminal and it was asked for): when it was last
    /// drawn, and the events written then.
    status: Option<(Instant, u64)>,
    /// Goroutine probes of Go binaries (issue 38).
    pub(crate) go: crate::golang::GoProbes,
}

impl Consumer {
    pub(crate) fn new(
        conv: Converter,
        usyms: UserSymbolizer,
        cpu_count: u32,
        opts: &RecordOptions,
    ) -> Self {
        let status = opts.status_line && std::io::stderr().is_terminal();
        Consumer {
            conv,
            reorder: Reorder {
                buf: Vec::with_capacity(1 << 16),
                last_ts: 0,
                out_of_order: 0,
            },
            by_kind: [0; EventKind::COUNT],
            lost_seen: vec![0; cpu_count as usize],
            counters_total: [0; raw::C_NR],
            usyms,
            cgroups: crate::cgroups::CgroupResolver::new(),
            status: status.then(|| (Instant::now(), 0)),
            go: crate::golang::GoProbes::new(opts.go.clone()),
        }
    }

    /// Run until `stop` says so: then detach (so nothing new arrives), drain everything
    /// and return.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn run(
        &mut self,
        ring: &RingBuffer<'_>,
        batch: &RefCell<Batch>,
        skel: &mut ChainrecSkel<'_>,
        mut softirq_links: SoftirqLinks,
        mut sample_links: crate::samples::SampleLinks,
        writer: &mut Output,
        meta: &mut RecordingMeta,
        stop: &StopCondition,
        opts: &RecordOptions,
        t_start: Instant,
    ) -> Result<()> {
        let mut last_flush = Instant::now();
        let mut stopping = false;
        let fresh = ConsumerProgress::default();
        let progress = stop.progress.as_deref().unwrap_or(&fresh);
        loop {
            progress.next_loop();
            if !stopping {
                let dur_over = stop.duration.is_some_and(|d| t_start.elapsed() >= d);
                let flagged = stop.flag.as_ref().is_some_and(|f| f.load(Ordering::SeqCst));
                if dur_over || flagged {
                    stopping = true;
                    // Detach first so that nothing new arrives, then drain everything.
                    progress.enter(ConsumerStep::Detaching);
                    skel.links = ChainrecLinks::default();
                    self.go.stop();
                    drop(std::mem::take(&mut softirq_links));
                    drop(std::mem::take(&mut sample_links));
                }
            }
            let now = monotonic_ns();
            if !stopping {
                // Sleeps until the period ends or BPF forces a wakeup past the fill mark.
                progress.enter(ConsumerStep::Polling);
                let _ = ring.poll(opts.poll_period);
            }
            progress.enter(ConsumerStep::Consuming);
            ring.consume()
                .map_err(|e| bpf_err("ring buffer consume", e))?;
            // Mapping records before the stacks: a process that mapped its objects and
            // exited within this poll is unwound from the history (its /proc is gone).
            progress.enter(ConsumerStep::Mappings);
            self.usyms.poll(monotonic_ns());
            progress.enter(ConsumerStep::Converting);
            self.convert_batch(batch, now);
            self.tell_learned_stacks(skel);
            if !stopping {
                // New Go binaries get their probes; binaries capped are noted.
                self.go.poll(skel, now);
            } else {
                self.go.take_capped();
            }
            progress.enter(ConsumerStep::Tables);
            self.write_tables(writer)?;
            let periodic = last_flush.elapsed() >= PERIOD;
            if periodic || stopping {
                progress.enter(ConsumerStep::Counters);
                self.read_counters(skel, now);
                self.conv.unwinder.refill_live_budget();
            }
            let bound = if stopping {
                u64::MAX
            } else {
                now.saturating_sub(REORDER_WINDOW_NS)
            };
            progress.enter(ConsumerStep::Draining);
            self.reorder.drain(bound, writer, &mut self.by_kind)?;
            // Flight recorder: triggers, SIGUSR1, dumps whose post time has passed.
            writer.after_drain(self.reorder.last_ts)?;
            if periodic && !stopping {
                // Flush first: symbolization below may take a while on first sight of a big
                // binary.
                progress.enter(ConsumerStep::Flushing);
                writer.flush()?;
            }
            progress.enter(ConsumerStep::Symbolizing);
            self.symbolize_new(writer, monotonic_ns())?;
            if periodic || stopping {
                progress.enter(ConsumerStep::Counters);
                meta.lost = self.lost();
                self.update_sampling(skel, meta, opts);
                if periodic && !stopping {
                    progress.enter(ConsumerStep::Flushing);
                    writer.update_meta(meta)?;
                    writer.flush()?;
                    last_flush = Instant::now();
                }
                self.draw_status(writer, meta, t_start);
            }
            if stopping {
                progress.enter(ConsumerStep::Finishing);
                break;
            }
        }
        if self.status.is_some() {
            let _ = writeln!(std::io::stderr());
        }
        Ok(())
    }

    /// Convert the records decoded since the last call into the reorder buffer; malformed
    /// records become a Lost marker.
    fn convert_batch(&mut self, batch: &RefCell<Batch>, now: u64) {
        let mut b = batch.borrow_mut();
        let Batch {
            evs,
            pool,
            bytes,
            malformed,
        } = &mut *b;
        for e in evs.iter() {
            if e.kind == raw::EV_THROTTLE {
                // Not an event: a record of the throttle sections (format 2.1).
                if !self.conv.throttles.take(e) {
                    *malformed += 1;
                }
                continue;
            }
            if e.kind == raw::EV_GO && (e.aux == raw::GO_STW_STOP || e.aux == raw::GO_STW_START) {
                // Not an event: a record of the Go stop-the-world sections (format 2.4).
                let (slot, x) = self.conv.go_stw(e, pool);
                self.go.record_stw(slot, x, (raw::HDR + 8) as u64);
                continue;
            }
            if e.kind == raw::EV_GO && e.aux == raw::GO_EXECUTE {
                // Not an event: a record of the goroutine execute sections (format 2.3):
                // header and argument word.
                let (slot, x) = self.conv.go_execute(e);
                self.go.record_execute(slot, x, (raw::HDR + 8) as u64);
                continue;
            }
            if e.kind == raw::EV_GO {
                // Not an event: a record of the goroutine sections (format 2.2).
                match self.conv.go_event(e, pool) {
                    // The record's size as output: header, argument word, frames.
                    Some((slot, ev)) => {
                        let bytes = (raw::HDR + 8 * (1 + e.nu as usize)) as u64;
                        self.go.record(slot, ev, bytes)
                    }
                    None => *malformed += 1,
                }
                continue;
            }
            if e.kind == raw::EV_COMM {
                let t = e.task();
                if e.aux == CommReason::Exec as u8 {
                    self.go.exec(t.tgid);
                } else {
                    self.go.saw_process(t.tgid);
                }
            }
            if e.kind == raw::EV_CGROUP {
                let cg = e.cgroup();
                let id = u64::from(cg.cgid_lo) | u64::from(cg.cgid_hi) << 32;
                self.conv.cgroup_member(e.ts, cg.tid, id);
                continue;
            }
            let ev = self
                .conv
                .convert(e, pool, bytes, Some(&self.usyms.tracker.history));
            self.reorder.buf.push(ev);
        }
        evs.clear();
        pool.clear();
        bytes.clear();
        if *malformed > 0 {
            self.conv.lost.malformed += *malformed;
            self.reorder.buf.push(Event::Lost(Lost {
                ts: now,
                cpu: u32::MAX,
                count: *malformed,
                cause: LostCause::Malformed,
            }));
            *malformed = 0;
        }
    }

    /// What unwinding taught of threads' stacks goes to the BPF side's `ustack_learned`
    /// (later copies of those threads stop at the top and take the windows); nothing
    /// learned deletes the entry.
    fn tell_learned_stacks(&mut self, skel: &ChainrecSkel<'_>) {
        // CPython processes found: their threads' Python frames go with their stacks.
        for (tgid, value) in self.conv.unwinder.take_new_python() {
            // A failure (map full: 4096 Python processes) leaves that one's stacks with
            // `_PyEval_EvalFrameDefault` frames, counted as stacks without Python frames.
            let _ = skel
                .maps
                .py_procs
                .update(&tgid.to_ne_bytes(), &value, MapFlags::ANY);
        }
        for (tid, l) in self.conv.new_learned.drain(..) {
            let key = tid.to_ne_bytes();
            // A failure (map full: 65536 threads learned) only means that thread's copies
            // stay UCOPY_MAX long and without windows.
            let _ = if l.top == 0 && l.windows == [0; crate::convert::MAX_LEARNED] {
                skel.maps.ustack_learned.delete(&key)
            } else {
                // struct ustack_learned: top, then win_at[], native u64s without padding.
                let value: Vec<u8> = std::iter::once(l.top)
                    .chain(l.windows)
                    .flat_map(u64::to_ne_bytes)
                    .collect();
                debug_assert_eq!(value.len(), size_of::<crate::raw::ustack_learned>());
                skel.maps.ustack_learned.update(&key, &value, MapFlags::ANY)
            };
        }
    }

    /// New irq sources, tasks and stacks go to the writer before the events that use them.
    fn write_tables(&mut self, writer: &mut Output) -> Result<()> {
        let conv = &mut self.conv;
        if !conv.new_irqs.is_empty() {
            writer.add_irq_sources(&conv.new_irqs)?;
            conv.new_irqs.clear();
        }
        if !conv.new_tasks.is_empty() {
            writer.add_tasks(&conv.new_tasks)?;
            conv.new_tasks.clear();
        }
        if !conv.new_stacks.is_empty() {
            writer.add_stacks(&conv.new_stacks)?;
            conv.new_stacks.clear();
        }
        // After the stacks they name.
        let go = self.go.take_pending();
        if !go.is_empty() {
            writer.add_goroutines(&go)?;
        }
        if !conv.throttles.pending.is_empty() {
            // v2 groups are named by the cgroup table (v1 paths travel in the section).
            let v2: Vec<u64> = conv
                .throttles
                .pending
                .events
                .iter()
                .filter(|e| e.group.hierarchy == 0)
                .map(|e| e.group.cgroup)
                .collect();
            if !v2.is_empty() {
                let entries = self.cgroups.entries_for(v2);
                writer.add_cgroups(&entries, &[])?;
            }
            writer.add_throttles(&conv.throttles.pending)?;
            conv.throttles.pending = Default::default();
        }
        if !conv.new_members.is_empty() {
            let entries = self
                .cgroups
                .entries_for(conv.new_members.iter().map(|m| m.cgroup));
            writer.add_cgroups(&entries, &conv.new_members)?;
            conv.new_members.clear();
        }
        Ok(())
    }

    /// Sum the per-CPU counters; ring-buffer reserve failures, per CPU, become Lost markers.
    fn read_counters(&mut self, skel: &ChainrecSkel<'_>, now: u64) {
        let mut totals = [0u64; raw::C_NR];
        for idx in 0..raw::C_NR as u32 {
            if let Ok(Some(vals)) = skel
                .maps
                .counters
                .lookup_percpu(&idx.to_ne_bytes(), MapFlags::ANY)
            {
                for (cpu, v) in vals.iter().enumerate() {
                    let n = v
                        .get(..8)
                        .and_then(|b| b.try_into().ok())
                        .map(u64::from_ne_bytes)
                        .unwrap_or(0);
                    totals[idx as usize] += n;
                    let seen = &mut self.lost_seen;
                    if idx == raw::C_RB_FULL && cpu < seen.len() && n > seen[cpu] {
                        self.reorder.buf.push(Event::Lost(Lost {
                            ts: now,
                            cpu: cpu as u32,
                            count: n - seen[cpu],
                            cause: LostCause::RingBufferFull,
                        }));
                        seen[cpu] = n;
                    }
                }
            }
        }
        self.counters_total = totals;
    }

    /// Symbolize new addresses at once (every poll), while their processes are still
    /// alive: short-lived processes would be gone by the next periodic flush.
    fn symbolize_new(&mut self, writer: &mut Output, now: u64) -> Result<()> {
        let conv = &mut self.conv;
        if !conv.new_label_syms.is_empty() {
            writer.add_symbols(&conv.new_label_syms)?;
            conv.new_label_syms.clear();
        }
        if !conv.new_kaddrs.is_empty() {
            let addrs = std::mem::take(&mut conv.new_kaddrs);
            let syms: Vec<SymbolEntry> = addrs.iter().map(|&a| conv.ksyms.resolve(a)).collect();
            conv.lost.unresolved_symbols += syms.iter().filter(|s| s.name.is_none()).count() as u64;
            writer.add_symbols(&syms)?;
        }
        // Mapping records first: every mapping a new stack can be in was made before it.
        self.usyms.poll(now);
        let mut ts_of = std::mem::take(&mut conv.new_uaddr_ts);
        let callers = std::mem::take(&mut conv.new_ucallers);
        for (tgid, addrs) in std::mem::take(&mut conv.new_uaddrs) {
            let ts = ts_of.remove(&tgid).unwrap_or(now);
            let is_caller: Vec<bool> = addrs
                .iter()
                .map(|a| callers.contains(&(tgid, *a)))
                .collect();
            let syms = self.usyms.resolve(tgid, &addrs, &is_caller, ts, now);
            conv.lost.unresolved_symbols += syms.iter().filter(|s| s.name.is_none()).count() as u64;
            writer.add_symbols(&syms)?;
        }
        let maps = self.usyms.take_mappings();
        if !maps.is_empty() {
            writer.add_mappings(&maps)?;
        }
        Ok(())
    }

    /// The sampling record of the metadata, with the counts so far (nothing without
    /// samples).
    fn update_sampling(
        &self,
        skel: &ChainrecSkel<'_>,
        meta: &mut RecordingMeta,
        opts: &RecordOptions,
    ) {
        let Some(cfg) = &opts.samples else {
            return;
        };
        let mut bpf = [0u64; raw::SC_NR];
        for (idx, total) in bpf.iter_mut().enumerate() {
            if let Ok(Some(vals)) = skel
                .maps
                .sample_counters
                .lookup_percpu(&(idx as u32).to_ne_bytes(), MapFlags::ANY)
            {
                *total = vals
                    .iter()
                    .filter_map(|v| v.get(..8)?.try_into().ok().map(u64::from_ne_bytes))
                    .sum();
            }
        }
        meta.set_sampling(&self.conv.samples.sampling(cfg, &bpf));
    }

    /// The lost and skipped counts so far.
    pub(crate) fn lost(&self) -> LostCounts {
        lost_counts(&self.conv, &self.counters_total, self.reorder.out_of_order)
    }

    fn draw_status(&mut self, writer: &Output, meta: &RecordingMeta, t_start: Instant) {
        let Some(last) = &mut self.status else {
            return;
        };
        let dt = last.0.elapsed().as_secs_f64().max(1e-3);
        let evs = writer.events_written();
        let rate = (evs - last.1) as f64 / dt;
        let lost = meta.lost.events();
        // Not eprint!: a terminal gone away (EIO) must not panic the consumer and lose the
        // trace's end.
        let _ = write!(
            std::io::stderr(),
            "\r\x1b[K[chainrec] {:6.1} s  {:>9.0} ev/s  {:>11} events  lost {}  {:.1} MiB",
            t_start.elapsed().as_secs_f64(),
            rate,
            evs,
            lost,
            writer.bytes_written() as f64 / (1 << 20) as f64
        );
        let _ = std::io::stderr().flush();
        *last = (Instant::now(), evs);
    }

    /// The final counts into `meta.extra`; the lazy-user and softirq counts and the BPF
    /// run time and count (all programs; non-zero with `kernel.bpf_stats_enabled=1`).
    pub(crate) fn final_counts(
        &self,
        skel: &ChainrecSkel<'_>,
        meta: &mut RecordingMeta,
        opts: &RecordOptions,
        path: UserStackPath,
    ) -> FinalCounts {
        let (mut run_ns, mut run_cnt) = (0, 0);
        for prog in skel.object().progs() {
            use std::os::fd::{AsFd, AsRawFd};
            let (t, c) = prog_stats(prog.as_fd().as_raw_fd());
            run_ns += t;
            run_cnt += c;
        }
        let counters_total = &self.counters_total;
        let conv = &self.conv;
        meta.extra.push((
            "unresolved_user_frames".into(),
            self.usyms.unresolved.by_reason_text(),
        ));
        meta.extra.push((
            "mappings".into(),
            match &self.usyms.events_error {
                None => self.usyms.tracker.summary(),
                Some(e) => format!(
                    "{} (mapping events unavailable: {e}; /proc only)",
                    self.usyms.tracker.summary()
                ),
            },
        ));
        meta.extra.push((
            "user_symbolizer_ns".into(),
            self.usyms.busy.as_nanos().to_string(),
        ));
        meta.extra.push((
            "user_walk_shortcut".into(),
            format!(
                "{} user stacks finished below vm.mmap_min_addr without the kernel walker{}",
                counters_total[raw::C_UWALK_SHORT as usize],
                if opts.verify_user_walk_shortcut {
                    format!(
                        "; verified: {} disagreed with the kernel walker",
                        counters_total[raw::C_UWALK_MISMATCH as usize]
                    )
                } else {
                    String::new()
                }
            ),
        ));
        meta.extra.push((
            "throttling".into(),
            format!(
                "{} throttled switch-outs, {} quota refills recorded",
                conv.throttles.switch_outs, conv.throttles.refills
            ),
        ));
        if path == UserStackPath::TaskWork {
            meta.extra.push((
                "task_work_failed".into(),
                counters_total[raw::C_TW_FAILED as usize].to_string(),
            ));
        }
        meta.extra.push((
            "user_halves_in_place".into(),
            counters_total[raw::C_UHALF_INPLACE as usize].to_string(),
        ));
        meta.extra.push((
            "user_copies_skipped_busy".into(),
            counters_total[raw::C_UCOPY_BUSY as usize].to_string(),
        ));
        let lazy_user = LazyUserCounts {
            exiting: conv.user_exiting,
            at_switch_out: counters_total[raw::C_USER_AT_SWITCH as usize],
            at_exit: counters_total[raw::C_USER_AT_EXIT as usize],
            served_by_pending: counters_total[raw::C_USER_PENDING_OVERWRITTEN as usize],
            at_exec: counters_total[raw::C_USER_AT_EXEC as usize],
        };
        meta.extra.extend(lazy_user.extra());
        let c = |i: u32| counters_total[i as usize];
        let softirq = SoftirqCounts {
            task: c(raw::C_SIRQ_TASK),
            irq_exit: c(raw::C_SIRQ_IRQ),
            ksoftirqd: c(raw::C_SIRQ_KSOFTIRQD),
            untracked: c(raw::C_SIRQ_UNTRACKED),
            stack_checked: conv.softirq_stack_checked,
            stack_to_task: conv.softirq_stack_to_task,
            stack_to_irq: conv.softirq_stack_to_irq,
        };
        meta.extra
            .push(("softirq_wakings".into(), softirq.to_string()));
        if !opts.no_cgroups {
            let r = &self.cgroups;
            meta.extra.push((
                "cgroups".into(),
                format!(
                    "cgroup2 at {}; {} walks, {} ids unresolved (removed before the walk)",
                    r.root()
                        .map_or("(not mounted)".into(), |p| p.display().to_string()),
                    r.walks,
                    r.unresolved
                ),
            ));
        }
        if run_cnt > 0 {
            meta.extra
                .push(("bpf_run_time_ns".into(), run_ns.to_string()));
            meta.extra.push(("bpf_run_cnt".into(), run_cnt.to_string()));
        }
        let user_stash = UserStashCounts {
            taken: c(raw::C_USTASH_TAKEN),
            used: c(raw::C_USTASH_USED),
            missed: c(raw::C_USTASH_MISSED),
            evicted: c(raw::C_USTASH_EVICTED),
            busy: c(raw::C_USTASH_BUSY),
        };
        meta.extra.push((
            "task_state".into(),
            format!(
                "{} slots preallocated, {} tasks recorded without state (map full)",
                skel.maps.tslots.max_entries(),
                c(raw::C_TSLOT_FULL)
            ),
        ));
        if path != UserStackPath::Off {
            meta.extra
                .push(("user_stacks_at_switch_out".into(), user_stash.to_string()));
        }
        let bpf_profile = if opts.profile_bpf {
            raw::P_NAMES
                .iter()
                .enumerate()
                .map(|(p, name)| {
                    let i = raw::C_PROF as usize + 2 * p;
                    (*name, counters_total[i], counters_total[i + 1])
                })
                .collect()
        } else {
            Vec::new()
        };
        let user_unwind = (opts.user_stacks && opts.user_stack_copy_bytes > 0).then(|| {
            let mut u = conv.unwinder.counts.clone();
            u.copies_skipped_busy = counters_total[raw::C_UCOPY_BUSY as usize];
            meta.extra.push(("user_unwind".into(), u.to_string()));
            u
        });
        let goroutines = crate::golang::GoProbes::wanted(&opts.go).then(|| {
            let g = self.go.final_counts(
                c(raw::C_GO_BUSY),
                c(raw::C_GO_READ_FAILED),
                c(raw::C_GO_LOST),
            );
            meta.extra.push(("goroutines".into(), g.to_string()));
            g
        });
        FinalCounts {
            goroutines,
            user_unwind,
            user_stash,
            bpf_profile,
            run_ns,
            run_cnt,
            lazy_user,
            softirq,
        }
    }
}

/// What [`Consumer::final_counts`] adds to the summary.
pub(crate) struct FinalCounts {
    pub(crate) goroutines: Option<crate::golang::GoCounts>,
    pub(crate) user_unwind: Option<crate::unwind::UnwindCounts>,
    pub(crate) user_stash: UserStashCounts,
    pub(crate) bpf_profile: Vec<(&'static str, u64, u64)>,
    pub(crate) run_ns: u64,
    pub(crate) run_cnt: u64,
    pub(crate) lazy_user: LazyUserCounts,
    pub(crate) softirq: SoftirqCounts,
}
