//! Facts read from the running kernel's BTF.

use libbpf_rs::btf::types::{Composite, DataSec, MemberAttr};
use libbpf_rs::btf::{Btf, BtfType};

/// Distance in bytes from the per-CPU variable `runqueues` to `__preempt_count`, read from
/// the `.data..percpu` datasec of `/sys/kernel/btf/vmlinux`. The BPF side adds it to this
/// CPU's `struct rq` address to read the preempt count (waking context). `Err` says why
/// it is unavailable (then the interrupt-tracepoint fallback is used).
pub fn preempt_count_delta() -> Result<i64, String> {
    percpu_delta("__preempt_count", 4)
}

/// Distance in bytes from `runqueues` to the per-CPU `ksoftirqd` task pointer, like
/// [`preempt_count_delta`] (kernels without `CONFIG_KALLSYMS_ALL` give BPF no address
/// for per-CPU variables). The BPF side names softirqs run by ksoftirqd with it.
pub fn ksoftirqd_delta() -> Result<i64, String> {
    percpu_delta("ksoftirqd", 8)
}

/// Distances from `runqueues` to the x86 per-CPU `hardirq_stack_ptr` (8 bytes) and
/// `hardirq_stack_inuse` (1 byte): the BPF side reads the irq stack with them to tell a
/// softirq run by a task (`do_softirq`) from one at an interrupt's exit.
pub fn irq_stack_deltas() -> Result<(i64, i64), String> {
    Ok((
        percpu_delta("hardirq_stack_ptr", 8)?,
        percpu_delta("hardirq_stack_inuse", 1)?,
    ))
}

/// The member of x86's per-CPU `struct pcpu_hot` (Linux 6.2 to 6.14) that holds the
/// per-CPU variable `name` on those kernels.
fn pcpu_hot_member(name: &str) -> Option<&'static str> {
    match name {
        "__preempt_count" => Some("preempt_count"),
        "hardirq_stack_ptr" => Some("hardirq_stack_ptr"),
        "hardirq_stack_inuse" => Some("hardirq_stack_inuse"),
        _ => None,
    }
}

/// Byte offset of the member `name` inside the struct or union `ty`, looking through
/// anonymous struct and union members (`pcpu_hot` wraps its fields in one).
fn member_offset(btf: &Btf<'_>, t: BtfType<'_>, name: &str, depth: u32) -> Option<u32> {
    let c = Composite::try_from(t.skip_mods_and_typedefs()).ok()?;
    for m in c.iter() {
        let bits = match m.attr {
            MemberAttr::Normal { offset } => offset,
            MemberAttr::BitField { .. } => continue,
        };
        match m.name.and_then(|n| n.to_str()).filter(|n| !n.is_empty()) {
            Some(n) if n == name => return Some(bits / 8),
            None if depth < 4 => {
                let inner = btf.type_by_id::<BtfType<'_>>(m.ty)?;
                if let Some(o) = member_offset(btf, inner, name, depth + 1) {
                    return Some(bits / 8 + o);
                }
            }
            _ => {}
        }
    }
    None
}

/// Offset of the per-CPU variable `name` (of `size` bytes) minus that of `runqueues`. On
/// kernels that moved it into x86's `pcpu_hot` (6.2 to 6.14), the offset of that member.
fn percpu_delta(name: &str, size: usize) -> Result<i64, String> {
    let btf = Btf::from_vmlinux().map_err(|e| format!("cannot read kernel BTF: {e}"))?;
    let sec: DataSec<'_> = btf
        .type_by_name(".data..percpu")
        .ok_or_else(|| "kernel BTF has no .data..percpu datasec".to_string())?;
    let mut rq = None;
    let mut var = None;
    let mut hot = None;
    for v in sec.iter() {
        let Some(t) = btf.type_by_id::<BtfType<'_>>(v.ty) else {
            continue;
        };
        match t.name().and_then(|n| n.to_str()) {
            Some("runqueues") => rq = Some(v.offset as i64),
            Some(n) if n == name && v.size == size => var = Some(v.offset as i64),
            Some("pcpu_hot") => {
                // The datasec entry is the VAR; the type it names is struct pcpu_hot.
                if let (Some(m), Some(ty)) = (pcpu_hot_member(name), t.next_type()) {
                    hot = member_offset(&btf, ty, m, 0).map(|o| v.offset as i64 + o as i64);
                }
            }
            _ => {}
        }
    }
    let var = var.or(hot);
    match (rq, var) {
        (Some(rq), Some(v)) => Ok(v - rq),
        (None, _) => Err("per-CPU variable `runqueues` not in kernel BTF".into()),
        (_, None) => Err(format!(
            "per-CPU variable `{name}` ({size} bytes) not in kernel BTF"
        )),
    }
}

/// The kfunc that schedules a BPF task_work callback on a task's return to user space
/// (Linux 6.18+). Lazy user stacks use it when the kernel has it.
pub const TASK_WORK_KFUNC: &str = "bpf_task_work_schedule_resume_impl";

/// Whether the running kernel's BTF has the function `name` (e.g. a kfunc). `Err` says why
/// the BTF could not be read.
pub fn kernel_has_func(name: &str) -> Result<bool, String> {
    use libbpf_rs::btf::types::Func;
    let btf = Btf::from_vmlinux().map_err(|e| format!("cannot read kernel BTF: {e}"))?;
    let f: Option<Func<'_>> = btf.type_by_name(name);
    Ok(f.is_some())
}
