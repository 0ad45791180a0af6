//! `perf_event_open(2)` for one CPU, shared by the on-CPU sampler (`samples.rs`) and the
//! mapping tracker (`mappings.rs`): both watch every task of a CPU.

use libbpf_rs::libbpf_sys as sys;
use std::os::fd::{FromRawFd, OwnedFd};

/// Opens `attr` for every task on `cpu` (no group, close-on-exec).
pub(crate) fn open_on_cpu(attr: &sys::perf_event_attr, cpu: u32) -> std::io::Result<OwnedFd> {
    // SAFETY: perf_event_open(2) with a fully initialised attr of the size it declares;
    // pid -1 with a CPU = every task on that CPU; no group; the fd is owned below.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            attr as *const sys::perf_event_attr,
            -1 as libc::pid_t,
            cpu as libc::c_int,
            -1 as libc::c_int,
            sys::PERF_FLAG_FD_CLOEXEC as libc::c_ulong,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a new descriptor returned by the kernel, owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}
