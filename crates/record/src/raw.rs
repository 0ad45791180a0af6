//! Ring-buffer records as written by `bpf/chainrec.bpf.c` (`struct ev`, 32 bytes, then
//! `nk + nu` u64 frames, or 16 comm bytes for comm records).

#![allow(dead_code)] // mirrors every constant of the C side, used or not

pub const EV_SWITCH: u8 = 0;
pub const EV_WAKING: u8 = 1;
pub const EV_WAKEUP_NEW: u8 = 2;
pub const EV_COMM: u8 = 3;
pub const EV_EXIT: u8 = 4;
pub const EV_OFFCPU: u8 = 5;
/// A task's cgroup changed: a = tid, b = tgid, c/d = the new cgroup id, low/high half.
pub const EV_CGROUP: u8 = 6;

pub const ST_NONE: u8 = 0;
pub const ST_SKIPPED: u8 = 1;
pub const ST_FAILED: u8 = 2;
pub const ST_UPREEMPT: u8 = 3;
pub const ST_PRESENT: u8 = 4;
pub const ST_EXITING: u8 = 5;
pub const ST_EXEC: u8 = 6;
/// Flag in the user status byte: a user-stack copy block follows the frames.
pub const UST_COPY: u8 = 0x80;
/// Size of the copy block's header (`struct ucopy`: ip, sp, bp, len, pad).
pub const UCOPY_HDR: usize = 32;

pub const SRC_HARDIRQ: u32 = 1 << 16;
pub const SRC_SOFTIRQ: u32 = 2 << 16;
pub const SRC_TIMER: u32 = 3 << 16;
/// With [`SRC_SOFTIRQ`]: the vector ran in ksoftirqd.
pub const SRC_SOFTIRQ_KSOFTIRQD: u32 = 0x8000;
/// With [`SRC_SOFTIRQ`]: no softirq_entry seen on that CPU yet (vector unknown).
pub const SRC_SOFTIRQ_UNKNOWN: u32 = 0x7fff;

/// Waking context byte of a softirq run by the task itself (= `WakeContext::SoftIrqTask`).
pub const CTX_SOFTIRQ_TASK: u8 = 4;

/// Counter indexes of the per-CPU `counters` map.
pub const C_RB_FULL: u32 = 0;
pub const C_SKIP_OFFCPU: u32 = 1;
pub const C_SKIP_WAKER: u32 = 2;
pub const C_USER_PENDING_OVERWRITTEN: u32 = 3;
pub const C_CTX_FALLBACK: u32 = 4;
pub const C_TW_FAILED: u32 = 5;
pub const C_UWALK_SHORT: u32 = 6;
pub const C_UWALK_MISMATCH: u32 = 7;
pub const C_USER_AT_SWITCH: u32 = 8;
pub const C_USER_AT_EXIT: u32 = 9;
pub const C_USER_AT_EXEC: u32 = 10;
pub const C_SIRQ_TASK: u32 = 11;
pub const C_SIRQ_IRQ: u32 = 12;
pub const C_SIRQ_KSOFTIRQD: u32 = 13;
pub const C_SIRQ_UNTRACKED: u32 = 14;
/// User stacks taken at a switch-out because the wait was predicted long.
pub const C_USTASH_TAKEN: u32 = 15;
/// ... and used (the wait was long).
pub const C_USTASH_USED: u32 = 16;
/// Long waits of user tasks predicted short (their user stack came by the task_work path).
pub const C_USTASH_MISSED: u32 = 17;
/// Lazy user halves reserved in the ring buffer at their maximal size because the per-CPU
/// scratch was held by a preempted program (the others are output at their real size).
pub const C_UHALF_INPLACE: u32 = 18;
/// User-stack copies not taken because the ring buffer was more than half full (the
/// stack keeps its frame-pointer walk).
pub const C_UCOPY_BUSY: u32 = 19;
/// `--profile-bpf`: section `p` has its ns at `C_PROF + 2p` and its entry count after it.
pub const C_PROF: u32 = 20;
/// The profiled sections, in `P_*` order of the C side.
pub const P_NAMES: [&str; 20] = [
    "on_switch",
    "switch: task storage (seen)",
    "switch: user half at switch-out",
    "switch: kernel stack of next",
    "switch: arm user stack",
    "switch: output off-CPU half",
    "switch: eager stacks of prev",
    "on_waking",
    "waking: context",
    "waking: waker kernel stack",
    "waking: waker user stack",
    "waking: output",
    "task_work callback",
    "callback: user stack",
    "arm: task_work kfunc",
    "switch: stack-less record",
    "switch: user stack of prev (predicted)",
    "switch: kernel stack of next, 1 frame",
    "waking: waker kernel stack, 1 frame",
    "switch: cgroup of prev",
];
/// Number of counters (`C_NR` on the C side).
pub const C_NR: usize = C_PROF as usize + 2 * P_NAMES.len();

pub const HDR: usize = 32;

/// One decoded record; frames live in a shared pool (`frames_at..frames_at+nk+nu`).
#[derive(Clone, Copy, Debug, Default)]
pub struct RawEv {
    pub ts: u64,
    pub kind: u8,
    pub aux: u8,
    pub kst: u8,
    pub ust: u8,
    pub cpu: u16,
    pub nk: u8,
    pub nu: u8,
    pub a: u32,
    pub b: u32,
    pub c: u32,
    pub d: u32,
    pub frames_at: u32,
    pub comm: [u8; 16],
    /// Comm records: the task's cgroup id (0: not tracked).
    pub cgid: u64,
    /// A user-stack copy came with the record (`UST_COPY`, stripped from `ust`): the user
    /// registers and `copy_len` bytes at `copy_at` in the batch's byte pool.
    pub has_copy: bool,
    pub uip: u64,
    pub usp: u64,
    pub ubp: u64,
    pub copy_at: u32,
    pub copy_len: u32,
}

impl RawEv {
    /// The user stack copy of this record, if it has one.
    pub fn stack_copy<'a>(&self, bytes: &'a [u8]) -> Option<crate::unwind::StackCopy<'a>> {
        if !self.has_copy {
            return None;
        }
        let at = self.copy_at as usize;
        Some(crate::unwind::StackCopy {
            ip: self.uip,
            sp: self.usp,
            bp: self.ubp,
            bytes: bytes.get(at..at + self.copy_len as usize)?,
        })
    }
}

fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}

fn u64_at(b: &[u8], o: usize) -> u64 {
    b.get(o..o + 8)
        .and_then(|s| s.try_into().ok())
        .map_or(0, u64::from_le_bytes)
}

/// Decode one record, appending its frames to `pool` and its user-stack copy, if any, to
/// `bytes`. None when malformed.
pub fn decode(data: &[u8], pool: &mut Vec<u64>, bytes: &mut Vec<u8>) -> Option<RawEv> {
    if data.len() < HDR {
        return None;
    }
    let mut e = RawEv {
        ts: u64::from_le_bytes(data[0..8].try_into().ok()?),
        kind: data[8],
        aux: data[9],
        kst: data[10],
        ust: data[11],
        cpu: u16::from_le_bytes([data[12], data[13]]),
        nk: data[14],
        nu: data[15],
        a: u32_at(data, 16),
        b: u32_at(data, 20),
        c: u32_at(data, 24),
        d: u32_at(data, 28),
        frames_at: pool.len() as u32,
        comm: [0; 16],
        ..RawEv::default()
    };
    if e.kind > EV_CGROUP
        && e.kind != crate::samples::EV_SAMPLE
        && e.kind != crate::throttle::EV_THROTTLE
    {
        return None;
    }
    if e.kind == EV_COMM {
        if data.len() < HDR + 16 {
            return None;
        }
        e.comm.copy_from_slice(&data[HDR..HDR + 16]);
        if let Some(b) = data.get(HDR + 16..HDR + 24) {
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
        if data.len() < at + UCOPY_HDR {
            return None;
        }
        let len = u32_at(data, at + 24) as usize;
        let stack = data.get(at + UCOPY_HDR..at + UCOPY_HDR + len)?;
        e.has_copy = true;
        e.uip = u64_at(data, at);
        e.usp = u64_at(data, at + 8);
        e.ubp = u64_at(data, at + 16);
        e.copy_at = bytes.len() as u32;
        e.copy_len = len as u32;
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
        assert_eq!((e.a, e.b, e.c, e.d), (10, 20, SRC_TIMER, 30));
        assert_eq!(e.frames_at, 1);
        assert_eq!(
            &pool[1..],
            &[0xffff_ffff_8100_0000, 0xffff_ffff_8100_0010, 0x5555_0000]
        );
        // truncated: frames announced but missing
        assert!(decode(&b[..HDR + 8], &mut pool, &mut bytes).is_none());
        // unknown kind
        let mut bad = b.clone();
        bad[8] = 9;
        assert!(decode(&bad, &mut pool, &mut bytes).is_none());
        // a user-stack copy block after the frames
        let mut c = b.clone();
        c[11] = ST_PRESENT | UST_COPY;
        for v in [0x5555_0010u64, 0x7ffc_0000, 0x7ffc_0040] {
            c.extend_from_slice(&v.to_le_bytes());
        }
        c.extend_from_slice(&5u32.to_le_bytes());
        c.extend_from_slice(&0u32.to_le_bytes());
        c.extend_from_slice(b"stack");
        let e = decode(&c, &mut pool, &mut bytes).unwrap();
        assert_eq!(e.ust, ST_PRESENT);
        let copy = e.stack_copy(&bytes).unwrap();
        assert_eq!(
            (copy.ip, copy.sp, copy.bp),
            (0x5555_0010, 0x7ffc_0000, 0x7ffc_0040)
        );
        assert_eq!(copy.bytes, b"stack");
        // a block announcing more bytes than the record has
        assert!(decode(&c[..c.len() - 1], &mut pool, &mut bytes).is_none());
    }
}
