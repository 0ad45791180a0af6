//! What the explorer's checkpoints hold: the checkpoints `chainrec serve` takes of TRACE
//! (every 0.5 s of trace, at most 32), then the bytes of each part of each checkpoint's
//! engine state, measured by cloning that part under a counting allocator.
//!
//! `cargo run --release -p chainrec-chain --example checkpoint_memory -- TRACE`

use chainrec_chain::{Analysis, DamagePolicy, Setup};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// The system allocator, counting the bytes it has out.
struct Counting;
static ALLOCATED: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call forwards to the system allocator with the caller's own arguments;
// the counter is only arithmetic beside it.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        ALLOCATED.fetch_add(l.size(), Ordering::Relaxed);
        // SAFETY: forwarded as is (the caller upholds alloc's contract).
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        ALLOCATED.fetch_sub(l.size(), Ordering::Relaxed);
        // SAFETY: forwarded as is (p came from this allocator with layout l).
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        ALLOCATED.fetch_add(new, Ordering::Relaxed);
        ALLOCATED.fetch_sub(l.size(), Ordering::Relaxed);
        // SAFETY: forwarded as is (p came from this allocator with layout l).
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args()
        .nth(1)
        .ok_or("usage: checkpoint_memory TRACE")?;
    let an = Analysis::open(path.as_ref(), DamagePolicy::Refuse, Arc::new(|_| {}))?;
    let duration = an.end_ns().saturating_sub(an.start_ns());
    let every = (duration / 32).max(500_000_000);
    let before = ALLOCATED.load(Ordering::Relaxed);
    let cps = an.checkpoints(&Setup::default(), every, |_| {})?;
    let held = ALLOCATED.load(Ordering::Relaxed) - before;
    let mb = |b: usize| b as f64 / 1e6;
    println!(
        "{} checkpoints hold {:.1} MB in all ({:.1} MB each on average)",
        cps.len(),
        mb(held),
        mb(held) / cps.len().max(1) as f64
    );
    let heap = || ALLOCATED.load(Ordering::Relaxed);
    let mut totals: Vec<(&str, usize)> = Vec::new();
    for i in 0..cps.len() {
        let parts = cps.part_bytes(i, &heap).unwrap_or_default();
        let line: Vec<String> = parts
            .iter()
            .map(|(n, b)| format!("{n} {:.2}", mb(*b)))
            .collect();
        println!("checkpoint {i:2} (MB): {}", line.join(", "));
        for (n, b) in parts {
            match totals.iter_mut().find(|(t, _)| *t == n) {
                Some(t) => t.1 += b,
                None => totals.push((n, b)),
            }
        }
    }
    println!("sum over checkpoints (MB):");
    for (n, b) in totals {
        println!("  {n:28} {:8.1}", mb(b));
    }
    Ok(())
}
