//! Golden files: fixed folded inputs in testdata/golden/*.folded must render to exactly the
//! committed *.svg (deterministic output). Regenerate with `CHAINREC_UPDATE_GOLDEN=1`.

use chainrec_report::svg::{self, SvgOptions};
use std::path::PathBuf;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/golden")
}

fn read_folded(name: &str) -> Vec<(String, u64)> {
    let text = std::fs::read_to_string(dir().join(name)).unwrap();
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let (stack, w) = l.rsplit_once(' ').unwrap();
            (stack.to_string(), w.parse().unwrap())
        })
        .collect()
}

fn check(input: &str, golden: &str, opts: &SvgOptions) -> String {
    let folded = read_folded(input);
    let mut out = Vec::new();
    svg::render(&folded, opts, &mut out).unwrap();
    // Same input twice: same bytes.
    let mut again = Vec::new();
    svg::render(&folded, opts, &mut again).unwrap();
    assert!(out == again, "rendering is not deterministic");
    let out = String::from_utf8(out).unwrap();
    let path = dir().join(golden);
    let want = chainrec_testkit::golden::expected(&path, &out);
    assert!(
        out == want,
        "{} differs from the rendering of {input}",
        path.display()
    );
    out
}

/// (title text, fill) of every frame.
fn frames(svg: &str) -> Vec<(String, String)> {
    let mut v = Vec::new();
    for g in svg.split("<g><title>").skip(1) {
        let title = g[..g.find("</title>").unwrap()].to_string();
        let fill_at = g.find("fill=\"").unwrap() + 6;
        let fill = g[fill_at..fill_at + g[fill_at..].find('"').unwrap()].to_string();
        v.push((title, fill));
    }
    v
}

fn fill_of<'a>(frames: &'a [(String, String)], title_prefix: &str) -> Vec<&'a str> {
    frames
        .iter()
        .filter(|(t, _)| t.starts_with(title_prefix))
        .map(|(_, f)| f.as_str())
        .collect()
}

#[test]
fn chain_golden_and_colours() {
    let out = check(
        "chain.folded",
        "chain.svg",
        &SvgOptions::new("Chain graph", "us", true),
    );
    let f = frames(&out);
    // Tooltips: time with unit and percent of the total (11000 us).
    assert!(
        f.iter().any(|(t, _)| t == "sink (10,650 us, 96.82%)"),
        "{:?}",
        &f[..3]
    );
    assert!(f
        .iter()
        .any(|(t, _)| t == "[hardirq: timer] (7,000 us, 63.64%)"));
    assert_eq!(fill_of(&f, "[hardirq: timer]"), vec![svg::METAL_FILL]);
    assert_eq!(fill_of(&f, "[softirq: NET_RX]"), vec![svg::METAL_FILL]);
    assert_eq!(fill_of(&f, "[nmi]"), vec![svg::METAL_FILL]);
    assert_eq!(
        fill_of(&f, "[no stack: wait &lt; 100us]"),
        vec![svg::MARKER_FILL]
    );
    assert_eq!(fill_of(&f, "[missing stack]"), vec![svg::MARKER_FILL]);
    assert_eq!(fill_of(&f, "[lost events]"), vec![svg::LOST_FILL]);
    assert!(fill_of(&f, "-- (")
        .iter()
        .all(|&c| c == svg::LEVEL_SEP_FILL));
    assert!(fill_of(&f, "- (")
        .iter()
        .all(|&c| c == svg::USER_KERNEL_SEP_FILL));
    // The same function at different chain levels gets different hues: pipe_write
    // appears at level 1 (woke sink) and level 2 (woke relay).
    let pw = fill_of(&f, "pipe_write (");
    assert_eq!(pw.len(), 2, "{pw:?}");
    assert_ne!(pw[0], pw[1]);
    let pw_levels: Vec<String> = [1u32, 2]
        .iter()
        .map(|&l| {
            svg::fill_for(
                svg::FrameClass::Frame {
                    level: l,
                    kernel: true,
                },
                "pipe_write",
            )
        })
        .collect();
    let mut got: Vec<String> = pw.iter().map(|s| s.to_string()).collect();
    got.sort();
    let mut want = pw_levels.clone();
    want.sort();
    assert_eq!(got, want);
    // Interactivity is there: search, reset, zoom handlers.
    for needle in [
        "function search(",
        "function zoom(",
        "id=\"search\"",
        "id=\"unzoom\"",
        "Chain graph",
    ] {
        assert!(out.contains(needle), "missing {needle}");
    }
    assert!(out.contains("id=\"chainrec-marker\"") && out.contains("id=\"chainrec-lost\""));
}

#[test]
fn offcpu_golden_escaping_and_flat_layout() {
    let out = check(
        "offcpu.folded",
        "offcpu.svg",
        &SvgOptions::new("Off-CPU <time> & \"stacks\"", "us", false),
    );
    let f = frames(&out);
    assert!(out.contains("Off-CPU &lt;time&gt; &amp; &quot;stacks&quot;"));
    assert!(
        f.iter()
            .any(|(t, _)| t == "accept&lt;T&gt; (800 us, 11.36%)"),
        "{f:?}"
    );
    assert!(f
        .iter()
        .any(|(t, _)| t.starts_with("&quot;quote&quot; &amp; amp (40 us")));
    // Flat layout: user frames all in the level-0 hue family.
    assert_eq!(
        fill_of(&f, "fsync ("),
        vec![svg::fill_for(
            svg::FrameClass::Frame {
                level: 0,
                kernel: false
            },
            "fsync"
        )
        .as_str()]
    );
    assert_eq!(
        fill_of(&f, "do_fsync ("),
        vec![svg::fill_for(
            svg::FrameClass::Frame {
                level: 0,
                kernel: true
            },
            "do_fsync"
        )
        .as_str()]
    );
}

/// The SVG drawn from the engine's structured paths (`render_paths`: kinds and levels from
/// the nodes) is the SVG of its folded text (`render`: classes from `--`/`-`), byte for
/// byte, on every scenario and view; on the busy server, where subtrees are left out
/// before insertion, the drawn frames (titles and fills) are the same.
#[test]
fn structured_paths_draw_like_folded_text() {
    use chainrec_chain::{Config, Engine, FoldedSink, Graph, Unit, View};
    use chainrec_format::synth;
    let mut oncpu_drawn = 0;
    for sc in synth::scenarios() {
        let mut t = chainrec_format::MemTrace::default();
        t.meta.stack_threshold_ns = 100_000;
        let events = if sc.name == "busy-server" {
            200_000
        } else {
            3_000
        };
        let params = synth::SynthParams { events, seed: 1 };
        if sc.name == "oncpu-worker" {
            // Its sampling period, so that waker levels have `[on cpu]` parts.
            t.meta = synth::meta(sc.name, &params, vec![]);
        }
        (sc.generate)(&params, &mut t).unwrap();
        for view in [View::Chains, View::OffCpu, View::Wakeup, View::OffWake] {
            let mut engine = Engine::new(&t.tables, &t.meta, Config::default());
            let mut f = FoldedSink::new(view);
            engine.process(&t.events, &mut f);
            engine.finish(&mut f);
            let graph = Graph::new(f, engine.into_nodes(), &t.tables, &t.meta);
            let lines = graph.lines(Unit::Ns);
            if lines.is_empty() {
                continue;
            }
            let mut opts = SvgOptions::new("t", "ns", view != View::OffCpu);
            opts.root_label = "all: structured".into();
            let mut want = Vec::new();
            svg::render(&lines, &opts, &mut want).unwrap();
            let mut got = Vec::new();
            let st = svg::render_paths(&graph, Unit::Ns, &opts, &mut got).unwrap();
            let (want, got) = (
                String::from_utf8(want).unwrap(),
                String::from_utf8(got).unwrap(),
            );
            assert!(got.contains("<title>all: structured ("));
            oncpu_drawn += got.matches("<title>[on cpu] (").count();
            if st.frames_too_narrow == 0 {
                assert!(got == want, "{} {view:?}: SVGs differ", sc.name);
            } else {
                let (g, w) = (frames(&got), frames(&want));
                let only_got: Vec<_> = g.iter().filter(|f| !w.contains(f)).collect();
                let only_want: Vec<_> = w.iter().filter(|f| !g.contains(f)).collect();
                assert!(
                    only_got.is_empty() && only_want.is_empty() && g.len() == w.len(),
                    "{} {view:?}: drawn only from paths {:?}, only from text {:?}",
                    sc.name,
                    &only_got[..only_got.len().min(3)],
                    &only_want[..only_want.len().min(3)]
                );
            }
        }
    }
    assert!(oncpu_drawn > 0, "no [on cpu] frame drawn");
}

/// A frame name holding `;` (demangled Rust symbols with `[T; N]` do) reads as
/// several frames in the folded text; the SVG drawn from the structured paths splits it the
/// same way (it panicked on a real recording before: one class per node, more pieces).
#[test]
fn names_with_semicolons_draw_like_folded_text() {
    use chainrec_chain::{Config, Engine, FoldedSink, Graph, Unit, View};
    use chainrec_format::synth;
    let sc = synth::scenarios()
        .into_iter()
        .find(|s| s.name == "pipe-relay")
        .expect("the pipe-relay scenario");
    let mut t = chainrec_format::MemTrace::default();
    (sc.generate)(
        &synth::SynthParams {
            events: 3_000,
            seed: 1,
        },
        &mut t,
    )
    .unwrap();
    let renamed: Vec<chainrec_format::SymbolEntry> = t
        .tables
        .symbols
        .iter()
        .filter(|s| s.name.is_some_and(|n| n.ends_with("_loop")))
        .map(|s| chainrec_format::SymbolEntry {
            name: s.name.map(|n| format!("{n}<[u8; 4]>")),
            ..s.to_entry()
        })
        .collect();
    t.tables.symbols.extend(&renamed);
    let mut engine = Engine::new(&t.tables, &t.meta, Config::default());
    let mut f = FoldedSink::new(View::Chains);
    engine.process(&t.events, &mut f);
    engine.finish(&mut f);
    let graph = Graph::new(f, engine.into_nodes(), &t.tables, &t.meta);
    let lines = graph.lines(Unit::Ns);
    assert!(
        lines.iter().any(|(l, _)| l.contains("_loop<[u8; 4]>")),
        "{lines:?}"
    );
    let opts = SvgOptions::new("t", "ns", true);
    let mut want = Vec::new();
    svg::render(&lines, &opts, &mut want).unwrap();
    let mut got = Vec::new();
    svg::render_paths(&graph, Unit::Ns, &opts, &mut got).unwrap();
    assert_eq!(
        frames(&String::from_utf8(got).unwrap()),
        frames(&String::from_utf8(want).unwrap())
    );
}

/// The icicle layout with the options flamegraph.pl users reach for: narrower image,
/// higher minimum width, count name, a root label; colours by depth as in the upright graph.
#[test]
fn chain_inverted_golden() {
    let mut opts = SvgOptions::new("Chain graph (icicle)", "us", true);
    opts.inverted = true;
    opts.width = 900;
    opts.min_width_pct = 2.0;
    opts.count_name = "microseconds".into();
    opts.root_label = "all: 6 waits".into();
    let out = check("chain.folded", "chain-inverted.svg", &opts);
    let f = frames(&out);
    assert!(
        f.iter()
            .any(|(t, _)| t == "all: 6 waits (11,000 microseconds, 100%)"),
        "{f:?}"
    );
    // The 150 us [lost events] frame is 1.4 % of the total: under 2 %, not drawn.
    assert!(!f.iter().any(|(t, _)| t.starts_with("[lost events]")));
    // Same colours as the upright graph.
    let up = check(
        "chain.folded",
        "chain.svg",
        &SvgOptions::new("Chain graph", "us", true),
    );
    let upf = frames(&up);
    let fill = |v: &[(String, String)], p: &str| fill_of(v, p).first().map(|s| s.to_string());
    for name in ["sink ", "relay ", "[hardirq: timer] ", "schedule "] {
        assert_eq!(fill(&f, name), fill(&upf, name), "{name}");
    }
    // Root at the top: its y is the smallest.
    let y_of = |svg: &str, title: &str| -> u64 {
        let g = &svg[svg.find(title).unwrap()..];
        let at = g.find(" y=\"").unwrap() + 4;
        g[at..at + g[at..].find('"').unwrap()].parse().unwrap()
    };
    assert!(y_of(&out, "<title>all: 6 waits") < y_of(&out, "<title>sink ("));
}
