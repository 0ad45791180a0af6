//! Progress on stderr for long analyses: shown only when stderr is a terminal, not
//! `--quiet`, and only once the work has taken more than about a second.

use crate::{ReportError, Result};
use chainrec_format::EventSource;
use chainrec_format::{Event, RecordingMeta, Tables};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::cell::RefCell;
use std::io::IsTerminal;
use std::time::{Duration, Instant};

/// Delay before a bar appears.
pub const SHOW_AFTER: Duration = Duration::from_secs(1);

/// A lazily shown progress bar over a number of events.
pub struct Progress {
    bar: Option<ProgressBar>,
    start: Instant,
    shown: bool,
}

impl Progress {
    /// A bar over `total` events labelled `what`; inert when `quiet` or stderr is not a terminal.
    pub fn new(total: u64, what: &str, quiet: bool) -> Progress {
        let bar = (!quiet && std::io::stderr().is_terminal()).then(|| {
            let b = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::hidden());
            let style = ProgressStyle::with_template(
                "{prefix} [{bar:40}] {percent:>3}% {human_pos}/{human_len} events, eta {eta}",
            )
            .map(|s| s.progress_chars("=> "))
            .unwrap_or_else(|_| ProgressStyle::default_bar());
            b.set_style(style);
            b.set_prefix(what.to_string());
            b
        });
        Progress {
            bar,
            start: Instant::now(),
            shown: false,
        }
    }
    /// Advance by `n` events.
    pub fn inc(&mut self, n: u64) {
        if let Some(b) = &self.bar {
            b.inc(n);
            if !self.shown && self.start.elapsed() >= SHOW_AFTER {
                b.set_draw_target(ProgressDrawTarget::stderr());
                self.shown = true;
            }
        }
    }
    /// True when the bar is (or would be) drawn.
    pub fn visible(&self) -> bool {
        self.shown
    }
    /// Remove the bar.
    pub fn finish(&mut self) {
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}

/// An [`EventSource`] that advances a progress bar as its batches are read.
pub struct Progressed<'a> {
    inner: &'a dyn EventSource<ReportError>,
    progress: RefCell<Progress>,
}

impl<'a> Progressed<'a> {
    /// `inner`, advancing `progress` by each batch's events.
    pub fn new(inner: &'a dyn EventSource<ReportError>, progress: Progress) -> Self {
        Progressed {
            inner,
            progress: RefCell::new(progress),
        }
    }

    /// Remove the bar.
    pub fn finish(&self) {
        self.progress.borrow_mut().finish();
    }
}

impl EventSource<ReportError> for Progressed<'_> {
    fn meta(&self) -> &RecordingMeta {
        self.inner.meta()
    }
    fn tables(&self) -> &Tables {
        self.inner.tables()
    }
    fn event_count(&self) -> u64 {
        self.inner.event_count()
    }
    fn for_each_batch(&self, f: &mut dyn FnMut(&[Event]) -> Result<()>) -> Result<()> {
        self.inner.for_each_batch(&mut |evs| {
            self.progress.borrow_mut().inc(evs.len() as u64);
            f(evs)
        })
    }
}
