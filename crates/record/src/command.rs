//! Running a command beside a recording (`chainrec record -- COMMAND`): the command, the
//! recording and the stop signals polled together until both the command and the
//! recording have ended. The caller prints; this module decides.

use crate::{stop_signals, RecordSummary, Recording, Result, StopSignals};
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, ExitStatus};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// What happened while supervising, for the caller to act on and print.
// A handful are made per recording and handed over at once: boxing the big variant would
// buy nothing.
#[allow(clippy::large_enum_variant)]
pub enum Supervision {
    /// The recording ended with `result`; `command_running` says whether the command
    /// still runs. The callback returns true to have the command stopped with SIGTERM (a
    /// failed recording: the command would run unrecorded).
    RecordingEnded {
        /// The recording's summary or error.
        result: Result<RecordSummary>,
        /// Whether the command is still running.
        command_running: bool,
    },
    /// Waiting for the command failed (cannot happen for one's own child); the recording
    /// is stopped and the command no longer watched.
    WaitFailed(std::io::Error),
    /// The recording ended a second ago and the command still runs; `signals_seen` says
    /// whether a stop signal came already.
    StillRunning {
        /// The command's pid.
        pid: u32,
        /// Whether a stop signal came already.
        signals_seen: bool,
    },
}

/// Run until `child` and `recording` have both ended. A stop signal that came after
/// `seen` stops the recording, and a SIGTERM from outside chainrec's process group is
/// passed on to the command (SIGINT never is: the terminal's Ctrl-C reaches the command
/// itself, as does `kill -TERM -PGID`). The command's exit stops the recording. Returns
/// the command's status (None when waiting for it failed).
pub fn supervise(
    mut child: Child,
    recording: Recording,
    stop: &AtomicBool,
    mut seen: StopSignals,
    mut on: impl FnMut(Supervision) -> bool,
) -> Option<ExitStatus> {
    let pid = child.id();
    let mut recording = Some(recording);
    let mut status: Option<ExitStatus> = None;
    let mut waiting_since: Option<Instant> = None;
    let mut child_gone = false;
    loop {
        let sigs = stop_signals();
        if sigs.count > seen.count {
            stop.store(true, Ordering::SeqCst);
            if let Some(sig) = to_pass_on(seen, sigs) {
                if status.is_none() && !child_gone {
                    send_signal(pid, sig);
                }
            }
            seen = sigs;
        }
        if status.is_none() && !child_gone {
            match child.try_wait() {
                Ok(Some(st)) => {
                    status = Some(st);
                    stop.store(true, Ordering::SeqCst);
                }
                Ok(None) => {}
                Err(e) => {
                    stop.store(true, Ordering::SeqCst);
                    on(Supervision::WaitFailed(e));
                    child_gone = true;
                }
            }
        }
        if recording.as_ref().is_some_and(|r| r.is_finished()) {
            let r = recording.take().expect("checked above");
            let running = status.is_none() && !child_gone;
            let stop_command = on(Supervision::RecordingEnded {
                result: r.join(),
                command_running: running,
            });
            if running && stop_command {
                send_signal(pid, libc::SIGTERM);
            }
            if running {
                waiting_since = Some(Instant::now());
            }
        }
        if (status.is_some() || child_gone) && recording.is_none() {
            return status;
        }
        if let Some(t) = waiting_since {
            if t.elapsed() >= Duration::from_secs(1) {
                on(Supervision::StillRunning {
                    pid,
                    signals_seen: seen.count > 0,
                });
                waiting_since = None;
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The exit status for a command that ended with `st`: its code; 128+N when it died of
/// signal N, except 0 when N is the stop signal chainrec received last (passed on, or
/// the terminal's): a normal stop.
pub fn exit_code(st: ExitStatus) -> i32 {
    let sigs = stop_signals();
    match (st.code(), st.signal()) {
        (Some(c), _) => c,
        (None, Some(sig)) if sigs.count > 0 && sig == sigs.last => 0,
        (None, Some(sig)) => 128 + sig,
        (None, None) => 1,
    }
}

/// Send `sig` to the command. Callers check that it was not reaped: try_wait returned
/// no status and no error (after an error the pid may have been reaped and reused).
fn send_signal(pid: u32, sig: i32) {
    // SAFETY: kill has no memory-safety preconditions. The caller checked that the child
    // was not reaped (a zombie keeps its pid), so the pid cannot name another process.
    unsafe { libc::kill(pid as libc::pid_t, sig) };
}

/// Whether `pid` is in chainrec's own process group. False when it is unknown (0) or
/// gone (getpgid fails: the sender already exited).
fn in_own_process_group(pid: i32) -> bool {
    if pid <= 0 {
        return false;
    }
    // SAFETY: getpgid and getpgrp have no memory-safety preconditions.
    let (theirs, ours) = unsafe { (libc::getpgid(pid), libc::getpgrp()) };
    theirs != -1 && theirs == ours
}

/// The stop signals that came since `seen`: the signal to pass on to the command, if
/// any. SIGINT never is (the terminal's or the group's signal: the command receives it
/// itself); SIGTERM is when it did not come from the terminal and its sender is not in
/// chainrec's process group (`kill -TERM -PGID`, e.g. systemd or GNU timeout, reaches the
/// command directly).
fn to_pass_on(seen: StopSignals, now: StopSignals) -> Option<i32> {
    (now.terms > seen.terms && !in_own_process_group(now.term_sender)).then_some(libc::SIGTERM)
}

/// Why a command cannot be run.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    /// The command name is empty.
    #[error("the command is an empty string")]
    Empty,
    /// No such command in any PATH directory.
    #[error("cannot run `{0}`: command not found in PATH")]
    NotFound(String),
    /// The file exists but cannot be executed.
    #[error("cannot run `{name}`: {}{why}", path.as_ref().map(|p| format!("{}: ", p.display())).unwrap_or_default())]
    NotRunnable {
        /// The command as given.
        name: String,
        /// The candidate found in PATH (None for a name with a `/`, which is the path).
        path: Option<std::path::PathBuf>,
        /// Why it cannot run.
        why: Unrunnable,
    },
}

/// Why a file cannot be executed.
#[derive(Debug, thiserror::Error)]
pub enum Unrunnable {
    /// Its metadata cannot be read (missing, no permission on a directory).
    #[error("{0}")]
    Stat(std::io::Error),
    /// It is a directory.
    #[error("is a directory")]
    Directory,
    /// The path contains a NUL byte.
    #[error("contains a NUL byte")]
    NulByte,
    /// No execute permission for this process.
    #[error("not executable")]
    NotExecutable,
}

/// Where `name` would be executed from (the PATH lookup `execvp` does), or why it cannot
/// be run: checked before recording starts, so that a typo costs no recording.
pub fn resolve(name: &str) -> std::result::Result<std::path::PathBuf, CommandError> {
    use std::os::unix::fs::PermissionsExt;
    use std::path::{Path, PathBuf};
    let runnable = |p: &Path| -> std::result::Result<(), Unrunnable> {
        let m = std::fs::metadata(p).map_err(Unrunnable::Stat)?;
        if m.is_dir() {
            return Err(Unrunnable::Directory);
        }
        let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes())
            .map_err(|_| Unrunnable::NulByte)?;
        // SAFETY: c is a valid NUL-terminated path.
        let ok = unsafe { libc::access(c.as_ptr(), libc::X_OK) } == 0;
        if !ok || m.permissions().mode() & 0o111 == 0 {
            return Err(Unrunnable::NotExecutable);
        }
        Ok(())
    };
    if name.is_empty() {
        return Err(CommandError::Empty);
    }
    if name.contains('/') {
        let p = PathBuf::from(name);
        runnable(&p).map_err(|why| CommandError::NotRunnable {
            name: name.to_string(),
            path: None,
            why,
        })?;
        return Ok(p);
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    let mut first_failure = None;
    for dir in std::env::split_paths(&path) {
        let dir = if dir.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            dir
        };
        let cand = dir.join(name);
        if !cand.exists() {
            continue;
        }
        match runnable(&cand) {
            Ok(()) => return Ok(cand),
            Err(why) => {
                first_failure.get_or_insert(CommandError::NotRunnable {
                    name: name.to_string(),
                    path: Some(cand),
                    why,
                });
            }
        }
    }
    Err(first_failure.unwrap_or_else(|| CommandError::NotFound(name.to_string())))
}

/// Why a pid does not name a process.
#[derive(Debug, thiserror::Error)]
pub enum PidError {
    /// Pid 0.
    #[error("pid 0 is the idle task, not a process (give a process id)")]
    Idle,
    /// No such process.
    #[error("no such process")]
    NoSuchProcess,
    /// `/proc/PID/status` could not be read.
    #[error("cannot read /proc/{pid}/status")]
    Read {
        /// The pid.
        pid: u32,
        /// Why.
        source: std::io::Error,
    },
    /// `/proc/PID/status` has no Tgid line.
    #[error("no Tgid in /proc/{0}/status")]
    NoTgid(u32),
}

/// The process (thread group id) that `pid` belongs to, from /proc.
pub fn process_of(pid: u32) -> std::result::Result<u32, PidError> {
    if pid == 0 {
        return Err(PidError::Idle);
    }
    let status = match std::fs::read_to_string(format!("/proc/{pid}/status")) {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(PidError::NoSuchProcess),
        Err(source) => return Err(PidError::Read { pid, source }),
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or(PidError::NoTgid(pid))
}
