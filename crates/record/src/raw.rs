//! Ring-buffer records as written by `bpf/chainrec.bpf.c`: `struct ev` (32 bytes), then
//! `nk + nu` u64 frames and a `struct ucopy` block, or `struct ev_comm` for comm records.
//!
//! The layout and every constant come from `bpf/chainrec_abi.h`, turned into Rust by
//! bindgen in `build.rs` ([`abi`]); nothing here repeats a number of the C side.

/// The generated Rust side of `bpf/chainrec_abi.h` (structs with bindgen's layout checks,
/// which fail the build if a struct is not the size and shape the C side has).
#[allow(
    non_camel_case_types,
    non_upper_case_globals,
    dead_code,
    missing_docs,
    unreachable_pub,
    clippy::all,
    clippy::undocumented_unsafe_blocks,
    unsafe_op_in_unsafe_fn
)]
pub(crate) mod abi {
    include!(concat!(env!("OUT_DIR"), "/chainrec_abi.rs"));
}

// The constants and per-kind views, as `raw::EV_SWITCH`, `raw::ev_switch` ... (some are
// used by the BPF side only).
pub(crate) use abi::*;

/// The four words after a record's header, one view per record kind.
pub(crate) type EvArgs = abi::ev__bindgen_ty_1;

/// Size of a record's header (`struct ev`).
pub const HDR: usize = size_of::<abi::ev>();
/// Size of the copy block's header (`struct ucopy`: ip, sp, bp, len, nwin, win_at).
pub const UCOPY_HDR: usize = size_of::<abi::ucopy>();

// The unwinder's window count is the BPF side's.
const _: () = assert!(UCOPY_WINDOWS as usize == crate::unwind::MAX_WINDOWS);
/// Where a comm record's name and cgroup id are (`struct ev_comm`).
const COMM_AT: usize = std::mem::offset_of!(abi::ev_comm, comm);
const COMM_CGID_AT: usize = std::mem::offset_of!(abi::ev_comm, cgid);

/// The names of the `--profile-bpf` sections, indexed by the `P_*` constants of the C side.
pub const P_NAMES: [&str; P_NR] = {
    use abi::*;
    let mut n = [""; P_NR];
    n[P_SW_ALL as usize] = "on_switch";
    n[P_SW_SEEN as usize] = "switch: task state (seen)";
    n[P_SW_UHALF as usize] = "switch: user half at switch-out";
    n[P_SW_KSTACK as usize] = "switch: kernel stack of next";
    n[P_SW_ARM as usize] = "switch: arm user stack";
    n[P_SW_OUT as usize] = "switch: output off-CPU half";
    n[P_SW_EAGER as usize] = "switch: eager stacks of prev";
    n[P_WK_ALL as usize] = "on_waking";
    n[P_WK_CTX as usize] = "waking: context";
    n[P_WK_KSTACK as usize] = "waking: waker kernel stack";
    n[P_WK_USTACK as usize] = "waking: waker user stack";
    n[P_WK_OUT as usize] = "waking: output";
    n[P_CB_ALL as usize] = "task_work callback";
    n[P_CB_USTACK as usize] = "callback: user stack";
    n[P_TW_SCHED as usize] = "arm: task_work kfunc";
    n[P_SW_EMIT as usize] = "switch: stack-less record";
    n[P_SW_STASH as usize] = "switch: user stack of prev (predicted)";
    n[P_SW_KSTACK1 as usize] = "switch: kernel stack of next, 1 frame";
    n[P_WK_KSTACK1 as usize] = "waking: waker kernel stack, 1 frame";
    n[P_SW_CGROUP as usize] = "switch: cgroup of prev";
    n
};
// Every section has a name (a P_* added on the C side without one fails the build).
const _: () = {
    let mut i = 0;
    while i < P_NR {
        assert!(
            !P_NAMES[i].is_empty(),
            "a P_* section has no name in P_NAMES"
        );
        i += 1;
    }
};

/// One decoded record; frames live in a shared pool (`frames_at..frames_at+nk+nu`).
#[derive(Clone, Copy, Default)]
pub struct RawEv {
    pub ts: u64,
    pub kind: u8,
    pub aux: u8,
    pub kst: u8,
    pub ust: u8,
    pub cpu: u16,
    pub nk: u8,
    pub nu: u8,
    /// The kind's fields: read them with the view of the kind ([`RawEv::switch`] ...).
    pub args: EvArgs,
    pub frames_at: u32,
    pub comm: [u8; 16],
    /// Comm records: the task's cgroup id (0: not tracked).
    pub cgid: u64,
    /// A user-stack copy came with the record (`UST_COPY`, stripped from `ust`): the user
    /// registers and `copy_len` bytes at `copy_at` in the batch's byte pool, the last
    /// `UCOPY_WINDOW` bytes of them for each window address in `copy_windows` (0: none).
    pub has_copy: bool,
    pub uip: u64,
    pub usp: u64,
    pub ubp: u64,
    pub copy_at: u32,
    pub copy_len: u32,
    pub copy_windows: [u64; UCOPY_WINDOWS as usize],
}

/// Safe readers of the per-kind views of [`RawEv::args`].
macro_rules! views {
    ($($(#[$doc:meta])* $name:ident: $field:ident -> $ty:ty;)*) => {
        impl RawEv {
            $(
                $(#[$doc])*
                pub fn $name(&self) -> $ty {
                    // SAFETY: every view of the union is four u32 (bindgen's layout checks
                    // hold it to the C side), so any bytes are a valid value of any view.
                    unsafe { self.args.$field }
                }
            )*
        }
    };
}

views! {
    /// `EV_SWITCH`.
    switch: sw -> ev_switch;
    /// `EV_WAKING`.
    waking: wk -> ev_waking;
    /// `EV_WAKEUP_NEW`.
    wakeup_new: wn -> ev_wakeup_new;
    /// `EV_COMM`, `EV_EXIT`, `EV_OFFCPU`, `EV_SAMPLE`.
    task: task -> ev_task;
    /// `EV_CGROUP`.
    cgroup: cg -> ev_cgroup;
    /// `EV_THROTTLE`.
    throttle: thr -> ev_throttle;
    /// `EV_GO`.
    go: go -> ev_go;
    /// The generic words (tests).
    words: w -> ev_words;
}

impl std::fmt::Debug for RawEv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RawEv")
            .field("ts", &self.ts)
            .field("kind", &self.kind)
            .field("aux", &self.aux)
            .field("cpu", &self.cpu)
            .field("args", &self.words())
            .finish_non_exhaustive()
    }
}

impl RawEv {
    /// The user stack copy of this record, if it has one.
    pub fn stack_copy<'a>(&self, bytes: &'a [u8]) -> Option<crate::unwind::StackCopy<'a>> {
        if !self.has_copy {
            return None;
        }
        let at = self.copy_at as usize;
        let all = bytes.get(at..at + self.copy_len as usize)?;
        let nwin = self.copy_windows.iter().take_while(|&&a| a != 0).count();
        // A copy shorter than its windows is malformed: keep nothing of it.
        let (bottom, windows) =
            all.split_at_checked(all.len().checked_sub(nwin * UCOPY_WINDOW as usize)?)?;
        let mut copy = crate::unwind::StackCopy::new(self.uip, self.usp, self.ubp, bottom);
        for (&at, w) in self
            .copy_windows
            .iter()
            .zip(windows.chunks_exact(UCOPY_WINDOW as usize))
        {
            if at == u64::from(UCOPY_PY_FRAMES) {
                copy.python = w;
            } else {
                copy.add_window(at, w);
            }
        }
        Some(copy)
    }
}

/// Read a `T` from the front of `b`, None when `b` is too short.
fn read_front<T: Copy + Plain>(b: &[u8]) -> Option<T> {
    if b.len() < size_of::<T>() {
        return None;
    }
    // SAFETY: `b` holds at least size_of::<T>() bytes (checked above), read unaligned, and
    // `T` is a Plain struct of integers, for which every bit pattern is a valid value.
    Some(unsafe { std::ptr::read_unaligned(b.as_ptr().cast::<T>()) })
}

/// Structs of integers only (every bit pattern valid): what [`read_front`] may read.
trait Plain {}
impl Plain for abi::ev {}
impl Plain for abi::ucopy {}

/// The kinds of the C side (`EV_*`).
const KINDS: [u8; 10] = [
    EV_SWITCH,
    EV_WAKING,
    EV_WAKEUP_NEW,
    EV_COMM,
    EV_EXIT,
    EV_OFFCPU,
    EV_CGROUP,
    EV_SAMPLE,
    EV_THROTTLE,
    EV_GO,
];

/// Decode one record, appending its frames to `pool` and its user-stack copy, if any, to
/// `bytes`. None when malformed.
pub fn decode(data: &[u8], pool: &mut Vec<u64>, bytes: &mut Vec<u8>) -> Option<RawEv> {
    let h: abi::ev = read_front(data)?;
    let mut e = RawEv {
        ts: h.ts,
        kind: h.kind,
        aux: h.aux,
        kst: h.kst,
        ust: h.ust,
        cpu: h.cpu,
        nk: h.nk,
        nu: h.nu,
        args: h.__bindgen_anon_1,
        frames_at: pool.len() as u32,
        comm: [0; 16],
        ..RawEv::default()
    };
    if !KINDS.contains(&e.kind) {
        return None;
    }
    if e.kind == EV_COMM {
        e.comm.copy_from_slice(data.get(COMM_AT..COMM_AT + 16)?);
        if let Some(b) = data.get(COMM_CGID_AT..COMM_CGID_AT + 8) {
            e.cgid = u64::from_le_bytes(b.try_into().ok()?);
        }
        return Some(e);
    }
    let n = e.nk as usize + e.nu as usize;
    if data.len() < HDR + n * 8 {
        return None;
    }
    pool.extend(
        data[HDR..HDR + n * 8]
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8]))),
    );
    if e.ust & UST_COPY != 0 {
        e.ust &= !UST_COPY;
        let at = HDR + n * 8;
        let copy: abi::ucopy = read_front(data.get(at..)?)?;
        let len = copy.len as usize;
        let stack = data.get(at + UCOPY_HDR..at + UCOPY_HDR + len)?;
        e.has_copy = true;
        e.uip = copy.ip;
        e.usp = copy.sp;
        e.ubp = copy.bp;
        e.copy_at = bytes.len() as u32;
        e.copy_len = len as u32;
        let nwin = copy.nwin as usize;
        if nwin > copy.win_at.len()
            || nwin * UCOPY_WINDOW as usize > len
            || copy.win_at[..nwin].contains(&0)
        {
            return None; // malformed: counted by the caller
        }
        e.copy_windows = [0; UCOPY_WINDOWS as usize];
        e.copy_windows[..nwin].copy_from_slice(&copy.win_at[..nwin]);
        bytes.extend_from_slice(stack);
    }
    Some(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_header_and_frames() {
        let mut b = vec![0u8; HDR + 24];
        b[0..8].copy_from_slice(&123456789u64.to_le_bytes());
        b[8] = EV_WAKING;
        b[9] = 2;
        b[10] = ST_PRESENT;
        b[11] = ST_PRESENT;
        b[12..14].copy_from_slice(&3u16.to_le_bytes());
        b[14] = 2;
        b[15] = 1;
        b[16..20].copy_from_slice(&10u32.to_le_bytes());
        b[20..24].copy_from_slice(&20u32.to_le_bytes());
        b[24..28].copy_from_slice(&SRC_TIMER.to_le_bytes());
        b[28..32].copy_from_slice(&30u32.to_le_bytes());
        for (i, f) in [0xffff_ffff_8100_0000u64, 0xffff_ffff_8100_0010, 0x5555_0000]
            .iter()
            .enumerate()
        {
            b[HDR + i * 8..HDR + i * 8 + 8].copy_from_slice(&f.to_le_bytes());
        }
        let mut pool = vec![7];
        let mut bytes = Vec::new();
        let e = decode(&b, &mut pool, &mut bytes).unwrap();
        assert!(!e.has_copy && bytes.is_empty());
        assert_eq!(
            (e.ts, e.kind, e.aux, e.cpu, e.nk, e.nu),
            (123456789, EV_WAKING, 2, 3, 2, 1)
        );
        let w = e.waking();
        assert_eq!(
            (w.waker_tid, w.target_tid, w.source, w.waker_tgid),
            (10, 20, SRC_TIMER, 30)
        );
        assert_eq!(e.frames_at, 1);
        assert_eq!(
            &pool[1..],
            &[0xffff_ffff_8100_0000, 0xffff_ffff_8100_0010, 0x5555_0000]
        );
        // truncated: frames announced but missing
        assert!(decode(&b[..HDR + 8], &mut pool, &mut bytes).is_none());
        // unknown kind
        let mut bad = b.clone();
        bad[8] = 10; // no such kind
        assert!(!KINDS.contains(&10));
        assert!(decode(&bad, &mut pool, &mut bytes).is_none());
        // a user-stack copy block after the frames
        let mut c = b.clone();
        c[11] = ST_PRESENT | UST_COPY;
        for v in [0x5555_0010u64, 0x7ffc_0000, 0x7ffc_0040] {
            c.extend_from_slice(&v.to_le_bytes());
        }
        let block = |len: u32, win_at: &[u64]| {
            let mut h = len.to_le_bytes().to_vec();
            h.extend_from_slice(&(win_at.len() as u32).to_le_bytes());
            for i in 0..UCOPY_WINDOWS as usize {
                h.extend_from_slice(&win_at.get(i).copied().unwrap_or(0).to_le_bytes());
            }
            h
        };
        let regs = c.clone();
        c.extend_from_slice(&block(5, &[]));
        c.extend_from_slice(b"stack");
        let e = decode(&c, &mut pool, &mut bytes).unwrap();
        assert_eq!(e.ust, ST_PRESENT);
        let copy = e.stack_copy(&bytes).unwrap();
        assert_eq!(
            (copy.ip, copy.sp, copy.bp),
            (0x5555_0010, 0x7ffc_0000, 0x7ffc_0040)
        );
        assert_eq!(copy.bytes, b"stack");
        assert!(copy.windows.iter().all(|w| w.1.is_empty()));
        // a block announcing more bytes than the record has
        assert!(decode(&c[..c.len() - 1], &mut pool, &mut bytes).is_none());

        // a copy with a window farther up: the window's bytes come last
        let w = UCOPY_WINDOW as usize;
        let mut d = regs.clone();
        d.extend_from_slice(&block(5 + w as u32, &[0x7ffc_8000]));
        d.extend_from_slice(b"stack");
        d.extend(std::iter::repeat_n(7u8, w));
        let e = decode(&d, &mut pool, &mut bytes).unwrap();
        let copy = e.stack_copy(&bytes).unwrap();
        assert_eq!(copy.bytes, b"stack");
        assert_eq!(copy.windows[0].0, 0x7ffc_8000);
        assert_eq!(copy.windows[0].1, &vec![7u8; w][..]);
        // malformed: more windows than bytes, more windows than there can be
        let mut bad = regs.clone();
        bad.extend_from_slice(&block(5, &[0x7ffc_8000]));
        bad.extend_from_slice(b"stack");
        assert!(decode(&bad, &mut pool, &mut bytes).is_none());
        let mut bad = regs;
        let mut h = block(5 + w as u32, &[0x7ffc_8000]);
        h[4..8].copy_from_slice(&(UCOPY_WINDOWS + 1).to_le_bytes());
        bad.extend_from_slice(&h);
        bad.extend_from_slice(b"stack");
        bad.extend(std::iter::repeat_n(7u8, w));
        assert!(decode(&bad, &mut pool, &mut bytes).is_none());
    }

    /// A comm record (`struct ev_comm`: name and cgroup id after the header) and the views
    /// of the other kinds over the same four words.
    #[test]
    fn decodes_comm_and_views() {
        let mut b = vec![0u8; HDR];
        b[8] = EV_COMM;
        b[9] = CR_EXEC;
        for (i, w) in [41u32, 40, COMM_KTHREAD, 0].iter().enumerate() {
            b[16 + 4 * i..20 + 4 * i].copy_from_slice(&w.to_le_bytes());
        }
        b.extend_from_slice(b"kworker/0:1\0\0\0\0\0");
        b.extend_from_slice(&0x1234_5678_9abc_u64.to_le_bytes());
        let (mut pool, mut bytes) = (Vec::new(), Vec::new());
        let e = decode(&b, &mut pool, &mut bytes).unwrap();
        let t = e.task();
        assert_eq!(
            (e.aux, t.tid, t.tgid, t.flags),
            (CR_EXEC, 41, 40, COMM_KTHREAD)
        );
        assert_eq!(&e.comm[..11], b"kworker/0:1");
        assert_eq!(e.cgid, 0x1234_5678_9abc);
        // without its name the comm record is malformed
        assert!(decode(&b[..HDR + 8], &mut pool, &mut bytes).is_none());
        // the views name the words in the order the C side writes them
        let cg = e.cgroup();
        assert_eq!((cg.tid, cg.tgid, cg.cgid_lo), (41, 40, COMM_KTHREAD));
        let thr = e.throttle();
        assert_eq!(
            (thr.tid, thr.cgid_lo, thr.cgid_hi, thr.hierarchy),
            (41, 40, 1, 0)
        );
        let sw = e.switch();
        assert_eq!((sw.prev_tid, sw.next_tid, sw.prev_state), (41, 40, 1));
    }
}
