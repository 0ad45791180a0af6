//! [`record`]: validate the options, load and attach the BPF programs (`load.rs`), run
//! the consumer loop (`consumer.rs`) until the stop condition, finish the file.

use crate::consumer::{self, Batch, Consumer};
use crate::convert::Converter;
use crate::load::{self, Loaded};
use crate::options::{RecordOptions, RecordSummary, StopCondition};
use crate::output::{Output, OutputMode};
use crate::raw;
use crate::usyms::UserSymbolizer;
use crate::workload::monotonic_ns;
use crate::{InvalidOption, OutputProblem, RecordError, Result};
use chainrec_format::*;
use libbpf_rs::skel::Skel;
use libbpf_rs::OpenObject;
use std::cell::RefCell;
use std::mem::MaybeUninit;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

fn thread_cpu() -> Duration {
    let mut ru: libc::rusage = unsafe_zeroed_rusage();
    // SAFETY: ru is a valid, writable rusage.
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn unsafe_zeroed_rusage() -> libc::rusage {
    // SAFETY: rusage is plain old data; all-zero is a valid value.
    unsafe { std::mem::zeroed() }
}

fn realtime_ns() -> i128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i128)
        .unwrap_or(0)
}

fn uname() -> (String, String) {
    // SAFETY: utsname is plain old data; uname fills it.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: u is valid and writable.
    if unsafe { libc::uname(&mut u) } != 0 {
        return (String::new(), String::new());
    }
    let s = |f: &[libc::c_char]| {
        let b: Vec<u8> = f
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        String::from_utf8_lossy(&b).into_owned()
    };
    (s(&u.nodename), s(&u.release))
}

/// After a recording failed once it had started: where the events recorded before the
/// failure are (a sentence to append to the error), if `output` holds any.
pub fn partial_trace_note(output: &std::path::Path) -> Option<String> {
    std::fs::metadata(output)
        .is_ok_and(|m| m.is_file() && m.len() > 0)
        .then(|| {
            format!(
                "the events recorded before the failure are in {o} (`chainrec info {o}` reads it \
                 and tells how to analyse it)",
                o = output.display()
            )
        })
}

/// Fail before loading anything when `path` cannot be the trace file: a directory, or in
/// a directory that does not exist (or is not a directory).
pub fn check_output(path: &std::path::Path) -> Result<()> {
    let bad = |problem: OutputProblem| RecordError::Output {
        path: path.to_path_buf(),
        problem,
    };
    if path.is_dir() {
        return Err(bad(OutputProblem::IsDirectory));
    }
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        let dir = parent.to_path_buf();
        match std::fs::metadata(parent) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => return Err(bad(OutputProblem::ParentNotDirectory(dir))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(bad(OutputProblem::NoParent(dir)));
            }
            Err(error) => return Err(bad(OutputProblem::Parent { dir, error })),
        }
    }
    Ok(())
}

/// Record until `stop` says so, writing `opts.output`. See the crate docs.
pub fn record(opts: &RecordOptions, stop: StopCondition) -> Result<RecordSummary> {
    let rb_size = check_options(opts)?;
    let mut open_objs: [MaybeUninit<OpenObject>; 3] =
        std::array::from_fn(|_| MaybeUninit::uninit());
    let mut loaded = load::load(&mut open_objs, opts, rb_size)?;
    // Mapping events before the programs attach: every mapping a stack can be in is
    // either in the /proc scan or in a record.
    let usyms = UserSymbolizer::new(
        &crate::samples::online_cpus()
            .unwrap_or_else(|_| (0..libbpf_rs::num_possible_cpus().unwrap_or(1) as u32).collect()),
        &[],
    );
    let cpu_count = libbpf_rs::num_possible_cpus().unwrap_or(1) as u32;
    let mut meta = initial_meta(opts, rb_size, cpu_count, &loaded);

    let wopts = WriterOptions {
        mode: 0o600,
        ..WriterOptions::default()
    };
    // A stop requested while the programs were loading: leave any previous file alone.
    if stop.flag.as_ref().is_some_and(|f| f.load(Ordering::SeqCst)) {
        return Err(RecordError::Stopped {
            path: opts.output.clone(),
        });
    }
    let mut writer = Output::create(&opts.output, &opts.output_mode, &meta, wopts)?;
    let batch = RefCell::new(Batch::new());
    let ring = consumer::ring_buffer(&loaded.skel, &batch)?;
    let (softirq_links, softirq_method) = load::attach_softirq_tracking(&mut loaded, opts);
    meta.extra
        .push(("softirq_context".into(), softirq_method.clone()));
    meta.extra.push((
        "fallbacks".into(),
        loaded
            .fallbacks
            .iter()
            .map(|f| f.feature)
            .collect::<Vec<_>>()
            .join("; "),
    ));
    loaded
        .skel
        .attach()
        .map_err(|e| load::bpf_err("attach", e))?;
    // The perf events are opened here, not with the tracepoints: one per online CPU.
    let sample_links = match &opts.samples {
        Some(cfg) => crate::samples::attach(&loaded.skel.progs.on_sample, cfg)
            .map_err(RecordError::Samples)?,
        None => Default::default(),
    };
    let mut conv = Converter::new(std::mem::take(&mut loaded.ksyms));
    conv.softirq_by_stack_on = !opts.no_softirq_tracking;
    let mut consumer = Consumer::new(conv, usyms, cpu_count, opts);
    // Before the command starts: the binaries named with --go are probed from its first
    // goroutine on.
    consumer
        .go
        .attach_named(&loaded.skel)
        .map_err(|(path, error)| RecordError::Go { path, error })?;
    meta.start_ns = monotonic_ns();
    writer.update_meta(&meta)?;
    let t_start = Instant::now();
    // Consumer CPU counts from here: loading and verifying the programs is not consuming.
    let cpu_at_attach = thread_cpu();
    if let Some(s) = &stop.started {
        s.store(true, Ordering::SeqCst);
    }

    consumer.run(
        &ring,
        &batch,
        &mut loaded.skel,
        softirq_links,
        sample_links,
        &mut writer,
        &mut meta,
        &stop,
        opts,
        t_start,
    )?;

    let end_ns = monotonic_ns();
    meta.end_ns = end_ns.max(consumer.reorder.last_ts);
    meta.lost = consumer.lost();
    let consumer_cpu = thread_cpu().saturating_sub(cpu_at_attach);
    meta.extra.push((
        "consumer_cpu_ns".into(),
        consumer_cpu.as_nanos().to_string(),
    ));
    let fin = consumer.final_counts(&loaded.skel, &mut meta, opts, loaded.path);
    let ws = writer.finish(&meta)?;
    let main_output = match &opts.output_mode {
        OutputMode::File => opts.output.clone(),
        // The first numbered file, or the first dump (none when nothing was dumped).
        _ => ws.files.first().cloned().unwrap_or_default(),
    };
    let counters = &consumer.counters_total;
    let conv = &consumer.conv;
    Ok(RecordSummary {
        output: main_output,
        events: ws.events,
        events_by_kind: consumer.by_kind,
        bytes: ws.bytes,
        duration: t_start.elapsed(),
        lost: meta.lost.clone(),
        tasks_without_state: counters[raw::C_TSLOT_FULL as usize],
        stacks: (conv.next_stack - StackId::FIRST_REAL) as u64,
        symbols: (conv.kaddrs.len() + conv.uaddrs.len()) as u64,
        consumer_cpu,
        bpf_run_time_ns: fin.run_ns,
        bpf_run_cnt: fin.run_cnt,
        context_fallbacks: counters[raw::C_CTX_FALLBACK as usize],
        context_method: loaded.context_method,
        user_stack_method: loaded.user_stack_method,
        user_walks_shortcut: counters[raw::C_UWALK_SHORT as usize],
        lazy_user: fin.lazy_user,
        user_walk_mismatches: opts
            .verify_user_walk_shortcut
            .then_some(counters[raw::C_UWALK_MISMATCH as usize]),
        softirq_method,
        softirq: fin.softirq,
        files: ws.files,
        flight: ws.flight,
        bpf_profile: fin.bpf_profile,
        user_stash: fin.user_stash,
        user_unwind: fin.user_unwind,
        sampling: meta.sampling(),
        goroutines: fin.goroutines,
        fallbacks: std::mem::take(&mut loaded.fallbacks),
    })
}

/// Check the options that the BPF side cannot; the ring buffer size to use (a power of two).
fn check_options(opts: &RecordOptions) -> Result<u32> {
    if opts.ringbuf_bytes < 4096 || opts.ringbuf_bytes > (1 << 31) {
        return Err(RecordError::Invalid(InvalidOption::RingbufSize {
            bytes: opts.ringbuf_bytes,
        }));
    }
    let rb_size = opts.ringbuf_bytes.next_power_of_two() as u32;
    check_output(&opts.output)?;
    if let Some(s) = &opts.samples {
        if !(1..=100_000).contains(&s.freq_hz) {
            return Err(RecordError::Invalid(InvalidOption::SampleFreq {
                hz: s.freq_hz,
            }));
        }
    }
    if opts.pids.len() > 1024 {
        return Err(RecordError::Invalid(InvalidOption::TooManyPids {
            count: opts.pids.len(),
        }));
    }
    Ok(rb_size)
}

/// The trace metadata written when the file is created (start and end times, lost counts
/// and the final counters follow).
fn initial_meta(
    opts: &RecordOptions,
    rb_size: u32,
    cpu_count: u32,
    loaded: &Loaded<'_>,
) -> RecordingMeta {
    let (host, release) = uname();
    RecordingMeta {
        host,
        kernel_release: release,
        cpu_count,
        clock: Clock::Monotonic,
        clock_offset_ns: realtime_ns() - monotonic_ns() as i128,
        command_line: opts.command_line.clone(),
        start_ns: 0,
        end_ns: 0,
        stack_mode: opts.stack_mode,
        stack_threshold_ns: if opts.stack_mode == StackMode::Lazy {
            opts.stack_threshold_ns
        } else {
            0
        },
        lost: LostCounts::default(),
        synthetic_scenario: None,
        extra: vec![
            (
                "recorder".into(),
                format!("chainrec-record {}", env!("CARGO_PKG_VERSION")),
            ),
            ("ringbuf_bytes".into(), rb_size.to_string()),
            (
                "filter_pids".into(),
                opts.pids
                    .iter()
                    .map(|p| p.to_string())
                    .collect::<Vec<_>>()
                    .join(","),
            ),
            ("wake_context".into(), loaded.context_method.clone()),
            ("lazy_user_stacks".into(), loaded.user_stack_method.clone()),
            ("kallsyms_symbols".into(), loaded.ksyms.len().to_string()),
            (
                "kernel_stacks".into(),
                "BPF program and tracepoint frames removed from the leaf end".into(),
            ),
        ],
    }
}
