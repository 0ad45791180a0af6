//! Interactive chain-graph SVG: inferno draws the flame graph (layout, search, zoom,
//! reset, tooltips); this module adds what it lacks for chain graphs — colours that
//! depend on a frame's *position* in the chain (one hue per level, a lighter shade for
//! kernel frames, metal nodes and "no stack" markers in their own colours), which
//! inferno's name-keyed palettes cannot express.
//!
//! How: we merge the folded lines exactly as inferno does (sorted lines, frames
//! identified by depth and start offset), classify each frame from its ancestors, run
//! inferno with a fixed palette, then rewrite each frame's `fill` by its (depth, start).
//! Output is byte-for-byte deterministic for a given input.

use crate::ReportError;
use inferno::flamegraph::{self, color::BasicPalette, Options, Palette};
use std::collections::{BTreeMap, HashMap};
use std::io::Write;

/// How to draw a flame graph.
#[derive(Clone, Debug)]
pub struct SvgOptions {
    /// Title at the top.
    pub title: String,
    /// Unit of the weights (`us`, `ns`, `ms`), shown in tooltips and the legend.
    pub unit: String,
    /// Chain layout: a new hue after every `--` frame (CHAINS.md "Folded layout").
    /// Off: the whole stack is one level (separators, metal and markers still distinct).
    pub chain_layout: bool,
    /// Image width in pixels.
    pub width: usize,
}

impl SvgOptions {
    /// Options with the default width (1200 px).
    pub fn new(title: &str, unit: &str, chain_layout: bool) -> Self {
        SvgOptions {
            title: title.to_string(),
            unit: unit.to_string(),
            chain_layout,
            width: 1200,
        }
    }
}

/// What a frame is, from its own name and its position in the chain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameClass {
    /// An ordinary frame of chain level `level` (0 = the blocked thread's off-CPU stack).
    Frame {
        /// Chain level: number of `--` frames below it.
        level: u32,
        /// Kernel part of the level (after the `-` for level 0, before it for wakers).
        kernel: bool,
    },
    /// `-` (user/kernel) separator.
    UserKernelSeparator,
    /// `--` (level) separator.
    LevelSeparator,
    /// Metal node: `[hardirq: ...]`, `[softirq: ...]`, `[nmi]`, `[idle]`, ...
    Metal,
    /// A marker for missing data: `[no stack: ...]`, `[missing stack]`, `[unknown]`, ...
    Marker,
    /// `[lost events]` and other loss markers.
    Lost,
    /// `[run queue]`: the level above waited for a CPU (the frame above it names who held
    /// the CPU).
    RunQueue,
    /// `[on cpu]`: the frames above it (up to the next `--`) are sampled on-CPU stacks.
    OnCpu,
    /// `[off cpu]` (`hotcold`): the frames above it are an off-CPU wait and its chain.
    OffCpu,
    /// A frame of a sampled on-CPU stack (after `[on cpu]`): warm hues.
    Hot {
        /// Kernel part (after the `-`).
        kernel: bool,
    },
}

/// Hue (degrees) of each chain level; cycles after the last.
pub const LEVEL_HUES: [f64; 6] = [215.0, 30.0, 120.0, 275.0, 55.0, 180.0];
/// Fill of metal nodes.
pub const METAL_FILL: &str = "rgb(204,36,36)";
/// Fill of "no stack" markers (a hatched pattern defined in the SVG).
pub const MARKER_FILL: &str = "url(#chainrec-marker)";
/// Fill of loss markers (a red hatched pattern defined in the SVG).
pub const LOST_FILL: &str = "url(#chainrec-lost)";
/// Fill of `[run queue]` frames: waiting for a CPU, not for an event.
pub const RUNQ_FILL: &str = "rgb(150,110,200)";
/// Fill of `--` separators.
pub const LEVEL_SEP_FILL: &str = "rgb(110,110,110)";
/// Fill of `-` separators.
pub const USER_KERNEL_SEP_FILL: &str = "rgb(175,175,175)";
/// Fill of `[on cpu]` frames.
pub const ONCPU_FILL: &str = "rgb(222,82,30)";
/// Fill of `[off cpu]` frames.
pub const OFFCPU_FILL: &str = "rgb(60,110,200)";
/// Hue (degrees) of sampled on-CPU frames: red to yellow, apart from every level hue.
pub const HOT_HUE: f64 = 18.0;

const DEFS: &str = concat!(
    "<defs>",
    "<pattern id=\"chainrec-marker\" width=\"8\" height=\"8\" patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\">",
    "<rect width=\"8\" height=\"8\" fill=\"rgb(250,250,250)\"/><rect width=\"4\" height=\"8\" fill=\"rgb(190,190,190)\"/></pattern>",
    "<pattern id=\"chainrec-lost\" width=\"8\" height=\"8\" patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\">",
    "<rect width=\"8\" height=\"8\" fill=\"rgb(255,235,235)\"/><rect width=\"4\" height=\"8\" fill=\"rgb(230,40,40)\"/></pattern>",
    "</defs>"
);

/// Classify a frame name alone (separators, metal, markers); `None` for ordinary frames.
pub fn classify_name(name: &str) -> Option<FrameClass> {
    match name {
        "--" => return Some(FrameClass::LevelSeparator),
        "-" => return Some(FrameClass::UserKernelSeparator),
        _ => {}
    }
    let inner = name.strip_prefix('[')?.strip_suffix(']')?;
    match inner {
        "run queue" => return Some(FrameClass::RunQueue),
        "on cpu" => return Some(FrameClass::OnCpu),
        "off cpu" => return Some(FrameClass::OffCpu),
        _ => {}
    }
    let head = inner.split([':', ' ']).next().unwrap_or("");
    Some(match head {
        "hardirq" | "softirq" | "nmi" | "idle" | "irq" | "interrupt" | "metal" => FrameClass::Metal,
        _ if inner.starts_with("lost") => FrameClass::Lost,
        _ => FrameClass::Marker,
    })
}

/// Classify every frame of one stack (root first), given the layout.
pub fn classify_stack(frames: &[&str], chain_layout: bool) -> Vec<FrameClass> {
    let mut level = 0u32;
    let mut segment = 0u32;
    // After `[on cpu]`: sampled frames, "user;-;kernel" root first, until the next `--`.
    let mut hot = false;
    frames
        .iter()
        .map(|f| {
            let class = classify_name(f).unwrap_or(if hot {
                FrameClass::Hot {
                    kernel: segment > 0,
                }
            } else {
                FrameClass::Frame {
                    level,
                    // Level 0 is "comm;user;-;kernel"; wakers are "kernel;-;user;comm".
                    kernel: if level == 0 {
                        segment > 0
                    } else {
                        segment == 0
                    },
                }
            });
            match class {
                FrameClass::LevelSeparator => {
                    hot = false;
                    if chain_layout {
                        level += 1;
                        segment = 0;
                    }
                }
                FrameClass::OnCpu => {
                    hot = true;
                    segment = 0;
                }
                FrameClass::UserKernelSeparator => segment += 1,
                _ => {}
            }
            class
        })
        .collect()
}

/// FNV-1a: a stable hash (std's hasher is not guaranteed stable across releases).
fn fnv(s: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

fn hsl(h: f64, s: f64, l: f64) -> (u8, u8, u8) {
    let c = (1.0 - (2.0 * l - 1.0).abs()) * s;
    let hp = (h % 360.0) / 60.0;
    let x = c * (1.0 - (hp % 2.0 - 1.0).abs());
    let (r, g, b) = match hp as u32 {
        0 => (c, x, 0.0),
        1 => (x, c, 0.0),
        2 => (0.0, c, x),
        3 => (0.0, x, c),
        4 => (x, 0.0, c),
        _ => (c, 0.0, x),
    };
    let m = l - c / 2.0;
    let f = |v: f64| ((v + m) * 255.0).round().clamp(0.0, 255.0) as u8;
    (f(r), f(g), f(b))
}

/// The fill of a frame (deterministic: a function of the class and the name).
pub fn fill_for(class: FrameClass, name: &str) -> String {
    match class {
        FrameClass::Frame { level, kernel } => {
            let h = fnv(name);
            let v1 = (h & 0xffff) as f64 / 65535.0;
            let v2 = ((h >> 16) & 0xffff) as f64 / 65535.0;
            let hue = LEVEL_HUES[level as usize % LEVEL_HUES.len()] + (v2 - 0.5) * 16.0;
            let (sat, light) = if kernel {
                (0.55 + 0.25 * v1, 0.70 + 0.08 * v2)
            } else {
                (0.65 + 0.25 * v1, 0.52 + 0.08 * v2)
            };
            let (r, g, b) = hsl(hue + 360.0, sat, light);
            format!("rgb({r},{g},{b})")
        }
        FrameClass::UserKernelSeparator => USER_KERNEL_SEP_FILL.to_string(),
        FrameClass::LevelSeparator => LEVEL_SEP_FILL.to_string(),
        FrameClass::Metal => METAL_FILL.to_string(),
        FrameClass::Marker => MARKER_FILL.to_string(),
        FrameClass::Lost => LOST_FILL.to_string(),
        FrameClass::RunQueue => RUNQ_FILL.to_string(),
        FrameClass::OnCpu => ONCPU_FILL.to_string(),
        FrameClass::OffCpu => OFFCPU_FILL.to_string(),
        FrameClass::Hot { kernel } => {
            let h = fnv(name);
            let v1 = (h & 0xffff) as f64 / 65535.0;
            let v2 = ((h >> 16) & 0xffff) as f64 / 65535.0;
            let hue = HOT_HUE + v2 * 32.0;
            let light = if kernel { 0.66 } else { 0.52 } + 0.08 * v1;
            let (r, g, b) = hsl(hue, 0.85, light);
            format!("rgb({r},{g},{b})")
        }
    }
}

/// Counts about a rendered graph (for the caller to report).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SvgStats {
    /// Distinct stacks drawn (after merging identical lines).
    pub stacks: usize,
    /// Total weight (sum of all lines).
    pub total: u64,
    /// Frames in the merged tree.
    pub frames: usize,
    /// Frames too narrow to draw (< 0.1 % of the width; their time stays in their parents).
    pub frames_too_narrow: usize,
    /// Input lines with weight 0 (nothing to draw).
    pub zero_weight_lines: usize,
}

/// Render folded `(stack, weight)` lines as an interactive chain-graph SVG.
pub fn render(
    folded: &[(String, u64)],
    opts: &SvgOptions,
    out: &mut dyn Write,
) -> Result<SvgStats, ReportError> {
    let mut stats = SvgStats::default();
    // Merge identical stacks; a BTreeMap orders them exactly as inferno sorts lines.
    let mut merged: BTreeMap<&str, u64> = BTreeMap::new();
    for (stack, w) in folded {
        if *w == 0 {
            stats.zero_weight_lines += 1;
            continue;
        }
        let stack = stack.trim();
        if stack.is_empty() {
            return Err(ReportError::EmptyStack);
        }
        *merged.entry(stack).or_default() += *w;
    }
    if merged.is_empty() {
        return Err(ReportError::NothingToDraw);
    }
    stats.stacks = merged.len();
    stats.total = merged
        .values()
        .try_fold(0u64, |a, &w| a.checked_add(w))
        .ok_or(ReportError::TotalOverflow)?;
    let min_width = 0.1f64; // inferno's default, percent of the total
    let min_w = min_width * stats.total as f64 / 100.0;

    // Pass 1: the width of every frame of the merged tree, in creation order.
    let mut widths: Vec<u64> = Vec::new();
    walk(&merged, |_, _, _| {}, &mut widths);
    stats.frames = widths.len();
    stats.frames_too_narrow = widths.iter().filter(|&&w| (w as f64) < min_w).count();

    // Pass 2: cut every line at its first frame too narrow to draw (inferno would drop
    // it and everything above it anyway): the drawn frames keep their widths, and
    // inferno gets a fraction of the lines on big graphs (memory and time).
    let mut cut: BTreeMap<&str, u64> = BTreeMap::new();
    let mut ids: Vec<usize> = Vec::new();
    walk(
        &merged,
        |stack, w, path: &[usize]| {
            ids.clear();
            ids.extend_from_slice(path);
            let keep = ids
                .iter()
                .position(|&id| (widths[id] as f64) < min_w)
                .unwrap_or(ids.len())
                .max(1);
            let line = if keep >= ids.len() {
                stack
            } else {
                let end = stack
                    .match_indices(';')
                    .nth(keep - 1)
                    .map(|(i, _)| i)
                    .unwrap_or(stack.len());
                &stack[..end]
            };
            *cut.entry(line).or_default() += w;
        },
        &mut Vec::new(),
    );
    let merged = cut;

    // Our own merge of what inferno draws: (inferno depth, start offset) -> (class, name).
    // Depth 0 is inferno's "all".
    let mut classes: HashMap<(usize, u64), (FrameClass, &str)> = HashMap::new();
    let mut open: Vec<(&str, u64)> = Vec::new(); // (name, start) of the current path
    let mut time = 0u64;
    for (stack, &w) in &merged {
        let names: Vec<&str> = stack.split(';').collect();
        let shared = open
            .iter()
            .zip(&names)
            .take_while(|((a, _), b)| a == *b)
            .count();
        open.truncate(shared);
        let cls = classify_stack(&names, opts.chain_layout);
        for (i, name) in names.iter().enumerate().skip(shared) {
            classes.insert((i + 1, time), (cls[i], name));
            open.push((name, time));
        }
        time += w;
    }

    let subtitle = subtitle(
        opts.chain_layout,
        &opts.unit,
        stats.frames_too_narrow,
        opts.width,
    );
    let mut options = Options::default();
    options.colors = Palette::Basic(BasicPalette::Blue);
    options.hash = true;
    options.deterministic = true;
    options.title = opts.title.clone();
    options.subtitle = Some(subtitle);
    options.count_name = opts.unit.clone();
    options.image_width = Some(opts.width);
    options.min_width = min_width;
    options.name_type = "Frame:".to_string();

    let lines: Vec<String> = merged.iter().map(|(s, w)| format!("{s} {w}")).collect();
    let mut raw = Vec::new();
    flamegraph::from_lines(&mut options, lines.iter().map(|s| s.as_str()), &mut raw)
        .map_err(ReportError::Inferno)?;
    let raw = String::from_utf8(raw)
        .map_err(|e| ReportError::UnexpectedSvg(format!("not UTF-8 ({e})")))?;
    let svg = recolor(&raw, &classes)?;
    out.write_all(svg.as_bytes()).map_err(|e| ReportError::Io {
        path: "<svg output>".into(),
        source: e,
    })?;
    Ok(stats)
}

/// Walk sorted folded lines as inferno merges them, numbering frames in creation order.
/// Calls `f(line, weight, frame ids of the line's path)`; fills `widths` (by frame id).
fn walk<'a>(
    merged: &BTreeMap<&'a str, u64>,
    mut f: impl FnMut(&'a str, u64, &[usize]),
    widths: &mut Vec<u64>,
) {
    widths.clear();
    let mut open: Vec<(&str, u64, usize)> = Vec::new(); // (name, start, frame id)
    let mut path: Vec<usize> = Vec::new();
    let mut time = 0u64;
    for (&stack, &w) in merged {
        let mut n = 0;
        let mut shared = true;
        for name in stack.split(';') {
            if shared && n < open.len() && open[n].0 == name {
                n += 1;
                continue;
            }
            if shared {
                shared = false;
                for &(_, start, id) in &open[n..] {
                    widths[id] = time - start;
                }
                open.truncate(n);
            }
            widths.push(0);
            open.push((name, time, widths.len() - 1));
        }
        if shared {
            for &(_, start, id) in &open[n..] {
                widths[id] = time - start;
            }
            open.truncate(n);
        }
        path.clear();
        path.extend(open.iter().map(|o| o.2));
        f(stack, w, &path);
        time += w;
    }
    for &(_, start, id) in &open {
        widths[id] = time - start;
    }
}

fn attr<'a>(tag: &'a str, name: &str) -> Option<(usize, &'a str)> {
    let key = format!(" {name}=\"");
    let at = tag.find(&key)? + key.len();
    let end = tag[at..].find('"')? + at;
    Some((at, &tag[at..end]))
}

/// Rewrite the `fill` of every frame rectangle by its (depth, start) classification.
fn recolor(
    raw: &str,
    classes: &HashMap<(usize, u64), (FrameClass, &str)>,
) -> Result<String, ReportError> {
    let bad = |what: &str| ReportError::UnexpectedSvg(what.to_string());
    let frames_at = raw
        .find("<svg id=\"frames\"")
        .ok_or_else(|| bad("no frames container"))?;
    let body = &raw[frames_at..];
    // Pass 1: distinct y values; sorted descending they are depths 0, 1, 2, ...
    // Each frame rectangle: its tag's span in `body` and its y.
    let rect_at = |pos: usize| -> Result<Option<(usize, usize, u64)>, ReportError> {
        let Some(i) = body[pos..].find("<rect ") else {
            return Ok(None);
        };
        let s = pos + i;
        let e = body[s..]
            .find("/>")
            .ok_or_else(|| bad("unterminated rect"))?
            + s;
        let y = attr(&body[s..e], "y")
            .and_then(|(_, v)| v.parse().ok())
            .ok_or_else(|| bad("rect without y"))?;
        Ok(Some((s, e, y)))
    };
    let mut ys: Vec<u64> = Vec::new();
    let mut pos = 0;
    while let Some((_, e, y)) = rect_at(pos)? {
        ys.push(y);
        pos = e;
    }
    ys.sort_unstable_by(|a, b| b.cmp(a));
    ys.dedup();
    let depth_of: HashMap<u64, usize> = ys.iter().enumerate().map(|(d, &y)| (y, d)).collect();

    let mut out = String::with_capacity(raw.len() + 1024);
    out.push_str(&raw[..frames_at]);
    out.push_str(DEFS);
    let mut pos = 0;
    while let Some((s, e, y)) = rect_at(pos)? {
        let tag = &body[s..e];
        let x: u64 = attr(tag, "fg:x")
            .and_then(|(_, v)| v.parse().ok())
            .ok_or_else(|| bad("rect without fg:x"))?;
        let depth = depth_of[&y];
        out.push_str(&body[pos..s]);
        match (depth, classes.get(&(depth, x))) {
            (0, _) => out.push_str(&tag.replacen(
                &format!("fill=\"{}\"", attr(tag, "fill").map(|a| a.1).unwrap_or("")),
                "fill=\"rgb(200,200,200)\"",
                1,
            )),
            (_, Some((class, name))) => {
                let (at, old) = attr(tag, "fill").ok_or_else(|| bad("rect without fill"))?;
                out.push_str(&tag[..at]);
                out.push_str(&fill_for(*class, name));
                out.push_str(&tag[at + old.len()..]);
            }
            (_, None) => {
                return Err(bad(&format!(
                    "frame at depth {depth}, offset {x} not in our merge"
                )))
            }
        }
        pos = e;
    }
    out.push_str(&body[pos..]);
    Ok(out)
}

/// The subtitle: one centred line, so pick the most complete legend that fits the image
/// (inferno draws it in 12 px Verdana: at most ~7.5 px per character).
fn subtitle(chain_layout: bool, unit: &str, tiny_frames: usize, width: usize) -> String {
    let legends: &[&str] = if chain_layout {
        &[
            "blocked thread at the bottom, one hue per waker level; lighter = kernel; \
             red = interrupt; violet = run queue; hatched = no stack/lost",
            "one hue per waker level; lighter = kernel; red = interrupt; violet = run queue; \
             hatched = no stack",
            "one hue per waker level; red = interrupt; violet = run queue",
            "one hue per waker level",
        ]
    } else {
        &[
            "lighter = kernel frames; red = interrupt; hatched = no stack / lost",
            "lighter = kernel; red = interrupt",
        ]
    };
    let tiny = if tiny_frames > 0 {
        format!("; {tiny_frames} tiny frames not drawn")
    } else {
        String::new()
    };
    let fits = |s: &str| s.chars().count() * 15 / 2 + 20 <= width;
    legends
        .iter()
        .map(|l| format!("width = time ({unit}); {l}{tiny}"))
        .find(|s| fits(s))
        .unwrap_or_else(|| format!("width = time ({unit})"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subtitle_fits_the_width() {
        let full = subtitle(true, "us", 0, 1200);
        assert!(full.contains("blocked thread at the bottom"), "{full}");
        let tiny = subtitle(true, "us", 12345, 1200);
        assert_eq!(
            tiny,
            "width = time (us); one hue per waker level; lighter = kernel; red = interrupt; \
             violet = run queue; hatched = no stack; 12345 tiny frames not drawn"
        );
        assert_eq!(
            subtitle(true, "us", 0, 400),
            "width = time (us); one hue per waker level"
        );
        assert_eq!(subtitle(false, "ms", 0, 100), "width = time (ms)");
        for w in [100, 300, 600, 900, 1200, 2000] {
            for t in [0, 7, 123456] {
                for chain in [true, false] {
                    let s = subtitle(chain, "us", t, w);
                    assert!(
                        s.chars().count() * 15 / 2 + 20 <= w || s == "width = time (us)",
                        "{w}: {s}"
                    );
                }
            }
        }
    }

    #[test]
    fn classify_chain_levels() {
        let s = "app;main;read;-;sys_read;schedule;--;try_to_wake_up;pipe_write;-;write;writer;--;[hardirq: timer]";
        let f: Vec<&str> = s.split(';').collect();
        let c = classify_stack(&f, true);
        use FrameClass::*;
        assert_eq!(
            c,
            vec![
                Frame {
                    level: 0,
                    kernel: false
                },
                Frame {
                    level: 0,
                    kernel: false
                },
                Frame {
                    level: 0,
                    kernel: false
                },
                UserKernelSeparator,
                Frame {
                    level: 0,
                    kernel: true
                },
                Frame {
                    level: 0,
                    kernel: true
                },
                LevelSeparator,
                Frame {
                    level: 1,
                    kernel: true
                },
                Frame {
                    level: 1,
                    kernel: true
                },
                UserKernelSeparator,
                Frame {
                    level: 1,
                    kernel: false
                },
                Frame {
                    level: 1,
                    kernel: false
                },
                LevelSeparator,
                Metal,
            ]
        );
        let flat = classify_stack(&f, false);
        assert!(matches!(flat[7], Frame { level: 0, .. }), "{:?}", flat[7]);
        assert!(flat.iter().all(|c| !matches!(c, Frame { level: 1.., .. })));
        assert_eq!(classify_name("[no stack: wait < 100us]"), Some(Marker));
        assert_eq!(classify_name("[missing stack]"), Some(Marker));
        assert_eq!(classify_name("[lost events]"), Some(Lost));
        assert_eq!(classify_name("[softirq: NET_RX]"), Some(Metal));
        assert_eq!(classify_name("[nmi]"), Some(Metal));
        assert_eq!(classify_name("[run queue]"), Some(RunQueue));
        assert_eq!(classify_name("[idle]"), Some(Metal));
        assert_eq!(classify_name("main"), None);
    }

    #[test]
    fn hues_differ_per_level_and_are_stable() {
        let a = fill_for(
            FrameClass::Frame {
                level: 0,
                kernel: false,
            },
            "main",
        );
        let b = fill_for(
            FrameClass::Frame {
                level: 1,
                kernel: false,
            },
            "main",
        );
        assert_ne!(a, b);
        assert_eq!(
            a,
            fill_for(
                FrameClass::Frame {
                    level: 0,
                    kernel: false
                },
                "main"
            )
        );
        assert_eq!(hsl(0.0, 1.0, 0.5), (255, 0, 0));
        assert_eq!(hsl(240.0, 1.0, 0.5), (0, 0, 255));
    }

    #[test]
    fn empty_input_is_an_error() {
        let mut out = Vec::new();
        let e = render(
            &[("a;b".into(), 0)],
            &SvgOptions::new("t", "us", true),
            &mut out,
        )
        .unwrap_err();
        assert!(e.to_string().contains("nothing to draw"), "{e}");
    }

    #[test]
    fn narrow_frames_are_cut_before_inferno() {
        let mut folded: Vec<(String, u64)> =
            (0..2000).map(|i| (format!("a;b;c{i};x"), 1)).collect();
        folded.push(("a;d".into(), 100_000));
        folded.push(("a;b;wide".into(), 1_000));
        let mut out = Vec::new();
        let st = render(&folded, &SvgOptions::new("t", "us", true), &mut out).unwrap();
        let svg = String::from_utf8(out).unwrap();
        assert_eq!(st.frames_too_narrow, 4000); // c0..c1999 and their x frames
        assert_eq!(st.frames, 4000 + 4);
        assert!(svg.contains("<title>b (3,000 us, 2.91%)</title>"), "{svg}");
        assert!(svg.contains("<title>wide (1,000 us, 0.97%)</title>"));
        assert!(svg.contains("<title>all (103,000 us, 100%)</title>"));
        assert!(!svg.contains("<title>c0 ("));
        assert_eq!(svg.matches("<g><title>").count(), 5);
    }
}
