//! The root filters shared by `chains`, `offcpu`, `wakeup`, `offwake`, `top` and `export`
//! (a module of their own, so that the command modules need not import each other).
use anyhow::{bail, Context, Result};
use chainrec_chain::{Analysis, ChainError, Duration, Filter};
use chainrec_format::{CgroupSelector, FlightTrigger, RecordingMeta, Tables, ThreadSelector};
use std::marker::PhantomData;
use std::sync::Arc;

/// Where a command lists the thread flags in `--help` (the heading also says how they
/// match there). A type parameter of [`ThreadArgs`] and [`KindArgs`], so that each flag
/// is declared once and still carries its heading itself: a `next_help_heading` on the
/// flattening field would also apply to every argument declared after it.
pub trait Heading: Clone + std::fmt::Debug + Default + Send + Sync + 'static {
    /// The heading.
    const TEXT: &'static str;
}

/// [`FilterArgs`]: the flags select the waiting thread.
#[derive(Clone, Debug, Default)]
pub struct WaitingThread;
impl Heading for WaitingThread {
    const TEXT: &'static str = FILTERS;
}

/// [`ThreadFilterArgs`]: the flags select the threads counted (`heatmap`).
#[derive(Clone, Debug, Default)]
pub struct Counted;
impl Heading for Counted {
    const TEXT: &'static str = "Threads (all must match)";
}

/// `script`'s event filters: an event matches when any of its tasks does.
#[derive(Clone, Debug, Default)]
pub struct AnyTask;
impl Heading for AnyTask {
    const TEXT: &'static str = "Filters (an event matches when any of its tasks matches)";
}

/// Help heading of the filters of [`FilterArgs`].
const FILTERS: &str = "Filters (on the waiting thread)";

/// The thread flags `-p`, `-t` and `--comm`, listed under `H`'s heading; flatten with
/// `#[command(flatten)]`.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct ThreadArgs<H: Heading> {
    /// Only threads of these processes (tgid); repeat or comma-separate.
    #[arg(help_heading = H::TEXT, short = 'p', long = "pid", value_delimiter = ',', value_name = "PID")]
    pub pid: Vec<u32>,
    /// Only these threads; repeat or comma-separate.
    #[arg(help_heading = H::TEXT, short = 't', long = "tid", value_delimiter = ',', value_name = "TID")]
    pub tid: Vec<u32>,
    /// Only threads whose name (at the time) matches this regex.
    #[arg(help_heading = H::TEXT, long, value_name = "REGEX")]
    pub comm: Option<String>,
    /// Only threads in a cgroup (v2) whose path matches this regex, e.g. `docker-`,
    /// `^/system.slice/nginx.service$`, a pod UID (the cgroup at the time; traces recorded
    /// with cgroups, chainrec 2.1 format).
    #[arg(help_heading = H::TEXT, long, value_name = "REGEX")]
    pub cgroup: Option<String>,
    #[arg(skip)]
    heading: PhantomData<H>,
}

impl<H: Heading> ThreadArgs<H> {
    /// Whether any of the flags is given.
    pub fn is_set(&self) -> bool {
        !self.pid.is_empty() || !self.tid.is_empty() || self.comm.is_some() || self.cgroup.is_some()
    }

    /// The thread selector of the flags (the regexes compiled, an error naming the flag;
    /// `--cgroup` bound to the cgroups of `tables`).
    pub fn selector(&self, tables: &Tables) -> Result<ThreadSelector> {
        let cgroup = match &self.cgroup {
            Some(c) => Some(Arc::new(
                CgroupSelector::new(comm_regex("--cgroup", c)?, tables)
                    .ok_or(ChainError::NoCgroups { flag: "--cgroup" })?,
            )),
            None => None,
        };
        Ok(ThreadSelector {
            pids: self.pid.clone(),
            tids: self.tid.clone(),
            comm: self
                .comm
                .as_deref()
                .map(|c| comm_regex("--comm", c))
                .transpose()?,
            cgroup,
            ..ThreadSelector::default()
        })
    }

    /// Set the thread part of `f` (see [`ThreadArgs::selector`]; `-u`/`-k` are
    /// [`KindArgs`]'s and kept).
    pub fn apply(&self, f: &mut Filter, tables: &Tables) -> Result<()> {
        let kinds = (f.threads.user_only, f.threads.kernel_only);
        f.threads = self.selector(tables)?;
        (f.threads.user_only, f.threads.kernel_only) = kinds;
        Ok(())
    }
}

/// The thread-kind flags `-u` and `-k`, listed under `H`'s heading.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct KindArgs<H: Heading> {
    /// User threads only.
    #[arg(
        help_heading = H::TEXT,
        short = 'u',
        long = "user-threads-only",
        conflicts_with = "kernel_threads_only"
    )]
    pub user_threads_only: bool,
    /// Kernel threads only.
    #[arg(help_heading = H::TEXT, short = 'k', long = "kernel-threads-only")]
    pub kernel_threads_only: bool,
    #[arg(skip)]
    heading: PhantomData<H>,
}

impl<H: Heading> KindArgs<H> {
    /// Whether either flag is given.
    pub fn is_set(&self) -> bool {
        self.user_threads_only || self.kernel_threads_only
    }

    /// Set the thread-kind part of `s`.
    pub fn apply_to_selector(&self, s: &mut ThreadSelector) {
        s.user_only = self.user_threads_only;
        s.kernel_only = self.kernel_threads_only;
    }

    /// Set the thread-kind part of `f`.
    pub fn apply(&self, f: &mut Filter) {
        self.apply_to_selector(&mut f.threads);
    }
}

/// Root filters, shared by `chains`, `offcpu`, `wakeup`, `offwake` (and `top`): flatten
/// with `#[command(flatten)]` and convert with [`FilterArgs::to_filter`].
#[derive(clap::Args, Clone, Debug, Default)]
pub struct FilterArgs {
    /// `-p`, `-t`, `--comm`, `--cgroup`.
    #[command(flatten)]
    pub threads: ThreadArgs<WaitingThread>,
    /// Only waits whose switch-out state has a bit of MASK (2 = D, 1 = S; 0 = preempted
    /// only), decimal or 0x hex.
    #[arg(help_heading = FILTERS, long, value_name = "MASK", value_parser = parse_mask)]
    pub state: Option<u32>,
    /// Minimum blocked time in microseconds (switch-out to the waking).
    #[arg(help_heading = FILTERS, short = 'm', long = "min-block-time", value_name = "US")]
    pub min_block_us: Option<u64>,
    /// Maximum blocked time in microseconds (switch-out to the waking).
    #[arg(help_heading = FILTERS, short = 'M', long = "max-block-time", value_name = "US")]
    pub max_block_us: Option<u64>,
    /// `-u`, `-k`.
    #[command(flatten)]
    pub kinds: KindArgs<WaitingThread>,
    /// Only waits ending inside START..END: seconds from trace start (`2..3.5`), wall
    /// clock `@EPOCH_SECONDS`, or UTC time of day `HH:MM:SS[.f]`; either end may be empty.
    #[arg(help_heading = FILTERS, long, value_name = "START..END")]
    pub window: Option<String>,
    /// Only the wait that made this flight-recorder dump (`record --flight --trigger`).
    #[arg(help_heading = FILTERS, long, conflicts_with_all = ["tid", "window"])]
    pub trigger: bool,
}

/// The flight trigger recorded in `meta`, if any (damaged keys are an error).
pub(crate) fn flight_trigger(meta: &RecordingMeta) -> Result<Option<FlightTrigger>> {
    FlightTrigger::from_meta(meta).context("reading the flight trigger from the metadata")
}

/// Compile the regex of `flag` (`--comm`, ...): the error names the flag and gives the
/// regex crate's last line (what is wrong, not the whole caret diagram).
pub(crate) fn comm_regex(flag: &str, c: &str) -> Result<chainrec_chain::regex::Regex> {
    chainrec_chain::regex::Regex::new(c).map_err(|e| {
        let msg = e.to_string();
        let last = msg
            .lines()
            .rfind(|l| !l.trim().is_empty())
            .unwrap_or("invalid")
            .trim()
            .to_string();
        anyhow::anyhow!("bad {flag} regex {c:?}: {last}")
    })
}

/// The thread filters alone (`-p -t --comm -u -k`), for commands that count threads rather
/// than select waits (`heatmap`); the same flags and meaning as in [`FilterArgs`].
#[derive(clap::Args, Clone, Debug, Default)]
pub struct ThreadFilterArgs {
    /// `-p`, `-t`, `--comm`.
    #[command(flatten)]
    pub threads: ThreadArgs<Counted>,
    /// `-u`, `-k`.
    #[command(flatten)]
    pub kinds: KindArgs<Counted>,
}

impl ThreadFilterArgs {
    /// The thread selector, `--cgroup` bound to `tables`.
    pub fn to_selector(&self, tables: &Tables) -> Result<ThreadSelector> {
        let mut s = self.threads.selector(tables)?;
        self.kinds.apply_to_selector(&mut s);
        Ok(s)
    }
}

pub(crate) fn parse_mask(s: &str) -> Result<u32, String> {
    let r = match s.strip_prefix("0x") {
        Some(h) => u32::from_str_radix(h, 16),
        None => s.parse(),
    };
    r.map_err(|_| format!("{s:?} is not a state mask (decimal or 0x hex)"))
}

impl FilterArgs {
    /// Whether any filter that selects waits is given (all but `--trigger`).
    pub fn selects_waits(&self) -> bool {
        self.threads.is_set()
            || self.kinds.is_set()
            || self.state.is_some()
            || self.min_block_us.is_some()
            || self.max_block_us.is_some()
            || self.window.is_some()
    }

    /// Build the library filter for the trace of `an`: relative window times count from
    /// its start, and a window that selects none of its events is an error. `duration`
    /// says what -m/-M and the window measure.
    pub fn to_filter(&self, an: &Analysis, duration: Duration) -> Result<Filter> {
        let mut filter = Filter {
            state_mask: self.state,
            min_ns: self.min_block_us.map(|u| u.saturating_mul(1000)),
            max_ns: self.max_block_us.map(|u| u.saturating_mul(1000)),
            duration,
            ..Filter::default()
        };
        self.threads.apply(&mut filter, an.tables())?;
        self.kinds.apply(&mut filter);
        filter.window = self.window.as_deref().map(|w| an.window(w)).transpose()?;
        if let (Some(a), Some(b)) = (self.min_block_us, self.max_block_us) {
            if a > b {
                bail!("-m {a} is larger than -M {b}");
            }
        }
        if self.trigger {
            filter.restrict_to_trigger(an.meta())?;
        }
        Ok(filter)
    }
}
