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
    if std::env::var_os("CHAINREC_UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &out).unwrap();
    }
    let want = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (CHAINREC_UPDATE_GOLDEN=1 writes it)",
            path.display()
        )
    });
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
