//! A recording on its own thread: start it, wait until events flow, stop it, join it.
//! (`record` and `demo` both run their work beside a recording; this is that sequence once.)

use crate::progress::{ConsumerProgress, ProgressSnapshot};
use crate::{record, RecordError, RecordOptions, RecordSummary, Result, StopCondition};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// A recording running on a thread of its own (named `chainrec-consumer`).
pub struct Recording {
    handle: JoinHandle<Result<RecordSummary>>,
    stop: Arc<AtomicBool>,
    started: Arc<AtomicBool>,
    progress: Arc<ConsumerProgress>,
}

impl Recording {
    /// Start recording with `opts`. It stops after `duration`, when `stop` becomes true (a
    /// flag set by a signal handler, or a fresh one), or on [`Recording::stop`].
    pub fn start(
        opts: RecordOptions,
        duration: Option<Duration>,
        stop: Arc<AtomicBool>,
    ) -> Result<Recording> {
        let started = Arc::new(AtomicBool::new(false));
        let progress = Arc::new(ConsumerProgress::default());
        let cond = StopCondition {
            duration,
            flag: Some(stop.clone()),
            started: Some(started.clone()),
            progress: Some(progress.clone()),
        };
        let handle = std::thread::Builder::new()
            .name("chainrec-consumer".into())
            .spawn(move || record(&opts, cond))
            .map_err(RecordError::Thread)?;
        Ok(Recording {
            handle,
            stop,
            started,
            progress,
        })
    }

    /// Whether the programs are attached and events flow.
    pub fn started(&self) -> bool {
        self.started.load(Ordering::SeqCst)
    }

    /// Where the recording thread is in its loop (for a stop that takes long).
    pub fn progress(&self) -> ProgressSnapshot {
        self.progress.snapshot()
    }

    /// Whether the recording thread has ended (join it for the result).
    pub fn is_finished(&self) -> bool {
        self.handle.is_finished()
    }

    /// Wait until events flow, the recording ended, or `give_up()` returns true (checked
    /// every 5 ms); returns [`Recording::started`].
    pub fn wait_started(&self, mut give_up: impl FnMut() -> bool) -> bool {
        while !self.started() && !self.is_finished() && !give_up() {
            std::thread::sleep(Duration::from_millis(5));
        }
        self.started()
    }

    /// Ask the recording to stop (it finishes the file; [`Recording::join`] waits for that).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
    }

    /// Wait for the recording to end; its summary, or why it failed.
    pub fn join(self) -> Result<RecordSummary> {
        self.handle.join().map_err(|_| RecordError::Panicked)?
    }
}
