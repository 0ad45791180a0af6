//! Real-browser test of the chain-graph SVG: headless Debian chromium, driven over the
//! DevTools protocol on a pipe (`--remote-debugging-pipe`: commands on fd 3, replies on
//! fd 4, NUL-terminated JSON). It loads the SVG, clicks a frame with real mouse events
//! (zoom), clicks "Search" and answers the prompt (highlight), takes screenshots and checks
//! both the DOM state and the pixels.
//!
//! Skips (loudly) when /usr/bin/chromium is missing, unless CHAINREC_REQUIRE_BROWSER=1.
//! `CHAINREC_BROWSER_SVG=path` additionally checks an existing SVG (e.g. the demo's
//! chain.svg): it must load, zoom on its widest second-level frame and search.

use chainrec_report::svg::{self, SvgOptions};
use chainrec_testkit::devtools::{browser_available, Browser, H, W};
use chainrec_testkit::scratch::ScratchDir;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::Duration;

thread_local! {
    /// fg:x of the frame to zoom, when its name is not unique.
    static ZOOM_X: std::cell::Cell<Option<u64>> = const { std::cell::Cell::new(None) };
}
fn parse_rgb(fill: &str) -> (u8, u8, u8) {
    let inner = fill.trim_start_matches("rgb(").trim_end_matches(')');
    let v: Vec<u8> = inner
        .split(',')
        .map(|p| p.trim().parse().unwrap())
        .collect();
    (v[0], v[1], v[2])
}

fn count_pixels(
    rgb: &[u8],
    want: (u8, u8, u8),
    x0: u32,
    y0: u32,
    x1: u32,
    y1: u32,
    w: u32,
) -> usize {
    let mut n = 0;
    for y in y0..y1 {
        for x in x0..x1 {
            let i = ((y * w + x) * 3) as usize;
            if (rgb[i], rgb[i + 1], rgb[i + 2]) == want {
                n += 1;
            }
        }
    }
    n
}

/// What the page reports about one frame: JS helper installed into the page.
const HELPERS: &str = r#"
window.__frame = function(prefix, fgx) {
  for (const g of document.querySelectorAll('#frames g')) {
    const t = g.querySelector('title').textContent;
    if (t.startsWith(prefix) && (fgx === undefined || g.querySelector('rect').getAttribute('fg:x') === String(fgx))) {
      const r = g.querySelector('rect');
      if (window.__scroll) { r.scrollIntoView({block: 'center', inline: 'nearest'}); }
      const b = r.getBoundingClientRect();
      return {title: t, x: b.x, y: b.y, w: b.width, h: b.height, fill: r.getAttribute('fill'),
              hidden: g.classList.contains('hide')};
    }
  }
  return null;
};
window.__svgWidth = function() { return document.querySelector('#frames').getBoundingClientRect().width; };
"#;

/// Load `svg_path`, zoom on the frame whose title starts with `zoom_prefix`, search `term`.
/// Returns (matched text, number of search-coloured frames).
fn exercise(
    tag: &str,
    svg_path: &Path,
    zoom_prefix: &str,
    term: &str,
    hidden_after_zoom: Option<&str>,
) -> String {
    let mut b = Browser::launch(tag);
    let url = format!("file://{}", svg_path.canonicalize().unwrap().display());
    b.call("Page.navigate", json!({"url": url}));
    b.wait_event("Page.loadEventFired");
    b.eval(HELPERS);
    let root_w = b.eval("__svgWidth()").as_f64().unwrap();
    assert!(root_w > 1000.0, "frames area is {root_w} px wide");

    // --- zoom: a real click on the frame ---
    let fgx = ZOOM_X
        .with(|z| z.get())
        .map(|x| format!(", {x}"))
        .unwrap_or_default();
    // Bring the frame into the viewport (deep graphs are taller than the window).
    b.eval("window.__scroll = true");
    let before = b.eval(&format!("__frame({zoom_prefix:?}{fgx})"));
    b.eval("window.__scroll = false");
    assert!(
        before.is_object(),
        "no frame titled {zoom_prefix:?} in {}",
        svg_path.display()
    );
    let bw = before["w"].as_f64().unwrap();
    assert!(
        bw < root_w - 3.0,
        "frame {zoom_prefix:?} is already full width"
    );
    assert_eq!(
        b.eval("document.getElementById('unzoom').classList.contains('hide')"),
        json!(true)
    );
    let (cx, cy) = (
        before["x"].as_f64().unwrap() + bw / 2.0,
        before["y"].as_f64().unwrap() + 5.0,
    );
    b.click(cx, cy);
    b.eval("window.__scroll = true");
    let after = b.eval(&format!("__frame({zoom_prefix:?}{fgx})"));
    b.eval("window.__scroll = false");
    let aw = after["w"].as_f64().unwrap();
    assert!(
        aw > 0.98 * root_w && aw > bw + 2.0,
        "after the click {zoom_prefix:?} is {aw} px wide, want ~{root_w}"
    );
    assert_eq!(
        b.eval("document.getElementById('unzoom').classList.contains('hide')"),
        json!(false)
    );
    if let Some(h) = hidden_after_zoom {
        assert_eq!(
            b.eval(&format!("__frame({h:?}).hidden")),
            json!(true),
            "{h} should be hidden by the zoom"
        );
    }
    // Pixels: the zoomed frame's colour now fills (nearly) its whole row.
    let (w, h, rgb) = b.screenshot();
    assert_eq!((w, h), (W, H));
    let fill = after["fill"].as_str().unwrap().to_string();
    if fill.starts_with("rgb(") {
        let y = (after["y"].as_f64().unwrap() + after["h"].as_f64().unwrap() / 2.0) as u32;
        let n = count_pixels(&rgb, parse_rgb(&fill), 0, y, w, y + 1, w);
        assert!(
            n as f64 > 0.5 * root_w,
            "zoomed frame colour {fill} covers {n} px of its row"
        );
    }

    // --- reset zoom: click "Reset Zoom" (at the top of the image) ---
    b.eval("window.scrollTo(0, 0)");
    let r = b.eval("(() => { const b = document.getElementById('unzoom').getBoundingClientRect(); return [b.x + b.width/2, b.y + b.height/2]; })()");
    b.click(r[0].as_f64().unwrap(), r[1].as_f64().unwrap());
    let reset = b.eval(&format!("__frame({zoom_prefix:?}{fgx})"));
    assert!(
        (reset["w"].as_f64().unwrap() - bw).abs() < 1.0,
        "reset did not restore the width"
    );

    // --- search: click "Search", answer the prompt ---
    let s = b.eval("(() => { const b = document.getElementById('search').getBoundingClientRect(); return [b.x + b.width/2, b.y + b.height/2]; })()");
    let (sx, sy) = (s[0].as_f64().unwrap(), s[1].as_f64().unwrap());
    // The prompt blocks the page, so the mouse release waits on it: send press and release
    // without waiting, then answer the dialog.
    b.click_nowait(sx, sy);
    let dialog = b.wait_event("Page.javascriptDialogOpening");
    assert_eq!(dialog["params"]["type"], "prompt");
    b.call(
        "Page.handleJavaScriptDialog",
        json!({"accept": true, "promptText": term}),
    );
    let matched = b
        .eval("document.getElementById('matched').textContent")
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        matched.starts_with("Matched: "),
        "matched text is {matched:?}"
    );
    let highlighted = b
        .eval("Array.from(document.querySelectorAll('#frames rect')).filter(r => r.getAttribute('fill') === 'rgb(230,0,230)').length")
        .as_u64()
        .unwrap();
    let expected = b
        .eval(&format!(
            "Array.from(document.querySelectorAll('#frames g title')).filter(t => new RegExp({term:?}).test(t.textContent.replace(/ \\([^(]*\\)$/, ''))).length"
        ))
        .as_u64()
        .unwrap();
    assert!(expected > 0, "search term {term:?} matches nothing");
    assert_eq!(highlighted, expected, "frames highlighted by the search");
    // The widest match (the first in the DOM may be a sliver in a tall graph).
    b.eval("Array.from(document.querySelectorAll('#frames rect')).filter(r => r.getAttribute('fill') === 'rgb(230,0,230)').reduce((a, r) => r.getBoundingClientRect().width > a.getBoundingClientRect().width ? r : a).scrollIntoView({block: 'center'})");
    let (w, _h, rgb) = b.screenshot();
    let magenta = count_pixels(&rgb, (230, 0, 230), 0, 0, w, H, w);
    // What the DOM says should be drawn: the highlighted rectangles' area inside the
    // viewport, each less a pixel of each edge (anti-aliased), those under 2 px left out.
    let drawn = b
        .eval(
            "Array.from(document.querySelectorAll('#frames rect'))\
               .filter(r => r.getAttribute('fill') === 'rgb(230,0,230)')\
               .map(r => r.getBoundingClientRect())\
               .map(b => [Math.min(b.right, window.innerWidth) - Math.max(b.left, 0),\
                          Math.min(b.bottom, window.innerHeight) - Math.max(b.top, 0)])\
               .map(([w, h]) => Math.max(0, Math.floor(w) - 1) * Math.max(0, Math.floor(h) - 1))\
               .reduce((a, b) => a + b, 0)",
        )
        .as_f64()
        .unwrap() as usize;
    assert!(
        drawn > 0,
        "no highlighted frame of 2 px or more in view after scrolling to one"
    );
    eprintln!("{tag}: search {term:?}: {magenta} search-coloured pixels, {drawn} expected");
    assert!(
        magenta * 2 >= drawn,
        "only {magenta} search-coloured pixels in the screenshot, the DOM has {drawn} in view"
    );
    matched
}

#[test]
fn chain_svg_zoom_search_in_chromium() {
    if !browser_available() {
        return;
    }
    let text = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/golden/chain.folded"),
    )
    .unwrap();
    let folded: Vec<(String, u64)> = text
        .lines()
        .map(|l| {
            let (s, w) = l.rsplit_once(' ').unwrap();
            (s.to_string(), w.parse().unwrap())
        })
        .collect();
    let dir = ScratchDir::new("browser");
    let path = dir.file("chain.svg");
    let mut out = Vec::new();
    svg::render(
        &folded,
        &SvgOptions::new("Chain graph", "us", true),
        &mut out,
    )
    .unwrap();
    std::fs::write(&path, out).unwrap();
    // Zoom into relay's level (9000 of 11000 us), which hides the poll branch; search pipe_write
    // (2 frames: 9000 us at level 1 inside 11000 us total).
    let matched = exercise(
        "golden",
        &path,
        "relay_loop (",
        "pipe_write",
        Some("poll ("),
    );
    assert_eq!(matched, "Matched: 81.8%");
}

#[test]
fn external_svg_in_chromium() {
    let Some(path) = std::env::var_os("CHAINREC_BROWSER_SVG") else {
        eprintln!("SKIPPED: external_svg_in_chromium: set CHAINREC_BROWSER_SVG=path/to/chain.svg");
        return;
    };
    if !browser_available() {
        return;
    }
    exercise_any(&PathBuf::from(path), "external");
}

/// The README's main command, end to end: `chainrec demo` (BPF recording of the chain
/// workload), then its chain.svg in chromium. Needs root; skips loudly otherwise unless
/// CHAINREC_REQUIRE_BPF=1.
#[test]
fn demo_svg_in_chromium() {
    if !chainrec_testkit::bpf::can_record("demo_svg_in_chromium") {
        return;
    }
    if !browser_available() {
        return;
    }
    let dir = ScratchDir::new("demo");
    let opts = chainrec_demo::DemoOptions {
        dir: dir.path().to_path_buf(),
        duration: Duration::from_secs(2),
        period: Duration::from_millis(2),
        command_line: vec!["browser-test".into()],
    };
    let o = chainrec_demo::run(&opts).expect("chainrec demo");
    assert!(
        o.messages > 100,
        "workload passed only {} messages",
        o.messages
    );
    let top = o.top.expect("a top chain");
    // The workload's main chain: cr-sink <- cr-relay <- cr-timer <- [hardirq: timer].
    let who: Vec<&str> = top.chain.iter().map(|l| l.who.as_str()).collect();
    assert!(who[0].starts_with("cr-sink"), "top chain {who:?}");
    assert!(
        who.iter().any(|w| w.starts_with("cr-relay")),
        "top chain {who:?}"
    );
    assert!(
        who.iter().any(|w| w.starts_with("cr-timer")),
        "top chain {who:?}"
    );
    let folded = std::fs::read_to_string(&o.folded).unwrap();
    assert!(folded
        .lines()
        .all(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap() > 0));
    let svg = std::fs::read_to_string(&o.svg).unwrap();
    for needle in ["cr-sink", "cr-relay", "cr-timer", "[hardirq: timer]"] {
        assert!(
            svg.contains(needle),
            "{needle} missing from the demo's chain.svg"
        );
    }
    exercise_any(&o.svg, "demo");
}

/// Zoom into a frame of any chain SVG and search for it.
fn exercise_any(path: &Path, tag: &str) {
    let text = std::fs::read_to_string(path).unwrap();
    let total: u64 = {
        let t = text.find("total_samples=\"").unwrap() + 15;
        text[t..t + text[t..].find('"').unwrap()].parse().unwrap()
    };
    // A frame to zoom into: the widest under half the width if one is over 1%, else the
    // widest under 99%. Identified by name and start offset (fg:x).
    let mut cands: Vec<(u64, u64, String)> = Vec::new();
    for g in text.split("<g><title>").skip(1) {
        let title = &g[..g.find("</title>").unwrap()];
        let num = |key: &str| -> u64 {
            let p = g.find(key).unwrap() + key.len();
            g[p..p + g[p..].find('"').unwrap()].parse().unwrap()
        };
        let (w, x) = (num("fg:w=\""), num("fg:x=\""));
        let name = title.rsplit_once(" (").unwrap().0;
        if name == "all" || name.starts_with('-') || name.contains('&') || name.contains('[') {
            continue;
        }
        cands.push((w, x, name.to_string()));
    }
    cands.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let pick = cands
        .iter()
        .find(|c| c.0 * 2 < total && c.0 * 100 > total)
        .or_else(|| cands.iter().find(|c| c.0 * 100 < total * 99))
        .expect("no frame to zoom into");
    let (_, x, name) = pick.clone();
    ZOOM_X.with(|z| z.set(Some(x)));
    let term = name.replace(|c: char| !c.is_ascii_alphanumeric() && c != '_', ".");
    let matched = exercise(tag, path, &format!("{name} ("), &term, None);
    eprintln!(
        "{}: zoomed {name:?}, search {term:?}: {matched}",
        path.display()
    );
}

/// The heat map in chromium: the plot fills the canvas (a short trace gets wide columns),
/// the colour legend is drawn, the highlight shows. The screenshot is kept in the scratch
/// directory (its path is printed) to be looked at.
#[test]
fn heatmap_in_chromium() {
    use chainrec_report::heatmap::{self, ColorMap, HeatmapOptions, Select};
    if !browser_available() {
        return;
    }
    let t = chainrec_testkit::scenario::generate("pipe-relay", 4000);
    let opts = HeatmapOptions {
        rows: 50,
        highlight: Some(Select::comm("relay").unwrap()),
        ..Default::default()
    };
    let h = heatmap::compute(&t, &opts).unwrap();
    assert!(h.columns <= 10, "a short trace: {} seconds", h.columns);
    let svg_text = heatmap::render_svg(&h, ColorMap::Rank, "pipe-relay heat map", false);
    let dir = chainrec_testkit::scratch::dir("heatmap-browser");
    let path = dir.join("heatmap.svg");
    std::fs::write(&path, &svg_text).unwrap();
    let mut b = Browser::launch("heatmap");
    b.call(
        "Page.navigate",
        json!({"url": format!("file://{}", path.display())}),
    );
    b.wait_event("Page.loadEventFired");
    let bbox = |b: &mut Browser, id: &str| -> (f64, f64, f64, f64) {
        let r = b.eval(&format!(
            "(() => {{ const r = document.getElementById('{id}').getBoundingClientRect(); return [r.x, r.y, r.width, r.height]; }})()"
        ));
        let v: Vec<f64> = r
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect();
        (v[0], v[1], v[2], v[3])
    };
    let cells = bbox(&mut b, "cells");
    let legend = bbox(&mut b, "legend");
    // The plot uses the canvas: cells span at least 85 % of the 900 px plot width and
    // 90 % of its 500 px height; the legend is right of them, inside the window.
    assert!(cells.2 > 0.85 * 900.0, "cells span {} px", cells.2);
    assert!(cells.3 > 0.9 * 500.0, "cells span {} px high", cells.3);
    assert!(legend.0 > cells.0 + cells.2 && legend.0 + legend.2 <= W as f64);
    let png = b.screenshot_png();
    let shot = dir.join("heatmap.png");
    std::fs::write(&shot, &png).unwrap();
    eprintln!("heat-map screenshot: {}", shot.display());
    let (w, _h, rgb) = b.screenshot();
    // Pixels: the legend's darkest swatch and the highlight colour are drawn.
    let dark = parse_rgb(&heatmap::cell_fill(1.0, false));
    let n = count_pixels(
        &rgb,
        dark,
        legend.0 as u32,
        legend.1 as u32,
        (legend.0 + legend.2) as u32,
        (legend.1 + legend.3) as u32,
        w,
    );
    assert!(n > 300, "{n} px of the darkest legend colour");
    let non_white = (cells.1 as u32..(cells.1 + cells.3) as u32)
        .map(|y| {
            (cells.0 as u32..(cells.0 + cells.2) as u32)
                .filter(|&x| {
                    let i = ((y * w + x) * 3) as usize;
                    rgb[i..i + 3] != [255, 255, 255]
                })
                .count()
        })
        .sum::<usize>();
    let area = (cells.2 * cells.3) as usize;
    assert!(
        non_white * 2 > area,
        "only {non_white} of {area} plot pixels are coloured"
    );
}
