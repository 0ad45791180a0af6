//! Heat-map cell values on a hand-made trace with exactly known intervals, and on a
//! synthetic scenario.

use chainrec_format::*;
use chainrec_report::heatmap::{self, ColorMap, HeatmapOptions, Metric, Select};
use chainrec_testkit::events;

const S: u64 = 1_000_000_000;
const MS: u64 = 1_000_000;

/// A switch on CPU 0, the leaving thread sleeping.
fn sw(ts: u64, prev: Tid, next: Tid) -> Event {
    events::switch(ts, 0, prev, STATE_INTERRUPTIBLE, next)
}

/// A task-context waking on CPU 0.
fn wk(ts: u64, waker: Tid, target: Tid) -> Event {
    events::waking(ts, 0, waker, target, WakeContext::Task)
}

/// app (10) and bg (20) alternate on one CPU: app off 1.0-1.3 s and 2.5-3.0 s (open at the
/// end), bg off 1.3-2.5 s (and before 1.0 s, unknown start).
fn trace() -> MemTrace {
    let mut t = MemTrace::default();
    t.meta.start_ns = S;
    t.meta.end_ns = 3 * S;
    t.meta.clock = Clock::Synthetic;
    t.add_tasks(&[
        TaskEntry {
            tid: 10,
            tgid: 10,
            comm: Comm::new("app"),
            kernel_thread: false,
        },
        TaskEntry {
            tid: 20,
            tgid: 20,
            comm: Comm::new("bg"),
            kernel_thread: false,
        },
    ])
    .unwrap();
    for e in [
        sw(S, 10, 20),
        wk(S + 250 * MS, 20, 10),
        sw(S + 300 * MS, 20, 10),
        wk(2 * S + 450 * MS, 10, 20),
        sw(2 * S + 500 * MS, 10, 20),
    ] {
        t.push(&e).unwrap();
    }
    t
}

#[test]
fn offcpu_cells_exact() {
    let t = trace();
    let opts = HeatmapOptions {
        rows: 10,
        colormap: ColorMap::Linear,
        ..Default::default()
    };
    let h = heatmap::compute(&t, &opts).unwrap();
    assert_eq!((h.first_second, h.columns, h.rows), (1, 3, 10));
    // Every bucket of second 1 and 2 is covered by exactly one off-CPU thread.
    for col in 0..2 {
        for row in 0..10 {
            assert_eq!(h.cell(col, row), 100 * MS, "col {col} row {row}");
        }
    }
    // Second 3 starts at the end of the trace: nothing.
    assert!((0..10).all(|r| h.cell(2, r) == 0));
    assert_eq!(
        h.unknown_start, 1,
        "bg's first switch-in has no known switch-out"
    );
    assert_eq!(h.open_at_end, 1, "app is still off-CPU at the end");
    assert_eq!(h.total(), 2000 * MS);
}

#[test]
fn highlight_and_selection() {
    let t = trace();
    let app = Select {
        comm: Some("app".into()),
        tid: None,
    };
    let opts = HeatmapOptions {
        rows: 10,
        highlight: Some(app.clone()),
        ..Default::default()
    };
    let h = heatmap::compute(&t, &opts).unwrap();
    let hl: Vec<(u32, u32)> = (0..3)
        .flat_map(|c| (0..10).map(move |r| (c, r)))
        .filter(|&(c, r)| h.highlighted(c, r) > 0)
        .collect();
    let want: Vec<(u32, u32)> = (0..3)
        .map(|r| (0, r))
        .chain((5..10).map(|r| (1, r)))
        .collect();
    assert_eq!(hl, want);
    assert!(hl.iter().all(|&(c, r)| h.highlighted(c, r) == 100 * MS));

    // Selecting bg only: 1.3-2.5 s.
    let opts = HeatmapOptions {
        rows: 10,
        select: Select {
            comm: None,
            tid: Some(20),
        },
        ..Default::default()
    };
    let h = heatmap::compute(&t, &opts).unwrap();
    assert_eq!(h.total(), 1200 * MS);
    assert_eq!(h.cell(0, 3), 100 * MS);
    assert_eq!(h.cell(0, 2), 0);
    assert_eq!(h.cell(1, 4), 100 * MS);
    assert_eq!(h.cell(1, 5), 0);

    // The SVG: one rect per non-zero cell, highlight in blue, tooltips with values.
    let svg = heatmap::render_svg(
        &heatmap::compute(
            &t,
            &HeatmapOptions {
                rows: 10,
                highlight: Some(app),
                ..Default::default()
            },
        )
        .unwrap(),
        ColorMap::Rank,
        "t",
        false,
    );
    assert_eq!(svg.matches("data-col=").count(), 20);
    assert!(
        svg.contains("second 1 +200..300 ms: 100.0 ms (comm app: 100.0 ms)"),
        "{svg}"
    );
    assert!(svg.contains("second 2 +300..400 ms: 100.0 ms (comm app: 0.0 us)"));
    assert_eq!(
        svg.matches(&format!("fill=\"{}\"", heatmap::cell_fill(1.0, true)))
            .count(),
        8
    );
    assert_eq!(
        svg.matches(&format!("fill=\"{}\"", heatmap::cell_fill(1.0, false)))
            .count(),
        12
    );
}

#[test]
fn oncpu_and_wakeups() {
    let t = trace();
    let opts = HeatmapOptions {
        rows: 10,
        metric: Metric::OnCpu,
        select: Select {
            comm: Some("app".into()),
            tid: None,
        },
        ..Default::default()
    };
    let h = heatmap::compute(&t, &opts).unwrap();
    assert_eq!(h.total(), 1200 * MS); // app on-CPU 1.3-2.5 s
    assert_eq!(h.unknown_start, 1); // app was on-CPU before 1.0 s
    let opts = HeatmapOptions {
        rows: 4,
        metric: Metric::Wakeups,
        ..Default::default()
    };
    let h = heatmap::compute(&t, &opts).unwrap();
    assert_eq!(h.total(), 2);
    assert_eq!(h.cell(0, 1), 1); // 1.25 s
    assert_eq!(h.cell(1, 1), 1); // 2.45 s
}

#[test]
fn synthetic_pipe_relay_period() {
    let t = chainrec_testkit::scenario::generate("pipe-relay", 3000);
    let opts = HeatmapOptions {
        rows: 100,
        metric: Metric::Wakeups,
        select: Select {
            comm: Some("cr-sink".into()),
            tid: None,
        },
        ..Default::default()
    };
    let h = heatmap::compute(&t, &opts).unwrap();
    let wakings = t.events.iter().filter(|e| matches!(e, Event::Waking(w) if t.tables.tasks.get(&w.target_tid).is_some_and(|x| x.comm.as_str() == "cr-sink"))).count() as u64;
    assert!(wakings > 10);
    assert_eq!(h.total(), wakings);
    // A 10 ms period at 10 ms rows: every full second has each row hit exactly once.
    let full: Vec<u32> = (0..h.columns)
        .filter(|&c| (0..100).all(|r| h.cell(c, r) == 1))
        .collect();
    assert!(
        !full.is_empty() || h.columns == 1,
        "cells: {:?}",
        &h.cells[..100]
    );
}

#[test]
fn partial_highlight_is_a_bar() {
    let h = heatmap::Heatmap {
        metric: Metric::Wakeups,
        first_second: 0,
        columns: 1,
        rows: 2,
        cells: vec![100, 0],
        highlight: vec![25, 0],
        unknown_start: 0,
        open_at_end: 0,
        lost_markers: 0,
        selection: "all threads".into(),
        highlight_selection: Some("comm x".into()),
    };
    let svg = heatmap::render_svg(&h, ColorMap::Linear, "t", false);
    // 40 px wide column: a 10 px blue bar, then 30 px orange, one cell group with its tooltip.
    let blue = heatmap::cell_fill(1.0, true);
    let orange = heatmap::cell_fill(1.0, false);
    assert!(
        svg.contains(&format!(
            "<rect x=\"70\" y=\"80\" width=\"10\" height=\"20\" fill=\"{blue}\"/>"
        )),
        "{svg}"
    );
    assert!(svg.contains(&format!(
        "<rect x=\"80\" y=\"80\" width=\"30\" height=\"20\" fill=\"{orange}\"/>"
    )));
    assert!(svg.contains("<title>second 0 +0..500 ms: 100 wakeups (comm x: 25 wakeups)</title>"));
    assert_eq!(svg.matches("data-col=").count(), 1);
}
