//! `chainrec serve` end to end: the range's chain graph over HTTP equals `chainrec chains
//! --window` of that range (same paths, same nanoseconds), the server refuses what a
//! read-only loopback page must refuse, and in headless chromium the page selects a
//! range on the heat map, draws exactly those frames, zooms on a click and lists the
//! waits through the frame, with no console error (screenshots kept to look at).

mod common;
use chainrec_testkit::devtools::{browser_available, Browser};
use common::{bin, tmpdir};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// A running `chainrec serve`, stopped when dropped.
struct Served {
    child: Child,
    host: String,
}

impl Served {
    fn start(trace: &Path) -> Served {
        let mut child = bin()
            .args(["serve", "--port", "0", "-q"])
            .arg(trace)
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let mut err = BufReader::new(child.stderr.take().unwrap());
        let mut seen = String::new();
        let host = loop {
            let mut line = String::new();
            if err.read_line(&mut line).unwrap() == 0 {
                let _ = child.kill();
                panic!("chainrec serve ended before listening: {seen}");
            }
            seen += &line;
            if let Some(at) = line.find("http://") {
                let rest = &line[at + 7..];
                break rest[..rest.find('/').unwrap()].to_string();
            }
        };
        // Keep draining stderr so the server never blocks on it.
        std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
        Served { child, host }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.host)
    }

    /// A raw request; (status, body).
    fn request(&self, method: &str, path: &str, host: &str) -> (u16, String) {
        let mut s = TcpStream::connect(&self.host).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        write!(
            s,
            "{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).unwrap();
        let text = String::from_utf8(buf).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        let status = head.split(' ').nth(1).unwrap().parse().unwrap();
        (status, body.to_string())
    }

    fn get(&self, path: &str) -> Value {
        let (status, body) = self.request("GET", path, &self.host.clone());
        assert_eq!(status, 200, "{path}: {body}");
        serde_json::from_str(&body).unwrap()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn synth(dir: &Path, scenario: &str, events: u64) -> PathBuf {
    let path = dir.join(format!("{scenario}.zst"));
    let o = bin()
        .args([
            "synth",
            "--scenario",
            scenario,
            "--events",
            &events.to_string(),
            "-o",
        ])
        .arg(&path)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    path
}

fn secs(ns: u64) -> String {
    format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000)
}

/// `chainrec chains TRACE --window FROM..TO --unit ns`, summed per line.
fn chains_window(trace: &Path, from: u64, to: u64) -> BTreeMap<String, u64> {
    let o = bin()
        .args(["chains", "--unit", "ns", "--window"])
        .arg(format!("{}..{}", secs(from), secs(to)))
        .arg(trace)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut out = BTreeMap::new();
    for l in String::from_utf8(o.stdout).unwrap().lines() {
        let (path, w) = l.rsplit_once(' ').unwrap();
        *out.entry(path.to_string()).or_insert(0) += w.parse::<u64>().unwrap();
    }
    out
}

/// The paths of a served tree (`nodes`: preorder, parent indices) that weigh something
/// themselves, as folded lines summed per text.
fn tree_lines(v: &Value) -> BTreeMap<String, u64> {
    let mut paths: Vec<String> = Vec::new();
    let mut out = BTreeMap::new();
    for n in v["nodes"].as_array().unwrap() {
        let name = n["name"].as_str().unwrap();
        let p = match n["parent"].as_u64() {
            None => String::new(),
            Some(0) => name.to_string(),
            Some(i) => format!("{};{name}", paths[i as usize]),
        };
        let own = n["self"].as_u64().unwrap();
        if own > 0 {
            *out.entry(p.clone()).or_insert(0) += own;
        }
        paths.push(p);
    }
    out
}

#[test]
fn served_ranges_equal_chains_window() {
    let dir = tmpdir("serve-ranges");
    for (scenario, events) in [
        ("pipe-relay", 4000),
        ("lazy-stacks", 3000),
        ("busy-server", 150_000),
    ] {
        let trace = synth(&dir, scenario, events);
        let s = Served::start(&trace);
        let info = s.get("/api/info");
        let dur = info["duration_ns"].as_u64().unwrap();
        let heat = s.get("/api/heatmap");
        assert!(
            heat["total"].as_u64().unwrap() > 0,
            "{scenario}: empty heat map"
        );
        // The whole trace, a middle third, and a 20 ms heat-map cell.
        for (from, to) in [
            (0, dur),
            (dur / 3, 2 * dur / 3),
            (dur / 2, dur / 2 + 20_000_000),
        ] {
            let v = s.get(&format!("/api/chains?from={from}&to={to}"));
            let served = tree_lines(&v);
            let cli = chains_window(&trace, from, to);
            assert!(!cli.is_empty(), "{scenario} {from}..{to}: no chains");
            if v["pruned_frames"] == 0 {
                assert!(
                    served == cli,
                    "{scenario} {from}..{to}: the served graph differs from chains --window: {} vs {} lines",
                    served.len(),
                    cli.len()
                );
            } else {
                // A graph above 50 000 frames loses whole tiny subtrees: what is left is
                // exactly chains --window's lines of it.
                for (l, w) in &served {
                    assert_eq!(cli.get(l), Some(w), "{scenario} {from}..{to}: {l}");
                }
            }
            assert_eq!(
                v["nodes"][0]["value"].as_u64().unwrap(),
                cli.values().sum::<u64>(),
                "{scenario}"
            );
        }
    }
}

#[test]
fn the_server_is_read_only_and_loopback_only() {
    let dir = tmpdir("serve-refuses");
    let trace = synth(&dir, "pipe-relay", 1000);
    let s = Served::start(&trace);
    assert!(s.host.starts_with("127.0.0.1:"), "{}", s.host);
    let port = s.host.split(':').nth(1).unwrap().to_string();
    let me = s.host.clone();
    assert_eq!(s.request("POST", "/api/info", &me).0, 405);
    assert_eq!(s.request("PUT", "/", &me).0, 405);
    // DNS rebinding: a foreign Host is refused; localhost is fine.
    assert_eq!(s.request("GET", "/api/info", "evil.example:80").0, 403);
    assert_eq!(
        s.request("GET", "/api/info", &format!("localhost:{port}"))
            .0,
        200
    );
    let (st, body) = s.request("GET", "/../../etc/passwd", &me);
    assert_eq!(st, 404, "{body}");
    let (st, body) = s.request("GET", "/api/chains?from=1&to=0", &me);
    assert_eq!(st, 400, "{body}");
    assert!(body.contains("is after"), "{body}");
    // HEAD: headers only.
    let (st, body) = s.request("HEAD", "/", &me);
    assert_eq!((st, body.as_str()), (200, ""));
    // Still serving after all that.
    assert!(s.get("/api/info")["events"].as_u64().unwrap() > 1000);
    // A non-loopback --bind is only taken when named, with a warning.
    let o = bin()
        .args(["serve", "--bind", "not-an-address"])
        .arg(&trace)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "clap rejects it");
}

const CAPTURE_ERRORS: &str = r#"
window.__errs = [];
(() => {
  const orig = console.error;
  console.error = function (...a) { window.__errs.push('console.error: ' + a.join(' ')); orig.apply(console, a); };
  window.addEventListener('error', (e) => window.__errs.push('error: ' + (e.message || (e.target && (e.target.src || e.target.href)))), true);
  window.addEventListener('unhandledrejection', (e) => window.__errs.push('rejection: ' + e.reason));
  document.addEventListener('securitypolicyviolation', (e) => window.__errs.push('csp: ' + e.violatedDirective + ' ' + e.blockedURI));
})();
"#;

/// Wait until `cond` (a JS expression) is true in the page.
fn wait_for(b: &mut Browser, cond: &str) {
    let t0 = Instant::now();
    while b.eval(&format!("!!({cond})")) != json!(true) {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "timed out waiting for {cond}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn mouse(b: &mut Browser, kind: &str, xy: (f64, f64)) {
    b.call(
        "Input.dispatchMouseEvent",
        json!({"type": kind, "x": xy.0, "y": xy.1, "button": "left", "buttons": 1, "clickCount": 1}),
    );
}

fn xy(v: &Value) -> (f64, f64) {
    (v[0].as_f64().unwrap(), v[1].as_f64().unwrap())
}

#[test]
fn serve_page_in_chromium() {
    if !browser_available() {
        return;
    }
    let dir = tmpdir("serve-browser");
    let trace = synth(&dir, "pipe-relay", 4000);
    let s = Served::start(&trace);
    let mut b = Browser::launch("serve");
    b.call(
        "Page.addScriptToEvaluateOnNewDocument",
        json!({ "source": CAPTURE_ERRORS }),
    );
    b.call("Page.navigate", json!({ "url": s.url("/") }));
    b.wait_event("Page.loadEventFired");
    wait_for(
        &mut b,
        "window.explorer && explorer.heat && explorer.busy === 0",
    );

    // Drag on the heat map from (second 1, row 10) to (second 2, row 25): the range from
    // that first cell's start to the last one's end.
    let heat = s.get("/api/heatmap");
    let (col0, bucket) = (
        heat["col0_ns"].as_i64().unwrap(),
        heat["bucket_ns"].as_i64().unwrap(),
    );
    let want_from = (col0 + 1_000_000_000 + 10 * bucket) as u64;
    let want_to = (col0 + 2_000_000_000 + 26 * bucket) as u64;
    let a = xy(&b.eval("explorer.cellClientXY(1, 10)"));
    let z = xy(&b.eval("explorer.cellClientXY(2, 25)"));
    b.call(
        "Input.dispatchMouseEvent",
        json!({"type": "mouseMoved", "x": a.0, "y": a.1}),
    );
    mouse(&mut b, "mousePressed", a);
    mouse(&mut b, "mouseMoved", ((a.0 + z.0) / 2.0, (a.1 + z.1) / 2.0));
    mouse(&mut b, "mouseMoved", z);
    mouse(&mut b, "mouseReleased", z);
    wait_for(&mut b, "explorer.chains && explorer.busy === 0");
    let range = b.eval("explorer.range");
    assert_eq!(range, json!({"from": want_from, "to": want_to}));

    // The frames drawn are chains --window of that range: every path, every weight.
    let drawn = b.eval(
        "[...document.querySelectorAll('#flame .f')].filter(d => +d.dataset.self > 0).map(d => [d.dataset.path, +d.dataset.self])",
    );
    let mut shown = BTreeMap::new();
    for p in drawn.as_array().unwrap() {
        *shown.entry(p[0].as_str().unwrap().to_string()).or_insert(0) += p[1].as_u64().unwrap();
    }
    let cli = chains_window(&trace, want_from, want_to);
    assert!(cli.len() >= 3, "{cli:?}");
    assert_eq!(shown, cli, "the page's frames differ from chains --window");
    let n_divs = b.eval("document.querySelectorAll('#flame .f').length");
    let frames = s.get(&format!("/api/chains?from={want_from}&to={want_to}"))["frames"].clone();
    assert_eq!(n_divs, frames, "every frame drawn");
    let shot = dir.join("serve-range.png");
    std::fs::write(&shot, b.screenshot_png()).unwrap();
    eprintln!("screenshot after selecting the range: {}", shot.display());

    // Click a narrow frame of a waker level (the widest one not already full width): it
    // zooms to full width, and the waits through it are listed, heaviest first, as
    // /api/waits says.
    let full = b
        .eval("document.getElementById('flame').clientWidth")
        .as_f64()
        .unwrap();
    let pick = b.eval(&format!(
        "(() => {{ let best = null; for (const d of document.querySelectorAll('#flame .f')) {{ const w = d.getBoundingClientRect().width; if (d.dataset.path.includes(';--;') && w >= 3 && w < {full} - 5 && (!best || w > best.w)) best = {{path: d.dataset.path, w}}; }} return best; }})()"
    ));
    let path = pick["path"]
        .as_str()
        .expect("a narrow waker-level frame")
        .to_string();
    let rect_of = format!(
        "(() => {{ const d = document.querySelector('#flame .f[data-path=' + {} + ']'); d.scrollIntoView({{block: 'center'}}); const r = d.getBoundingClientRect(); return [r.x, r.y, r.width]; }})()",
        serde_json::to_string(&serde_json::to_string(&path).unwrap()).unwrap()
    );
    let before = b.eval(&rect_of);
    let (x, y, w) = (
        before[0].as_f64().unwrap(),
        before[1].as_f64().unwrap(),
        before[2].as_f64().unwrap(),
    );
    b.click(x + w / 2.0, y + 8.0);
    wait_for(&mut b, "explorer.waits && explorer.busy === 0");
    assert_eq!(b.eval("explorer.zoom.join(';')"), json!(path));
    let after = b.eval(&rect_of);
    assert!(
        after[2].as_f64().unwrap() >= full - 1.0,
        "{path} zoomed: {after}"
    );
    let q = path.replace(';', "%3B");
    let api = s.get(&format!(
        "/api/waits?frame={q}&from={want_from}&to={want_to}&limit=10"
    ));
    let first = &api["waits"][0];
    assert!(first.is_object(), "{api}");
    let shown_first = b.eval(
        "(() => { const w = document.querySelector('#waitlist .wait'); return [w.dataset.tid, w.dataset.through, w.innerText]; })()",
    );
    assert_eq!(shown_first[0], json!(first["wait"]["tid"].to_string()));
    assert_eq!(shown_first[1], json!(first["through_ns"].to_string()));
    let text = shown_first[2].as_str().unwrap();
    let root = path.split(';').next().unwrap();
    assert!(text.starts_with(&format!("{root} (tid ")), "{text}");
    assert!(text.contains("level 1: "), "{text}");
    assert_eq!(
        b.eval("document.querySelectorAll('#waitlist .wait').length"),
        json!(api["waits"].as_array().unwrap().len())
    );

    // Search: the matching frames turn magenta and their share is shown.
    b.eval("(() => { const s = document.getElementById('search'); s.value = 'hrtimer'; s.dispatchEvent(new Event('input')); })()");
    let matched = b.eval("document.querySelectorAll('#flame .f.match').length");
    assert!(matched.as_u64().unwrap() >= 1, "{matched}");
    let label = b.eval("document.getElementById('matched').textContent");
    assert!(label.as_str().unwrap().starts_with("matched "), "{label}");
    let shot = dir.join("serve-zoom.png");
    std::fs::write(&shot, b.screenshot_png()).unwrap();
    eprintln!("screenshot after the click and search: {}", shot.display());

    assert_eq!(b.eval("window.__errs"), json!([]), "console errors");
    assert_eq!(
        b.eval("explorer.errors"),
        json!([]),
        "errors shown on the page"
    );
}
